//! One table's rows from the source node into the local table: the source's `COPY … TO
//! STDOUT` fed straight into a local `COPY FROM` (`BeginCopyFrom` / `CopyFrom` /
//! `EndCopyFrom`), as logical replication's table synchronisation does it (tablesync.c's
//! `copy_table` and `copy_read_data`, which this mirrors).
//!
//! The bytes go from libpq's buffer for one row (`PQgetCopyData`) into COPY's own input
//! buffer, one row at a time: nothing here holds more than the row being handed over, and
//! nothing in Rust is allocated in proportion to the data.
//!
//! `CopyFrom` pulls its input through a callback that takes no argument of ours
//! (`copy_data_source_cb`), so the connection and the row in hand live in a thread-local
//! [`FEED`] for the duration of one table's copy, set and cleared by [`FeedGuard`] (a
//! backend runs one such copy at a time, on one thread).

use crate::pg::as_owner;
use crate::pg::error::IdError;
use crate::pg::node::copy_rows::CopyError;
use crate::pg::node::libpq::{Conn, PQfreemem, PGRES_COMMAND_OK, PGRES_COPY_OUT};
use pgrx::pg_sys;
use pgrx::PgTupleDesc;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};

/// The COPY in progress: its connection and the row libpq handed over, partly consumed.
struct Feed {
    conn: *const Conn,
    what: String,
    row: *mut c_char,
    len: usize,
    used: usize,
    ended: bool,
}

thread_local! {
    static FEED: RefCell<Option<Feed>> = const { RefCell::new(None) };
}

/// Sets [`FEED`] for one table's copy; clears it, and frees a row left in hand (an error
/// mid-row), when dropped, on every path.
struct FeedGuard;

impl FeedGuard {
    fn new(conn: &Conn, what: String) -> FeedGuard {
        FEED.with(|f| {
            *f.borrow_mut() = Some(Feed {
                conn,
                what,
                row: std::ptr::null_mut(),
                len: 0,
                used: 0,
                ended: false,
            })
        });
        FeedGuard
    }

    fn ended(&self) -> bool {
        FEED.with(|f| f.borrow().as_ref().is_some_and(|feed| feed.ended))
    }
}

impl Drop for FeedGuard {
    fn drop(&mut self) {
        if let Some(feed) = FEED.with(|f| f.borrow_mut().take()) {
            if !feed.row.is_null() {
                // SAFETY: libpq's row buffer, not yet freed.
                unsafe { PQfreemem(feed.row.cast()) };
            }
        }
    }
}

/// `copy_data_source_cb`: at least `minread` and at most `maxread` bytes of the source's
/// COPY data into `outbuf`, fewer only at its end (0: the end). Mirrors `copy_read_data`.
/// An error (an interrupt while waiting, a lost connection) is raised as an ERROR through
/// `CopyFrom` by pgrx's guard.
///
/// # Safety
/// Called by COPY as its data source (`BeginCopyFrom`'s callback), `outbuf` valid for
/// `maxread` bytes, only while a [`FeedGuard`] has set the feed.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn read_feed(
    outbuf: *mut c_void,
    minread: c_int,
    maxread: c_int,
) -> c_int {
    let (minread, maxread) = (minread.max(0) as usize, maxread.max(0) as usize);
    FEED.with(|f| {
        let mut f = f.borrow_mut();
        let feed = f.as_mut().expect("read_feed called outside a copy");
        let mut read = 0usize;
        loop {
            if !feed.row.is_null() {
                let n = (feed.len - feed.used).min(maxread - read);
                // SAFETY: outbuf has room for maxread bytes (COPY's contract); the row has
                // len bytes, of which used are consumed.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        feed.row.add(feed.used),
                        outbuf.cast::<c_char>().add(read),
                        n,
                    );
                }
                feed.used += n;
                read += n;
                if feed.used == feed.len {
                    // SAFETY: libpq's row buffer, wholly consumed.
                    unsafe { PQfreemem(feed.row.cast()) };
                    feed.row = std::ptr::null_mut();
                }
            }
            if read >= minread || read >= maxread || feed.ended {
                return read as c_int;
            }
            // SAFETY: the connection outlives the guard that set this feed.
            match unsafe { &*feed.conn }.copy_row(&feed.what) {
                Some((row, len)) => (feed.row, feed.len, feed.used) = (row, len, 0),
                None => feed.ended = true,
            }
        }
    })
}

/// The local table `relid`'s name, schema-qualified and quoted as an identifier (the name the
/// source's table of the same schema and name is read by); an error if it no longer exists.
pub fn qualified_name(relid: pg_sys::Oid) -> String {
    // SAFETY: catalog lookups (NULL for a table gone, refused); the result a palloc'd copy.
    unsafe {
        let rel = pg_sys::get_rel_name(relid);
        let nsp = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
        if rel.is_null() || nsp.is_null() {
            IdError::from(CopyError::TableGone {
                relid: relid.to_u32(),
            })
            .report();
        }
        CStr::from_ptr(pg_sys::quote_qualified_identifier(nsp, rel))
            .to_string_lossy()
            .into_owned()
    }
}

/// Copies every row of the source's table of the same schema and name as the local table
/// `relid` (its columns but generated ones, by name) into it, within the source's
/// transaction in progress on `conn`. Returns the rows copied.
pub fn copy_table(conn: &Conn, relid: pg_sys::Oid) -> u64 {
    // SAFETY: a table of this database (the caller's regclass); RowExclusiveLock as a
    // table-sync worker takes it, kept to the end of the transaction (NoLock at close).
    let rel = unsafe { pg_sys::table_open(relid, pg_sys::RowExclusiveLock as c_int) };
    let name = qualified_name(relid);
    // SAFETY: an open relation's descriptor, read while it is open.
    let (columns, attnames) = unsafe {
        let tupdesc = PgTupleDesc::from_pg_unchecked((*rel).rd_att);
        let mut columns = Vec::new();
        let mut attnames: *mut pg_sys::List = std::ptr::null_mut();
        // The columns COPY can read: not dropped, not generated (those are computed here).
        for att in tupdesc
            .iter()
            .filter(|a| !a.is_dropped() && a.attgenerated == 0)
        {
            let attname = att.attname.data.as_ptr();
            columns.push(CStr::from_ptr(pg_sys::quote_identifier(attname)).to_string_lossy());
            attnames = pg_sys::lappend(
                attnames,
                pg_sys::makeString(pg_sys::pstrdup(attname)).cast(),
            );
        }
        (columns, attnames)
    };
    let what = format!("copying table {name} from the source node");
    let list = if columns.is_empty() {
        String::new()
    } else {
        format!(" ({})", columns.join(", "))
    };
    let command =
        CString::new(format!("COPY {name}{list} TO STDOUT")).expect("no NUL in identifiers");
    conn.exec(&command, PGRES_COPY_OUT, &what);

    let rows = {
        let feed = FeedGuard::new(conn, what.clone());
        // The rows go in as the table's owner, under restricted-operation rules: its CHECK
        // constraints, its columns' domain checks, generated columns and index expressions
        // are the owner's code, which must not run with the mover's rights (as VACUUM or
        // REINDEX run them). No privilege of the owner's is checked: CopyFrom checks none.
        // SAFETY: an open relation's owner.
        let owner = unsafe { (*(*rel).rd_rel).relowner };
        // SAFETY: as tablesync.c's copy_table: a parse state with the relation as its range
        // table (CopyFrom's executor state reads it), the COPY options in this database's
        // encoding (the source sends in it: client_encoding), the callback above as input.
        let rows = as_owner::run(owner, || unsafe {
            let pstate = pg_sys::make_parsestate(std::ptr::null_mut());
            pg_sys::addRangeTableEntryForRelation(
                pstate,
                rel,
                pg_sys::AccessShareLock as c_int,
                std::ptr::null_mut(),
                false,
                false,
            );
            let encoding = pg_sys::makeString(pg_sys::pstrdup(pg_sys::GetDatabaseEncodingName()));
            let options = pg_sys::lappend(
                std::ptr::null_mut(),
                pg_sys::makeDefElem(pg_sys::pstrdup(c"encoding".as_ptr()), encoding.cast(), -1)
                    .cast(),
            );
            let cstate = pg_sys::BeginCopyFrom(
                pstate,
                rel,
                std::ptr::null_mut(),
                std::ptr::null(),
                false,
                Some(read_feed),
                attnames,
                options,
            );
            let rows = pg_sys::CopyFrom(cstate);
            pg_sys::EndCopyFrom(cstate);
            pg_sys::free_parsestate(pstate);
            rows
        });
        if !feed.ended() {
            // COPY stopped reading before the end: cannot happen with text input, which
            // it reads to the end; refuse rather than commit a part.
            IdError::from(CopyError::EndedEarly { what }).report();
        }
        rows
    };
    // The COPY's own result, once its data has ended.
    conn.expect(PGRES_COMMAND_OK, &what);
    // SAFETY: opened above; the lock stays to the end of the transaction.
    unsafe { pg_sys::table_close(rel, pg_sys::NoLock as c_int) };
    rows
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::pg_sys::panic::CaughtError;
    use pgrx::prelude::*;
    use pgrx::PgSqlErrorCode;

    /// A table of a move's copy dropped while the move runs: the user's doing, so a SQLSTATE
    /// of its own (42P01), never XX000.
    #[pg_test]
    fn a_table_dropped_during_a_copy_is_42p01() {
        Spi::run("CREATE TABLE copy_in_gone (i integer)").unwrap();
        let relid = Spi::get_one::<pg_sys::Oid>("SELECT 'copy_in_gone'::regclass::oid")
            .unwrap()
            .unwrap();
        Spi::run("DROP TABLE copy_in_gone").unwrap();
        let code = PgTryBuilder::new(|| {
            super::qualified_name(relid);
            None
        })
        .catch_others(|e| match e {
            CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => Some(r.sql_error_code()),
            CaughtError::RustPanic { .. } => None,
        })
        .execute();
        assert_eq!(code, Some(PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE));
    }
}
