//! The rule that picks the next ID, as plain arithmetic: the generator's whole decision, kept
//! free of PostgreSQL so that it can be tested exhaustively. Given the newest ID a sequence
//! has issued, the clock, a node (Instagram's shard) and a bound on how far IDs may run ahead
//! of the clock, [`next_after`] returns the next ID or says to wait. The layout is data (a
//! [`Shape`]): Instagram's and Twitter's IDs follow this one rule with different numbers.
//! `pg::generator` supplies the newest ID and the clock, and stores the result.

use super::layouts::Shape;
use super::layouts::INSTAGRAM_SHAPE;

/// The smallest value a sequence holds once it holds IDs: 2^42, an ID of 2011-08-24
/// 21:15:46 UTC (8.7 minutes after the epoch, before any real ID). Below it a sequence holds
/// a plain counter (a new sequence, or Instagram's PL/pgSQL's `nextval() % 1024`), which
/// names no shard; `create_shard` moves such a counter above it (its SQL spells the same
/// bound, `1::bigint << 42`, checked by a test below).
pub const MIN_HELD_ID: i64 = 1 << 42;

/// The shard `next_id(seq)` continues: that of the newest ID the sequence holds, or `None`
/// when it holds a plain counter (see [`MIN_HELD_ID`]).
#[inline(always)]
pub fn shard_of_newest(newest: i64) -> Option<i32> {
    let shard = (newest >> INSTAGRAM_SHAPE.node_shift()) & INSTAGRAM_SHAPE.max_node() as i64;
    (newest >= MIN_HELD_ID).then_some(shard as i32)
}

/// An ID taken apart in the generator's view of its layout. `ms` counts milliseconds since
/// the epoch, not since 1970.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Parts {
    ms: i64,
    shard: i32,
    seq: i32,
}

/// `id` taken apart in `shape` (any non-negative i64).
#[inline]
fn parts_in(shape: &Shape, id: i64) -> Parts {
    Parts {
        ms: id >> shape.time_shift(),
        shard: ((id >> shape.node_shift()) & shape.max_node() as i64) as i32,
        seq: (id & shape.max_seq() as i64) as i32,
    }
}

/// The smallest ID of `shard` greater than `prev` (any non-negative i64, not necessarily an
/// ID of this shard), ignoring the horizon: the result's `ms` may be `max_ms + 1`.
#[inline]
fn successor(shape: &Shape, prev: Parts, shard: i32) -> Parts {
    use std::cmp::Ordering::*;
    let next_ms = Parts {
        ms: prev.ms + 1,
        shard,
        seq: 0,
    };
    match shard.cmp(&prev.shard) {
        Greater => Parts {
            ms: prev.ms,
            shard,
            seq: 0,
        },
        Equal if prev.seq < shape.max_seq() => Parts {
            seq: prev.seq + 1,
            ..prev
        },
        _ => next_ms,
    }
}

/// The generator's decision for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Issue this ID, and remember it as the newest.
    Issue(i64),
    /// The next ID would borrow a millisecond more than the allowed lead ahead of the clock:
    /// wait for the clock to tick, then ask again with `waited_on` = this millisecond (the
    /// newest ID's).
    Wait { newest_ms: i64 },
    /// The next ID would be past the horizon: there are no IDs left.
    Exhausted,
}

/// Picks the next ID in `shape` (Instagram's [`INSTAGRAM_SHAPE`], Twitter's, ...: the layout is
/// data) for `shard` (a node) after `newest`, the newest ID the sequence has issued
/// (`None` when it has issued none that matter: a fresh sequence, or one holding a small
/// counter from Instagram's PL/pgSQL, where `newest` decodes to a millisecond in 2011).
///
/// The rule: the smallest ID of `shard` that is greater than `newest` and not older than the
/// clock's millisecond `now_ms` (since the epoch). So IDs strictly increase whatever the clock
/// does; a clock that steps back just means IDs keep counting from where they were.
///
/// When a millisecond's counters (1,024 in Instagram's layout, 4,096 in Twitter's) are used up, the next ID borrows the following
/// millisecond, possibly one the clock has not reached yet. Borrowing is free while the ID
/// stays within `max_lead_ms` of the clock. Beyond that the caller must wait for the clock to
/// tick (`Wait`); afterwards it may borrow one millisecond regardless of the bound, but only
/// if no one else has borrowed since (`waited_on` is still the newest millisecond). Under the
/// sequence's lock that allows one borrow per clock tick, however many sessions wait: a
/// saturated shard keeps issuing at about the layout's ceiling, even after the clock steps
/// back further than `max_lead_ms`, and never runs further ahead. Hence IDs lead the clock
/// by at most `max_lead_ms` + 1 ms while the clock runs forward; a backward step of D adds D
/// to the lead, which then shrinks as the clock runs (and cannot grow meanwhile).
#[inline(always)]
pub fn next_after(
    shape: &Shape,
    newest: Option<i64>,
    now_ms: i64,
    shard: i32,
    max_lead_ms: i64,
    waited_on: Option<i64>,
) -> Next {
    debug_assert!((0..=shape.max_node()).contains(&shard));
    let now_ms = now_ms.clamp(0, shape.max_ms + 1);
    let clock = Parts {
        ms: now_ms,
        shard,
        seq: 0,
    };
    let newest = newest.filter(|&id| id >= 0).map(|id| parts_in(shape, id));
    let next = match newest.map(|p| successor(shape, p, shard)) {
        Some(p) if p > clock => p,
        _ => clock,
    };
    if next.ms > shape.max_ms {
        return Next::Exhausted;
    }
    // Only moving ID time forward past the bound waits; counting on within a millisecond
    // already in use never does, however far the clock has stepped back.
    // Moving ID time past the bound takes a tick of the clock: wait, and after the wait
    // borrow only if no one has borrowed since. (With no newest ID, `next` is the clock.)
    if let Some(ms) = newest.map(|p| p.ms) {
        let beyond_bound = next.ms > ms && next.ms > now_ms.saturating_add(max_lead_ms);
        if beyond_bound && waited_on != Some(ms) {
            return Next::Wait { newest_ms: ms };
        }
    }
    Next::Issue(
        next.ms << shape.time_shift() | (shard as i64) << shape.node_shift() | next.seq as i64,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::layouts::{INSTAGRAM, LAYOUTS};
    use proptest::prelude::*;

    const MAX_MS: i64 = INSTAGRAM_SHAPE.max_ms;
    const MAX_SEQ: i32 = INSTAGRAM_SHAPE.max_seq();

    /// An Instagram ID (ms since the epoch, shard, counter), as the layout composes it.
    fn compose(ms: i64, shard: i64, seq: i64) -> i64 {
        INSTAGRAM.compose(ms, &[shard, seq]).unwrap()
    }

    fn parts(ms: i64, shard: i32, seq: i32) -> Parts {
        Parts { ms, shard, seq }
    }

    /// An Instagram ID taken apart as the rule sees it.
    fn decompose(id: i64) -> Parts {
        parts_in(&INSTAGRAM_SHAPE, id)
    }

    #[test]
    fn a_sequence_names_the_shard_of_its_newest_id() {
        let id = compose(1_387_263_000, 8191, 1023);
        assert_eq!(shard_of_newest(id), Some(8191));
        assert_eq!(shard_of_newest(compose(0, 5, 0)), None);
        assert_eq!(shard_of_newest(MIN_HELD_ID - 1), None);
        assert_eq!(shard_of_newest(MIN_HELD_ID), Some(0));
        assert_eq!(shard_of_newest(-1), None);
    }

    #[test]
    fn create_shard_uses_the_same_bound_for_a_plain_counter() {
        let bound = format!("counter < (1::bigint << {})", MIN_HELD_ID.trailing_zeros());
        for (name, sql) in [
            (
                "installer.sql",
                include_str!("../../sql/installer/installer.sql"),
            ),
            (
                "the upgrade script",
                include_str!("../../released/snowflake_id--0.1.0--0.2.0.sql"),
            ),
        ] {
            assert!(sql.contains(&bound), "{name} does not say {bound}");
        }
    }

    const LEAD: i64 = 1000;

    fn issue(newest: Option<i64>, now: i64, shard: i32) -> i64 {
        match next_after(&INSTAGRAM_SHAPE, newest, now, shard, LEAD, None) {
            Next::Issue(id) => id,
            other => panic!("expected an ID, got {other:?}"),
        }
    }

    #[test]
    fn fresh_sequence_starts_at_the_clock() {
        assert_eq!(issue(None, 77, 5), compose(77, 5, 0));
        // A sequence that Instagram's PL/pgSQL used holds a small counter: ignored.
        assert_eq!(issue(Some(123_456), 77, 5), compose(77, 5, 0));
    }

    #[test]
    fn counter_runs_within_a_millisecond_then_borrows_the_next() {
        let mut id = issue(None, 10, 5);
        for seq in 1..=MAX_SEQ {
            id = issue(Some(id), 10, 5);
            assert_eq!(decompose(id), parts(10, 5, seq));
        }
        let borrowed = issue(Some(id), 10, 5);
        assert_eq!(decompose(borrowed), parts(11, 5, 0));
    }

    #[test]
    fn clock_stepping_back_keeps_counting_forward() {
        let newest = compose(5_000, 5, 3);
        assert_eq!(issue(Some(newest), 1_000, 5), compose(5_000, 5, 4));
    }

    #[test]
    fn lead_bound_asks_to_wait_then_allows_one_borrow() {
        let newest = compose(10 + LEAD, 5, MAX_SEQ as i64);
        let newest_ms = 10 + LEAD;
        assert_eq!(
            next_after(&INSTAGRAM_SHAPE, Some(newest), 10, 5, LEAD, None),
            Next::Wait { newest_ms }
        );
        assert_eq!(
            next_after(&INSTAGRAM_SHAPE, Some(newest), 10, 5, LEAD, Some(newest_ms)),
            Next::Issue(compose(11 + LEAD, 5, 0))
        );
        // Someone else borrowed while we waited: no second borrow on the same wait.
        let theirs = compose(11 + LEAD, 5, MAX_SEQ as i64);
        assert_eq!(
            next_after(&INSTAGRAM_SHAPE, Some(theirs), 10, 5, LEAD, Some(newest_ms)),
            Next::Wait {
                newest_ms: 11 + LEAD
            }
        );
        // Once the clock has ticked, the borrow is within the bound again.
        assert_eq!(
            next_after(&INSTAGRAM_SHAPE, Some(newest), 11, 5, LEAD, None),
            Next::Issue(compose(11 + LEAD, 5, 0))
        );
    }

    #[test]
    fn horizon_is_exhaustion_not_wraparound() {
        let last = compose(MAX_MS, 5, MAX_SEQ as i64);
        assert_eq!(
            next_after(&INSTAGRAM_SHAPE, Some(last), MAX_MS, 5, LEAD, Some(MAX_MS)),
            Next::Exhausted
        );
        assert_eq!(
            next_after(&INSTAGRAM_SHAPE, None, MAX_MS + 1, 5, LEAD, None),
            Next::Exhausted
        );
        assert_eq!(
            next_after(&INSTAGRAM_SHAPE, None, i64::MAX, 5, LEAD, None),
            Next::Exhausted
        );
        assert_eq!(issue(None, MAX_MS, 5), compose(MAX_MS, 5, 0));
    }

    #[test]
    fn a_lower_shard_on_the_same_sequence_still_increases() {
        let newest = compose(10, 7, 0);
        let next = issue(Some(newest), 10, 5);
        assert!(next > newest);
        assert_eq!(decompose(next), parts(11, 5, 0));
        assert_eq!(issue(Some(newest), 10, 9), compose(10, 9, 0));
    }

    proptest! {
        /// The rule's view of an ID is the layout's: the same three parts, in the same order.
        #[test]
        fn decompose_compose_round_trip(id in 0..=i64::MAX) {
            let p = decompose(id);
            prop_assert_eq!(compose(p.ms, p.shard as i64, p.seq as i64), id);
        }

        #[test]
        fn ids_order_like_their_time_then_shard_then_counter(a in 0..=i64::MAX, b in 0..=i64::MAX) {
            prop_assert_eq!(a.cmp(&b), decompose(a).cmp(&decompose(b)));
        }

        /// Eight sessions saturating one sequence, each waking from its wait for the tick
        /// after a random delay (early wakers go back to issuing and fill the millisecond
        /// just borrowed; late ones find it full): IDs never lead the clock by more than
        /// `lead` + 1 ms, because only one borrow past the bound is allowed per tick.
        #[test]
        fn concurrent_sessions_cannot_outrun_the_bound(
            schedule in proptest::collection::vec((0_usize..8, 0_u16..2500, 0_u16..1500), 1..40_000),
            lead in 0_i64..50,
        ) {
            let mut now = 1_000_i64;
            let mut newest: Option<i64> = None;
            // Per session: the millisecond it waited on, the tick it waits for, its wake delay.
            let mut waiting: [Option<(i64, i64, u16)>; 8] = [None; 8];
            let (mut ticks, mut since_tick) = (0_i64, 0_u16);
            for (session, tick, delay) in schedule {
                if tick == 0 {
                    now += 1;
                    ticks += 1;
                    since_tick = 0;
                }
                since_tick = since_tick.saturating_add(1);
                let waited_on = match waiting[session] {
                    Some((_, after, wake)) if ticks <= after || since_tick < wake => continue,
                    Some((ms, _, _)) => Some(ms),
                    None => None,
                };
                match next_after(&INSTAGRAM_SHAPE, newest, now, 5, lead, waited_on) {
                    Next::Issue(id) => {
                        if let Some(prev) = newest { prop_assert!(id > prev); }
                        let ms = decompose(id).ms;
                        prop_assert!(ms - now <= lead + 1, "lead {} > {} + 1", ms - now, lead);
                        newest = Some(id);
                        waiting[session] = None;
                    }
                    Next::Wait { newest_ms } => waiting[session] = Some((newest_ms, ticks, delay)),
                    Next::Exhausted => panic!("far from the horizon"),
                }
            }
        }

        /// Any sequence of calls, whatever the clock does (steps back, jumps ahead, stands
        /// still), issues strictly increasing IDs of the requested shard, and the lead over
        /// the clock stays within `lead` + 1, plus whatever backward steps added to it: in
        /// every layout the generator fills (Instagram's, Twitter's, Discord's, pgEdge's).
        #[test]
        fn generator_is_strictly_increasing_and_bounded(
            start in 0..(1_i64 << 36),
            steps in proptest::collection::vec((-5_000_i64..5_000, 0_u32..3000), 1..60),
            which in 0_usize..LAYOUTS.len(),
            node in any::<u32>(),
            lead in 0_i64..2_000,
        ) {
            let shapes: Vec<Shape> = LAYOUTS.iter().filter_map(|l| l.shape()).collect();
            let shape = shapes[which % shapes.len()];
            let shard = (node % (shape.max_node() as u32 + 1)) as i32;
            let mut now = start;
            let mut newest: Option<i64> = None;
            let mut bound = lead + 1;
            for (step, burst) in steps {
                let stepped = (now + step).max(0);
                bound = (bound + now - stepped).max(lead + 1);
                now = stepped;
                for _ in 0..burst {
                    let id = match next_after(&shape, newest, now, shard, lead, None) {
                        Next::Issue(id) => id,
                        Next::Wait { newest_ms } => {
                            // The clock ticks once while the caller waits.
                            now += 1;
                            match next_after(&shape, newest, now, shard, lead, Some(newest_ms)) {
                                Next::Issue(id) => id,
                                other => panic!("after a wait: {other:?}"),
                            }
                        }
                        Next::Exhausted => panic!("far from the horizon"),
                    };
                    let p = parts_in(&shape, id);
                    prop_assert_eq!(p.shard, shard);
                    if let Some(prev) = newest { prop_assert!(id > prev); }
                    prop_assert!(p.ms - now <= bound, "lead {} > bound {}", p.ms - now, bound);
                    newest = Some(id);
                }
            }
        }

        /// In every layout the generator fills, the counter runs through the whole
        /// millisecond (4,096 IDs in Twitter's) before the next one, and the horizon is the
        /// end: no ID past it, never a wrap-around.
        #[test]
        fn each_layout_fills_its_millisecond_then_stops_at_its_horizon(
            which in 0_usize..LAYOUTS.len(),
            node in any::<u32>(),
        ) {
            let shapes: Vec<Shape> = LAYOUTS.iter().filter_map(|l| l.shape()).collect();
            let shape = shapes[which % shapes.len()];
            let shard = (node % (shape.max_node() as u32 + 1)) as i32;
            let mut newest = None;
            for seq in 0..=shape.max_seq() {
                match next_after(&shape, newest, 77, shard, 0, None) {
                    Next::Issue(id) => {
                        prop_assert_eq!(parts_in(&shape, id), Parts { ms: 77, shard, seq });
                        newest = Some(id);
                    }
                    other => panic!("{other:?}"),
                }
            }
            prop_assert_eq!(next_after(&shape, newest, 77, shard, 0, None), Next::Wait { newest_ms: 77 });
            let last = (shape.max_ms << shape.time_shift()) | (shard as i64) << shape.node_shift() | shape.max_seq() as i64;
            prop_assert_eq!(next_after(&shape, Some(last), shape.max_ms, shard, 5, Some(shape.max_ms)), Next::Exhausted);
        }
    }
}
