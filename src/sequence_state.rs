//! A PostgreSQL sequence's own tuple as the generator's durable state.
//!
//! `next_id` keeps the newest ID it issued in the sequence's `last_value`, where `nextval()`
//! keeps its counter. So whatever carries a sequence carries the generator: WAL and crash
//! recovery, streaming replication and promotion, `pg_dump` (which restores it with
//! `setval`). No shared memory and no `shared_preload_libraries` are needed.
//!
//! This module mirrors PostgreSQL 15's `src/backend/commands/sequence.c` (`init_sequence`,
//! `lock_and_open_sequence`, `read_seq_tuple` and the WAL part of `nextval_internal`); the C
//! names are used below. pgEdge's `snowflake.c` does the same. Invariants it keeps:
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

use crate::error::IdError;
use pgrx::pg_sys;
use std::ffi::CStr;

/// How far ahead of the issued ID a WAL record puts the sequence (ID time, in ms).
pub const LOG_AHEAD_MS: i64 = 100;

/// `sequence_magic`: the special space of a sequence page.
const SEQ_MAGIC: u32 = 0x1717;
/// `InvalidSubTransactionId`.
const INVALID_SUBTRANSACTION_ID: pg_sys::SubTransactionId = 0;
/// `XLOG_SEQ_LOG`, the one record type of the sequence resource manager.
const XLOG_SEQ_LOG: u8 = 0x00;

/// `FormData_pg_sequence_data`: the sequence relation's single tuple.
#[repr(C)]
struct SequenceData {
    last_value: i64,
    log_cnt: i64,
    is_called: bool,
}

/// `FormData_pg_sequence`: the sequence's catalog row (its options).
#[repr(C)]
struct SequenceOptions {
    seqrelid: pg_sys::Oid,
    seqtypid: pg_sys::Oid,
    seqstart: i64,
    seqincrement: i64,
    seqmax: i64,
    seqmin: i64,
    seqcache: i64,
    seqcycle: bool,
}

/// `xl_seq_rec`: the header of an `XLOG_SEQ_LOG` record, followed by the tuple.
#[repr(C)]
struct XlSeqRec {
    #[cfg(any(feature = "pg13", feature = "pg14", feature = "pg15"))]
    node: pg_sys::RelFileNode,
    #[cfg(not(any(feature = "pg13", feature = "pg14", feature = "pg15")))]
    locator: pg_sys::RelFileLocator,
}

/// PostgreSQL functions called on every ID *without* pgrx's FFI guard. The guard (a
/// `sigsetjmp` and a thread check per call) is there to turn a PostgreSQL ERROR into a Rust
/// panic; on this path it cost as much as `nextval()` itself. None of these raises an ERROR
/// short of a broken installation (an I/O failure in `ReadBuffer`); if one did, PostgreSQL's
/// longjmp would pass over frames of ours that own nothing to drop (all state on this path is
/// plain data), which is sound. Anything that can fail in ordinary use (locking, catalog and
/// permission checks, our own errors) goes through pgrx as usual.
mod unguarded {
    #[cfg(not(any(feature = "pg13", feature = "pg14", feature = "pg15")))]
    pub use pgrx::pg_sys::RelFileLocator;
    #[cfg(any(feature = "pg13", feature = "pg14", feature = "pg15"))]
    pub use pgrx::pg_sys::RelFileNode as RelFileLocator;
    use pgrx::pg_sys::{BlockNumber, Buffer, CommandId, ForkNumber, Oid, Relation, TimestampTz};
    use pgrx::pg_sys::{SubTransactionId, TransactionId, XLogRecPtr, LOCKMODE};
    unsafe extern "C" {
        pub fn GetCurrentTimestamp() -> TimestampTz;
        pub fn GetUserId() -> Oid;
        pub fn GetCurrentCommandId(used: bool) -> CommandId;
        pub fn GetCurrentSubTransactionId() -> SubTransactionId;
        pub fn GetTopTransactionIdIfAny() -> TransactionId;
        pub fn try_relation_open(relid: Oid, lockmode: LOCKMODE) -> Relation;
        pub fn relation_close(rel: Relation, lockmode: LOCKMODE);
        pub fn ReadBuffer(rel: Relation, block: BlockNumber) -> Buffer;
        #[cfg(not(feature = "pg13"))]
        pub fn ReadRecentBuffer(
            rel: RelFileLocator,
            fork: ForkNumber::Type,
            block: BlockNumber,
            recent: Buffer,
        ) -> bool;
        pub fn LockBuffer(buf: Buffer, mode: i32);
        pub fn MarkBufferDirty(buf: Buffer);
        pub fn UnlockReleaseBuffer(buf: Buffer);
        pub fn GetRedoRecPtr() -> XLogRecPtr;
        pub fn IsInParallelMode() -> bool;
    }
}

/// State kept per backend (each backend is one thread; pgrx enforces it).
struct BackendLocal<T>(std::cell::UnsafeCell<T>);
// SAFETY: PostgreSQL backends are single-threaded; only the backend's thread touches this.
unsafe impl<T> Sync for BackendLocal<T> {}

/// What a backend has checked about a sequence (see [`Sequence::open`] for how long it holds).
#[derive(Clone, Copy)]
struct Checked {
    relid: pg_sys::Oid,
    userid: pg_sys::Oid,
    /// `SharedInvalidMessageCounter` read *before* the check (after locking the sequence):
    /// any catalog change committed by another session since the check began (a REVOKE,
    /// ALTER SEQUENCE, DROP), even one that committed while the check itself waited for a
    /// catalog lock, has moved it.
    invalidations: u64,
    /// Whether the checking transaction had written anything (it had an XID): then the check
    /// may rest on its own uncommitted catalog changes (a GRANT), which a rollback undoes
    /// without any invalidation message, so the check holds only where it was made.
    own_changes: bool,
    /// Where the check was made: transaction, subtransaction (a `ROLLBACK TO` starts a new
    /// one) and command.
    lxid: pg_sys::LocalTransactionId,
    subxid: pg_sys::SubTransactionId,
    cid: pg_sys::CommandId,
    local_temp: bool,
    min: i64,
    max: i64,
}

/// How many sequences' checks a backend remembers; past that it forgets them all.
const CHECKED_CAPACITY: usize = 64;

/// The buffer that last held a sequence's page, per sequence: `ReadRecentBuffer` pins it
/// without the buffer-mapping lookup when it still does (and says so when it does not).
static RECENT_BUFFER: BackendLocal<(pg_sys::Oid, pg_sys::Buffer)> =
    BackendLocal(std::cell::UnsafeCell::new((pg_sys::InvalidOid, 0)));

/// Milliseconds between 1970-01-01 and PostgreSQL's epoch, 2000-01-01 (both UTC).
pub const PG_EPOCH_UNIX_MS: i64 = 946_684_800_000;

/// PostgreSQL's clock (`gettimeofday`, the one `clock_timestamp()` reads) in Unix ms.
pub fn clock_unix_ms() -> i64 {
    // SAFETY: see `unguarded`.
    let micros_since_2000 = unsafe { unguarded::GetCurrentTimestamp() };
    micros_since_2000.div_euclid(1000) + PG_EPOCH_UNIX_MS
}

/// Sequences this backend locked in the current transaction (cleared when a new one starts),
/// as `seqhashtab`'s lxid: the RowExclusiveLock is taken once per transaction.
static LOCKED: BackendLocal<(pg_sys::LocalTransactionId, Vec<pg_sys::Oid>)> =
    BackendLocal(std::cell::UnsafeCell::new((0, Vec::new())));

/// Sequences this backend checked, across transactions.
static CHECKED: BackendLocal<Vec<Checked>> = BackendLocal(std::cell::UnsafeCell::new(Vec::new()));

fn current_lxid() -> pg_sys::LocalTransactionId {
    // SAFETY: MyProc is set for every backend before any SQL function can run.
    unsafe {
        #[cfg(any(feature = "pg13", feature = "pg14", feature = "pg15", feature = "pg16"))]
        return (*pg_sys::MyProc).lxid;
        #[cfg(not(any(feature = "pg13", feature = "pg14", feature = "pg15", feature = "pg16")))]
        return (*pg_sys::MyProc).vxid.lxid;
    }
}

/// `lock_and_open_sequence`'s locking: RowExclusiveLock, owned by the top-level transaction
/// so that a subtransaction's abort does not release it.
fn lock_for_transaction(relid: pg_sys::Oid) {
    // SAFETY: swapping the resource owner around LockRelationOid is what sequence.c does; it
    // is restored before anything else runs (LockRelationOid raises through pgrx's guard,
    // and the transaction's abort resets CurrentResourceOwner anyway).
    unsafe {
        let owner = pg_sys::CurrentResourceOwner;
        pg_sys::CurrentResourceOwner = pg_sys::TopTransactionResourceOwner;
        pg_sys::LockRelationOid(relid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
        pg_sys::CurrentResourceOwner = owner;
    }
}

/// An open sequence, checked for issuing values as `nextval()` checks it.
pub struct Sequence {
    rel: pg_sys::Relation,
    min: i64,
    max: i64,
}

impl Sequence {
    /// Locks and opens `relid`, and refuses as `nextval()` would: not a sequence (42809), no
    /// USAGE or UPDATE right (42501), a read-only transaction or a standby (25006).
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
    pub fn open(relid: pg_sys::Oid) -> Result<Sequence, IdError> {
        let lxid = current_lxid();
        // SAFETY: see `unguarded`; LOCKED and CHECKED are only touched by this backend, never
        // re-entrantly (no PostgreSQL call happens while a reference is alive).
        let locked = unsafe {
            let locked = &mut *LOCKED.0.get();
            if locked.0 != lxid {
                locked.0 = lxid;
                locked.1.clear(); // keeps its allocation: none per transaction
            }
            locked.1.contains(&relid)
        };
        if !locked {
            lock_for_transaction(relid);
            // SAFETY: as above.
            unsafe { (*LOCKED.0.get()).1.push(relid) };
        }
        // SAFETY: as above; read after locking, so that the lock's processing of invalidation
        // messages is counted.
        let (userid, cid, subxid, clean, invalidations, known) = unsafe {
            let known = (*CHECKED.0.get())
                .iter()
                .find(|c| c.relid == relid)
                .copied();
            (
                unguarded::GetUserId(),
                unguarded::GetCurrentCommandId(false),
                unguarded::GetCurrentSubTransactionId(),
                unguarded::GetTopTransactionIdIfAny() == pg_sys::InvalidTransactionId,
                pg_sys::SharedInvalidMessageCounter,
                known,
            )
        };
        let fresh = known.filter(|c| {
            c.userid == userid
                && c.invalidations == invalidations
                && ((clean && !c.own_changes)
                    || (c.lxid == lxid && c.subxid == subxid && c.cid == cid))
        });
        let checked = match fresh {
            Some(c) => c,
            None => {
                let c = Checked {
                    invalidations,
                    own_changes: !clean,
                    lxid,
                    subxid,
                    cid,
                    ..Self::check(relid, userid)?
                };
                // SAFETY: as above.
                let checked = unsafe { &mut *CHECKED.0.get() };
                match checked.iter_mut().find(|k| k.relid == relid) {
                    Some(k) => *k = c,
                    None => {
                        if checked.len() == CHECKED_CAPACITY {
                            checked.clear();
                        }
                        checked.push(c)
                    }
                }
                c
            }
        };
        // SAFETY: the lock is held, so the relation cannot go away; XactReadOnly is a plain
        // flag, and the Prevent* functions only run (through pgrx) to raise their errors.
        unsafe {
            if pg_sys::XactReadOnly && !checked.local_temp {
                pg_sys::PreventCommandIfReadOnly(c"next_id()".as_ptr());
            }
            if unguarded::IsInParallelMode() {
                pg_sys::PreventCommandIfParallelMode(c"next_id()".as_ptr());
            }
            let rel = unguarded::try_relation_open(relid, pg_sys::NoLock as pg_sys::LOCKMODE);
            if rel.is_null() {
                pgrx::error!(
                    "sequence with OID {} was dropped while in use",
                    relid.to_u32()
                );
            }
            Ok(Sequence {
                rel,
                min: checked.min,
                max: checked.max,
            })
        }
    }

    /// The checks nextval() makes on every call (the caller fills in where they were made).
    fn check(relid: pg_sys::Oid, userid: pg_sys::Oid) -> Result<Checked, IdError> {
        // SAFETY: we hold a lock on relid; a missing relation is an ERROR (42P01 below).
        let rel = unsafe { pg_sys::try_relation_open(relid, pg_sys::NoLock as pg_sys::LOCKMODE) };
        if rel.is_null() {
            pgrx::ereport!(
                ERROR,
                pgrx::PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                format!("sequence with OID {} does not exist", relid.to_u32())
            );
        }
        let seq = Sequence {
            rel,
            min: 0,
            max: 0,
        };
        // SAFETY: rel is open, so rd_rel is valid.
        let (relkind, persistence, local_temp) = unsafe {
            let form = &*(*rel).rd_rel;
            (form.relkind, form.relpersistence, (*rel).rd_islocaltemp)
        };
        if relkind as u8 != pg_sys::RELKIND_SEQUENCE {
            return Err(IdError::NotASequence {
                relation: seq.close_returning_name(),
            });
        }
        // RELATION_IS_OTHER_TEMP: its pages live in another backend's local buffers, and
        // ReadBuffer would raise this same error from beneath the unguarded path.
        if persistence as u8 == pg_sys::RELPERSISTENCE_TEMP && !local_temp {
            return Err(IdError::OtherSessionsTemporary {
                sequence: seq.close_returning_name(),
            });
        }
        // SAFETY: catalog lookups on an open relation.
        let allowed = unsafe {
            pg_sys::pg_class_aclcheck(
                relid,
                userid,
                (pg_sys::ACL_USAGE | pg_sys::ACL_UPDATE) as pg_sys::AclMode,
            ) == pg_sys::AclResult::ACLCHECK_OK
        };
        if !allowed {
            return Err(IdError::PermissionDenied {
                sequence: seq.close_returning_name(),
            });
        }
        let (min, max) = seq.limits();
        seq.close();
        Ok(Checked {
            relid,
            userid,
            invalidations: 0,
            own_changes: true,
            lxid: 0,
            subxid: 0,
            cid: 0,
            local_temp,
            min,
            max,
        })
    }

    /// The sequence's MINVALUE and MAXVALUE, from `pg_sequence` (the syscache, as nextval()).
    fn limits(&self) -> (i64, i64) {
        // SAFETY: SEQRELID lookup of an open sequence; the tuple is released right after use.
        unsafe {
            let relid = (*self.rel).rd_id;
            let tuple =
                pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::SEQRELID as _, relid.into());
            if tuple.is_null() {
                pgrx::error!("cache lookup failed for sequence {}", relid.to_u32());
            }
            let options = &*(pg_sys::GETSTRUCT(tuple) as *const SequenceOptions);
            let limits = (options.seqmin, options.seqmax);
            pg_sys::ReleaseSysCache(tuple);
            limits
        }
    }

    pub fn name(&self) -> String {
        // SAFETY: rd_rel->relname is a NUL-terminated NameData while the relation is open.
        unsafe {
            CStr::from_ptr((*(*self.rel).rd_rel).relname.data.as_ptr())
                .to_string_lossy()
                .into_owned()
        }
    }

    /// Whether the sequence's range admits `id`; else the error to raise.
    pub fn check_holds(&self, id: i64) -> Result<(), IdError> {
        if (self.min..=self.max).contains(&id) {
            Ok(())
        } else {
            Err(IdError::SequenceTooSmall {
                sequence: self.name(),
                id,
                min: self.min,
                max: self.max,
            })
        }
    }

    pub fn max(&self) -> i64 {
        self.max
    }

    fn close_returning_name(self) -> String {
        let name = self.name();
        self.close();
        name
    }

    pub fn close(self) {
        // SAFETY: opened in `open` with NoLock; the lock stays with the transaction.
        unsafe { unguarded::relation_close(self.rel, pg_sys::NoLock as pg_sys::LOCKMODE) }
    }

    fn needs_wal(&self) -> bool {
        // SAFETY: RelationNeedsWAL() on an open relation.
        unsafe {
            let rel = &*self.rel;
            (*rel.rd_rel).relpersistence as u8 == pg_sys::RELPERSISTENCE_PERMANENT
                && (pg_sys::wal_level >= pg_sys::WalLevel::WAL_LEVEL_REPLICA as i32
                    || (rel.rd_createSubid == INVALID_SUBTRANSACTION_ID
                        && rel.rd_firstRelfilenodeSubid == INVALID_SUBTRANSACTION_ID))
        }
    }

    /// `read_seq_tuple`: pins and exclusively locks the sequence's page.
    pub fn lock_tuple(&self) -> LockedTuple<'_> {
        // SAFETY: mirrors read_seq_tuple(); the page is a sequence page (magic checked) with
        // one normal item, the tuple, which we only touch under the exclusive buffer lock.
        unsafe {
            let buf = read_sequence_page(self.rel);
            unguarded::LockBuffer(buf, pg_sys::BUFFER_LOCK_EXCLUSIVE as i32);
            let page = pg_sys::BufferGetPage(buf);
            let magic = *(pg_sys::PageGetSpecialPointer(page) as *const u32);
            if magic != SEQ_MAGIC {
                pgrx::error!(
                    "bad magic number in sequence \"{}\": {magic:08X}",
                    self.name()
                );
            }
            let item =
                pg_sys::PageGetItemId(page, pg_sys::FirstOffsetNumber as pg_sys::OffsetNumber);
            let header = pg_sys::PageGetItem(page, item) as pg_sys::HeapTupleHeader;
            let mut tuple: pg_sys::HeapTupleData = std::mem::zeroed();
            tuple.t_data = header;
            tuple.t_len = (*item).lp_len();
            // A SELECT FOR UPDATE by old releases can leave an xmax here; clear it like a
            // hint bit, as read_seq_tuple() does.
            if (*header).t_choice.t_heap.t_xmax != pg_sys::InvalidTransactionId {
                (*header).t_choice.t_heap.t_xmax = pg_sys::InvalidTransactionId;
                (*header).t_infomask &= !(pg_sys::HEAP_XMAX_COMMITTED as u16);
                (*header).t_infomask |= pg_sys::HEAP_XMAX_INVALID as u16;
                pg_sys::MarkBufferDirtyHint(buf, true);
            }
            let data = pg_sys::GETSTRUCT(&mut tuple) as *mut SequenceData;
            LockedTuple {
                seq: self,
                buf,
                page,
                tuple,
                data,
            }
        }
    }
}

/// The sequence's tuple, with its buffer pinned and exclusively locked.
pub struct LockedTuple<'a> {
    seq: &'a Sequence,
    buf: pg_sys::Buffer,
    page: pg_sys::Page,
    tuple: pg_sys::HeapTupleData,
    data: *mut SequenceData,
}

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
            let needs_wal = self.seq.needs_wal();
            let log = needs_wal
                && (id > data.log_cnt || page_lsn(self.page) <= unguarded::GetRedoRecPtr());
            if log {
                // Outside the critical section: commit must flush WAL past our record.
                pg_sys::GetTopTransactionId();
            }
            pg_sys::CritSectionCount += 1;
            unguarded::MarkBufferDirty(self.buf);
            if log {
                data.last_value = logged_ahead;
                data.log_cnt = logged_ahead;
                data.is_called = true;
                pg_sys::XLogBeginInsert();
                pg_sys::XLogRegisterBuffer(0, self.buf, pg_sys::REGBUF_WILL_INIT as u8);
                let mut record: XlSeqRec = std::mem::zeroed();
                #[cfg(any(feature = "pg13", feature = "pg14", feature = "pg15"))]
                {
                    record.node = (*self.seq.rel).rd_node;
                }
                #[cfg(not(any(feature = "pg13", feature = "pg14", feature = "pg15")))]
                {
                    record.locator = (*self.seq.rel).rd_locator;
                }
                pg_sys::XLogRegisterData(
                    &mut record as *mut XlSeqRec as *mut _,
                    std::mem::size_of::<XlSeqRec>() as _,
                );
                pg_sys::XLogRegisterData(self.tuple.t_data as *mut _, self.tuple.t_len as _);
                let lsn = pg_sys::XLogInsert(pg_sys::RmgrIds::RM_SEQ_ID as u8, XLOG_SEQ_LOG);
                set_page_lsn(self.page, lsn);
            }
            data.last_value = id;
            data.is_called = true;
            pg_sys::CritSectionCount -= 1;
            unguarded::UnlockReleaseBuffer(self.buf);
        }
        self.data = std::ptr::null_mut();
    }
}

/// Pins the sequence's only page: through `ReadRecentBuffer` when the buffer that held it
/// last time still does (no buffer-mapping lookup), else `ReadBuffer`.
///
/// # Safety
/// `rel` is an open sequence relation, locked by this transaction.
unsafe fn read_sequence_page(rel: pg_sys::Relation) -> pg_sys::Buffer {
    // SAFETY: see `unguarded`; RECENT_BUFFER is this backend's, not borrowed elsewhere.
    unsafe {
        let relid = (*rel).rd_id;
        let recent = &mut *RECENT_BUFFER.0.get();
        #[cfg(any(feature = "pg14", feature = "pg15"))]
        let locator = (*rel).rd_node;
        #[cfg(not(any(feature = "pg13", feature = "pg14", feature = "pg15")))]
        let locator = (*rel).rd_locator;
        #[cfg(not(feature = "pg13"))] // ReadRecentBuffer is new in PostgreSQL 14
        if recent.0 == relid
            && recent.1 != 0
            && unguarded::ReadRecentBuffer(locator, pg_sys::ForkNumber::MAIN_FORKNUM, 0, recent.1)
        {
            return recent.1;
        }
        let buf = unguarded::ReadBuffer(rel, 0);
        *recent = (relid, buf);
        buf
    }
}

/// `PageGetLSN`.
unsafe fn page_lsn(page: pg_sys::Page) -> u64 {
    // SAFETY: page is a locked buffer page; pd_lsn is its first field.
    let lsn = unsafe { (*(page as *const pg_sys::PageHeaderData)).pd_lsn };
    (lsn.xlogid as u64) << 32 | lsn.xrecoff as u64
}

/// `PageSetLSN`.
unsafe fn set_page_lsn(page: pg_sys::Page, lsn: u64) {
    // SAFETY: page is a locked buffer page; pd_lsn is its first field.
    let header = unsafe { &mut *(page as *mut pg_sys::PageHeaderData) };
    header.pd_lsn.xlogid = (lsn >> 32) as u32;
    header.pd_lsn.xrecoff = lsn as u32;
}
