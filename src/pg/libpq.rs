//! libpq inside a backend, as PostgreSQL's own `libpq/libpq-be-fe-helpers.h` uses it
//! (`libpqsrv_connect`, `libpqsrv_exec`, `libpqsrv_get_result`): every wait is on the
//! backend's latch and the connection's socket together, so a cancel, a terminate or the
//! postmaster's death ends it at once, and the connection counts against the backend's
//! file descriptors (`AcquireExternalFD`). Those helpers are static inline C, out of reach
//! of the bindings: this is their mirror, for `copy_rows` (`src/sql/copy_rows.rs`).
//!
//! A [`Conn`] is closed when it is dropped, on every path: an `ereport(ERROR)` raised in
//! PostgreSQL's code under it comes back as a Rust panic (pgrx's guard at each call) and
//! unwinds through its owner, so no error leaves a connection behind — which would keep the
//! source's WAL sender, and the replication slot it is making, alive.
//!
//! Errors become `ereport(ERROR)`: the remote's own SQLSTATE, message, detail and hint when
//! the remote reported one, else 08001 (connecting) or 08006 (a connection lost).

use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use std::ffi::{c_char, c_int, c_void, CStr};

/// libpq's `PGconn` and `PGresult`: opaque.
#[repr(C)]
pub struct PGconn {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct PGresult {
    _opaque: [u8; 0],
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
    ErrorReport::new(code, message, "copy_rows").report(PgLogLevel::ERROR);
    unreachable!("ereport(ERROR) returned")
}

/// One result, cleared when dropped.
pub struct Res(*mut PGresult);

impl Res {
    pub fn status(&self) -> c_int {
        // SAFETY: a live result.
        unsafe { PQresultStatus(self.0) }
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
pub struct Conn(*mut PGconn);

impl Drop for Conn {
    fn drop(&mut self) {
        // SAFETY: ours, finished once; the descriptor was acquired in `connect`. Neither can
        // raise an error, so this is safe while an error unwinds.
        unsafe {
            PQfinish(self.0);
            pg_sys::ReleaseExternalFD();
        }
    }
}

impl Conn {
    /// Connects (`libpqsrv_connect`): 08001 with libpq's message on failure.
    pub fn connect(conninfo: &CStr) -> Conn {
        // SAFETY: fd.c's count of descriptors outside its own, given back by Drop (or below).
        if !unsafe { pg_sys::AcquireExternalFD() } {
            raise(
                PgSqlErrorCode::ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
                "could not connect to the source node: too many open files on this server".into(),
            );
        }
        // SAFETY: a NUL-terminated connect string; null only when libpq is out of memory.
        let raw = unsafe { PQconnectStart(conninfo.as_ptr()) };
        if raw.is_null() {
            // SAFETY: acquired above, no Conn to give it back.
            unsafe { pg_sys::ReleaseExternalFD() };
            raise(
                PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
                "could not connect to the source node: out of memory".into(),
            );
        }
        let conn = Conn(raw);
        // As PQconnectPoll's contract says: first wait until the socket is writable.
        let mut status = PGRES_POLLING_WRITING;
        // SAFETY: a live connection.
        while unsafe { PQstatus(conn.0) } != CONNECTION_BAD
            && status != PGRES_POLLING_OK
            && status != PGRES_POLLING_FAILED
        {
            let io = if status == PGRES_POLLING_READING {
                pg_sys::WL_SOCKET_READABLE
            } else {
                pg_sys::WL_SOCKET_WRITEABLE
            };
            if conn.wait(io) & io as c_int != 0 {
                // SAFETY: a live connection, its socket ready.
                status = unsafe { PQconnectPoll(conn.0) };
            }
        }
        // SAFETY: a live connection.
        if unsafe { PQstatus(conn.0) } != CONNECTION_OK {
            raise(
                PgSqlErrorCode::ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
                format!("could not connect to the source node: {}", conn.error()),
            );
        }
        conn
    }

    /// libpq's message about the connection's last failure.
    fn error(&self) -> String {
        // SAFETY: a live connection; the message is copied at once.
        text(unsafe { PQerrorMessage(self.0) }).unwrap_or_default()
    }

    /// 08006 for a connection that failed while `what`.
    fn lost(&self, what: &str) -> ! {
        raise(
            PgSqlErrorCode::ERRCODE_CONNECTION_FAILURE,
            format!(
                "{what}: the connection to the source node failed: {}",
                self.error()
            ),
        )
    }

    /// Sleeps until the socket is ready for `io` or the latch is set; a latch set is this
    /// backend's interrupts (cancel, terminate), processed here. Returns WaitLatchOrSocket's
    /// events.
    fn wait(&self, io: u32) -> c_int {
        // SAFETY: this backend's latch and the connection's socket; no timeout.
        let events = unsafe {
            pg_sys::WaitLatchOrSocket(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_EXIT_ON_PM_DEATH | io) as c_int,
                PQsocket(self.0),
                -1,
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

    /// Sends `query` (`PQsendQuery`: the text is short, so sending it cannot block for long).
    pub fn send(&self, query: &CStr, what: &str) {
        // SAFETY: a live connection and a NUL-terminated query.
        if unsafe { PQsendQuery(self.0, query.as_ptr()) } == 0 {
            self.lost(what);
        }
    }

    /// The next result of what was sent (`libpqsrv_get_result`), None once all are read.
    pub fn next_result(&self, what: &str) -> Option<Res> {
        // SAFETY: a live connection throughout.
        unsafe {
            while PQisBusy(self.0) != 0 {
                self.wait(pg_sys::WL_SOCKET_READABLE);
                if PQconsumeInput(self.0) == 0 {
                    self.lost(what);
                }
            }
            let res = PQgetResult(self.0);
            (!res.is_null()).then_some(Res(res))
        }
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
        // SAFETY: a live result; each field copied at once.
        let field = |f| text(unsafe { PQresultErrorField(res.0, f) });
        let Some(message) = field(PG_DIAG_MESSAGE_PRIMARY) else {
            self.lost(what)
        };
        let code = match field(PG_DIAG_SQLSTATE).as_deref().map(str::as_bytes) {
            Some(&[a, b, c, d, e]) => PgSqlErrorCode::from(sqlstate([a, b, c, d, e])),
            _ => PgSqlErrorCode::ERRCODE_CONNECTION_EXCEPTION,
        };
        let mut report = ErrorReport::new(code, format!("{what}: {message}"), "copy_rows");
        if let Some(detail) = field(PG_DIAG_MESSAGE_DETAIL) {
            report = report.set_detail(detail);
        }
        if let Some(hint) = field(PG_DIAG_MESSAGE_HINT) {
            report = report.set_hint(hint);
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("ereport(ERROR) returned")
    }

    /// The next row of a COPY TO STDOUT in progress: its bytes, malloc'd by libpq (to be
    /// freed with `PQfreemem`), or None at the end of the data (the COPY's own result
    /// follows). Waits interruptibly for the row to arrive.
    pub fn copy_row(&self, what: &str) -> Option<(*mut c_char, usize)> {
        loop {
            let mut buf: *mut c_char = std::ptr::null_mut();
            // SAFETY: a live connection in COPY OUT; asynchronous: 0 when no row is whole yet.
            let len = unsafe { PQgetCopyData(self.0, &mut buf, 1) };
            match len {
                n if n > 0 => return Some((buf, n as usize)),
                -1 => return None,
                0 => {
                    self.wait(pg_sys::WL_SOCKET_READABLE);
                    // SAFETY: a live connection.
                    if unsafe { PQconsumeInput(self.0) } == 0 {
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
