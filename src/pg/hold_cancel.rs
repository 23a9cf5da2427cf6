//! A query run with query cancels held off: the part of a shard move that must not stop
//! half-way.
//!
//! From a move's seal to its flip the source refuses the shards' writes and only the flip
//! sends them to the target: a cancel landing in between (a client's Ctrl-C,
//! `pg_cancel_backend`, `statement_timeout`, a rebalance cancelling its workers) would leave
//! the shards refusing writes until someone repairs the move. PostgreSQL holds cancels off
//! where stopping would break its protocol (`QueryCancelHoldoffCount`, postgres.c, while a
//! client message is half read): here the count is raised around one query, run by SPI. A
//! cancel that arrives meanwhile stays pending (`ProcessInterrupts` re-arms it) and is taken
//! at the first interrupt check after the query ends; the waits inside still wake at once
//! (they sleep on the latch) and go on to their own deadlines. A terminate
//! (`pg_terminate_backend`, a shutdown) is not held off: it ends the backend as ever.
//!
//! The count comes back on every path out, as it was: on return, and on an error raised
//! inside, which unwinds through here as a Rust panic (pgrx's guard at each call into
//! PostgreSQL) and drops the guard before the error goes on to the caller's handler. It is
//! set back, not decremented: `errfinish` zeroes it for every ERROR before the error
//! unwinds (elog.c), and a decrement would then wrap it around, holding every cancel of the
//! session off for good once a PL/pgSQL block caught the error. For the same reason an
//! error caught *inside* the query (a PL/pgSQL block there, its subtransaction rolled back)
//! would end the hold early, and the handler and what follows would run cancellable: the
//! rollback of a subtransaction while a hold is on sets the count back to the hold's.

use pgrx::prelude::*;
use std::cell::{Cell, RefCell};
use std::ffi::c_void;

thread_local! {
    /// The count each hold in force set, innermost last.
    static LEVELS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    static HOOKED: Cell<bool> = const { Cell::new(false) };
}

/// One hold on query cancels: the count as it was, set back when dropped.
struct Held(u32);

impl Held {
    fn take() -> Held {
        if !HOOKED.with(|h| h.replace(true)) {
            // SAFETY: a callback that lives as long as the library, registered once.
            unsafe {
                pg_sys::RegisterSubXactCallback(Some(at_subtransaction_abort), std::ptr::null_mut())
            };
        }
        // SAFETY: a backend global, only this backend's; set back by Drop.
        let before = unsafe { pg_sys::QueryCancelHoldoffCount };
        LEVELS.with(|l| l.borrow_mut().push(before + 1));
        // SAFETY: as above.
        unsafe { pg_sys::QueryCancelHoldoffCount = before + 1 };
        Held(before)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        LEVELS.with(|l| l.borrow_mut().pop());
        // SAFETY: sets back the count `take` found.
        unsafe { pg_sys::QueryCancelHoldoffCount = self.0 };
    }
}

/// A subtransaction rolled back inside a hold (its error zeroed the count): the hold again.
unsafe extern "C-unwind" fn at_subtransaction_abort(
    event: pg_sys::SubXactEvent::Type,
    _my_subid: pg_sys::SubTransactionId,
    _parent_subid: pg_sys::SubTransactionId,
    _arg: *mut c_void,
) {
    if event != pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        return;
    }
    if let Some(level) = LEVELS.with(|l| l.try_borrow().ok().and_then(|l| l.last().copied())) {
        // SAFETY: a backend global, only this backend's.
        unsafe { pg_sys::QueryCancelHoldoffCount = level };
    }
}

/// Runs `query` (as the current user, by SPI) with query cancels held off until it ends: the
/// first column of its first row, as text.
pub fn query(query: &str) -> Option<String> {
    let held = Held::take();
    let result = Spi::connect_mut(|client| -> pgrx::spi::SpiResult<Option<String>> {
        let table = client.update(query, None, &[])?;
        if table.is_empty() {
            return Ok(None);
        }
        table.first().get_one::<String>()
    });
    drop(held);
    result.unwrap_or_else(|e| {
        crate::pg::node::libpq::raise(
            pgrx::PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
            format!("a query run with cancels held off must return one text column: {e}"),
        )
    })
}
