//! PostgreSQL's C definitions that `sequence_state` needs and pgrx does not bind, mirrored
//! by hand from `commands/sequence.h`, `catalog/pg_sequence.h`, `access/xact.h` and
//! `miscadmin.h` of PostgreSQL 15, 17, 18 and 19 (identical there, save the relfilenode's
//! rename to "relfilelocator" in 16, `PGPROC.lxid`'s move into `vxid` in 17 and
//! `LockBuffer` becoming an inline function in 19). The
//! `const` assertions below fail the build if a mirror's size drifts from the C struct's.
//!
//! Also here: the few functions the hot path calls without pgrx's guard ([`unguarded`]),
//! and `START_CRIT_SECTION`/`END_CRIT_SECTION` under their C names.

use pgrx::pg_sys;
use std::mem::size_of;

/// `sequence_magic`: the special space of a sequence page.
pub const SEQ_MAGIC: u32 = 0x1717;
/// `InvalidSubTransactionId`.
pub const INVALID_SUBTRANSACTION_ID: pg_sys::SubTransactionId = 0;
/// `XLOG_SEQ_LOG`, the one record type of the sequence resource manager.
pub const XLOG_SEQ_LOG: u8 = 0x00;

#[cfg(not(feature = "pg15"))]
pub use pg_sys::RelFileLocator;
/// `RelFileLocator` (PostgreSQL 16 and later), `RelFileNode` before: where a relation's
/// files are.
#[cfg(feature = "pg15")]
pub use pg_sys::RelFileNode as RelFileLocator;
const _: () = assert!(size_of::<RelFileLocator>() == 12);

/// `FormData_pg_sequence_data`: the sequence relation's single tuple.
#[repr(C)]
pub struct SequenceData {
    pub last_value: i64,
    pub log_cnt: i64,
    pub is_called: bool,
}
const _: () = assert!(size_of::<SequenceData>() == 24);

/// `FormData_pg_sequence`: the sequence's catalog row (its options).
#[repr(C)]
pub struct SequenceOptions {
    pub seqrelid: pg_sys::Oid,
    pub seqtypid: pg_sys::Oid,
    pub seqstart: i64,
    pub seqincrement: i64,
    pub seqmax: i64,
    pub seqmin: i64,
    pub seqcache: i64,
    pub seqcycle: bool,
}
const _: () = assert!(size_of::<SequenceOptions>() == 56);
const _: () = assert!(std::mem::offset_of!(SequenceOptions, seqmax) == 24);

/// `xl_seq_rec`: the header of an `XLOG_SEQ_LOG` record, followed by the tuple.
#[repr(C)]
pub struct XlSeqRec {
    pub locator: RelFileLocator,
}
const _: () = assert!(size_of::<XlSeqRec>() == 12);
const _: () = assert!(std::mem::offset_of!(pg_sys::PageHeaderData, pd_lsn) == 0);
const _: () = assert!(size_of::<pg_sys::PageXLogRecPtr>() == 8);

/// The relation's file locator (`rd_locator`, `rd_node` before 16).
///
/// # Safety
/// `rel` is an open relation.
pub unsafe fn rel_locator(rel: pg_sys::Relation) -> RelFileLocator {
    // SAFETY: the caller's.
    unsafe {
        #[cfg(feature = "pg15")]
        return (*rel).rd_node;
        #[cfg(not(feature = "pg15"))]
        return (*rel).rd_locator;
    }
}

/// `RelationNeedsWAL()`: whether changes to the relation are WAL-logged (not for
/// temporary and unlogged relations, nor, under `wal_level = minimal`, for one whose file
/// this transaction created).
///
/// # Safety
/// `rel` is an open relation.
pub unsafe fn relation_needs_wal(rel: pg_sys::Relation) -> bool {
    // SAFETY: the caller's.
    unsafe {
        let rel = &*rel;
        #[cfg(feature = "pg15")]
        let first_file_subid = rel.rd_firstRelfilenodeSubid;
        #[cfg(not(feature = "pg15"))]
        let first_file_subid = rel.rd_firstRelfilelocatorSubid;
        (*rel.rd_rel).relpersistence as u8 == pg_sys::RELPERSISTENCE_PERMANENT
            && (pg_sys::wal_level >= pg_sys::WalLevel::WAL_LEVEL_REPLICA as i32
                || (rel.rd_createSubid == INVALID_SUBTRANSACTION_ID
                    && first_file_subid == INVALID_SUBTRANSACTION_ID))
    }
}

/// This backend's local transaction ID (`MyProc->lxid`; `MyProc->vxid.lxid` from 17).
pub fn current_lxid() -> pg_sys::LocalTransactionId {
    // SAFETY: MyProc is set for every backend before any SQL function can run.
    unsafe {
        #[cfg(feature = "pg15")]
        return (*pg_sys::MyProc).lxid;
        #[cfg(not(feature = "pg15"))]
        return (*pg_sys::MyProc).vxid.lxid;
    }
}

/// `START_CRIT_SECTION()`: until [`end_crit_section`], any ERROR becomes a PANIC (the
/// server restarts and replays WAL), so a half-made change can never be left behind.
///
/// # Safety
/// Must be paired with [`end_crit_section`]; nothing in between may allocate.
pub unsafe fn start_crit_section() {
    // SAFETY: a plain counter of this backend's.
    unsafe { pg_sys::CritSectionCount += 1 }
}

/// `END_CRIT_SECTION()`.
///
/// # Safety
/// Closes the section [`start_crit_section`] opened.
pub unsafe fn end_crit_section() {
    // SAFETY: a plain counter of this backend's, raised by start_crit_section.
    unsafe {
        debug_assert!(pg_sys::CritSectionCount > 0);
        pg_sys::CritSectionCount -= 1;
    }
}

/// `PageGetLSN`. `pd_lsn`, the page header's first field, is two native-endian 32-bit
/// halves, the high one first: the struct of `xlogid` and `xrecoff` up to 18, one `uint64`
/// stored in that same layout from 19 (`PageXLogRecPtrGet`).
///
/// # Safety
/// `page` is a pinned and locked buffer page.
pub unsafe fn page_lsn(page: pg_sys::Page) -> u64 {
    // SAFETY: the caller's; the page header is aligned, its first 8 bytes are pd_lsn.
    let [high, low] = unsafe { *(page as *const [u32; 2]) };
    (high as u64) << 32 | low as u64
}

/// `PageSetLSN` (`PageXLogRecPtrSet`), in the layout [`page_lsn`] reads.
///
/// # Safety
/// `page` is a pinned and exclusively locked buffer page.
pub unsafe fn set_page_lsn(page: pg_sys::Page, lsn: u64) {
    // SAFETY: as page_lsn's.
    unsafe { *(page as *mut [u32; 2]) = [(lsn >> 32) as u32, lsn as u32] }
}

/// `*(uint32 *) PageGetSpecialPointer(page)`: a sequence page's magic number.
///
/// # Safety
/// `page` is a pinned and locked buffer page.
#[inline(always)]
pub unsafe fn page_special_magic(page: pg_sys::Page) -> u32 {
    // SAFETY: pd_special is the offset of the special space within the page.
    unsafe {
        let special = (*(page as *const pg_sys::PageHeaderData)).pd_special;
        (page as *const u8)
            .add(special as usize)
            .cast::<u32>()
            .read_unaligned()
    }
}

/// `PageGetItemId(page, FirstOffsetNumber)`: the line pointer of a sequence page's one tuple.
///
/// # Safety
/// `page` is a pinned and locked buffer page with at least one item.
#[inline(always)]
unsafe fn first_item_id(page: pg_sys::Page) -> pg_sys::ItemIdData {
    // SAFETY: the caller's; pd_linp[0] is the first line pointer.
    unsafe { *(*(page as *const pg_sys::PageHeaderData)).pd_linp.as_ptr() }
}

/// `PageGetItem(page, PageGetItemId(page, FirstOffsetNumber))`: a sequence page's one tuple.
///
/// # Safety
/// As [`first_item_id`].
#[inline(always)]
pub unsafe fn page_first_item(page: pg_sys::Page) -> *mut u8 {
    // SAFETY: the caller's; lp_off is the item's offset in the page.
    unsafe { (page as *mut u8).add(first_item_id(page).lp_off() as usize) }
}

/// `ItemIdGetLength(PageGetItemId(page, FirstOffsetNumber))`: the length of that tuple.
///
/// # Safety
/// As [`first_item_id`].
pub unsafe fn page_first_item_len(page: pg_sys::Page) -> u32 {
    // SAFETY: the caller's.
    unsafe { first_item_id(page).lp_len() }
}

/// PostgreSQL functions the steady path calls *without* pgrx's FFI guard (a `sigsetjmp`, a
/// thread check and their bookkeeping per call, code of its own that an INSERT would bring
/// into the CPU's caches for each ID). Any of them may raise an ERROR: `LockRelationOid` when
/// its wait is cancelled, times out or deadlocks, `ReadRecentBuffer` when out of memory. That
/// is safe for the reason pgrx's own guard requires of its callers (Rust's "plain old
/// frames"): from the fmgr entry points down to these calls, every frame of ours holds only
/// plain data, integers and the `Sequence`/`LockedTuple` handles (which have no destructor:
/// `sequence_state` asserts it at compile time), and no reference into the per-backend table
/// (`sequence_cache`). So PostgreSQL's longjmp skips nothing of Rust's, and the
/// (sub)transaction's abort releases the lock, the pin and the buffer lock, as for
/// `nextval()`.
///
/// The steady path's callers keep it so: the entry points (`next_id_wrapper`,
/// `next_id_continuing_wrapper`, and `#[pg_extern]`'s wrapper of the named layouts' form)
/// hold nothing with a destructor across `generator::issue`, which builds an error's message
/// only after releasing the buffer. The cold paths' calls, some made while a value with a
/// destructor is alive (a `Relation`, which closes itself), go through pgrx's guard
/// (`pg_sys::...`): opening the relation, `ReadBuffer` when the page is not in the buffer we
/// remember, catalog and permission checks, taking a transaction ID, WAL insertion.
pub mod unguarded {
    use super::RelFileLocator;
    use pgrx::pg_sys::{BlockNumber, Buffer, CommandId, ForkNumber, Oid, TimestampTz};
    use pgrx::pg_sys::{SubTransactionId, TransactionId, XLogRecPtr, LOCKMODE};
    unsafe extern "C" {
        pub fn GetCurrentTimestamp() -> TimestampTz;
        pub fn GetUserId() -> Oid;
        pub fn GetCurrentCommandId(used: bool) -> CommandId;
        pub fn GetCurrentSubTransactionId() -> SubTransactionId;
        pub fn GetTopTransactionIdIfAny() -> TransactionId;
        pub fn IsInParallelMode() -> bool;
        pub fn ReadRecentBuffer(
            rel: RelFileLocator,
            fork: ForkNumber::Type,
            block: BlockNumber,
            recent: Buffer,
        ) -> bool;
        #[cfg(not(feature = "pg19"))]
        fn LockBuffer(buf: Buffer, mode: i32);
        #[cfg(feature = "pg19")]
        fn LockBufferInternal(buf: Buffer, mode: pgrx::pg_sys::BufferLockMode::Type);
        pub fn MarkBufferDirty(buf: Buffer);
        pub fn UnlockReleaseBuffer(buf: Buffer);
        pub fn GetRedoRecPtr() -> XLogRecPtr;
        pub fn LockRelationOid(relid: Oid, lockmode: LOCKMODE);
    }

    /// `LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE)`. From PostgreSQL 19, `LockBuffer` is an
    /// inline function that calls `LockBufferInternal`, and `BUFFER_LOCK_EXCLUSIVE` is 3
    /// (a share-exclusive mode came in between).
    ///
    /// # Safety
    /// `buf` is a pinned buffer this backend has not locked.
    #[inline(always)]
    pub unsafe fn lock_buffer_exclusive(buf: Buffer) {
        // SAFETY: the caller's.
        unsafe {
            #[cfg(not(feature = "pg19"))]
            LockBuffer(buf, pgrx::pg_sys::BUFFER_LOCK_EXCLUSIVE as i32);
            #[cfg(feature = "pg19")]
            LockBufferInternal(buf, pgrx::pg_sys::BufferLockMode::BUFFER_LOCK_EXCLUSIVE);
        }
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::*;
    use pgrx::prelude::*;

    /// The mirrors that changed with 19, against PostgreSQL's own functions on a sequence's
    /// page that nextval() has just WAL-logged: `lock_buffer_exclusive` takes the exclusive
    /// content lock (19 numbers the modes anew), `page_lsn` reads what `BufferGetLSNAtomic`
    /// reads, and `set_page_lsn` writes what it then reads, for an LSN with both 32-bit
    /// halves set (swapped halves would show).
    #[pg_test]
    fn buffer_lock_and_page_lsn_are_postgres_own() {
        Spi::run("CREATE SEQUENCE mirror_probe; SELECT nextval('mirror_probe')").unwrap();
        let relid = Spi::get_one::<pg_sys::Oid>("SELECT 'mirror_probe'::regclass::oid")
            .unwrap()
            .unwrap();
        let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
        // SAFETY: an open relation's first block, pinned, then locked by us; the probe LSN is
        // put back before the lock is released, so nothing else ever sees it.
        unsafe {
            let rel = pg_sys::relation_open(relid, lock);
            let buf = pg_sys::ReadBuffer(rel, 0);
            unguarded::lock_buffer_exclusive(buf);
            #[cfg(feature = "pg19")]
            assert!(pg_sys::BufferIsLockedByMeInMode(
                buf,
                pg_sys::BufferLockMode::BUFFER_LOCK_EXCLUSIVE
            ));
            #[cfg(any(feature = "pg17", feature = "pg18"))]
            assert!(pg_sys::BufferIsExclusiveLocked(buf));
            let page = pg_sys::BufferGetPage(buf);
            let logged = page_lsn(page);
            assert!(logged > 0);
            assert_eq!(logged, pg_sys::BufferGetLSNAtomic(buf));
            let probe = 0x0000_0007_1234_5678;
            set_page_lsn(page, probe);
            let seen = pg_sys::BufferGetLSNAtomic(buf);
            set_page_lsn(page, logged);
            assert_eq!(seen, probe);
            pg_sys::UnlockReleaseBuffer(buf);
            pg_sys::relation_close(rel, lock);
        }
    }
}
