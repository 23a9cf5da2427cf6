//! The node side of alter_shards written in Rust: `snowflake_id_node.ddl_statement(text)` and
//! `snowflake_id_node.ddl_template(text)`, declared in sql/node/ddl.sql with the rest of it.

use crate::pg::error::OrReport;
use crate::pg::node::ddl_statement;
use crate::pg::text_arg::Text;
use pgrx::prelude::*;

/// The command tag of a statement alter_shards may run on every shard's schema (one schema
/// change that can run in a transaction block); an error otherwise.
#[pg_extern(sql = false)]
fn ddl_statement(ddl: Text) -> String {
    ddl_statement::command_tag(ddl.bytes()).or_report()
}

/// The command tag of an alter_shards template (`%I` for the schema, each a name standing
/// alone; `%%` a percent sign), as every shard's statement will have it; an error otherwise.
#[pg_extern(sql = false)]
fn ddl_template(ddl: Text) -> String {
    ddl_statement::template_tag(ddl.bytes()).or_report()
}
