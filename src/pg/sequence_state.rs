//! A PostgreSQL sequence's own tuple as the generator's durable state.
//!
//! `next_id` keeps the newest ID it issued in the sequence's `last_value`, where `nextval()`
//! keeps its counter. So whatever carries a sequence carries the generator: WAL and crash
//! recovery, streaming replication and promotion, `pg_dump` (which restores it with
//! `setval`). No shared memory and no `shared_preload_libraries` are needed.
//!
//! This module mirrors PostgreSQL's `src/backend/commands/sequence.c` (`init_sequence`,
//! `lock_and_open_sequence`, `read_seq_tuple` and the WAL part of `nextval_internal`, the
//! same in 15, 17 and 18); the C names are used below, and the C structs it reads are
//! mirrored in `mirror`. What it remembers between calls, per sequence, is in
//! `sequence_cache`; the checks it makes when that holds nothing, in `sequence_checks`.
//! pgEdge's `snowflake.c` does the same. Invariants it keeps:
//!
//! - The tuple is read and written only under an exclusive lock on its buffer, so every
//!   call, in every backend, sees the previous call's ID: IDs from one sequence are totally
//!   ordered in the order they are issued.
//! - Like `nextval()`, not every call writes WAL. A WAL record stores the state *ahead*:
//!   `last_value` = an ID [`LOG_AHEAD_MS`] of ID time past the one issued, and `log_cnt` = that
//!   same ID, which tells later calls how far WAL already covers. A call whose ID passes
//!   `log_cnt` logs again, and so does the first call after a checkpoint (else a crash
//!   would restore the checkpoint's image of the page, older than the IDs issued since).
//!   After a crash, recovery leaves `last_value` at the logged-ahead ID, at or above every
//!   ID issued before, so none repeats, whatever the clock says at restart.
//! - A call that writes WAL first takes a transaction ID, so that its transaction's commit
//!   flushes WAL past the record. Calls that do not log are covered by an earlier record that
//!   precedes their own commit record in WAL. Thus an ID in a committed row is always covered
//!   by durable WAL, exactly the promise `nextval()` makes.
//! - `setval()`/`ALTER SEQUENCE RESTART` set `log_cnt` to 0 and `nextval()` counts it down
//!   from small numbers; both only make the next call log sooner, never later.

use super::error::IdError;
use super::mirror::{self, unguarded, SequenceData, XlSeqRec};
use super::sequence_cache::{self, Checked, Slot};
use super::sequence_checks::{self, refuse_read_only_or_parallel, Relation};
use pgrx::pg_sys;

/// How far ahead of the issued ID a WAL record puts the sequence (ID time, in ms).
pub const LOG_AHEAD_MS: i64 = 100;

/// `lock_and_open_sequence`'s locking: RowExclusiveLock, owned by the top-level transaction
/// so that a subtransaction's abort does not release it. Unguarded (see `unguarded`): it can
/// raise (a lock timeout, a cancel while waiting, a deadlock), and when it does PostgreSQL's
/// longjmp leaves `CurrentResourceOwner` swapped, which the (sub)transaction's abort resets
/// anyway, as for `nextval()`, whose C does the same.
#[inline(always)]
fn lock_for_transaction(relid: pg_sys::Oid) {
    // SAFETY: swapping the resource owner around LockRelationOid is what sequence.c does; the
    // call is made on the steady path's plain frames (see `unguarded`).
    unsafe {
        let owner = pg_sys::CurrentResourceOwner;
        pg_sys::CurrentResourceOwner = pg_sys::TopTransactionResourceOwner;
        unguarded::LockRelationOid(relid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
        pg_sys::CurrentResourceOwner = owner;
    }
}

/// A sequence locked for this transaction and checked for issuing values as `nextval()`
/// checks it.
///
/// `Sequence` and `LockedTuple` must stay plain data: the steady path calls PostgreSQL
/// unguarded while they are alive (see `mirror::unguarded`).
pub struct Sequence {
    /// Its entry in the per-backend table: its OID and checks, read there when needed.
    slot: Slot,
}

impl Sequence {
    /// Locks `relid` and refuses as `nextval()` would: not a sequence (42809), no USAGE or
    /// UPDATE right (42501), a read-only transaction or a standby (25006), another
    /// session's temporary sequence (0A000).
    ///
    /// `nextval()` makes its checks on every call; here they are remembered while nothing
    /// can have changed their outcome: same user, no catalog change from another session
    /// processed since the check began (the lock, taken first, processes any that committed
    /// before it), and either
    /// - the check was made by a transaction that had written nothing, and the current one
    ///   has written nothing either (no XID: neither can have changed the catalog, so only
    ///   committed catalog state, covered by the counter, decided or decides the outcome); or
    /// - the same statement of the same (sub)transaction.
    ///
    /// A stream of single-statement transactions, each INSERT with `DEFAULT next_id(...)`,
    /// thus checks once (the INSERT takes its XID only after the first ID is made).
    #[inline(always)]
    pub fn open(relid: pg_sys::Oid) -> Result<Sequence, IdError> {
        let lxid = mirror::current_lxid();
        let slot = sequence_cache::slot(relid);
        if slot.locked_in() != lxid {
            lock_for_transaction(relid);
            slot.set_locked_in(lxid);
        }
        // SAFETY: none of these can fail; read after locking, so that the lock's processing of
        // invalidation messages is counted.
        let (userid, clean, invalidations) = unsafe {
            (
                unguarded::GetUserId(),
                unguarded::GetTopTransactionIdIfAny() == pg_sys::InvalidTransactionId,
                pg_sys::SharedInvalidMessageCounter,
            )
        };
        // Where in the transaction this call is: asked only when a check could hold here
        // alone (made or reused by a transaction that has written).
        // SAFETY: as above.
        let place = || unsafe {
            (
                unguarded::GetCurrentSubTransactionId(),
                unguarded::GetCurrentCommandId(false),
            )
        };
        let c = slot.checked();
        let fresh = c.userid == userid
            && c.invalidations == invalidations
            && ((clean && !c.own_changes) || (c.lxid == lxid && (c.subxid, c.cid) == place()));
        if !fresh {
            let (subxid, cid) = place();
            slot.set_checked(Checked {
                invalidations,
                own_changes: !clean,
                lxid,
                subxid,
                cid,
                ..sequence_checks::check(relid, userid)?
            });
        }
        let local_temp = slot.checked().local_temp;
        // SAFETY: XactReadOnly is a plain flag; IsInParallelMode cannot fail.
        if unsafe { pg_sys::XactReadOnly && !local_temp || unguarded::IsInParallelMode() } {
            refuse_read_only_or_parallel(local_temp);
        }
        Ok(Sequence { slot })
    }

    /// The sequence's name, for messages.
    #[cold]
    #[inline(never)]
    pub fn name(&self) -> String {
        Relation::open(self.slot.relid()).name()
    }

    /// Whether the sequence's range (MINVALUE to MAXVALUE) admits `id`.
    pub fn holds(&self, id: i64) -> bool {
        (self.slot.checked().min..=self.slot.checked().max).contains(&id)
    }

    /// The error for an `id` the sequence's range does not admit (made after releasing the
    /// buffer: it looks up the sequence's name).
    #[cold]
    #[inline(never)]
    pub fn too_small_for(&self, id: i64) -> IdError {
        let Checked { min, max, .. } = self.slot.checked();
        if max.checked_sub(min) == Some(1) {
            // A move's seal stops the sequences of the copy it leaves behind so, at their
            // newest value (snowflake_id_node.stop_sequences): its shard issues from its new
            // node now. (No sequence of two values can hold snowflake IDs otherwise.)
            return IdError::SequenceStopped {
                sequence: self.name(),
                value: max,
            };
        }
        IdError::SequenceTooSmall {
            sequence: self.name(),
            id,
            min,
            max,
        }
    }

    pub fn max(&self) -> i64 {
        self.slot.checked().max
    }

    /// Done with the sequence (its lock stays with the transaction, as nextval()'s).
    pub fn close(self) {}

    /// `read_seq_tuple`: pins and exclusively locks the sequence's page.
    #[inline(always)]
    pub fn lock_tuple(&self) -> LockedTuple<'_> {
        // SAFETY: mirrors read_seq_tuple(); the page is a sequence page (magic checked) with
        // one normal item, the tuple, which we only touch under the exclusive buffer lock.
        unsafe {
            let buf = self.pin_page();
            unguarded::lock_buffer_exclusive(buf);
            let page = pg_sys::BufferGetPage(buf);
            let magic = mirror::page_special_magic(page);
            if magic != mirror::SEQ_MAGIC {
                self.bad_magic(magic);
            }
            let header = mirror::page_first_item(page) as pg_sys::HeapTupleHeader;
            if (*header).t_choice.t_heap.t_xmax != pg_sys::InvalidTransactionId {
                clear_xmax(header, buf);
            }
            let data = (header as *mut u8).add((*header).t_hoff as usize) as *mut SequenceData;
            LockedTuple {
                seq: self,
                buf,
                page,
                header,
                data,
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn bad_magic(&self, magic: u32) -> ! {
        pgrx::error!(
            "bad magic number in sequence \"{}\": {magic:08X}",
            self.name()
        );
    }

    /// Pins the sequence's only page: through `ReadRecentBuffer` when the buffer that held it
    /// last time still does (no buffer-mapping lookup, no relcache lookup), else opens the
    /// relation and `ReadBuffer`s it, both through pgrx's guard, and remembers the buffer.
    ///
    /// # Safety
    /// The sequence is locked by this transaction.
    #[inline(always)]
    unsafe fn pin_page(&self) -> pg_sys::Buffer {
        let recent = self.slot.recent_buffer();
        // SAFETY: ReadRecentBuffer checks that the buffer still holds this file's block 0
        // and pins it only then (see `unguarded` for why it may go unguarded).
        if recent != 0
            && unsafe {
                unguarded::ReadRecentBuffer(
                    self.slot.checked().locator,
                    pg_sys::ForkNumber::MAIN_FORKNUM,
                    0,
                    recent,
                )
            }
        {
            return recent;
        }
        // SAFETY: the caller's.
        unsafe { self.read_page() }
    }

    /// `pin_page` when the page is not in the remembered buffer.
    ///
    /// # Safety
    /// The sequence is locked by this transaction.
    #[cold]
    #[inline(never)]
    unsafe fn read_page(&self) -> pg_sys::Buffer {
        let rel = Relation::open(self.slot.relid());
        // SAFETY: an open, locked relation; pgrx's guard turns an ERROR into a panic.
        let buf = unsafe { pg_sys::ReadBuffer(rel.0, 0) };
        drop(rel);
        self.slot.set_recent_buffer(buf);
        buf
    }
}

/// A SELECT FOR UPDATE by old releases can leave an xmax on the sequence's tuple; clear it
/// like a hint bit, as read_seq_tuple() does.
///
/// # Safety
/// `header` is the tuple of `buf`'s page, pinned and exclusively locked.
#[cold]
#[inline(never)]
unsafe fn clear_xmax(header: pg_sys::HeapTupleHeader, buf: pg_sys::Buffer) {
    // SAFETY: the caller's.
    unsafe {
        (*header).t_choice.t_heap.t_xmax = pg_sys::InvalidTransactionId;
        (*header).t_infomask &= !(pg_sys::HEAP_XMAX_COMMITTED as u16);
        (*header).t_infomask |= pg_sys::HEAP_XMAX_INVALID as u16;
        pg_sys::MarkBufferDirtyHint(buf, true);
    }
}

/// The sequence's tuple, with its buffer pinned and exclusively locked.
pub struct LockedTuple<'a> {
    seq: &'a Sequence,
    buf: pg_sys::Buffer,
    page: pg_sys::Page,
    /// The tuple: its header, then `data`.
    header: pg_sys::HeapTupleHeader,
    data: *mut SequenceData,
}

const _: () = assert!(!std::mem::needs_drop::<Sequence>());
const _: () = assert!(!std::mem::needs_drop::<LockedTuple<'static>>());

impl LockedTuple<'_> {
    /// The newest value issued from the sequence, or the one before the next if nextval()
    /// would return `last_value` itself next (`is_called` false, as after `setval(.., false)`).
    pub fn newest(&self) -> i64 {
        // SAFETY: the buffer is locked; data points into it.
        let data = unsafe { &*self.data };
        if data.is_called {
            data.last_value
        } else {
            data.last_value.saturating_sub(1)
        }
    }

    /// Unlocks and unpins without changing anything.
    pub fn release(self) {
        // SAFETY: we hold a pin and the exclusive lock taken in lock_tuple.
        unsafe { unguarded::UnlockReleaseBuffer(self.buf) }
    }

    /// Stores `id` as the newest issued value, WAL-logging the state `logged_ahead` when WAL
    /// does not yet cover `id` (see the module's header), then unlocks.
    pub fn store(mut self, id: i64, logged_ahead: i64) {
        debug_assert!(logged_ahead >= id);
        // SAFETY: mirrors the end of nextval_internal(): the buffer is pinned and exclusively
        // locked; between START_CRIT_SECTION and END_CRIT_SECTION nothing may fail.
        unsafe {
            let data = &mut *self.data;
            let log = self.seq.slot.checked().needs_wal
                && (id > data.log_cnt || mirror::page_lsn(self.page) <= unguarded::GetRedoRecPtr());
            if log {
                take_transaction_id();
            }
            mirror::start_crit_section();
            unguarded::MarkBufferDirty(self.buf);
            if log {
                self.log_ahead(logged_ahead);
            }
            data.last_value = id;
            data.is_called = true;
            mirror::end_crit_section();
            unguarded::UnlockReleaseBuffer(self.buf);
        }
        self.data = std::ptr::null_mut();
    }

    /// WAL-logs the tuple with the state `logged_ahead` (`last_value` = `log_cnt` = it).
    ///
    /// # Safety
    /// Inside `store`'s critical section, with the buffer locked and marked dirty.
    #[cold]
    #[inline(never)]
    unsafe fn log_ahead(&mut self, logged_ahead: i64) {
        // SAFETY: the caller's; mirrors nextval_internal()'s XLOG_SEQ_LOG record.
        unsafe {
            let data = &mut *self.data;
            data.last_value = logged_ahead;
            data.log_cnt = logged_ahead;
            data.is_called = true;
            pg_sys::XLogBeginInsert();
            pg_sys::XLogRegisterBuffer(0, self.buf, pg_sys::REGBUF_WILL_INIT as u8);
            let mut record = XlSeqRec {
                locator: self.seq.slot.checked().locator,
            };
            pg_sys::XLogRegisterData(
                &mut record as *mut XlSeqRec as *mut _,
                std::mem::size_of::<XlSeqRec>() as _,
            );
            let len = mirror::page_first_item_len(self.page);
            pg_sys::XLogRegisterData(self.header as *mut _, len as _);
            let lsn = pg_sys::XLogInsert(pg_sys::RmgrIds::RM_SEQ_ID as u8, mirror::XLOG_SEQ_LOG);
            mirror::set_page_lsn(self.page, lsn);
        }
    }
}

/// Before a WAL record, outside the critical section: the transaction takes an ID, so that
/// its commit flushes WAL past the record.
#[cold]
#[inline(never)]
fn take_transaction_id() {
    // SAFETY: may raise (through pgrx's guard), before anything is changed.
    unsafe {
        pg_sys::GetTopTransactionId();
    }
}
