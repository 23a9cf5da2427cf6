//! The SQL written as SQL: every `sql/*.sql` file of the fresh install, in the order it
//! loads. cargo pgrx places each after what it `requires` (its other files by name, the
//! functions written in Rust by path); the order here is the order to read them in.
//!
//! Each of these files is written so that it can run again: CREATE OR REPLACE, COMMENT,
//! GRANT and REVOKE, guarded blocks. A migration (sql/migrations/R--V.sql) takes whole the
//! ones it changes (`--#include`); what cannot run twice (tables, types, casts, operators)
//! is written once, in sql/node/objects.sql, sql/installer/shard_catalog.sql and
//! sql/id/snowflake_type.sql for what shipped by 0.3.0, and in the migration of the release that
//! brings it after (scripts/build-sql).

use pgrx::prelude::*;

// The node side of snowflake_id_router's protocol (sql/node/): schema snowflake_id_node, its
// tables; its identity, locks and move records; a schema's shape and grants; the steps of a
// move on its source and on its target; undo and repair. Before the installer:
// snowflake_id_shards reads the moves.
extension_sql_file!("../../sql/node/objects.sql", name = "node_objects");
// What 0.4.0 changes in those tables (made once; its migration includes it first).
extension_sql_file!(
    "../../sql/migrations/0.4.0-objects.sql",
    name = "node_objects_0_4_0",
    requires = ["node_objects", "shard_catalog"]
);
extension_sql_file!(
    "../../sql/node/node.sql",
    name = "node",
    requires = ["node_objects_0_4_0"]
);
extension_sql_file!(
    "../../sql/node/shape.sql",
    name = "node_shape",
    requires = ["node"]
);
extension_sql_file!(
    "../../sql/node/grants.sql",
    name = "node_grants",
    requires = ["node_shape"]
);
extension_sql_file!(
    "../../sql/node/partman.sql",
    name = "node_partman",
    requires = ["node_grants"]
);
extension_sql_file!(
    "../../sql/node/move_source.sql",
    name = "node_move_source",
    requires = ["node_partman"]
);
extension_sql_file!(
    "../../sql/node/move_target.sql",
    name = "node_move_target",
    requires = ["node_move_source"]
);
extension_sql_file!(
    "../../sql/node/repair.sql",
    name = "node_repair",
    requires = ["node_move_target"]
);
// The router's private connections, owner-only locks and clock.
extension_sql_file!(
    "../../sql/node/remote.sql",
    name = "remote",
    requires = ["node_repair"]
);
// Comparing the content of two copies of a shard (a move's verification, verify_shard).
extension_sql_file!(
    "../../sql/node/verify.sql",
    name = "node_verify",
    requires = ["remote", "installer"]
);

// Instagram's layout: the declarations (the fmgr ones) and descriptions of its functions.
extension_sql_file!(
    "../../sql/id/instagram.sql",
    name = "instagram",
    requires = [
        instagram::id_timestamp,
        instagram::id_shard,
        instagram::id_sequence,
        instagram::make_id
    ]
);
// The per-schema shard installer: its catalog table, then create_shard, create_shards,
// drop_shard and the view snowflake_id_shards.
extension_sql_file!(
    "../../sql/installer/shard_catalog.sql",
    name = "shard_catalog",
    requires = [instagram::id_shard]
);
extension_sql_file!(
    "../../sql/installer/installer.sql",
    name = "installer",
    requires = ["shard_catalog", "instagram", "node_repair"]
);

// A node split through its streaming standby: the node's and the promoted standby's steps.
extension_sql_file!(
    "../../sql/node/split.sql",
    name = "node_split",
    requires = ["node_repair", "installer"]
);

// What the router's node_status, shard_status and rebalancer read on a node.
extension_sql_file!(
    "../../sql/node/status.sql",
    name = "node_status",
    requires = [
        "node",
        "installer",
        instagram::id_timestamp,
        instagram::make_id
    ]
);
// A shard in a move refuses schema and privilege changes (event triggers).
extension_sql_file!(
    "../../sql/node/guard.sql",
    name = "node_guard",
    requires = ["node", "remote"]
);
// alter_shards' change of every shard on a node.
extension_sql_file!(
    "../../sql/node/ddl.sql",
    name = "node_ddl",
    requires = ["node", "installer"]
);
// use_shard: what an application routing by shard itself asks a node first (the shards it
// serves are snowflake_id_shards').
extension_sql_file!(
    "../../sql/node/app.sql",
    name = "node_app",
    requires = ["installer"]
);

// IDs in applications: the snowflake type, its casts to other types and from smallint and
// its comparisons with smallint.
extension_sql_file!("../../sql/id/snowflake_type.sql", name = "snowflake_type");
extension_sql_file!(
    "../../sql/id/snowflake_casts.sql",
    name = "snowflake_casts",
    requires = ["snowflake_type"]
);
// convert_column: a bigserial or identity key adopted in place.
extension_sql_file!(
    "../../sql/installer/convert.sql",
    name = "convert",
    requires = ["installer"]
);
// The descriptions of the application functions, and the snowflake type's casts' and
// operators'.
extension_sql_file!(
    "../../sql/id/applications.sql",
    name = "applications",
    requires = [
        "snowflake_type",
        "snowflake_casts",
        applications::id_to_text,
        applications::id_from_text,
        applications::id_mask_key,
        applications::id_unmask_key,
        applications::id_mask,
        applications::id_unmask
    ]
);

// Other people's IDs: id_decode's declaration, and the descriptions.
extension_sql_file!(
    "../../sql/id/other_ids.sql",
    name = "other_ids",
    requires = [
        other_ids::id_timestamp_in,
        other_ids::id_timestamp_in_epoch,
        other_ids::id_fields,
        other_ids::next_id_in,
        other_ids::next_id_in_epoch,
        other_ids::uuid_timestamp,
        other_ids::ulid_timestamp,
        other_ids::objectid_timestamp
    ]
);
