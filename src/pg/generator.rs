//! `next_id`: the clock, the layout's rule and the sequence's tuple, put together.
//!
//! Each call locks the sequence's buffer, reads the newest ID issued, asks the rule
//! ([`rule::next_after`]) for the next one and stores it before unlocking. The layout is data
//! (a [`Shape`] and an epoch): Instagram's `next_id(shard, seq)` and Twitter's
//! `next_id(node, seq, 'twitter')` are this one code path with different numbers. When the rule says
//! to wait (a saturated shard has borrowed `snowflake_id.max_lead` ms of future time), the
//! call unlocks, sleeps until the clock's millisecond changes, and asks again.

use super::error::IdError;
use super::sequence_state::{Sequence, LOG_AHEAD_MS};
use super::time::clock_unix_ms;
use crate::id::layouts::Shape;
use crate::id::layouts::{INSTAGRAM, INSTAGRAM_SHAPE};
use crate::id::rule::{self, Next};
use pgrx::{pg_sys, GucContext, GucFlags, GucRegistry, GucSetting};

/// How far (ms) IDs may run ahead of the clock when a shard issues more than 1,024 per ms.
pub static MAX_LEAD_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);

pub fn init() {
    GucRegistry::define_int_guc(
        c"snowflake_id.max_lead",
        c"How far ahead of the clock a saturated shard's IDs may run, in milliseconds.",
        c"A shard holds 1,024 IDs per millisecond. Past that, next_id borrows future \
          milliseconds up to this lead, then waits for the clock to tick for each further \
          millisecond. IDs never repeat and never decrease whatever this is set to.",
        &MAX_LEAD_MS,
        0,
        3_600_000,
        GucContext::Suset,
        GucFlags::UNIT_MS,
    );
}

/// `snowflake_id.max_lead`, read where PostgreSQL keeps it: `GucSetting::get` checks the
/// calling thread on every read (a thread-local lookup), which a backend, one thread, does not
/// need on the hot path.
#[inline(always)]
fn max_lead_ms() -> i64 {
    // SAFETY: an int that PostgreSQL's GUC machinery writes only between statements.
    unsafe { *MAX_LEAD_MS.as_ptr() as i64 }
}

/// The clock as milliseconds since `epoch_unix_ms`, clamped into the layout's range (a clock
/// before the epoch issues IDs as if it were at the epoch, still strictly increasing).
#[inline(always)]
fn clock_ms(shape: &Shape, epoch_unix_ms: i64) -> i64 {
    clock_unix_ms()
        .saturating_sub(epoch_unix_ms)
        .clamp(0, shape.max_ms + 1)
}

/// Sleeps (with the buffer unlocked) until the clock's millisecond differs from `seen`, or
/// about 10 ms pass (20 naps of 0.5 ms), whichever comes first; honours query cancel meanwhile.
#[cold]
#[inline(never)]
fn wait_for_tick(shape: &Shape, epoch_unix_ms: i64, seen: i64) {
    for _ in 0..20 {
        // SAFETY: pg_usleep only sleeps.
        unsafe { pg_sys::pg_usleep(500) };
        pgrx::check_for_interrupts!();
        if clock_ms(shape, epoch_unix_ms) != seen {
            return;
        }
    }
}

/// Whose ID a call issues: a given node (shard), or, for `next_id(seq)`, the shard of the
/// newest ID the sequence holds (read under the buffer lock with the rest of the state).
#[derive(Clone, Copy)]
pub enum Node {
    Given(i32),
    OfNewest,
}

/// Issues the next ID in Instagram's layout for `shard` from the sequence `relid`.
#[inline(always)]
pub fn issue_instagram(shard: i32, relid: pg_sys::Oid) -> Result<i64, IdError> {
    let shard = INSTAGRAM.check_node(&INSTAGRAM_SHAPE, shard)?;
    issue(
        &INSTAGRAM_SHAPE,
        INSTAGRAM.epoch_unix_ms,
        Node::Given(shard),
        relid,
    )
}

/// Issues the next ID in Instagram's layout from the sequence `relid`, in the shard of the
/// newest ID it holds ([`rule::shard_of_newest`]).
#[inline(always)]
pub fn issue_continuing(relid: pg_sys::Oid) -> Result<i64, IdError> {
    issue(
        &INSTAGRAM_SHAPE,
        INSTAGRAM.epoch_unix_ms,
        Node::OfNewest,
        relid,
    )
}

/// Issues the next ID in `shape`, with time counted from `epoch_unix_ms`, for `node` (a given
/// one already checked to be within `shape`) from the sequence `relid`. Always inlined: Instagram's
/// `next_id` gets its own copy with the layout's numbers as constants (so that layouts being
/// data costs its hot path nothing); the named layouts share one copy.
///
/// Callers hold nothing with a destructor across this call: its steady path calls PostgreSQL
/// unguarded (see `mirror::unguarded`), and builds an error's message only after
/// releasing the buffer.
#[inline(always)]
pub fn issue(
    shape: &Shape,
    epoch_unix_ms: i64,
    node: Node,
    relid: pg_sys::Oid,
) -> Result<i64, IdError> {
    let seq = Sequence::open(relid)?;
    let max_lead = max_lead_ms();
    let mut waited_on = None;
    loop {
        let tuple = seq.lock_tuple();
        let newest = tuple.newest();
        let node = match node {
            Node::Given(node) => node,
            Node::OfNewest => match rule::shard_of_newest(newest) {
                Some(shard) => shard,
                None => {
                    tuple.release();
                    let sequence = seq.name();
                    seq.close();
                    return Err(IdError::NoShardHeld { sequence, newest });
                }
            },
        };
        debug_assert!((0..=shape.max_node()).contains(&node));
        let now = clock_ms(shape, epoch_unix_ms);
        match rule::next_after(shape, Some(newest), now, node, max_lead, waited_on) {
            Next::Issue(id) => {
                if !seq.holds(id) {
                    tuple.release();
                    return Err(seq.too_small_for(id));
                }
                tuple.store(id, logged_ahead(shape, id, &seq));
                seq.close();
                return Ok(id);
            }
            Next::Wait { newest_ms } => {
                tuple.release();
                wait_for_tick(shape, epoch_unix_ms, now);
                // A borrow needs a full tick of waiting since seeing the newest millisecond.
                waited_on = Some(newest_ms);
            }
            Next::Exhausted => {
                tuple.release();
                let sequence = seq.name();
                seq.close();
                return Err(IdError::Exhausted {
                    sequence,
                    horizon_unix_ms: epoch_unix_ms.saturating_add(shape.max_ms),
                });
            }
        }
    }
}

/// The state a WAL record stores: `LOG_AHEAD_MS` of ID time past `id`, but within the
/// sequence's MAXVALUE, so that `pg_dump`'s `setval` can always restore it.
#[inline(always)]
fn logged_ahead(shape: &Shape, id: i64, seq: &Sequence) -> i64 {
    id.saturating_add(LOG_AHEAD_MS << shape.time_shift())
        .min(seq.max())
}
