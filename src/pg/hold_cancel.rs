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
//! The count comes back on every path out: on return, and on an error raised inside, which
//! unwinds through here as a Rust panic (pgrx's guard at each call into PostgreSQL) and drops
//! the guard before the error goes on to the caller's handler. (An error that reaches the
//! top level resets the count anyway, PostgresMain's recovery; one caught by a PL/pgSQL
//! block would not.)

use pgrx::prelude::*;

/// One hold on query cancels, given back when dropped.
struct Held;

impl Held {
    fn take() -> Held {
        // SAFETY: a backend global, only this backend's; given back by Drop.
        unsafe { pg_sys::QueryCancelHoldoffCount += 1 };
        Held
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: gives back the hold taken in `take`, once.
        unsafe { pg_sys::QueryCancelHoldoffCount -= 1 };
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
        crate::pg::libpq::raise(
            pgrx::PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
            format!("a query run with cancels held off must return one text column: {e}"),
        )
    })
}
