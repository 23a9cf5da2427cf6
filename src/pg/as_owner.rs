//! Queries on other roles' tables, run as their owner under restricted-operation rules.
//!
//! Planning or running a query on a table runs code its owner defined: an index
//! expression's function is folded by the planner (`RelationGetIndexExpressions` evaluates
//! its constant parts), a constraint's or default's function runs on every row written. Run
//! as a superuser, that code runs as the superuser. PostgreSQL's own maintenance commands
//! (VACUUM, ANALYZE, REINDEX, CLUSTER, REFRESH MATERIALIZED VIEW) switch to the table's owner
//! first, with `SECURITY_RESTRICTED_OPERATION` (no `SET ROLE`, no temporary objects, no
//! session state left behind) and a search_path of their own: this does the same for the
//! router's privileged steps that read or change a shard's tables (row counts, status,
//! schema changes, the rows a move copies into its target's tables). The user id and
//! security context come back on return, and on an error from the (sub)transaction's abort,
//! as for a SECURITY DEFINER function.

use pgrx::prelude::*;
use std::ffi::CString;

/// Runs `query` as `role` under restricted-operation rules ([`run`]): the first column of
/// its first row, as text.
pub fn query(role: pg_sys::Oid, query: &str) -> Option<String> {
    run(role, || {
        Spi::connect_mut(|client| -> pgrx::spi::SpiResult<Option<String>> {
            let table = client.update(query, None, &[])?;
            if table.is_empty() {
                return Ok(None);
            }
            table.first().get_one::<String>()
        })
        .unwrap_or_else(|e| {
            crate::pg::node::libpq::raise(
                pgrx::PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                format!("a query run as a table's owner must return one text column: {e}"),
            )
        })
    })
}

/// Runs `work` as `role` under restricted-operation rules, with `search_path` =
/// pg_catalog, pg_temp and `row_security` off (a policy that would filter the owner's rows
/// makes a query fail, never count fewer). The user id, security context and settings come
/// back on return, and on an error from the (sub)transaction's abort.
pub fn run<T>(role: pg_sys::Oid, work: impl FnOnce() -> T) -> T {
    let (mut saved_user, mut saved_context) = (pg_sys::InvalidOid, 0);
    // SAFETY: saves and switches the backend's user id and security context, restored
    // below (and by the abort on an error); the GUC nest level is closed likewise.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut saved_user, &mut saved_context);
        pg_sys::SetUserIdAndSecContext(
            role,
            saved_context
                | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32
                | pg_sys::SECURITY_RESTRICTED_OPERATION as i32,
        );
    }
    // SAFETY: as above.
    let nest = unsafe { pg_sys::NewGUCNestLevel() };
    set("search_path", "pg_catalog, pg_temp");
    set("row_security", "off");
    let result = work();
    // SAFETY: closes the nest level opened above, then restores the saved identity.
    unsafe {
        pg_sys::AtEOXact_GUC(false, nest);
        pg_sys::SetUserIdAndSecContext(saved_user, saved_context);
    }
    result
}

/// Sets a setting for the current GUC nest level (`SET LOCAL` within it).
fn set(name: &str, value: &str) {
    let (name, value) = (
        CString::new(name).expect("no NUL"),
        CString::new(value).expect("no NUL"),
    );
    // SAFETY: valid settings and values of PostgreSQL's own; saved and restored by the nest.
    unsafe {
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
    }
}
