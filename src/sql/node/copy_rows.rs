//! `snowflake_id_node.copy_from_source(…)`, a move's initial copy made by the target node,
//! and `snowflake_id_node.untrusted_call(…)`, what it may leave PostgreSQL 15's apply worker
//! to run (declared in sql/node/move_target.sql; the work is `src/pg/node/copy_rows.rs`'s
//! and `src/pg/builtin_only.rs`'s).

use crate::pg::builtin_only;
use crate::pg::node::copy_rows;
use crate::pg::text_arg::Text;
use pgrx::prelude::*;

/// `snowflake_id_node.copy_from_source(connstr text, source text, slot text, tables oid[])
/// RETURNS bigint`: makes the logical replication slot `slot` on the node `connstr` reaches
/// (which must be the database of identity `source`) and copies the rows of each of
/// `tables` (local tables, read there by the same schema and name) at its snapshot; returns
/// the rows copied. Superuser only (the schema is revoked from PUBLIC); the caller holds the
/// move's record and locks (`copy_rows`).
#[pg_extern(sql = false)]
fn copy_from_source(connstr: Text, source: Text, slot: Text, tables: Array<pg_sys::Oid>) -> i64 {
    let relids: Vec<pg_sys::Oid> = tables.iter().flatten().collect();
    let rows = copy_rows::copy_from_source(connstr.bytes(), source.bytes(), slot.bytes(), &relids);
    i64::try_from(rows).unwrap_or(i64::MAX)
}

/// `snowflake_id_node.pinned_connstr(connstr text) RETURNS text`: `connstr` with the
/// router's session settings as its `options` (after its own), for the subscription a move
/// makes to its source (declared in sql/node/move_target.sql).
#[pg_extern(sql = false)]
fn pinned_connstr(connstr: Text) -> String {
    String::from_utf8_lossy(&copy_rows::pinned_connstr(connstr.bytes())).into_owned()
}

/// `snowflake_id_node.untrusted_call(expr pg_node_tree, schemas oid[]) RETURNS text`: the
/// first call or node of `expr` that is neither an IMMUTABLE function of PostgreSQL's own nor
/// a function or sequence of one of `schemas`, described; NULL when there is none
/// (`src/pg/builtin_only.rs`).
#[pg_extern(sql = false)]
fn untrusted_call(expr: Text, schemas: Array<pg_sys::Oid>) -> Option<String> {
    let schemas: Vec<pg_sys::Oid> = schemas.iter().flatten().collect();
    builtin_only::first_untrusted(expr.bytes(), &schemas)
}
