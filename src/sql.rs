//! The SQL surface: the functions written in Rust, one module per part of the manual, and
//! the SQL written as SQL (`sql/*.sql`), loaded by the modules that need it.

use pgrx::prelude::*;

/// IDs in applications (docs/applications.md): text form, masks, JSON, the `snowflake`
/// type, `convert_column`.
mod applications;
/// libpq's reading of a connect string, for the node side of the router.
mod conninfo;
/// A move's initial copy, made by the target at its slot's snapshot.
mod copy_rows;
/// Instagram's layout (README.md): `next_id`, the decoders, `make_id`; the shard installer.
mod instagram;
/// alter_shards on a node: the statement parsed and judged.
mod node_ddl;
/// Other people's IDs (docs/other-ids.md): named layouts, UUID/ULID/ObjectID times.
mod other_ids;
/// The router's private connections, owner-only locks, monotonic clock, and queries run as a
/// table's owner.
mod remote;

// The node side of snowflake_id_router's protocol (schema snowflake_id_node): identity,
// connect strings, moves. Before the installer: snowflake_id_shards reads the moves.
extension_sql_file!("../sql/node.sql", name = "node");
// The router's private connections, locks and clock (in snowflake_id_node).
extension_sql_file!("../sql/remote.sql", name = "remote", requires = ["node"]);
// What the router's node_status, shard_status and rebalancer read on a node.
extension_sql_file!(
    "../sql/node_status.sql",
    name = "node_status",
    requires = ["node", "installer", id_timestamp, make_id]
);
// A shard in a move refuses schema and privilege changes (event triggers).
extension_sql_file!(
    "../sql/node_guard.sql",
    name = "node_guard",
    requires = ["node", "remote"]
);
// alter_shards' change of every shard on a node.
extension_sql_file!(
    "../sql/node_ddl.sql",
    name = "node_ddl",
    requires = ["node", "installer"]
);
