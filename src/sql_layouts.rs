//! The SQL surface of other people's IDs: decoders taking a layout name (`layouts.rs`),
//! generation in a named layout (`generator.rs`), and the time inside UUIDs, ULIDs and
//! ObjectIDs (`wide_ids.rs`). Each function converts types and maps errors, nothing more.
//!
//! `id_decode(id, layout)` returns `(ts timestamptz, fields jsonb)`: one row per ID whatever
//! the layout, so it works in a SELECT list and in joins, and the fields keep the names their
//! owners give them (`fields->>'worker'`), which no single composite type could do for seven
//! layouts. The time is exact to the layout's unit; the JSON numbers are exact integers.

use crate::error::{IdError, OrReport};
use crate::generator::Node;
use crate::layouts::{self, Layout, NamedLayoutError};
use crate::sequence_state::PG_EPOCH_UNIX_MS;
use crate::wide_ids;
use crate::Regclass;
use pgrx::callconv::{BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::pg_guard;
use pgrx::prelude::*;
use std::ffi::CString;

/// A `jsonb` value built from its text (by `jsonb_in`, as pgrx's own `JsonB` does).
pub struct Jsonb(CString);

// SAFETY: the datum is what jsonb_in returns for our text, a jsonb varlena in the current
// memory context, exactly what a function returning jsonb must return.
unsafe impl BoxRet for Jsonb {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        unsafe { fcinfo.return_raw_datum(self.into_datum()) }
    }
}

pgrx::impl_sql_translatable!(Jsonb, "jsonb");

fn layout(name: &str) -> &'static Layout {
    layouts::by_name(name).or_report()
}

/// A timestamptz argument as an epoch in Unix ms: finite and on a whole millisecond.
fn epoch_unix_ms(epoch: TimestampWithTimeZone) -> i64 {
    let us = epoch.into_inner();
    if us == i64::MIN || us == i64::MAX || us % 1000 != 0 {
        IdError::from(NamedLayoutError::BadEpoch).report()
    }
    us / 1000 + PG_EPOCH_UNIX_MS
}

/// Unix microseconds as a timestamptz, or `err` when PostgreSQL's range cannot hold them.
fn timestamp_us(unix_us: Option<i64>, err: impl FnOnce() -> IdError) -> TimestampWithTimeZone {
    unix_us
        .and_then(|us| us.checked_sub(PG_EPOCH_UNIX_MS * 1000))
        .filter(|&us| us != i64::MIN && us != i64::MAX)
        .and_then(|us| TimestampWithTimeZone::try_from(us).ok())
        .unwrap_or_else(|| err().report())
}

#[inline]
fn time_of(id: i64, layout: &Layout, epoch_unix_ms: i64) -> TimestampWithTimeZone {
    let decoded = layout.decode(id).or_report();
    let unix_us = layout
        .unix_ms(decoded.time, epoch_unix_ms)
        .and_then(|ms| ms.checked_mul(1000));
    timestamp_us(unix_us, || {
        NamedLayoutError::TimeOutsideTimestamp {
            layout: layout.name,
        }
        .into()
    })
}

/// Time an ID of a named layout (instagram, twitter, discord, sonyflake, pgedge, mastodon, tsid) was made, exact to the layout's unit.
#[pg_extern(immutable, parallel_safe, name = "id_timestamp")]
fn id_timestamp_in(id: i64, layout: &str) -> TimestampWithTimeZone {
    let layout = self::layout(layout);
    time_of(id, layout, layout.epoch_unix_ms)
}

/// Time an ID of a named layout was made, counting from a deployment's own epoch (a whole millisecond) instead of the layout's.
#[pg_extern(immutable, parallel_safe, name = "id_timestamp")]
fn id_timestamp_in_epoch(
    id: i64,
    layout: &str,
    epoch: TimestampWithTimeZone,
) -> TimestampWithTimeZone {
    time_of(id, self::layout(layout), epoch_unix_ms(epoch))
}

/// The fields below an ID's time in a named layout, as a JSON object keyed by their names in that layout (e.g. worker, process, increment).
#[pg_extern(immutable, parallel_safe)]
fn id_fields(id: i64, layout: &str) -> Jsonb {
    let layout = self::layout(layout);
    fields_json(layout, id)
}

fn fields_json(layout: &Layout, id: i64) -> Jsonb {
    use std::fmt::Write;
    let decoded = layout.decode(id).or_report();
    let mut text = String::with_capacity(64);
    text.push('{');
    for (i, field) in layout.fields.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(text, "{sep}\"{}\": {}", field.name, decoded.values[i]);
    }
    text.push('}');
    Jsonb(CString::new(text).expect("field names hold no NUL"))
}

impl Jsonb {
    fn into_datum(self) -> pg_sys::Datum {
        // SAFETY: jsonb_in takes a NUL-terminated string and returns a jsonb datum (or raises).
        unsafe {
            pgrx::fcinfo::direct_function_call_as_datum(
                pg_sys::jsonb_in,
                &[Some(pg_sys::Datum::from(self.0.as_ptr()))],
            )
        }
        .expect("jsonb_in returns a value")
    }
}

/// `pg_finfo_id_decode_layout`: declares `id_decode_layout` a version-1 C function.
#[no_mangle]
pub extern "C" fn pg_finfo_id_decode_layout() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// `id_decode(id, layout [, epoch], OUT ts, OUT fields)`: the time and the fields as one
/// record. Written by hand rather than as an SQL function over `id_timestamp` and `id_fields`
/// because PostgreSQL never inlines a STRICT function returning a record, and calling an SQL
/// function costs more than the decoding itself; pgrx 0.18 has no
/// return type for a record of OUT parameters.
///
/// # Safety
/// Called by PostgreSQL's fmgr with the arguments the `CREATE FUNCTION` below declares
/// (STRICT, so none is NULL).
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn id_decode_layout(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: fmgr passes the declared arguments, none NULL (STRICT).
    let (id, name, epoch, flinfo) = unsafe {
        (
            pgrx::fcinfo::pg_getarg::<i64>(fcinfo, 0).expect("STRICT"),
            pgrx::fcinfo::pg_getarg::<&str>(fcinfo, 1).expect("STRICT"),
            ((*fcinfo).nargs == 3)
                .then(|| pgrx::fcinfo::pg_getarg::<TimestampWithTimeZone>(fcinfo, 2))
                .flatten(),
            (*fcinfo).flinfo,
        )
    };
    let layout = self::layout(name);
    let epoch = epoch.map_or(layout.epoch_unix_ms, epoch_unix_ms);
    let ts = time_of(id, layout, epoch);
    let fields = fields_json(layout, id).into_datum();
    // SAFETY: the result's tuple descriptor is built once per call site, in the function's
    // own memory context (fn_mcxt), blessed so that the record's type can be looked up, and
    // kept in fn_extra, as PostgreSQL's C functions returning records do.
    unsafe {
        if (*flinfo).fn_extra.is_null() {
            let old = pg_sys::MemoryContextSwitchTo((*flinfo).fn_mcxt);
            let mut tupdesc: pg_sys::TupleDesc = std::ptr::null_mut();
            let class = pg_sys::get_call_result_type(fcinfo, std::ptr::null_mut(), &mut tupdesc);
            if class != pg_sys::TypeFuncClass::TYPEFUNC_COMPOSITE {
                pgrx::error!(
                    "id_decode must be declared with OUT ts timestamptz, OUT fields jsonb"
                );
            }
            (*flinfo).fn_extra = pg_sys::BlessTupleDesc(tupdesc).cast();
            pg_sys::MemoryContextSwitchTo(old);
        }
        let tupdesc: pg_sys::TupleDesc = (*flinfo).fn_extra.cast();
        let mut values = [pg_sys::Datum::from(ts.into_inner()), fields];
        let mut nulls = [false, false];
        let tuple = pg_sys::heap_form_tuple(tupdesc, values.as_mut_ptr(), nulls.as_mut_ptr());
        pg_sys::HeapTupleHeaderGetDatum((*tuple).t_data)
    }
}

/// Next ID in a named layout (twitter, discord, pgedge or instagram) for a node from a sequence: the same state and guarantees as next_id(shard, seq).
#[pg_extern(volatile, parallel_unsafe, name = "next_id")]
fn next_id_in(node: i32, seq: Regclass, layout: &str) -> i64 {
    let layout = self::layout(layout);
    next_in(node, seq, layout, layout.epoch_unix_ms)
}

/// Next ID in a named layout counting time from a deployment's own epoch (a whole millisecond), e.g. 2026-01-01 for Twitter's layout lasts to 2095.
#[pg_extern(volatile, parallel_unsafe, name = "next_id")]
fn next_id_in_epoch(node: i32, seq: Regclass, layout: &str, epoch: TimestampWithTimeZone) -> i64 {
    let epoch_unix_ms = epoch_unix_ms(epoch);
    let clock_unix_ms = crate::sequence_state::clock_unix_ms();
    if epoch_unix_ms > clock_unix_ms {
        IdError::from(NamedLayoutError::FutureEpoch {
            epoch_unix_ms,
            clock_unix_ms,
        })
        .report()
    }
    next_in(node, seq, self::layout(layout), epoch_unix_ms)
}

fn next_in(node: i32, seq: Regclass, layout: &Layout, epoch_unix_ms: i64) -> i64 {
    let shape = layout.generated().or_report();
    if !(0..=shape.max_node()).contains(&node) {
        IdError::from(NamedLayoutError::FieldOutOfRange {
            layout: layout.name,
            field: "node",
            value: node as i64,
            max: shape.max_node() as i64,
        })
        .report()
    }
    crate::generator::issue(&shape, epoch_unix_ms, Node::Given(node), seq.0).or_report()
}

/// Time a UUID of version 1 or 6 (100 ns since 1582-10-15, shown to the microsecond) or 7 (milliseconds) was made; other versions raise an error.
#[pg_extern(immutable, parallel_safe)]
fn uuid_timestamp(id: pgrx::Uuid) -> TimestampWithTimeZone {
    let unix_us = wide_ids::uuid_unix_us(id.as_bytes()).or_report();
    timestamp_us(Some(unix_us), || unreachable!("v1/v6/v7 times fit"))
}

/// Time a ULID (26 Crockford base32 characters, any case) was made, exact to the millisecond.
#[pg_extern(immutable, parallel_safe)]
fn ulid_timestamp(ulid: &str) -> TimestampWithTimeZone {
    let unix_ms = wide_ids::ulid_unix_ms(ulid).or_report();
    timestamp_us(Some(unix_ms * 1000), || unreachable!("48-bit ms fit"))
}

/// Time a MongoDB ObjectID (24 hexadecimal characters) was made, exact to the second.
#[pg_extern(immutable, parallel_safe)]
fn objectid_timestamp(objectid: &str) -> TimestampWithTimeZone {
    let unix_s = wide_ids::objectid_unix_s(objectid).or_report();
    timestamp_us(Some(unix_s * 1_000_000), || {
        unreachable!("32-bit seconds fit")
    })
}

extension_sql!(
    r#"
CREATE FUNCTION id_decode(id bigint, layout text, OUT ts timestamptz, OUT fields jsonb)
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_decode_layout';
CREATE FUNCTION id_decode(id bigint, layout text, epoch timestamptz, OUT ts timestamptz, OUT fields jsonb)
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_decode_layout';
COMMENT ON FUNCTION id_timestamp(bigint, text) IS 'Time an ID of a named layout (instagram, twitter, discord, sonyflake, pgedge, mastodon, tsid) was made, exact to the layout''s unit.';
COMMENT ON FUNCTION id_timestamp(bigint, text, timestamptz) IS 'Time an ID of a named layout was made, counting from a deployment''s own epoch (a whole millisecond) instead of the layout''s.';
COMMENT ON FUNCTION id_fields(bigint, text) IS 'The fields below an ID''s time in a named layout, as a JSON object keyed by their names in that layout (e.g. worker, process, increment).';
COMMENT ON FUNCTION id_decode(bigint, text) IS 'An ID of a named layout taken apart: its time (exact to the layout''s unit) and its fields by their names in that layout.';
COMMENT ON FUNCTION id_decode(bigint, text, timestamptz) IS 'An ID of a named layout taken apart, its time counted from a deployment''s own epoch: its time and its fields by name.';
COMMENT ON FUNCTION next_id(integer, regclass, text) IS 'Next ID in a named layout (twitter, discord, pgedge or instagram) for a node from a sequence: the same state and guarantees as next_id(shard, seq).';
COMMENT ON FUNCTION next_id(integer, regclass, text, timestamptz) IS 'Next ID in a named layout counting time from a deployment''s own epoch (a whole millisecond), e.g. 2026-01-01 for Twitter''s layout lasts to 2095.';
COMMENT ON FUNCTION uuid_timestamp(uuid) IS 'Time a UUID of version 1 or 6 (100 ns since 1582-10-15, shown to the microsecond) or 7 (milliseconds) was made; other versions raise an error.';
COMMENT ON FUNCTION ulid_timestamp(text) IS 'Time a ULID (26 Crockford base32 characters, any case) was made, exact to the millisecond.';
COMMENT ON FUNCTION objectid_timestamp(text) IS 'Time a MongoDB ObjectID (24 hexadecimal characters) was made, exact to the second.';
"#,
    name = "layouts",
    requires = [
        id_timestamp_in,
        id_timestamp_in_epoch,
        id_fields,
        next_id_in,
        next_id_in_epoch,
        uuid_timestamp,
        ulid_timestamp,
        objectid_timestamp
    ]
);

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn text(sql: &str) -> String {
        Spi::get_one::<String>(sql).unwrap().unwrap()
    }

    #[pg_test]
    fn discord_example_through_sql() {
        // discord.com/developers/docs/reference#snowflakes.
        assert_eq!(
            text("SELECT id_timestamp(175928847299117063, 'discord') AT TIME ZONE 'UTC' || ''"),
            "2016-04-30 11:18:25.796"
        );
        assert_eq!(
            text("SELECT id_fields(175928847299117063, 'discord')::text"),
            r#"{"worker": 1, "process": 0, "increment": 7}"#
        );
    }

    #[pg_test]
    fn twitter_generation_follows_the_layout() {
        Spi::run("CREATE SEQUENCE tw").unwrap();
        let ok = Spi::get_one::<bool>(
            "WITH ids AS (SELECT g, next_id(1023, 'tw', 'twitter', '2026-01-01+00') id
                            FROM generate_series(1, 10000) g)
             SELECT bool_and((id >> 12) & 1023 = 1023)
                AND count(DISTINCT id) = 10000
                AND max(id_timestamp(id, 'twitter', '2026-01-01+00')) <= clock_timestamp() + interval '1 s'
                AND min(id_timestamp(id, 'twitter', '2026-01-01+00')) > clock_timestamp() - interval '1 min'
               FROM ids",
        );
        assert_eq!(ok, Ok(Some(true)));
    }
}

/// Every `COMMENT ON FUNCTION` here is its function's doc comment, word for word.
#[cfg(test)]
mod comment_tests {
    #[test]
    fn comments_are_the_doc_comments() {
        let src = include_str!("sql_layouts.rs");
        let mut checked = 0;
        for (i, line) in src.lines().enumerate() {
            let Some(rust_name) = line.strip_prefix("fn ").and_then(|l| l.split('(').next()) else {
                continue;
            };
            let attr = src.lines().nth(i - 1).unwrap_or_default();
            if !attr.starts_with("#[pg_extern") {
                continue;
            }
            let sql_name = attr
                .split("name = \"")
                .nth(1)
                .map(|n| n.split('"').next().unwrap())
                .unwrap_or(rust_name);
            let doc = src.lines().nth(i - 2).unwrap().trim_start_matches("/// ");
            let quoted = doc.replace('\'', "''");
            let found = src.lines().any(|l| {
                l.starts_with(&format!("COMMENT ON FUNCTION {sql_name}("))
                    && l.ends_with(&format!("IS '{quoted}';"))
            });
            assert!(found, "no COMMENT for {rust_name} saying its doc comment");
            checked += 1;
        }
        assert_eq!(
            checked, 8,
            "each #[pg_extern] has its doc comment right above it"
        );
    }
}
