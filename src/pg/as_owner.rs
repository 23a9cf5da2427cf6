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
/// back on return, and on an error from the (sub)transaction's abort. A session-level
/// advisory lock the code takes and keeps is released, and refused (42501).
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
    let session_locks = SessionLocks::now();
    let result = work();
    let (kept, lost) = session_locks.give_back();
    // SAFETY: closes the nest level opened above, then restores the saved identity.
    unsafe {
        pg_sys::AtEOXact_GUC(false, nest);
        pg_sys::SetUserIdAndSecContext(saved_user, saved_context);
    }
    if kept > 0 {
        crate::pg::node::libpq::raise(
            pgrx::PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!(
                "cannot keep a session-level advisory lock within a privileged operation run as a table's owner: {kept} released"
            ),
        );
    }
    // (pg_advisory_unlock_all() in the owner's code: the session's own locks, a move's
    // proof of life among them, are gone, and the operation cannot go on as if held.)
    if lost > 0 {
        crate::pg::node::libpq::raise(
            pgrx::PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!(
                "a table owner's code released {lost} session-level advisory lock(s) of the privileged operation that ran it"
            ),
        );
    }
    result
}

/// A hold of a lock by this session: its tag, mode and count.
type Hold = (pg_sys::LOCKTAG, pg_sys::LOCKMODE, i64);

/// This backend's session-level holds of advisory locks (the user lock method's) when it
/// was made; the holds added since are given back by [`give_back`](Self::give_back), or on
/// an unwinding error when it is dropped (a session lock outlives the abort).
struct SessionLocks {
    before: Vec<Hold>,
    done: bool,
}

impl SessionLocks {
    fn now() -> Self {
        SessionLocks {
            before: session_holds(),
            done: false,
        }
    }

    /// Releases every session-level hold added since [`now`](Self::now); how many, and how
    /// many of the holds there were then are gone.
    fn give_back(mut self) -> (i64, i64) {
        self.done = true;
        let mut released = 0;
        let holds = session_holds();
        let lost = self
            .before
            .iter()
            .map(|h| {
                let now = holds
                    .iter()
                    .find(|n| same(&n.0, &h.0) && n.1 == h.1)
                    .map_or(0, |n| n.2);
                (h.2 - now).max(0)
            })
            .sum();
        for (tag, mode, count) in holds {
            let before = self
                .before
                .iter()
                .find(|h| same(&h.0, &tag) && h.1 == mode)
                .map_or(0, |h| h.2);
            for _ in before..count {
                // SAFETY: a session hold this backend has (counted just now).
                unsafe { pg_sys::LockRelease(&tag, mode, true) };
                released += 1;
            }
        }
        (released, lost)
    }
}

impl Drop for SessionLocks {
    fn drop(&mut self) {
        if !self.done {
            let before = std::mem::take(&mut self.before);
            SessionLocks {
                before,
                done: false,
            }
            .give_back();
        }
    }
}

fn same(a: &pg_sys::LOCKTAG, b: &pg_sys::LOCKTAG) -> bool {
    (
        a.locktag_field1,
        a.locktag_field2,
        a.locktag_field3,
        a.locktag_field4,
        a.locktag_type,
    ) == (
        b.locktag_field1,
        b.locktag_field2,
        b.locktag_field3,
        b.locktag_field4,
        b.locktag_type,
    ) && a.locktag_lockmethodid == b.locktag_lockmethodid
}

/// This backend's session-level holds of advisory locks, read from the lock table (which
/// says what a backend holds, not at which level) and counted in the backend's own entry.
fn session_holds() -> Vec<Hold> {
    let mut holds = Vec::new();
    // SAFETY: GetLockStatusData returns a palloc'd copy of the lock table (freed below).
    unsafe {
        let data = pg_sys::GetLockStatusData();
        let locks = std::slice::from_raw_parts((*data).locks, (*data).nelements as usize);
        for lock in locks.iter().filter(|l| {
            l.pid == pg_sys::MyProcPid
                && u32::from(l.locktag.locktag_lockmethodid) == pg_sys::USER_LOCKMETHOD
        }) {
            for mode in 1..=pg_sys::MaxLockMode as pg_sys::LOCKMODE {
                if lock.holdMask & (1 << mode) != 0 {
                    let count = session_count(&lock.locktag, mode);
                    if count > 0 {
                        holds.push((lock.locktag, mode, count));
                    }
                }
            }
        }
        pg_sys::pfree((*data).locks.cast());
        pg_sys::pfree(data.cast());
    }
    holds
}

/// How many session-level holds this backend has of (tag, mode), a lock it holds: its
/// entry in the backend's local lock table (which only LockAcquireExtended hands out, here
/// for one more session hold of a lock already held: granted locally, no wait, given back
/// at once) counts the holds of each owner, the session's being the null one.
///
/// # Safety
/// This backend must hold (tag, mode) (its PROCLOCK's hold mask says so).
unsafe fn session_count(tag: &pg_sys::LOCKTAG, mode: pg_sys::LOCKMODE) -> i64 {
    let mut local: *mut pg_sys::LOCALLOCK = std::ptr::null_mut();
    #[cfg(any(feature = "pg18", feature = "pg19"))]
    let got = pg_sys::LockAcquireExtended(tag, mode, true, true, false, &mut local, false);
    #[cfg(not(any(feature = "pg18", feature = "pg19")))]
    let got = pg_sys::LockAcquireExtended(tag, mode, true, true, false, &mut local);
    if got == pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL || local.is_null() {
        return 0;
    }
    let owners = std::slice::from_raw_parts((*local).lockOwners, (*local).numLockOwners as usize);
    let count: i64 = owners
        .iter()
        .filter(|o| o.owner.is_null())
        .map(|o| o.nLocks)
        .sum();
    pg_sys::LockRelease(tag, mode, true);
    count - 1
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
