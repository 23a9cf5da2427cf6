//! What `create_shard(..., template => ...)` reads of a template schema, read so that it is
//! what `CREATE TABLE ... (LIKE ...)` then copies (sql/installer/template_read.sql says what is read).
//!
//! The template's tables (and views and sequences) are locked first, SHARE ROW EXCLUSIVE, until
//! the caller's transaction ends: no ALTER TABLE, CREATE INDEX, CREATE STATISTICS, trigger or
//! policy can commit on them meanwhile, nor any row, nor CREATE OR REPLACE VIEW, nor ALTER
//! SEQUENCE. The template is then read at a snapshot taken after
//! the locks were granted, because the statement's snapshot predates them (under REPEATABLE
//! READ and SERIALIZABLE it is the transaction's, taken before the call), while LIKE reads the
//! catalog as it is when it runs: a change committed while create_shard waited for a lock
//! would be copied without having been read. A table created in the template after the
//! tables were listed is seen by the reading, locked in turn, and the template read again.
//!
//! Locking takes what `LOCK TABLE ... IN SHARE ROW EXCLUSIVE MODE` takes: UPDATE, DELETE or
//! TRUNCATE on each table (42501 otherwise). The reading is catalog queries any role may
//! run, as the caller.
//!
//! A statement that makes many shards from one template (create_shard called for each row of
//! a query) reads it once: what the first call read is used again by the same statement's
//! later calls for the same template and role, and by nothing else. Why that reading cannot
//! be outlived by a change to what it read:
//! - the template's tables stay locked from that reading to the end of the transaction, so
//!   no other session can change them; a subtransaction that rolls back may release those
//!   locks, so any subtransaction abort forgets the reading;
//! - the statement itself can change them only by DDL on them, which invalidates their
//!   relation cache entries: any invalidation of a template table, of a relation the walk
//!   reached, or of every relation, forgets the reading;
//! - everything else the walk reached is owned by the caller or a superuser (or the reading
//!   refused the template, and the statement failed): only they can change it;
//! - tables created in the template after the reading are not copied by that statement,
//!   which reads the template as it was when the statement first read it.
//! Every cache key is the (transaction, statement) pair's start times, the template and the
//! role; another statement, transaction or role reads the template afresh.

use pgrx::prelude::*;
use std::cell::Cell;
use std::collections::BTreeSet;
use std::ffi::CStr;

/// The template's tables, views and sequences, as sql/installer/template_read.sql's `tables`,
/// `views` and `sequences` list them.
const TABLES: &CStr = c"SELECT c.oid FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_class c ON c.oid = d.objid
 WHERE d.refclassid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND d.refobjid = $1 AND d.deptype = 'n'
   AND d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
   AND (c.relkind IN ('r', 'p', 'v', 'm')
        OR (c.relkind = 'S' AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend i
                                             WHERE i.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
                                               AND i.objid = c.oid AND i.deptype = 'i')))";

/// Rounds of "lock what is listed, read again" before giving up with 40001: more means
/// tables keep being created in the template while create_shard reads it.
const ROUNDS: usize = 5;

/// Locks the template's tables, then reads what create_shard copies of them and what the
/// copies would run (sql/installer/template_read.sql), at a snapshot taken after the locks; the
/// statement's earlier reading of the same template, if it still holds (see above).
pub fn read(template: pg_sys::Oid) -> Vec<Finding> {
    let key = Key::now(template);
    if let Some(findings) = CACHE.with_borrow(|c| {
        c.as_ref()
            .filter(|c| c.key == key)
            .map(|c| c.findings.clone())
    }) {
        return findings;
    }
    let findings = lock_and_read(template);
    let watched = findings
        .iter()
        .filter(|f| {
            f.0 == "table"
                || f.0 == "view"
                || f.0 == "matview"
                || f.0 == "sequence"
                || f.0 == "watch"
        })
        .filter_map(|f| f.1)
        .collect();
    register_callbacks();
    CACHE.set(Some(Cached {
        key,
        watched,
        findings: findings.clone(),
    }));
    findings
}

/// One row of sql/installer/template_read.sql: kind, rel, name, detail, deps. Names and the texts
/// built from them are the database's bytes ([`TextBytes`]): in a `LATIN1` or `SQL_ASCII`
/// database they need not be UTF-8.
pub type Finding = (
    String,
    Option<pg_sys::Oid>,
    Option<TextBytes>,
    Option<TextBytes>,
    Option<TextBytes>,
);

/// A `text` value as the bytes PostgreSQL holds, in the database's encoding: copied out of
/// SPI's memory as it is, and given back as `text` unchanged. (A Rust `String` must be
/// UTF-8: a template table named `café` in a `LATIN1` database would raise XX000.) What is
/// copied is catalog names and definitions, not user data.
#[derive(Clone)]
pub struct TextBytes(Vec<u8>);

impl FromDatum for TextBytes {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        typoid: pg_sys::Oid,
    ) -> Option<Self> {
        // SAFETY: a text datum is a varlena, which `&[u8]`'s FromDatum detoasts and borrows;
        // the bytes are copied before SPI's memory goes.
        unsafe { <&[u8]>::from_polymorphic_datum(datum, is_null, typoid) }
            .map(|b| TextBytes(b.to_vec()))
    }
}

impl IntoDatum for TextBytes {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        let len = i32::try_from(self.0.len()).expect("a catalog text is under 1 GB");
        // SAFETY: copies len bytes into a new text in the current memory context.
        Some(pg_sys::Datum::from(unsafe {
            pg_sys::cstring_to_text_with_len(self.0.as_ptr().cast(), len)
        }))
    }
    fn type_oid() -> pg_sys::Oid {
        pg_sys::TEXTOID
    }
}

// SAFETY: returns exactly the datum into_datum makes, as pgrx's own text types do.
unsafe impl pgrx::callconv::BoxRet for TextBytes {
    unsafe fn box_into<'fcx>(
        self,
        fcinfo: &mut pgrx::callconv::FcInfo<'fcx>,
    ) -> pgrx::datum::Datum<'fcx> {
        // SAFETY: the caller's (the datum is returned to the function's caller).
        unsafe { fcinfo.return_optional_datum(self.into_datum()) }
    }
}

pgrx::impl_sql_translatable!(TextBytes, "text");

/// The statement, role and template a reading was made for.
#[derive(Clone, Copy, PartialEq)]
struct Key {
    transaction_start: pg_sys::TimestampTz,
    statement_start: pg_sys::TimestampTz,
    user: pg_sys::Oid,
    template: pg_sys::Oid,
}

impl Key {
    fn now(template: pg_sys::Oid) -> Key {
        // SAFETY: plain reads of the backend's transaction state, in a transaction.
        unsafe {
            Key {
                transaction_start: pg_sys::GetCurrentTransactionStartTimestamp(),
                statement_start: pg_sys::GetCurrentStatementStartTimestamp(),
                user: pg_sys::GetUserId(),
                template,
            }
        }
    }
}

/// The last reading, and the relations whose invalidation forgets it.
struct Cached {
    key: Key,
    watched: Vec<pg_sys::Oid>,
    findings: Vec<Finding>,
}

thread_local! {
    static CACHE: std::cell::RefCell<Option<Cached>> = const { std::cell::RefCell::new(None) };
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
}

fn register_callbacks() {
    if REGISTERED.get() {
        return;
    }
    // SAFETY: registered once per backend (PostgreSQL keeps a small fixed number of relcache
    // callbacks); the callbacks only clear a thread-local, which cannot fail.
    unsafe {
        pg_sys::CacheRegisterRelcacheCallback(Some(forget_on_relcache), pg_sys::Datum::from(0));
        pg_sys::RegisterSubXactCallback(Some(forget_on_subabort), std::ptr::null_mut());
    }
    REGISTERED.set(true);
}

unsafe extern "C-unwind" fn forget_on_relcache(_: pg_sys::Datum, relid: pg_sys::Oid) {
    CACHE.with_borrow_mut(|c| {
        if c.as_ref()
            .is_some_and(|c| relid == pg_sys::InvalidOid || c.watched.contains(&relid))
        {
            *c = None;
        }
    });
}

unsafe extern "C-unwind" fn forget_on_subabort(
    event: pg_sys::SubXactEvent::Type,
    _: pg_sys::SubTransactionId,
    _: pg_sys::SubTransactionId,
    _: *mut std::ffi::c_void,
) {
    if event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        CACHE.set(None);
    }
}

/// Locks the template's tables, then reads it at a snapshot taken after the locks.
fn lock_and_read(template: pg_sys::Oid) -> Vec<Finding> {
    // OIDs as numbers, in order: tables are locked in OID order, as every create_shard does.
    let mut locked = BTreeSet::new();
    let mut tables: BTreeSet<u32> = run_now(&TABLES_PLAN, TABLES, template, |column| {
        // SAFETY: column 1 of TABLES is an oid.
        unsafe { oid_at(column, 1) }
    })
    .into_iter()
    .flatten()
    .map(|oid| oid.to_u32())
    .collect();
    for _ in 0..ROUNDS {
        for &table in tables.difference(&locked) {
            lock(pg_sys::Oid::from(table));
        }
        locked.extend(tables.iter().copied());
        let findings = run_now(&READ_PLAN, read_query(), template, |column| {
            // SAFETY: the columns of sql/installer/template_read.sql: text, oid, text, text, text.
            unsafe {
                (
                    // (kind is one of the query's own ASCII words)
                    text_at(column, 1)
                        .map_or_else(String::new, |t| String::from_utf8_lossy(&t.0).into_owned()),
                    oid_at(column, 2),
                    text_at(column, 3),
                    text_at(column, 4),
                    text_at(column, 5),
                )
            }
        });
        tables = findings
            .iter()
            .filter(|f| f.0 == "table" || f.0 == "view" || f.0 == "matview" || f.0 == "sequence")
            .filter_map(|f| f.1.map(|oid| oid.to_u32()))
            .collect();
        if tables.is_subset(&locked) {
            return findings;
        }
    }
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
        "tables kept being created in the template schema while create_shard read it",
        "Retry the transaction."
    );
}

/// sql/installer/template_read.sql, NUL-terminated for SPI.
fn read_query() -> &'static CStr {
    const TEXT: &str = concat!(include_str!("../../sql/installer/template_read.sql"), "\0");
    CStr::from_bytes_with_nul(TEXT.as_bytes()).expect("the query holds no NUL")
}

/// Takes what LOCK TABLE takes for SHARE ROW EXCLUSIVE: UPDATE, DELETE or TRUNCATE.
fn lock(table: pg_sys::Oid) {
    // SAFETY: catalog lookups and a heavyweight lock, inside a transaction. The privilege
    // check comes first, as LOCK TABLE's does, so that no one queues for a lock they may not
    // take; a table dropped since it was listed fails the check with its own error.
    unsafe {
        let mode =
            (pg_sys::ACL_UPDATE | pg_sys::ACL_DELETE | pg_sys::ACL_TRUNCATE) as pg_sys::AclMode;
        let result = pg_sys::pg_class_aclcheck(table, pg_sys::GetUserId(), mode);
        if result != pg_sys::AclResult::ACLCHECK_OK {
            let kind = pg_sys::get_relkind_objtype(pg_sys::get_rel_relkind(table));
            pg_sys::aclcheck_error(result, kind, pg_sys::get_rel_name(table));
        }
        pg_sys::LockRelationOid(table, pg_sys::ShareRowExclusiveLock as pg_sys::LOCKMODE);
    }
}

thread_local! {
    /// The two queries' plans, prepared on first use and kept for the session: PostgreSQL's
    /// plan cache replans them if the catalogs they read change shape.
    static TABLES_PLAN: Cell<pg_sys::SPIPlanPtr> = const { Cell::new(std::ptr::null_mut()) };
    static READ_PLAN: Cell<pg_sys::SPIPlanPtr> = const { Cell::new(std::ptr::null_mut()) };
}

/// Reads column n (from 1) of the current row: its datum and whether it is NULL.
type Column<'a> = &'a dyn Fn(i32) -> (pg_sys::Datum, bool);

/// # Safety
/// Column n must be of type oid.
unsafe fn oid_at(column: Column, n: i32) -> Option<pg_sys::Oid> {
    let (datum, null) = column(n);
    // SAFETY: the caller's.
    unsafe { pg_sys::Oid::from_datum(datum, null) }
}

/// # Safety
/// Column n must be of type text.
unsafe fn text_at(column: Column, n: i32) -> Option<TextBytes> {
    let (datum, null) = column(n);
    // SAFETY: the caller's; TextBytes is a copy, which outlives SPI's memory.
    unsafe { TextBytes::from_datum(datum, null) }
}

/// Runs `query` (its plan kept in `plan`) with $1 = `template` at a snapshot taken now (see
/// the module's comment), and reads each row with `read`.
fn run_now<T>(
    plan: &'static std::thread::LocalKey<Cell<pg_sys::SPIPlanPtr>>,
    query: &CStr,
    template: pg_sys::Oid,
    read: impl Fn(Column) -> T,
) -> Vec<T> {
    Spi::connect(|_| {
        // SAFETY: SPI is connected (Spi::connect), in a transaction. SPI_keepplan moves the
        // plan out of SPI's procedure memory, so that it outlives this call. With read_only,
        // SPI_execute_snapshot pushes the given snapshot and runs with exactly it. The rows
        // live in SPI's memory until Spi::connect finishes: `read` copies them into Rust
        // values before.
        unsafe {
            if plan.get().is_null() {
                // A generic plan: the queries are the same for every template, and planning
                // them costs more than running them.
                let mut types = [pg_sys::OIDOID];
                let prepared = pg_sys::SPI_prepare_cursor(
                    query.as_ptr(),
                    1,
                    types.as_mut_ptr(),
                    pg_sys::CURSOR_OPT_GENERIC_PLAN as i32,
                );
                if prepared.is_null() || pg_sys::SPI_keepplan(prepared) != 0 {
                    error!("template_read: could not prepare a query");
                }
                plan.set(prepared);
            }
            // (An OID by value; pgrx's into_datum has no datum for InvalidOid, 0, which any
            // role may pass to snowflake_id_internal.template_read.)
            let mut values = [pg_sys::Datum::from(template.to_u32())];
            let status = pg_sys::SPI_execute_snapshot(
                plan.get(),
                values.as_mut_ptr(),
                std::ptr::null(),
                pg_sys::GetLatestSnapshot(),
                std::ptr::null_mut(),
                true,
                false,
                0,
            );
            if status != pg_sys::SPI_OK_SELECT as i32 {
                error!("template_read: SPI_execute_snapshot returned {status}");
            }
            let table = pg_sys::SPI_tuptable;
            (0..pg_sys::SPI_processed as usize)
                .map(|i| {
                    let tuple = *(*table).vals.add(i);
                    let column = |n: i32| {
                        let mut null = false;
                        let datum = pg_sys::SPI_getbinval(tuple, (*table).tupdesc, n, &mut null);
                        (datum, null)
                    };
                    read(&column)
                })
                .collect()
        }
    })
}
