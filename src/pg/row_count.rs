//! A table's rows counted without running anything its owner defined.
//!
//! `SELECT count(*) FROM t` plans a query on `t`, and planning runs code of `t`'s owner:
//! the planner folds the constant parts of its index expressions (`RelationGetIndexExpressions`
//! evaluates them), so an owner's IMMUTABLE function that calls anything runs as whoever
//! counts. A move counts a shard's rows under its fence, as the router's superuser; this
//! counts them as a sequential scan does, through the table's access method at the
//! statement's snapshot, with no planner, no index and no expression: the tuples the scan
//! returns are the rows `count(*)` would count (as PostgreSQL's own `SeqScan` reads them).

use pgrx::pg_sys;

/// The rows of table `relid` (a plain table, or a partition) visible to the active snapshot.
pub fn rows(relid: pg_sys::Oid) -> i64 {
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    // SAFETY: opens the table (erroring if it is not one), scans it through its access
    // method's callbacks as table_beginscan/table_scan_getnextslot/table_endscan (static
    // inline in tableam.h) do, with the flags table_beginscan gives a sequential scan; every
    // object made here is released before returning, and an error aborts the transaction,
    // whose clean-up releases the scan's buffers and the relation.
    unsafe {
        let rel = pg_sys::table_open(relid, lock);
        let am = (*rel).rd_tableam;
        let flags = pg_sys::ScanOptions::SO_TYPE_SEQSCAN
            | pg_sys::ScanOptions::SO_ALLOW_STRAT
            | pg_sys::ScanOptions::SO_ALLOW_SYNC
            | pg_sys::ScanOptions::SO_ALLOW_PAGEMODE;
        let scan = (*am).scan_begin.expect("a table access method scans")(
            rel,
            pg_sys::GetActiveSnapshot(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            flags,
        );
        let slot = pg_sys::table_slot_create(rel, std::ptr::null_mut());
        let next = (*am).scan_getnextslot.expect("a table access method scans");
        let mut n: i64 = 0;
        while next(scan, pg_sys::ScanDirection::ForwardScanDirection, slot) {
            n += 1;
            if n % 65536 == 0 {
                pgrx::check_for_interrupts!();
            }
        }
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        (*am).scan_end.expect("a table access method scans")(scan);
        pg_sys::table_close(rel, lock);
        n
    }
}
