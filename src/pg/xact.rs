//! Whether the caller's transaction can outlive the statement running now, for the router's
//! SECURITY DEFINER functions: what they lock or write in the caller's transaction is held
//! until that transaction ends, so those that cannot give it back before they return refuse
//! to run where the caller could keep it open (PreventInTransactionBlock's rule, xact.c).
//!
//! `IsTransactionBlock()` answers for the current (sub)transaction: inside a PL/pgSQL block
//! with an EXCEPTION clause it is true even in a single-statement transaction, and a
//! procedure's own transaction control (`CALL rebalance()`, which runs its steps in such
//! blocks) must still work. So, below the top level, a transaction started by a procedure's
//! COMMIT is told apart by its start time: PostgreSQL starts the transaction of a client
//! statement at the statement's start time, and only one a procedure begins after its
//! COMMIT or ROLLBACK later (StartTransaction, `SPI_inside_nonatomic_context`), and such a
//! procedure is never inside a transaction block (its COMMIT would fail). Any other
//! subtransaction is counted as a block. A pipeline's later statements (extended protocol,
//! no Sync between) share one transaction too (`XACT_FLAGS_PIPELINING`).

use pgrx::pg_sys;

/// Whether the current transaction may stay open after the statement running now: an
/// explicit or implicit transaction block, a pipeline, or a subtransaction of a
/// transaction that no procedure began.
pub fn in_transaction_block() -> bool {
    // SAFETY: reads the transaction state of this backend, inside a transaction.
    unsafe {
        if pg_sys::MyXactFlags & pg_sys::XACT_FLAGS_PIPELINING as i32 != 0 {
            return true;
        }
        if pg_sys::GetCurrentTransactionNestLevel() <= 1 {
            return pg_sys::IsTransactionBlock();
        }
        pg_sys::GetCurrentTransactionStartTimestamp() <= pg_sys::GetCurrentStatementStartTimestamp()
    }
}
