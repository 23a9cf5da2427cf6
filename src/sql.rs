//! The SQL surface: the functions written in Rust, one module per part of the manual, and
//! the SQL written as SQL (`sql/*.sql`), which `files` lists in the order it loads.

/// IDs in applications (docs/applications.md): text form, masks, JSON, the `snowflake`
/// type, `convert_column`.
mod applications;
/// The `sql/*.sql` files of the fresh install.
mod files;
/// Instagram's layout (README.md): `next_id`, the decoders, `make_id`; the shard installer.
mod instagram;
/// The node side of snowflake_id_router's protocol (docs/cluster-design.md): connect strings,
/// a move's copy, alter_shards on a node, the router's private connections.
mod node;
/// Other people's IDs (docs/other-ids.md): named layouts, UUID/ULID/ObjectID times.
mod other_ids;
