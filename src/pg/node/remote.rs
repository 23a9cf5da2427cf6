//! The router's connections to its nodes, to other routers and to itself: a registry of
//! this backend's, which no SQL but the extension owner's can reach.
//!
//! Until 0.3.0 these were dblink connections, named per session: any code in the session
//! (the caller's own SQL, another role's SECURITY DEFINER function) could use one opened
//! with the extension owner's rights, or open one under a name the router would then use.
//! Here a connection belongs to the role that opened it (the user id current at the call:
//! the owner, inside the router's SECURITY DEFINER functions), and every function on it
//! refuses any other role: another role finds no connection of that name. The functions are
//! closed to PUBLIC as well (sql/node/remote.sql).
//!
//! Lifetime, on every path out (as postgres_fdw keeps its connections' transaction state):
//! - a connection opened inside a SECURITY DEFINER function's call is closed when that call
//!   ends, by return or error (fmgr's hook around every such call): a function that shares
//!   its session with its caller leaves nothing of its own in it;
//! - a connection opened inside a subtransaction that aborts (an error or a cancel caught by
//!   a PL/pgSQL block) is closed with it;
//! - at the end of the top-level transaction (commit or abort) every connection is closed,
//!   but those marked `keep` (`remote_keep`), which only a session whose session user is a
//!   superuser may keep: they then outlive the transaction (a rebalance's workers across its
//!   commits, a superuser's node connections from move to move) unless the transaction
//!   aborted with a query of theirs in flight. A terminated backend closes them all.
//! - a query whose results were not all read (its reader interrupted) is settled (cancelled,
//!   its results consumed, at most a few seconds) before the connection takes the next one;
//!   a connection that will not settle is closed.
//!
//! Every wait is on the backend's latch with a deadline of the monotonic clock (`Instant`):
//! a cancel or terminate ends it at once, a clock stepped back does not stretch it, and a
//! cancel sent to a frozen peer is waited for at most a bound (`libpq::Conn::cancel`).
//!
//! Every session opened here starts with settings of the router's choosing, given in the
//! startup packet (libpq's `options`), which outrank what the peer's database or role set
//! (`ALTER DATABASE … SET search_path`): nothing runs in it under a search_path, date style
//! or timeout that another role chose.

use crate::pg::node::home;
use crate::pg::node::libpq::{Conn, RemoteError, PGRES_COMMAND_OK, PGRES_TUPLES_OK};
use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;
use std::cell::{Cell, RefCell};
use std::ffi::{c_void, CString};
use std::time::{Duration, Instant};

/// The settings every session opened here starts with (libpq `options`, `-c name=value`,
/// a space inside a value escaped by `\`), after whatever options the connect string has:
/// the last of a setting given twice wins. Each is one that a database's or role's owner
/// may set for every session there (`ALTER DATABASE … SET`) and that would steer the
/// router's: `role` above all (a superuser's session would run as that owner), then
/// search_path, output formats, transaction defaults, durability and timeouts, and what
/// changes how the node side's own code reads (string literals' backslashes, locales'
/// number and time formats, PL/pgSQL's checks and name resolution), prints (time zones and
/// their abbreviations, in definitions compared across nodes), makes (the tablespace and
/// access method of a move's copies) or does with an error (`exit_on_error` would turn one
/// the code catches into the session's end). The settings no startup packet can carry are
/// `PINNED_LATER`'s. `reliability/t_node_owner.sh` lists every setting a database's or role's
/// owner could set on the running server and fails on one neither pinned here nor named
/// harmless there, with its reason.
pub const SESSION_OPTIONS: &str = "-c role=none -c search_path=pg_catalog,pg_temp \
-c DateStyle=ISO,MDY -c IntervalStyle=postgres -c extra_float_digits=3 -c bytea_output=hex \
-c TimeZone=UTC -c timezone_abbreviations=Default -c lc_numeric=C -c lc_time=C -c lc_monetary=C \
-c standard_conforming_strings=on -c backslash_quote=safe_encoding -c transform_null_equals=off \
-c quote_all_identifiers=off -c array_nulls=on -c xmlbinary=base64 -c xmloption=content \
-c plpgsql.extra_errors=none -c plpgsql.extra_warnings=none -c plpgsql.check_asserts=on \
-c default_transaction_isolation=read\\ committed -c default_transaction_read_only=off \
-c default_transaction_deferrable=off -c row_security=on -c exit_on_error=off \
-c default_tablespace= -c temp_tablespaces= -c default_table_access_method=heap \
-c default_toast_compression=pglz -c synchronize_seqscans=on \
-c synchronous_commit=on -c statement_timeout=0 -c lock_timeout=0 \
-c idle_in_transaction_session_timeout=0 -c idle_session_timeout=0 -c wal_sender_timeout=60s \
-c client_connection_check_interval=1000 -c check_function_bodies=on";

/// The settings `Conn::open` sets first thing in every session, which no startup packet can
/// carry: those an older server does not have (it refuses an unknown name at connection),
/// and those only a superuser may set (a session of another user would be refused): each
/// set where the server has it and the session may set it. Pairs of name and value, as the
/// rows of an SQL `VALUES` list.
pub const PINNED_LATER: &str = "('transaction_timeout', '0'), ('restrict_nonsystem_relation_kind', ''), \
('event_triggers', 'on'), ('session_replication_role', 'origin'), ('lc_messages', 'C'), \
('zero_damaged_pages', 'off'), ('ignore_checksum_failure', 'off'), ('allow_system_table_mods', 'off'), \
('lo_compat_privileges', 'off'), ('plpgsql.variable_conflict', 'error'), ('debug_parallel_query', 'off'), \
('force_parallel_mode', 'off'), ('composite_type_mismatch', 'error')";

/// How long a cancel request is waited for, and then the cancelled query's results.
const CANCEL_BOUND: Duration = Duration::from_secs(1);
const SETTLE_BOUND: Duration = Duration::from_secs(2);

struct Entry {
    /// The order of opening, for the SECURITY DEFINER call frames (`FRAMES`).
    seq: u64,
    owner: pg_sys::Oid,
    name: String,
    conn: Conn,
    /// The connect string it was opened with (without the options added here).
    connstr: String,
    /// The subtransaction it was opened in (moved to the parent when that one commits).
    subxact: pg_sys::SubTransactionId,
    keep: bool,
    /// A query was sent whose results are not all read.
    pending: bool,
}

thread_local! {
    static OPEN: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
    static HOOKED: Cell<bool> = const { Cell::new(false) };
    /// The next `Entry::seq`.
    static NEXT_SEQ: Cell<u64> = const { Cell::new(0) };
    /// Each SECURITY DEFINER call in progress: the `seq` of the first connection it may open.
    static FRAMES: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// The role whose connections the current code may use.
fn current_role() -> pg_sys::Oid {
    // SAFETY: reads a backend global.
    unsafe { pg_sys::GetUserId() }
}

fn raise(code: PgSqlErrorCode, message: String) -> ! {
    crate::pg::node::libpq::raise(code, message)
}

fn no_such(name: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_CONNECTION_DOES_NOT_EXIST,
        format!("no connection named \"{name}\" is open"),
    )
}

/// Runs `f` on this role's connection `name`; 08003 if there is none.
fn with<T>(name: &str, f: impl FnOnce(&mut Entry) -> T) -> T {
    let role = current_role();
    OPEN.with(|open| {
        let mut open = open.borrow_mut();
        match open.iter_mut().find(|e| e.owner == role && e.name == name) {
            Some(e) => f(e),
            None => no_such(name),
        }
    })
}

/// Removes (and so closes) this role's connection `name`; whether there was one.
pub fn close(name: &str) -> bool {
    let role = current_role();
    let gone = OPEN.with(|open| {
        let mut open = open.borrow_mut();
        let at = open.iter().position(|e| e.owner == role && e.name == name);
        at.map(|i| open.swap_remove(i))
    });
    gone.is_some()
}

/// Closes this role's connections whose names start with `prefix`; how many.
pub fn close_prefixed(prefix: &str) -> i32 {
    let role = current_role();
    let gone: Vec<Entry> = OPEN.with(|open| {
        let mut open = open.borrow_mut();
        let (gone, kept) = std::mem::take(&mut *open)
            .into_iter()
            .partition(|e| e.owner == role && e.name.starts_with(prefix));
        *open = kept;
        gone
    });
    gone.len() as i32
}

/// The names of this role's connections, sorted.
pub fn names() -> Vec<String> {
    let role = current_role();
    let mut names: Vec<String> = OPEN.with(|open| {
        open.borrow()
            .iter()
            .filter(|e| e.owner == role)
            .map(|e| e.name.clone())
            .collect()
    });
    names.sort();
    names
}

/// The connect string connection `name` was opened with, if this role has it open.
pub fn connstr(name: &str) -> Option<String> {
    let role = current_role();
    OPEN.with(|open| {
        open.borrow()
            .iter()
            .find(|e| e.owner == role && e.name == name)
            .map(|e| e.connstr.clone())
    })
}

/// `connstr` with the session options appended to its own `options` (libpq reads the last
/// of a keyword given twice, so they are given once, together), the client encoding of
/// this database, and, unless it names one, the application name `snowflake_id_router
/// <this backend's pid>` (so that a node's `pg_stat_activity` says whose session it is).
fn with_session_options(connstr: &str, own_options: Option<&str>) -> CString {
    let quote = |v: &str| format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"));
    let options = match own_options {
        Some(o) if !o.trim().is_empty() => format!("{o} {SESSION_OPTIONS}"),
        _ => SESSION_OPTIONS.to_string(),
    };
    // SAFETY: the database's encoding name, a static string.
    let encoding = unsafe { std::ffi::CStr::from_ptr(pg_sys::GetDatabaseEncodingName()) };
    // SAFETY: reads a backend global.
    let pid = unsafe { pg_sys::MyProcPid };
    let full = format!(
        "{connstr} options={} client_encoding={} fallback_application_name={}",
        quote(&options),
        quote(&encoding.to_string_lossy()),
        quote(&format!("snowflake_id_router {pid}"))
    );
    CString::new(full).unwrap_or_else(|_| {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "connect string contains a NUL byte".into(),
        )
    })
}

/// Opens connection `name` for the current role by `connstr` (whose own `options` value is
/// `own_options`), waiting at most `timeout` to connect; `peer` names it in messages.
/// Returns the peer's backend pid. 42710 if this role has a connection of that name open;
/// 55000, closed again, unless the peer's database passes `home::CHECK`.
pub fn open(
    name: &str,
    connstr: &str,
    own_options: Option<&str>,
    peer: String,
    timeout: Duration,
) -> i32 {
    hook();
    if self::connstr(name).is_some() {
        raise(
            PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT,
            format!("a connection named \"{name}\" is open already"),
        );
    }
    let conninfo = with_session_options(connstr, own_options);
    let conn = Conn::open(&conninfo, peer.clone(), Some(Instant::now() + timeout));
    let pid = conn.backend_pid();
    // SAFETY: reads the current subtransaction's id.
    let subxact = unsafe { pg_sys::GetCurrentSubTransactionId() };
    let seq = NEXT_SEQ.with(|n| n.replace(n.get() + 1));
    OPEN.with(|open| {
        open.borrow_mut().push(Entry {
            seq,
            owner: current_role(),
            name: name.to_string(),
            conn,
            connstr: connstr.to_string(),
            subxact,
            keep: false,
            pending: false,
        })
    });
    // Nothing of the peer's database is called before it passes (src/pg/node/home.rs).
    send(name, home::CHECK);
    let verdict = match receive(name, timeout, "the check of the peer's schemas") {
        Outcome::Value(v) => v,
        Outcome::Failed(err) => {
            close(name);
            err.raise(Some(&format!("checking {peer}")))
        }
    };
    if let Some((message, detail, hint)) = home::refusal(&peer, verdict.as_deref()) {
        close(name);
        RemoteError {
            sqlstate: "55000".into(),
            message,
            detail: Some(detail),
            hint: Some(hint),
        }
        .raise(None)
    }
    pid
}

/// Marks connection `name` to outlive the transaction (or not). Only a session whose
/// session user is a superuser keeps any: the connections are the extension owner's.
pub fn keep(name: &str, keep: bool) {
    // SAFETY: reads backend globals.
    let superuser = unsafe { pg_sys::superuser_arg(pg_sys::GetSessionUserId()) };
    if keep && !superuser {
        raise(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "only a superuser's session keeps connections past its transaction".into(),
        );
    }
    with(name, |e| e.keep = keep);
}

/// Cancels what is in flight on `e` and consumes its results, within the bounds; false if
/// it would not settle (the caller closes it). A peer whose postmaster does not take the
/// cancel within its bound (frozen, unreachable) will not send the results either: false at
/// once, so that what waits on this connection (a fence held on a healthy source while the
/// target is frozen) waits no longer than the cancel's bound.
fn settle(e: &mut Entry, what: &str) -> bool {
    if !e.pending {
        return true;
    }
    if e.conn.busy(what) && !e.conn.cancel(CANCEL_BOUND) {
        return false;
    }
    let deadline = Some(Instant::now() + SETTLE_BOUND);
    loop {
        if !e.conn.ready_by(what, deadline) {
            return false;
        }
        if e.conn.next_result(what).is_none() {
            e.pending = false;
            return true;
        }
    }
}

/// Sends `sql` on connection `name`, settling first what an interrupted reader left.
pub fn send(name: &str, sql: &str) {
    let query = CString::new(sql).unwrap_or_else(|_| {
        raise(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            "a query sent to a node contains a NUL byte".into(),
        )
    });
    let settled = with(name, |e| settle(e, "settling an earlier query"));
    if !settled {
        close(name);
        raise(
            PgSqlErrorCode::ERRCODE_CONNECTION_FAILURE,
            format!("connection \"{name}\" did not settle after an interrupted query: closed"),
        );
    }
    with(name, |e| {
        e.pending = true;
        e.conn.send(&query, "sending a query");
    });
}

/// Whether what was sent on `name` is still running (reads what has arrived).
pub fn busy(name: &str) -> bool {
    with(name, |e| e.pending && e.conn.busy("polling a query"))
}

/// Asks the peer to cancel what runs on `name` (bounded); whether the request was taken.
pub fn cancel(name: &str) -> bool {
    with(name, |e| e.pending && e.conn.cancel(CANCEL_BOUND))
}

/// What a query sent on a connection came to.
pub enum Outcome {
    /// The first column of its first row (None: no row, or NULL).
    Value(Option<String>),
    Failed(RemoteError),
}

/// Waits at most `timeout` for what was sent on `name`, then reads all its results: the
/// first column of the first row, or the first error. Past the timeout the query is
/// cancelled and its results consumed (bounded; a connection that does not settle is
/// closed) and 57014 raised: "`what` did not finish in time".
pub fn receive(name: &str, timeout: Duration, what: &str) -> Outcome {
    let deadline = Instant::now() + timeout;
    let ready = with(name, |e| {
        if !e.pending {
            raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("nothing was sent on connection \"{name}\""),
            );
        }
        e.conn.ready_by(what, Some(deadline))
    });
    if !ready {
        let settled = with(name, |e| settle(e, what));
        if !settled {
            close(name);
        }
        raise(
            PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
            format!("{what} did not finish in time"),
        );
    }
    with(name, |e| {
        let mut outcome: Option<Outcome> = None;
        // The results end with none; each is read once it has arrived whole, bounded by a
        // grace past the deadline (the first is there: later ones follow at once). Were the
        // grace to run out, what is left is settled before the next query.
        let grace = Some(Instant::now().max(deadline) + SETTLE_BOUND);
        while e.conn.ready_by(what, grace) {
            let Some(res) = e.conn.next_result(what) else {
                e.pending = false;
                break;
            };
            if outcome.is_none() {
                outcome = Some(match res.status() {
                    PGRES_TUPLES_OK => Outcome::Value(res.value(0)),
                    PGRES_COMMAND_OK => Outcome::Value(None),
                    _ => match res.error() {
                        Some(err) => Outcome::Failed(err),
                        None => e.conn.lost(what),
                    },
                });
            }
        }
        outcome.unwrap_or_else(|| e.conn.lost(what))
    })
}

/// The remote pid of connection `name`.
pub fn pid(name: &str) -> i32 {
    with(name, |e| e.conn.backend_pid())
}

/// Registers the transaction callbacks once per backend.
fn hook() {
    if HOOKED.with(|h| h.replace(true)) {
        return;
    }
    // SAFETY: registering callbacks that live as long as the library, once.
    unsafe {
        pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(at_subtransaction_end), std::ptr::null_mut());
    }
}

/// At the end of the top-level transaction: every connection goes but the kept ones, and
/// on an abort a kept one with a query in flight or a transaction open on the peer goes too.
/// (Closing cannot fail or wait: the connections are non-blocking.)
unsafe extern "C-unwind" fn at_transaction_end(event: pg_sys::XactEvent::Type, _arg: *mut c_void) {
    use pg_sys::XactEvent::*;
    let aborted = match event {
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT => true,
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT | XACT_EVENT_PREPARE => false,
        _ => return,
    };
    let gone: Vec<Entry> = OPEN.with(|open| match open.try_borrow_mut() {
        Ok(mut open) => {
            let (gone, kept) = std::mem::take(&mut *open).into_iter().partition(|e| {
                !e.keep || e.conn.broken() || (aborted && (e.pending || !e.conn.idle()))
            });
            *open = kept;
            gone
        }
        Err(_) => Vec::new(),
    });
    drop(gone);
    FRAMES.with(|f| {
        if let Ok(mut f) = f.try_borrow_mut() {
            f.clear();
        }
    });
}

/// At a subtransaction's end: an abort closes what was opened inside it; a commit hands it
/// to the parent.
unsafe extern "C-unwind" fn at_subtransaction_end(
    event: pg_sys::SubXactEvent::Type,
    my_subid: pg_sys::SubTransactionId,
    parent_subid: pg_sys::SubTransactionId,
    _arg: *mut c_void,
) {
    use pg_sys::SubXactEvent::*;
    let gone: Vec<Entry> = OPEN.with(|open| match open.try_borrow_mut() {
        Ok(mut open) => match event {
            SUBXACT_EVENT_ABORT_SUB => {
                let (gone, kept) = std::mem::take(&mut *open)
                    .into_iter()
                    .partition(|e| e.subxact == my_subid);
                *open = kept;
                gone
            }
            SUBXACT_EVENT_COMMIT_SUB => {
                for e in open.iter_mut().filter(|e| e.subxact == my_subid) {
                    e.subxact = parent_subid;
                }
                Vec::new()
            }
            _ => Vec::new(),
        },
        Err(_) => Vec::new(),
    });
    drop(gone);
}

/// The previous holder of fmgr's hook, called on.
static mut NEXT_FMGR_HOOK: pg_sys::fmgr_hook_type = None;

/// Installs fmgr's hook (from `_PG_init`): every call of a SECURITY DEFINER function gets a
/// frame, and at its end (return or error) the connections opened during it are closed,
/// but those a superuser's session keeps (`keep`).
pub fn init() {
    // SAFETY: _PG_init, once per backend; the previous hook is chained.
    unsafe {
        NEXT_FMGR_HOOK = pg_sys::fmgr_hook;
        pg_sys::fmgr_hook = Some(around_security_definer);
    }
}

/// Whether function `oid` is SECURITY DEFINER (its pg_proc row, from the syscache).
fn security_definer(oid: pg_sys::Oid) -> bool {
    // SAFETY: a syscache look-up of PROCOID, released at once.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::PROCOID as core::ffi::c_int,
            oid.into(),
        );
        if tuple.is_null() {
            return false;
        }
        let definer = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tuple)).prosecdef;
        pg_sys::ReleaseSysCache(tuple);
        definer
    }
}

/// fmgr's hook, around every call that fmgr_security_definer makes (SECURITY DEFINER
/// functions, and those with SET clauses): a SECURITY DEFINER call pushes a frame at its
/// start (noted in the call site's `arg`), and pops it at its end or abort, closing what
/// was opened since and is not kept. (The end and abort run after the caller's user id is
/// back; closing cannot fail or wait.)
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn around_security_definer(
    event: pg_sys::FmgrHookEventType::Type,
    flinfo: *mut pg_sys::FmgrInfo,
    arg: *mut pg_sys::Datum,
) {
    use pg_sys::FmgrHookEventType::*;
    match event {
        FHET_START => {
            let framed = security_definer((*flinfo).fn_oid);
            if framed {
                let first = NEXT_SEQ.with(|n| n.get());
                FRAMES.with(|f| f.borrow_mut().push(first));
            }
            *arg = pg_sys::Datum::from(framed);
        }
        FHET_END | FHET_ABORT if (*arg).value() != 0 => {
            *arg = pg_sys::Datum::from(false);
            let first = FRAMES.with(|f| f.try_borrow_mut().ok().and_then(|mut f| f.pop()));
            if let Some(first) = first {
                let gone: Vec<Entry> = OPEN.with(|open| match open.try_borrow_mut() {
                    Ok(mut open) => {
                        let (gone, kept) = std::mem::take(&mut *open)
                            .into_iter()
                            .partition(|e| e.seq >= first && !e.keep);
                        *open = kept;
                        gone
                    }
                    Err(_) => Vec::new(),
                });
                drop(gone);
            }
        }
        _ => {}
    }
    if let Some(next) = NEXT_FMGR_HOOK {
        next(event, flinfo, arg);
    }
}
