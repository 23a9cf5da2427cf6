//! libpq inside a backend, as PostgreSQL's own `libpq/libpq-be-fe-helpers.h` uses it
//! (`libpqsrv_connect`, `libpqsrv_exec`, `libpqsrv_get_result`): every wait is on the
//! backend's latch and the connection's socket together, so a cancel, a terminate or the
//! postmaster's death ends it at once, and the connection counts against the backend's
//! file descriptors (`AcquireExternalFD`). Those helpers are static inline C, out of reach
//! of the bindings: this is their mirror, for `copy_rows` (`src/sql/node/copy_rows.rs`) and the
//! router's connections (`src/pg/node/remote.rs`).
//!
//! Waits may have a deadline, an `Instant` (the monotonic clock: a wall clock stepped back
//! does not stretch them). Connections are non-blocking (`PQsetnonblocking`): a query is
//! flushed by waiting for the socket, so sending a long one to a peer that stopped reading
//! waits interruptibly too, and so does closing one (`PQfinish` never blocks). A cancel
//! (`PQcancel`, which connects to the peer's postmaster and waits for it) runs on a thread
//! of its own and is waited for at most a bound: a frozen peer cannot hold this backend.
//!
//! A [`Conn`] is closed when it is dropped, on every path: an `ereport(ERROR)` raised in
//! PostgreSQL's code under it comes back as a Rust panic (pgrx's guard at each call) and
//! unwinds through its owner, so no error leaves a connection behind — which would keep the
//! source's WAL sender, and the replication slot it is making, alive.
//!
//! Errors become `ereport(ERROR)`: the remote's own SQLSTATE, message, detail and hint when
//! the remote reported one, else 08001 (connecting) or 08006 (a connection lost).

use crate::pg::node::remote::PINNED_LATER;
use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// libpq's `PGconn` and `PGresult`: opaque.
#[repr(C)]
pub struct PGconn {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct PGresult {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct PGcancel {
    _opaque: [u8; 0],
}
/// libpq's `PQconninfoOption` (libpq-fe.h), a stable part of its ABI: one option of a
/// connect string as `PQconninfoParse` read it (`val` null: not given).
#[repr(C)]
pub struct PQconninfoOption {
    pub keyword: *mut c_char,
    pub envvar: *mut c_char,
    pub compiled: *mut c_char,
    pub val: *mut c_char,
    pub label: *mut c_char,
    pub dispchar: *mut c_char,
    pub dispsize: c_int,
}

// libpq-fe.h's enums, a stable part of its ABI.
const CONNECTION_OK: c_int = 0;
const CONNECTION_BAD: c_int = 1;
const PGRES_POLLING_FAILED: c_int = 0;
const PGRES_POLLING_READING: c_int = 1;
const PGRES_POLLING_WRITING: c_int = 2;
const PGRES_POLLING_OK: c_int = 3;
pub const PGRES_COMMAND_OK: c_int = 1;
pub const PGRES_TUPLES_OK: c_int = 2;
pub const PGRES_COPY_OUT: c_int = 3;
const PQTRANS_IDLE: c_int = 0;
// postgres_ext.h's error fields.
const PG_DIAG_SQLSTATE: c_int = b'C' as c_int;
const PG_DIAG_MESSAGE_PRIMARY: c_int = b'M' as c_int;
const PG_DIAG_MESSAGE_DETAIL: c_int = b'D' as c_int;
const PG_DIAG_MESSAGE_HINT: c_int = b'H' as c_int;

#[link(name = "pq")]
extern "C" {
    fn PQconnectStart(conninfo: *const c_char) -> *mut PGconn;
    fn PQconnectPoll(conn: *mut PGconn) -> c_int;
    fn PQstatus(conn: *const PGconn) -> c_int;
    fn PQsocket(conn: *const PGconn) -> c_int;
    fn PQerrorMessage(conn: *const PGconn) -> *const c_char;
    fn PQfinish(conn: *mut PGconn);
    fn PQsendQuery(conn: *mut PGconn, query: *const c_char) -> c_int;
    fn PQconsumeInput(conn: *mut PGconn) -> c_int;
    fn PQisBusy(conn: *mut PGconn) -> c_int;
    fn PQgetResult(conn: *mut PGconn) -> *mut PGresult;
    fn PQresultStatus(res: *const PGresult) -> c_int;
    fn PQresultErrorField(res: *const PGresult, fieldcode: c_int) -> *const c_char;
    fn PQntuples(res: *const PGresult) -> c_int;
    fn PQnfields(res: *const PGresult) -> c_int;
    fn PQgetvalue(res: *const PGresult, row: c_int, col: c_int) -> *const c_char;
    fn PQclear(res: *mut PGresult);
    fn PQgetCopyData(conn: *mut PGconn, buffer: *mut *mut c_char, is_async: c_int) -> c_int;
    pub fn PQfreemem(ptr: *mut c_void);
    fn PQsetnonblocking(conn: *mut PGconn, arg: c_int) -> c_int;
    fn PQflush(conn: *mut PGconn) -> c_int;
    fn PQtransactionStatus(conn: *const PGconn) -> c_int;
    fn PQbackendPID(conn: *const PGconn) -> c_int;
    fn PQgetCancel(conn: *mut PGconn) -> *mut PGcancel;
    fn PQcancel(cancel: *mut PGcancel, errbuf: *mut c_char, errbufsize: c_int) -> c_int;
    fn PQfreeCancel(cancel: *mut PGcancel);
    pub fn PQconninfoParse(
        conninfo: *const c_char,
        errmsg: *mut *mut c_char,
    ) -> *mut PQconninfoOption;
    pub fn PQconninfoFree(options: *mut PQconninfoOption);
}

/// The value libpq reads for `keyword` in `conninfo` (`PQconninfoParse`, the parser
/// `PQconnectdb` uses, in every syntax it accepts), as bytes; None when the string gives
/// none, or libpq cannot read it (connecting then says why).
pub fn conninfo_value(conninfo: &CStr, keyword: &CStr) -> Option<Vec<u8>> {
    // SAFETY: a NUL-terminated string; a null error pointer asks for no message.
    let options = unsafe { PQconninfoParse(conninfo.as_ptr(), std::ptr::null_mut()) };
    if options.is_null() {
        return None;
    }
    let mut found = None;
    // SAFETY: libpq's array, ended by an option whose keyword is null, freed below; the
    // value is copied before.
    unsafe {
        let mut option = options;
        while !(*option).keyword.is_null() {
            if CStr::from_ptr((*option).keyword) == keyword && !(*option).val.is_null() {
                found = Some(CStr::from_ptr((*option).val).to_bytes().to_vec());
            }
            option = option.add(1);
        }
        PQconninfoFree(options);
    }
    found
}

/// A C string of libpq's (null: none), as owned text, its trailing newline dropped.
fn text(s: *const c_char) -> Option<String> {
    // SAFETY: libpq's NUL-terminated strings, read before the object owning them goes.
    (!s.is_null()).then(|| {
        unsafe { CStr::from_ptr(s) }
            .to_string_lossy()
            .trim_end()
            .to_string()
    })
}

/// `ereport(ERROR)` with `code` and `message`.
pub fn raise(code: PgSqlErrorCode, message: String) -> ! {
    ErrorReport::new(code, message, "libpq").report(PgLogLevel::ERROR);
    unreachable!("ereport(ERROR) returned")
}

/// An error a peer reported: its SQLSTATE (five characters), message, detail and hint.
#[derive(Debug, Clone)]
pub struct RemoteError {
    pub sqlstate: String,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

impl RemoteError {
    /// `ereport(ERROR)` with the peer's SQLSTATE, its message after `prefix` (`prefix: …`),
    /// its detail and hint.
    pub fn raise(&self, prefix: Option<&str>) -> ! {
        let code = match self.sqlstate.as_bytes() {
            &[a, b, c, d, e] => PgSqlErrorCode::from(sqlstate([a, b, c, d, e])),
            _ => PgSqlErrorCode::ERRCODE_CONNECTION_EXCEPTION,
        };
        let message = match prefix {
            Some(p) => format!("{p}: {}", self.message),
            None => self.message.clone(),
        };
        let mut report = ErrorReport::new(code, message, "libpq");
        if let Some(detail) = &self.detail {
            report = report.set_detail(detail.clone());
        }
        if let Some(hint) = &self.hint {
            report = report.set_hint(hint.clone());
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("ereport(ERROR) returned")
    }
}

/// One result, cleared when dropped.
pub struct Res(*mut PGresult);

impl Res {
    pub fn status(&self) -> c_int {
        // SAFETY: a live result.
        unsafe { PQresultStatus(self.0) }
    }

    /// The error this result reports, if it reports one.
    pub fn error(&self) -> Option<RemoteError> {
        // SAFETY: a live result; each field copied at once.
        let field = |f| text(unsafe { PQresultErrorField(self.0, f) });
        let message = field(PG_DIAG_MESSAGE_PRIMARY)?;
        Some(RemoteError {
            sqlstate: field(PG_DIAG_SQLSTATE).unwrap_or_else(|| "08000".into()),
            message,
            detail: field(PG_DIAG_MESSAGE_DETAIL),
            hint: field(PG_DIAG_MESSAGE_HINT),
        })
    }

    /// The value at row 0, column `col` (None: no such row or column).
    pub fn value(&self, col: c_int) -> Option<String> {
        // SAFETY: a live result; row and column checked against its size.
        unsafe {
            if PQntuples(self.0) < 1 || PQnfields(self.0) <= col {
                return None;
            }
            text(PQgetvalue(self.0, 0, col))
        }
    }
}

impl Drop for Res {
    fn drop(&mut self) {
        // SAFETY: ours, cleared once.
        unsafe { PQclear(self.0) }
    }
}

/// A connection of this backend's, closed (and its file descriptor given back) when dropped.
/// `peer` names it in messages ("the source node", "node 'b'").
pub struct Conn {
    raw: *mut PGconn,
    peer: String,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // SAFETY: ours, finished once; the descriptor was acquired in `open`. Neither can
        // raise an error, so this is safe while an error unwinds (or in a transaction's
        // callback); the connection is non-blocking, so its Terminate message never waits.
        unsafe {
            PQfinish(self.raw);
            pg_sys::ReleaseExternalFD();
        }
    }
}

/// A cancel request in flight on its own thread (`PQcancel` is thread-safe and touches
/// nothing of PostgreSQL's).
struct CancelRequest(*mut PGcancel);
// SAFETY: the PGcancel is moved to the thread, which alone uses and frees it.
unsafe impl Send for CancelRequest {}

impl Conn {
    /// Connects (`libpqsrv_connect`) to the source node of a move, with no deadline.
    pub fn connect(conninfo: &CStr) -> Conn {
        Conn::open(conninfo, "the source node".into(), None)
    }

    /// Connects to `peer` (a name for messages) by `conninfo`, waiting at most until
    /// `deadline`: 08001 with libpq's message on failure or when the deadline passes.
    pub fn open(conninfo: &CStr, peer: String, deadline: Option<Instant>) -> Conn {
        // SAFETY: fd.c's count of descriptors outside its own, given back by Drop (or below).
        if !unsafe { pg_sys::AcquireExternalFD() } {
            raise(
                PgSqlErrorCode::ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
                format!("could not connect to {peer}: too many open files on this server"),
            );
        }
        // SAFETY: a NUL-terminated connect string; null only when libpq is out of memory.
        let raw = unsafe { PQconnectStart(conninfo.as_ptr()) };
        if raw.is_null() {
            // SAFETY: acquired above, no Conn to give it back.
            unsafe { pg_sys::ReleaseExternalFD() };
            raise(
                PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
                format!("could not connect to {peer}: out of memory"),
            );
        }
        let conn = Conn { raw, peer };
        // As PQconnectPoll's contract says: first wait until the socket is writable.
        let mut status = PGRES_POLLING_WRITING;
        // SAFETY: a live connection.
        while unsafe { PQstatus(conn.raw) } != CONNECTION_BAD
            && status != PGRES_POLLING_OK
            && status != PGRES_POLLING_FAILED
        {
            let io = if status == PGRES_POLLING_READING {
                pg_sys::WL_SOCKET_READABLE
            } else {
                pg_sys::WL_SOCKET_WRITEABLE
            };
            let events = conn.wait(io, deadline);
            if events & io as c_int != 0 {
                // SAFETY: a live connection, its socket ready.
                status = unsafe { PQconnectPoll(conn.raw) };
            } else if events & pg_sys::WL_TIMEOUT as c_int != 0 {
                raise(
                    PgSqlErrorCode::ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
                    format!("could not connect to {}: timed out", conn.peer),
                );
            }
        }
        // SAFETY: a live connection.
        if unsafe { PQstatus(conn.raw) } != CONNECTION_OK {
            raise(
                PgSqlErrorCode::ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
                format!("could not connect to {}: {}", conn.peer, conn.error()),
            );
        }
        // SAFETY: a live connection; 0 on success (it cannot fail on an idle connection).
        unsafe { PQsetnonblocking(conn.raw, 1) };
        conn.pin_later(deadline);
        conn
    }

    /// Sets, within `deadline`, the session settings the startup packet cannot carry
    /// (`remote::PINNED_LATER`): each where the server has it (`pg_settings`, and
    /// PL/pgSQL's, which it knows once loaded) and this session may set it.
    fn pin_later(&self, deadline: Option<Instant>) {
        let what = "setting up the session";
        let query = CString::new(format!(
            "SELECT pg_catalog.count(pg_catalog.set_config(v.name, v.value, false)) \
             FROM (VALUES {PINNED_LATER}) v(name, value) \
             LEFT JOIN pg_catalog.pg_settings s ON s.name OPERATOR(pg_catalog.=) v.name \
             WHERE (s.context OPERATOR(pg_catalog.=) 'user' \
                    OR (s.name IS NOT NULL OR v.name OPERATOR(pg_catalog.~~) 'plpgsql.%') \
                       AND pg_catalog.current_setting('is_superuser') OPERATOR(pg_catalog.=) 'on')"
        ))
        .expect("no NUL in a constant");
        if !self.send_until(&query, what, deadline) || !self.ready_by(what, deadline) {
            raise(
                PgSqlErrorCode::ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
                format!("could not connect to {}: timed out", self.peer),
            );
        }
        self.expect(PGRES_TUPLES_OK, what);
    }

    /// The backend process of the peer serving this connection.
    pub fn backend_pid(&self) -> i32 {
        // SAFETY: a live connection.
        unsafe { PQbackendPID(self.raw) }
    }

    /// Whether the peer's session is outside any transaction block (and not in a query).
    pub fn idle(&self) -> bool {
        // SAFETY: a live connection.
        unsafe { PQtransactionStatus(self.raw) == PQTRANS_IDLE }
    }

    /// Whether the connection is broken.
    pub fn broken(&self) -> bool {
        // SAFETY: a live connection.
        unsafe { PQstatus(self.raw) == CONNECTION_BAD }
    }

    /// Reads what has arrived and says whether a result is still being waited for.
    pub fn busy(&self, what: &str) -> bool {
        // SAFETY: a live connection.
        unsafe {
            if PQconsumeInput(self.raw) == 0 {
                self.lost(what);
            }
            PQisBusy(self.raw) != 0
        }
    }

    /// Asks the peer's postmaster to cancel the query in progress, waiting at most `bound`
    /// (interruptibly) for it to take the request. The request goes on a thread of its own:
    /// `PQcancel` connects to the postmaster and waits for its answer without a timeout,
    /// which a frozen or unreachable peer would never give. Returns whether it was taken.
    pub fn cancel(&self, bound: Duration) -> bool {
        // SAFETY: a live connection; null when it has no backend key.
        let request = unsafe { PQgetCancel(self.raw) };
        if request.is_null() {
            return false;
        }
        let request = CancelRequest(request);
        let done = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicBool::new(false));
        let (thread_done, thread_sent) = (done.clone(), sent.clone());
        let spawned = std::thread::Builder::new()
            .name("snowflake_id cancel".into())
            .spawn(move || {
                let request = request;
                let mut errbuf = [0 as c_char; 256];
                // SAFETY: the request is this thread's alone; libpq documents PQcancel and
                // PQfreeCancel as safe on any thread.
                unsafe {
                    let ok = PQcancel(request.0, errbuf.as_mut_ptr(), errbuf.len() as c_int);
                    PQfreeCancel(request.0);
                    thread_sent.store(ok == 1, Ordering::Release);
                }
                thread_done.store(true, Ordering::Release);
            });
        if spawned.is_err() {
            return false;
        }
        let deadline = Instant::now() + bound;
        while !done.load(Ordering::Acquire) && Instant::now() < deadline {
            crate::pg::time::sleep_until((Instant::now() + Duration::from_millis(5)).min(deadline));
        }
        done.load(Ordering::Acquire) && sent.load(Ordering::Acquire)
    }

    /// libpq's message about the connection's last failure.
    fn error(&self) -> String {
        // SAFETY: a live connection; the message is copied at once.
        text(unsafe { PQerrorMessage(self.raw) }).unwrap_or_default()
    }

    /// 08006 for a connection that failed while `what`.
    pub fn lost(&self, what: &str) -> ! {
        raise(
            PgSqlErrorCode::ERRCODE_CONNECTION_FAILURE,
            format!(
                "{what}: the connection to {} failed: {}",
                self.peer,
                self.error()
            ),
        )
    }

    /// Sleeps until the socket is ready for `io`, the latch is set or `deadline` passes; a
    /// latch set is this backend's interrupts (cancel, terminate), processed here. Returns
    /// WaitLatchOrSocket's events (WL_TIMEOUT once the deadline has passed).
    fn wait(&self, io: u32, deadline: Option<Instant>) -> c_int {
        let timeout = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return pg_sys::WL_TIMEOUT as c_int;
                }
                left.as_millis().clamp(1, i32::MAX as u128) as std::ffi::c_long
            }
        };
        let timeout_flag = if deadline.is_some() {
            pg_sys::WL_TIMEOUT
        } else {
            0
        };
        // SAFETY: this backend's latch and the connection's socket.
        let events = unsafe {
            pg_sys::WaitLatchOrSocket(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_EXIT_ON_PM_DEATH | timeout_flag | io) as c_int,
                PQsocket(self.raw),
                timeout,
                pg_sys::PG_WAIT_EXTENSION,
            )
        };
        if events & pg_sys::WL_LATCH_SET as c_int != 0 {
            // SAFETY: this backend's latch.
            unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
            pgrx::check_for_interrupts!();
        }
        events
    }

    /// Sends `query`, waiting (interruptibly, at most until `deadline`) until libpq has
    /// handed all of it to the socket. False if the deadline passed first.
    pub fn send_until(&self, query: &CStr, what: &str, deadline: Option<Instant>) -> bool {
        // SAFETY: a live, non-blocking connection and a NUL-terminated query.
        if unsafe { PQsendQuery(self.raw, query.as_ptr()) } == 0 {
            self.lost(what);
        }
        loop {
            // SAFETY: a live connection; 0: all sent, 1: more to send, -1: failed.
            match unsafe { PQflush(self.raw) } {
                0 => return true,
                1 => {
                    let events = self.wait(
                        pg_sys::WL_SOCKET_WRITEABLE | pg_sys::WL_SOCKET_READABLE,
                        deadline,
                    );
                    if events & pg_sys::WL_TIMEOUT as c_int != 0 {
                        return false;
                    }
                    if events & pg_sys::WL_SOCKET_READABLE as c_int != 0 {
                        self.busy(what);
                    }
                }
                _ => self.lost(what),
            }
        }
    }

    /// Sends `query` with no deadline.
    pub fn send(&self, query: &CStr, what: &str) {
        self.send_until(query, what, None);
    }

    /// Waits (interruptibly) until a result can be read without blocking, or `deadline`
    /// passes (false).
    pub fn ready_by(&self, what: &str, deadline: Option<Instant>) -> bool {
        while self.busy(what) {
            if self.wait(pg_sys::WL_SOCKET_READABLE, deadline) & pg_sys::WL_TIMEOUT as c_int != 0 {
                return false;
            }
        }
        true
    }

    /// The next result of what was sent (`libpqsrv_get_result`), None once all are read.
    pub fn next_result(&self, what: &str) -> Option<Res> {
        self.ready_by(what, None);
        // SAFETY: a live connection, not busy: PQgetResult returns at once.
        let res = unsafe { PQgetResult(self.raw) };
        (!res.is_null()).then_some(Res(res))
    }

    /// The result of what was sent, which must have `status` (and be the last, unless it
    /// starts a COPY): otherwise the remote's error, raised with its SQLSTATE.
    pub fn expect(&self, status: c_int, what: &str) -> Res {
        let Some(res) = self.next_result(what) else {
            self.lost(what)
        };
        if res.status() != status {
            self.remote_error(&res, what);
        }
        if status != PGRES_COPY_OUT {
            if let Some(more) = self.next_result(what) {
                self.remote_error(&more, what);
            }
        }
        res
    }

    /// Sends `query` and expects a result of `status` (`libpqsrv_exec`).
    pub fn exec(&self, query: &CStr, status: c_int, what: &str) -> Res {
        self.send(query, what);
        self.expect(status, what)
    }

    /// Raises the error `res` reports: the remote's SQLSTATE, message, detail and hint.
    pub fn remote_error(&self, res: &Res, what: &str) -> ! {
        match res.error() {
            Some(e) => e.raise(Some(what)),
            None => self.lost(what),
        }
    }

    /// The next row of a COPY TO STDOUT in progress: its bytes, malloc'd by libpq (to be
    /// freed with `PQfreemem`), or None at the end of the data (the COPY's own result
    /// follows). Waits interruptibly for the row to arrive.
    pub fn copy_row(&self, what: &str) -> Option<(*mut c_char, usize)> {
        loop {
            let mut buf: *mut c_char = std::ptr::null_mut();
            // SAFETY: a live connection in COPY OUT; asynchronous: 0 when no row is whole yet.
            let len = unsafe { PQgetCopyData(self.raw, &mut buf, 1) };
            match len {
                n if n > 0 => return Some((buf, n as usize)),
                -1 => return None,
                0 => {
                    self.wait(pg_sys::WL_SOCKET_READABLE, None);
                    // SAFETY: a live connection.
                    if unsafe { PQconsumeInput(self.raw) } == 0 {
                        self.lost(what);
                    }
                }
                _ => self.lost(what),
            }
        }
    }
}

/// `MAKE_SQLSTATE` of five characters.
fn sqlstate(chars: [u8; 5]) -> i32 {
    chars
        .iter()
        .enumerate()
        .map(|(i, &c)| ((c as i32 - b'0' as i32) & 0x3F) << (6 * i))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::sqlstate;
    use pgrx::PgSqlErrorCode;

    #[test]
    fn sqlstates_as_postgres_makes_them() {
        assert_eq!(
            sqlstate(*b"42710"),
            PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT as i32
        );
        assert_eq!(
            sqlstate(*b"57014"),
            PgSqlErrorCode::ERRCODE_QUERY_CANCELED as i32
        );
    }
}
