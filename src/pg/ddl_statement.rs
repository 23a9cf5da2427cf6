//! Which statements `alter_shards` runs on every shard's schema (sql/node_ddl.sql).
//!
//! The statement is parsed by PostgreSQL's own parser (`raw_parser`), never matched by
//! pattern: it must be exactly one statement, a change of schema objects, that can run
//! inside a transaction block (each node applies it to its template and every shard in one
//! transaction). Its text is handed to the parser as PostgreSQL's own NUL-terminated copy
//! (`pnstrdup`, in the call's memory context): nothing is allocated in Rust in proportion to
//! it, and a syntax error is the parser's own (42601, with its position).

use pgrx::pg_sys::{self, NodeTag};
use pgrx::PgList;
use std::ffi::CStr;

/// Why `alter_shards` refuses a statement (`error` gives each its SQLSTATE).
#[derive(Debug, PartialEq, Eq)]
pub enum DdlError {
    /// The text holds no statement, or more than one.
    NotOneStatement { count: usize },
    /// A change PostgreSQL runs only outside a transaction block.
    OutsideTransaction { what: &'static str },
    /// A query, DML, maintenance, session or server command: `tag` is its command tag.
    NotASchemaChange { tag: String },
}

/// Whether a statement of this kind is a change alter_shards runs: one that changes the
/// objects a schema holds (tables and their columns, constraints and indexes, and the other
/// objects DDL names in a schema) inside a transaction block.
fn schema_change(kind: NodeTag, concurrently: bool, tag: &str) -> Result<(), DdlError> {
    use NodeTag::*;
    match kind {
        T_IndexStmt if concurrently => Err(DdlError::OutsideTransaction {
            what: "CREATE INDEX CONCURRENTLY",
        }),
        T_DropStmt if concurrently => Err(DdlError::OutsideTransaction {
            what: "DROP INDEX CONCURRENTLY",
        }),
        T_AlterTableStmt
        | T_IndexStmt
        | T_CreateStmt
        | T_DropStmt
        | T_RenameStmt
        | T_CommentStmt
        | T_GrantStmt
        | T_AlterDefaultPrivilegesStmt
        | T_CreateTrigStmt
        | T_CreatePolicyStmt
        | T_AlterPolicyStmt
        | T_CreateStatsStmt
        | T_AlterStatsStmt
        | T_CreateSeqStmt
        | T_AlterSeqStmt
        | T_AlterObjectSchemaStmt
        | T_AlterOwnerStmt
        | T_ViewStmt
        | T_CreateTableAsStmt
        | T_CreateFunctionStmt
        | T_AlterFunctionStmt
        | T_DefineStmt
        | T_CompositeTypeStmt
        | T_CreateEnumStmt
        | T_AlterEnumStmt
        | T_CreateDomainStmt
        | T_AlterDomainStmt
        | T_RuleStmt
        | T_SecLabelStmt => Ok(()),
        _ => Err(DdlError::NotASchemaChange { tag: tag.into() }),
    }
}

/// The command tag of the one statement `ddl` holds (`ALTER TABLE`, `CREATE INDEX`, ...)
/// when alter_shards may run it on every shard's schema. `ddl` is the statement for one
/// schema (its placeholder replaced); it is parsed, not run.
pub fn command_tag(ddl: &[u8]) -> Result<String, DdlError> {
    // SAFETY: pnstrdup copies len bytes into a palloc'd NUL-terminated string (ereport on
    // out-of-memory); a text datum holds no NUL byte. raw_parser reads it and returns a List
    // of RawStmt (or NIL) in the current memory context, raising its own syntax errors.
    let stmts = unsafe {
        let text = pg_sys::pnstrdup(ddl.as_ptr().cast(), ddl.len());
        PgList::<pg_sys::RawStmt>::from_pg(pg_sys::raw_parser(
            text,
            pg_sys::RawParseMode::RAW_PARSE_DEFAULT,
        ))
    };
    if stmts.len() != 1 {
        return Err(DdlError::NotOneStatement { count: stmts.len() });
    }
    // SAFETY: the one RawStmt of the list; its stmt is a raw parse tree, which
    // CreateCommandTag reads as exec_simple_query does, and whose node tag names its struct.
    let (kind, concurrently, tag) = unsafe {
        let stmt = (*stmts.get_ptr(0).unwrap()).stmt;
        let concurrently = match (*stmt).type_ {
            NodeTag::T_IndexStmt => (*(stmt as *mut pg_sys::IndexStmt)).concurrent,
            NodeTag::T_DropStmt => (*(stmt as *mut pg_sys::DropStmt)).concurrent,
            _ => false,
        };
        let tag = CStr::from_ptr(pg_sys::GetCommandTagName(pg_sys::CreateCommandTag(stmt)));
        (
            (*stmt).type_,
            concurrently,
            tag.to_string_lossy().into_owned(),
        )
    };
    schema_change(kind, concurrently, &tag)?;
    Ok(tag)
}
