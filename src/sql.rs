//! The SQL surface: the functions written in Rust, one module per part of the manual, and
//! the SQL written as SQL (`sql/*.sql`), which `files` lists in the order it loads.

/// IDs in applications (docs/applications.md): text form, masks, JSON, the `snowflake`
/// type, `convert_column`.
mod applications;
/// libpq's reading of a connect string, for the node side of the router.
mod conninfo;
/// A move's initial copy, made by the target at its slot's snapshot.
mod copy_rows;
/// The `sql/*.sql` files of the fresh install.
mod files;
/// Instagram's layout (README.md): `next_id`, the decoders, `make_id`; the shard installer.
mod instagram;
/// alter_shards on a node: the statement parsed and judged.
mod node_ddl;
/// Other people's IDs (docs/other-ids.md): named layouts, UUID/ULID/ObjectID times.
mod other_ids;
/// The router's private connections, owner-only locks, monotonic clock, and queries run as a
/// table's owner.
mod remote;
