//! The node side of snowflake_id_router's protocol, as SQL functions written in Rust: libpq's
//! reading of a connect string, a move's initial copy, alter_shards on a node, the router's
//! private connections, owner-only locks, monotonic clock and queries run as a table's owner.

/// libpq's reading of a connect string.
mod conninfo;
/// A move's initial copy, made by the target at its slot's snapshot.
mod copy_rows;
/// alter_shards on a node: the statement parsed and judged.
mod ddl;
/// The router's private connections, owner-only locks, monotonic clock, and queries run as a
/// table's owner.
mod remote;
