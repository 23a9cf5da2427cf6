//! Which statements `alter_shards` runs on every shard's schema (sql/node/ddl.sql).
//!
//! The statement is parsed by PostgreSQL's own parser (`raw_parser`), never matched by
//! pattern: it must be exactly one statement, a change of schema objects, that can run
//! inside a transaction block (each node applies it to its template and every shard in one
//! transaction). Its text is handed to the parser as PostgreSQL's own NUL-terminated copy
//! (`pnstrdup`, in the call's memory context): nothing is allocated in Rust in proportion to
//! it, and a syntax error is the parser's own (42601, with its position).
//!
//! The router's text is a template: `%I` stands for each shard's schema, quoted, and `%%` for
//! a percent sign ([`template_tag`]). A `%I` must be a name standing alone, which PostgreSQL's
//! own scanner decides: inside a string constant, a dollar quote or a comment, a schema name
//! holding a quote would end the string and write SQL of its own.

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
    /// A change that runs a query on every node (CREATE TABLE AS, SELECT INTO, a materialized
    /// view made or refreshed with its data).
    RunsAQuery { tag: String },
    /// A `%` in the template other than `%I` and `%%`.
    StrayPercent,
    /// No `%I` in the template.
    NoPlaceholder,
    /// A `%I` that is not a name standing alone: in a string constant, a dollar quote, a
    /// quoted name or a comment, or joined to the text beside it. `at`: its character
    /// position (1-based) in the template.
    PlaceholderNotAName { at: usize },
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
        // (Raw SELECT INTO is a SelectStmt: see command_tag.)
        T_CreateTableAsStmt | T_RefreshMatViewStmt => Err(DdlError::RunsAQuery { tag: tag.into() }),
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
    // CreateCommandTag reads as exec_simple_query does, and whose node tag names its struct
    // (a CreateTableAsStmt's `into` is always set by the grammar).
    let (kind, concurrently, tag) = unsafe {
        let stmt = (*stmts.get_ptr(0).unwrap()).stmt;
        let concurrently = match (*stmt).type_ {
            NodeTag::T_IndexStmt => (*(stmt as *mut pg_sys::IndexStmt)).concurrent,
            NodeTag::T_DropStmt => (*(stmt as *mut pg_sys::DropStmt)).concurrent,
            _ => false,
        };
        // A materialized view made WITH NO DATA: its query is analysed, never planned or run.
        if (*stmt).type_ == NodeTag::T_CreateTableAsStmt {
            let ctas = stmt as *mut pg_sys::CreateTableAsStmt;
            if (*ctas).objtype == pg_sys::ObjectType::OBJECT_MATVIEW && (*(*ctas).into).skipData {
                return Ok("CREATE MATERIALIZED VIEW".into());
            }
        }
        // The raw tree's tag of SELECT ... INTO is SELECT's; it makes a table from a query.
        if (*stmt).type_ == NodeTag::T_SelectStmt
            && !(*(stmt as *mut pg_sys::SelectStmt)).intoClause.is_null()
        {
            return Err(DdlError::RunsAQuery {
                tag: "SELECT INTO".into(),
            });
        }
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

/// The name `%I` stands for while a template is checked: a quoted name (under NAMEDATALEN,
/// so the scanner keeps it whole) that a schema is unlikely to have; a template that holds
/// it elsewhere is refused, never misread.
const PLACEHOLDER: &[u8] = b"\"snowflake_id schema\"";

/// The command tag of an alter_shards template (`%I` for the schema, `%%` for a percent
/// sign), checked as what every shard's statement will be: `%` used only so, at least one
/// `%I`, each `%I` a name standing alone (PostgreSQL's scanner finds a name exactly there,
/// and no letter, digit, `_`, `$` or `"` touches it), and the statement with a name in each
/// place one schema change ([`command_tag`]). A schema's name, quoted, then takes the place
/// of a name and can change nothing else: every shard's statement is the same statement.
pub fn template_tag(ddl: &[u8]) -> Result<String, DdlError> {
    let text = with_placeholders(ddl)?;
    // SAFETY: text->data is a NUL-terminated palloc'd string of text->len bytes.
    unsafe {
        if let Some(at) = first_not_a_name((*text).data, placeholders(ddl)) {
            return Err(placeholder_at(ddl, at));
        }
        command_tag(std::slice::from_raw_parts(
            (*text).data.cast::<u8>(),
            (*text).len as usize,
        ))
    }
}

/// The template with the placeholder name for each `%I` and `%` for each `%%`, in
/// PostgreSQL's memory (the call's context); refused when it holds another `%`, no `%I`, or
/// a `%I` joined to a name's character.
fn with_placeholders(ddl: &[u8]) -> Result<pg_sys::StringInfo, DdlError> {
    let joined = |b: Option<&u8>| {
        b.is_some_and(|&b| b.is_ascii_alphanumeric() || b >= 0x80 || b"_$\"".contains(&b))
    };
    // SAFETY: makeStringInfo pallocs (ereport on out-of-memory); appendBinaryStringInfo
    // copies the bytes given and keeps the data NUL-terminated.
    unsafe {
        let buf = pg_sys::makeStringInfo();
        let mut any = false;
        let mut rest = ddl;
        while let Some(n) = rest.iter().position(|&b| b == b'%') {
            pg_sys::appendBinaryStringInfo(buf, rest.as_ptr().cast(), n as i32);
            let at = ddl.len() - rest.len() + n;
            match rest.get(n + 1) {
                Some(b'%') => pg_sys::appendBinaryStringInfo(buf, c"%".as_ptr().cast(), 1),
                Some(b'I')
                    if joined(at.checked_sub(1).map(|j| &ddl[j])) || joined(ddl.get(at + 2)) =>
                {
                    return Err(placeholder_at(ddl, at));
                }
                Some(b'I') => {
                    any = true;
                    let name = PLACEHOLDER.as_ptr().cast();
                    pg_sys::appendBinaryStringInfo(buf, name, PLACEHOLDER.len() as i32);
                }
                _ => return Err(DdlError::StrayPercent),
            }
            rest = &rest[n + 2..];
        }
        pg_sys::appendBinaryStringInfo(buf, rest.as_ptr().cast(), rest.len() as i32);
        if !any {
            return Err(DdlError::NoPlaceholder);
        }
        Ok(buf)
    }
}

/// Each `%I` of a (checked) template: its byte offset in [`with_placeholders`]' text, and in
/// the template.
fn placeholders(ddl: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let (mut at, mut out) = (0, 0);
    std::iter::from_fn(move || {
        while at < ddl.len() {
            let (here, two) = (at, ddl[at] == b'%');
            at += if two { 2 } else { 1 };
            if two && ddl.get(here + 1) == Some(&b'I') {
                out += PLACEHOLDER.len();
                return Some((out - PLACEHOLDER.len(), here));
            }
            out += 1;
        }
        None
    })
}

/// The template offset of the first placeholder that PostgreSQL's scanner does not find as
/// a name of its own in `text` (a token starting exactly there, whose value is the
/// placeholder's name: a token that starts with `"` is a quoted name, and a doubled quote
/// inside would change its value), or None. Tokens and placeholders come in text order.
///
/// # Safety
/// `text` is a NUL-terminated string.
unsafe fn first_not_a_name(
    text: *const std::ffi::c_char,
    mut places: impl Iterator<Item = (usize, usize)>,
) -> Option<usize> {
    let wanted = &PLACEHOLDER[1..PLACEHOLDER.len() - 1];
    let mut next = places.next();
    // SAFETY: scanner_init copies text into its own buffer and reads the scanner settings
    // (standard_conforming_strings, ...) as the parser would; core_yylex returns 0 at the
    // end, raises the scanner's own syntax errors, and sets the value's str for a quoted
    // name; scanner_finish frees the scanner.
    unsafe {
        let mut extra = pg_sys::core_yy_extra_type::default();
        let scanner = pg_sys::scanner_init(
            text,
            &mut extra,
            &raw const pg_sys::ScanKeywords,
            pg_sys::ScanKeywordTokens.as_ptr(),
        );
        let mut value = pg_sys::core_YYSTYPE::default();
        let mut location: std::ffi::c_int = 0;
        while let Some((offset, _)) = next {
            if pg_sys::core_yylex(&mut value, &mut location, scanner) == 0
                || location as usize > offset
            {
                break; // (the placeholder is inside a token, or a comment)
            }
            if location as usize == offset {
                if *text.add(offset) != b'"' as std::ffi::c_char
                    || CStr::from_ptr(value.str_).to_bytes() != wanted
                {
                    break;
                }
                next = places.next();
            }
        }
        pg_sys::scanner_finish(scanner);
    }
    next.map(|(_, at)| at)
}

/// The refusal of the `%I` at byte `at` of the template, named by its character position.
fn placeholder_at(ddl: &[u8], at: usize) -> DdlError {
    // SAFETY: counts the characters of the first `at` bytes, in the database's encoding
    // (`at` is the offset of an ASCII `%`, so a character boundary).
    let chars = unsafe { pg_sys::pg_mbstrlen_with_len(ddl.as_ptr().cast(), at as i32) };
    DdlError::PlaceholderNotAName {
        at: chars as usize + 1,
    }
}
