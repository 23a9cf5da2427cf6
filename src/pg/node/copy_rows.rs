//! A move's initial copy, made by the target node itself (the work of
//! `snowflake_id_node.copy_from_source(…)`, `src/sql/node/copy_rows.rs`), called by
//! `snowflake_id_node.copy_rows(key, connstr)` under the move's locks (docs/cluster-design.md,
//! "A move, step by step").
//!
//! Logical replication's table synchronisation starts a worker per table, each making a
//! slot of its own with an exported snapshot, copying, then catching up with the apply
//! worker: for a batch of a hundred small tables that is most of a move. This makes the
//! one slot the move streams from and copies every table at that slot's snapshot, over one
//! connection, in one transaction of the source, as tablesync.c does for one table:
//!
//! 1. connect to the source with the node's connect string and `replication='database'`
//!    (a WAL sender that also runs SQL), its session set up in the startup packet as the
//!    router's connections are (`SESSION_OPTIONS`: a search_path, output read back
//!    unambiguously here, no timeouts), which outranks what the source database's owner
//!    set, and check that it reaches the move's source (its identity, `<system
//!    identifier>/<database OID>`, and the router's mark of it when the move names one);
//! 2. `BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ`, then `CREATE_REPLICATION_SLOT …
//!    LOGICAL pgoutput (SNAPSHOT 'use')`: the slot, and this transaction's snapshot its
//!    consistent point (it waits for the transactions running on the source, as any new
//!    slot does);
//! 3. every table: `COPY … TO STDOUT` there, `COPY FROM` here (`src/pg/node/copy_in.rs`); a table
//!    of 1 MB or more there gets its indexes (primary key and unique constraints included)
//!    made after its rows, as `pg_restore` does (`snowflake_id_node.defer_indexes`: dropped
//!    first, made again from their definitions, in this transaction);
//! 4. `COMMIT`, and the connection closed.
//!
//! The subscription made next (`copy_data = false`) streams from the slot: every change
//! committed after the snapshot, none before. Every wait is interruptible and the
//! connection closed on every path (`src/pg/node/libpq.rs`); a slot whose making is cut short
//! is dropped by the source itself when its WAL sender ends.

use crate::pg::error::IdError;
use crate::pg::node::copy_in;
use crate::pg::node::libpq::{conninfo_value, Conn, PGRES_COMMAND_OK, PGRES_TUPLES_OK};
use crate::pg::node::remote::SESSION_OPTIONS;
use pgrx::prelude::*;
use std::ffi::CString;

/// What a move's copy refuses or finds gone, raised through [`IdError`] with its SQLSTATE.
#[derive(Debug)]
pub enum CopyError {
    /// A connect string holding a NUL byte (22023).
    NulInConnstr,
    /// A connect string longer than [`MAX_CONNSTR_BYTES`] (22023).
    ConnstrTooLong { bytes: usize },
    /// A slot name other than a move's (42602).
    BadSlotName,
    /// The connect string reaches another database than the move's source (55000).
    WrongSource { reached: String, source: String },
    /// A table of the copy dropped while the move ran (42P01).
    TableGone { relid: u32 },
    /// The local COPY stopped reading before the source's data ended (08P01).
    EndedEarly { what: String },
}

/// Longer connect strings are refused (as `conninfo` refuses them).
pub const MAX_CONNSTR_BYTES: usize = 64 * 1024;

/// `value` quoted for a libpq connect string (`key='value'`, `\` and `'` escaped).
fn quoted(value: &[u8]) -> Vec<u8> {
    let mut out = vec![b'\''];
    for &b in value {
        if b == b'\\' || b == b'\'' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'\'');
    out
}

/// `bytes` as a C string; 22023 if it holds a NUL.
fn c_string(bytes: Vec<u8>) -> CString {
    CString::new(bytes).unwrap_or_else(|_| IdError::from(CopyError::NulInConnstr).report())
}

/// The connect string: the node's, then the options the copy needs (libpq reads the last
/// of a keyword given twice; the stored strings are `key='value'` pairs, so appending is
/// safe). Among them the session's settings, as the router gives its own connections
/// (`SESSION_OPTIONS`, after the node's own `options`, which they outrank where they
/// repeat one): given in the startup packet, they outrank what the source's database or
/// role set (a database owner's `ALTER DATABASE … SET search_path = public, pg_catalog`
/// would otherwise resolve the first query's operators to functions of theirs, run with
/// the connect string's superuser rights), from the first query on.
fn conninfo(connstr: &[u8], slot: &str, encoding: &[u8]) -> CString {
    let mut s = pinned_connstr(connstr);
    s.extend_from_slice(b" replication='database' fallback_application_name=");
    s.extend(quoted(slot.as_bytes()));
    s.extend_from_slice(b" client_encoding=");
    s.extend(quoted(encoding));
    c_string(s)
}

/// `connstr` with the router's session settings (`SESSION_OPTIONS`) after its own
/// `options`, which they outrank where they repeat one: for the sessions a move has a node
/// open to its source (this copy's, the subscription's WAL sender), which would otherwise
/// run with what the source's database or role owner set (a statement_timeout cutting the
/// publisher's queries, exit_on_error).
pub fn pinned_connstr(connstr: &[u8]) -> Vec<u8> {
    let own = conninfo_value(&c_string(connstr.to_vec()), c"options");
    let mut options = own.unwrap_or_default();
    if !options.iter().all(u8::is_ascii_whitespace) {
        options.push(b' ');
    }
    options.extend_from_slice(SESSION_OPTIONS.as_bytes());
    let mut s = connstr.to_vec();
    s.extend_from_slice(b" options=");
    s.extend(quoted(&options));
    s
}

/// The source database's OID. The session's settings came with its startup packet
/// (`conninfo`): the output read back alike whatever the source's defaults (as
/// libpqwalreceiver.c sets them for a subscription), no timeout of the source's cutting the
/// copy short, and the client's loss noticed within a second (a WAL sender waiting to make
/// the slot reads no input: a target cancelled meanwhile must not leave it waiting). Every
/// operator is schema-qualified all the same: nothing here depends on a search_path.
const DATABASE_OID: &std::ffi::CStr = c"SELECT d.oid::pg_catalog.text FROM pg_catalog.pg_database d
  WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()";

/// The mark the router gave the source node (snowflake_id_node.node_mark), read from the
/// table, as the rest from pg_catalog: no function of the source's is called.
const NODE_MARK: &std::ffi::CStr =
    c"SELECT m.mark::pg_catalog.text FROM snowflake_id_node.node_mark m";

/// A table whose heap on the source is at least this large gets its indexes made after its
/// rows are copied, as `pg_restore` does: a B-tree filled row by row costs several times one
/// built by a sort (1,000,000 rows: the primary key 1.4 s of a 2.7 s `COPY`), while dropping
/// and making an index costs a few milliseconds, more than a small table's rows.
const DEFER_INDEXES_BYTES: i64 = 1 << 20;

/// The size in bytes of each of `relids`' namesakes on the source (0 where there is none),
/// in one query within the copy's transaction.
fn source_bytes(conn: &Conn, relids: &[pg_sys::Oid]) -> Vec<i64> {
    let names: Vec<String> = relids
        .iter()
        .map(|&relid| {
            let name = CString::new(copy_in::qualified_name(relid)).expect("no NUL in a name");
            // SAFETY: a NUL-terminated string; the result a palloc'd copy.
            unsafe { std::ffi::CStr::from_ptr(pg_sys::quote_literal_cstr(name.as_ptr())) }
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let query = CString::new(format!(
        "SELECT pg_catalog.string_agg(COALESCE(pg_catalog.pg_relation_size(pg_catalog.to_regclass(t)), 0)::text, ',' ORDER BY o)
           FROM pg_catalog.unnest(ARRAY[{}]::pg_catalog.text[]) WITH ORDINALITY u(t, o)",
        names.join(", ")
    ))
    .expect("no NUL in quoted names");
    let sizes = conn
        .exec(
            &query,
            PGRES_TUPLES_OK,
            "reading the sizes of the tables on the source node",
        )
        .value(0)
        .unwrap_or_default();
    let mut out: Vec<i64> = sizes.split(',').map(|x| x.parse().unwrap_or(0)).collect();
    out.resize(relids.len(), 0);
    out
}

/// Drops the indexes of `relid` that can be made again after the copy exactly as they are
/// (`snowflake_id_node.defer_indexes`) and returns the statements that make them.
fn deferred_indexes(relid: pg_sys::Oid) -> Vec<String> {
    Spi::get_one_with_args::<Vec<String>>(
        "SELECT snowflake_id_node.defer_indexes($1)",
        &[relid.into()],
    )
    .unwrap_or_else(|e| pgrx::error!("deferring the indexes of a copy: {e}"))
    .unwrap_or_default()
}

/// Makes the logical replication slot `slot` on the node `connstr` reaches (which must be the
/// database of identity `source`, with its mark if `source` names one) and copies the rows of each of `relids` (local tables, read
/// there by the same schema and name) at its snapshot; returns the rows copied.
pub fn copy_from_source(connstr: &[u8], source: &[u8], slot: &[u8], relids: &[pg_sys::Oid]) -> u64 {
    let slot = std::str::from_utf8(slot)
        .ok()
        .filter(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
        .unwrap_or_else(|| IdError::from(CopyError::BadSlotName).report());
    if connstr.len() > MAX_CONNSTR_BYTES {
        IdError::from(CopyError::ConnstrTooLong {
            bytes: connstr.len(),
        })
        .report();
    }
    // SAFETY: the database's encoding name, a static string.
    let encoding = unsafe { std::ffi::CStr::from_ptr(pg_sys::GetDatabaseEncodingName()) };
    let conn = Conn::connect(&conninfo(connstr, slot, encoding.to_bytes()));

    let what = "setting up the connection to the source node";
    let dboid = conn.exec(DATABASE_OID, PGRES_TUPLES_OK, what).value(0);
    let sysid = conn
        .exec(c"IDENTIFY_SYSTEM", PGRES_TUPLES_OK, what)
        .value(0);
    let mut reached = format!(
        "{}/{}",
        sysid.unwrap_or_default(),
        dboid.unwrap_or_default()
    );
    // A source identity with a mark (the router's, telling apart nodes that share the rest:
    // the two halves of a split, copies of one initdb) is checked with it.
    if source.iter().filter(|&&b| b == b'/').count() >= 2 {
        let mark = conn.exec(NODE_MARK, PGRES_TUPLES_OK, what).value(0);
        reached = format!("{reached}/{}", mark.unwrap_or_default());
    }
    if reached.as_bytes() != source {
        let source = String::from_utf8_lossy(source).into_owned();
        IdError::from(CopyError::WrongSource { reached, source }).report();
    }

    conn.exec(
        c"BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ",
        PGRES_COMMAND_OK,
        "starting the copy's transaction on the source node",
    );
    let make = CString::new(format!(
        "CREATE_REPLICATION_SLOT \"{slot}\" LOGICAL pgoutput (SNAPSHOT 'use')"
    ))
    .expect("a checked name");
    conn.exec(
        &make,
        PGRES_TUPLES_OK,
        "making the replication slot on the source node",
    );

    let mut rows: u64 = 0;
    for (relid, bytes) in relids.iter().zip(source_bytes(&conn, relids)) {
        let later = if bytes >= DEFER_INDEXES_BYTES {
            deferred_indexes(*relid)
        } else {
            Vec::new()
        };
        rows += copy_in::copy_table(&conn, *relid);
        for def in later {
            Spi::run(&def)
                .unwrap_or_else(|e| pgrx::error!("building an index after the copy: {e}"));
        }
    }
    conn.exec(
        c"COMMIT",
        PGRES_COMMAND_OK,
        "ending the copy's transaction on the source node",
    );
    drop(conn);
    rows
}

#[cfg(test)]
mod tests {
    use super::quoted;

    #[test]
    fn values_quoted_for_libpq() {
        assert_eq!(quoted(b"sfid_1a2b3c4d_7"), b"'sfid_1a2b3c4d_7'");
        assert_eq!(quoted(br"a'b\c"), br"'a\'b\\c'");
    }
}
