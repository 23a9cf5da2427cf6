//! The SQL surface of other people's IDs: decoders taking a layout name
//! (`id::layouts`), generation in a named layout (`pg::generator`), and the time inside
//! UUIDs, ULIDs and ObjectIDs (`id::wide_ids`). Each function converts types and maps errors,
//! nothing more.
//!
//! `id_decode(id, layout)` returns `(ts timestamptz, fields jsonb)`: one row per ID whatever
//! the layout, so it works in a SELECT list and in joins, and the fields keep the names their
//! owners give them (`fields->>'worker'`), which no single composite type could do for seven
//! layouts. The time is exact to the layout's unit; the JSON numbers are exact integers.
//! What each function does for its caller is its `COMMENT` in sql/id/other_ids.sql.

use crate::id::layouts::{self, Layout, LayoutError};
use crate::id::wide_ids::{self, WideIdError};
use crate::pg::error::{IdError, OrReport};
use crate::pg::fmgr;
use crate::pg::generator::{self, Node};
use crate::pg::text_arg::{self, Text};
use crate::pg::time::{clock_unix_ms, epoch_unix_ms, timestamp_of_unix_ms, timestamp_of_unix_us};
use pgrx::callconv::{ArgAbi, BoxRet, FcInfo};
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

/// A `regclass` argument taken as the bare OID: `next_id` locks and opens the sequence
/// itself, as `nextval()` does, rather than having it opened for every call.
pub struct Regclass(pg_sys::Oid);

impl FromDatum for Regclass {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _: pg_sys::Oid,
    ) -> Option<Self> {
        (!is_null).then(|| Regclass(pg_sys::Oid::from(datum.value() as u32)))
    }
}

// SAFETY: a regclass datum is an OID by value, exactly what FromDatum reads.
unsafe impl<'fcx> ArgAbi<'fcx> for Regclass {
    unsafe fn unbox_arg_unchecked(arg: pgrx::callconv::Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe { arg.unbox_arg_using_from_datum() }
            .unwrap_or_else(|| panic!("argument {index} must not be null"))
    }
}

pgrx::impl_sql_translatable!(Regclass, arg_only = "regclass");

/// The layout a name argument names; an unknown one is named (shortened to a name's
/// length) with the valid ones.
fn layout(name: Text) -> &'static Layout {
    layouts::by_name(name.bytes()).unwrap_or_else(|| {
        IdError::from(LayoutError::UnknownLayout {
            name: text_arg::shown(name.bytes(), 63),
        })
        .report()
    })
}

#[inline]
fn time_of(id: i64, layout: &Layout, epoch_unix_ms: i64) -> TimestampWithTimeZone {
    let decoded = layout.decode(id).or_report();
    layout
        .unix_ms(decoded.time, epoch_unix_ms)
        .and_then(timestamp_of_unix_ms)
        .unwrap_or_else(|| {
            IdError::from(LayoutError::TimeOutsideTimestamp {
                layout: layout.name,
            })
            .report()
        })
}

#[pg_extern(immutable, parallel_safe, name = "id_timestamp")]
fn id_timestamp_in(id: i64, layout: Text) -> TimestampWithTimeZone {
    let layout = self::layout(layout);
    time_of(id, layout, layout.epoch_unix_ms)
}

#[pg_extern(immutable, parallel_safe, name = "id_timestamp")]
fn id_timestamp_in_epoch(
    id: i64,
    layout: Text,
    epoch: TimestampWithTimeZone,
) -> TimestampWithTimeZone {
    time_of(id, self::layout(layout), epoch_unix_ms(epoch))
}

#[pg_extern(immutable, parallel_safe)]
fn id_fields(id: i64, layout: Text) -> Jsonb {
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

fmgr::pg_function_info_v1!(pg_finfo_id_decode_layout);

/// `id_decode(id, layout [, epoch], OUT ts, OUT fields)`: the time and the fields as one
/// record. Written by hand rather than as an SQL function over `id_timestamp` and `id_fields`
/// because PostgreSQL never inlines a STRICT function returning a record, and calling an SQL
/// function costs more than the decoding itself; pgrx 0.18 has no
/// return type for a record of OUT parameters.
///
/// # Safety
/// Called by PostgreSQL's fmgr with the arguments its declarations in sql/id/other_ids.sql
/// give (STRICT, so none is NULL).
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn id_decode_layout(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: fmgr passes the declared arguments, none NULL (STRICT).
    let (id, name, epoch, flinfo) = unsafe {
        (
            pgrx::fcinfo::pg_getarg::<i64>(fcinfo, 0).expect("STRICT"),
            pgrx::fcinfo::pg_getarg::<Text>(fcinfo, 1).expect("STRICT"),
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

#[pg_extern(volatile, parallel_unsafe, name = "next_id")]
fn next_id_in(node: i32, seq: Regclass, layout: Text) -> i64 {
    let layout = self::layout(layout);
    next_in(node, seq, layout, layout.epoch_unix_ms)
}

#[pg_extern(volatile, parallel_unsafe, name = "next_id")]
fn next_id_in_epoch(node: i32, seq: Regclass, layout: Text, epoch: TimestampWithTimeZone) -> i64 {
    let epoch_unix_ms = epoch_unix_ms(epoch);
    let clock_unix_ms = clock_unix_ms();
    if epoch_unix_ms > clock_unix_ms {
        IdError::from(LayoutError::FutureEpoch {
            epoch_unix_ms,
            clock_unix_ms,
        })
        .report()
    }
    next_in(node, seq, self::layout(layout), epoch_unix_ms)
}

fn next_in(node: i32, seq: Regclass, layout: &Layout, epoch_unix_ms: i64) -> i64 {
    let shape = layout.generated().or_report();
    let node = layout.check_node(&shape, node).or_report();
    generator::issue(&shape, epoch_unix_ms, Node::Given(node), seq.0).or_report()
}

#[pg_extern(immutable, parallel_safe)]
fn uuid_timestamp(id: pgrx::Uuid) -> TimestampWithTimeZone {
    let unix_us = wide_ids::uuid_unix_us(id.as_bytes()).or_report();
    timestamp_of_unix_us(unix_us).expect("v1/v6/v7 times fit")
}

#[pg_extern(immutable, parallel_safe)]
fn ulid_timestamp(ulid: Text) -> TimestampWithTimeZone {
    time_in_text(ulid, wide_ids::ulid_unix_ms, 1)
}

#[pg_extern(immutable, parallel_safe)]
fn objectid_timestamp(objectid: Text) -> TimestampWithTimeZone {
    time_in_text(objectid, wide_ids::objectid_unix_s, 1000)
}

/// The time a ULID's or ObjectID's text holds, read by `parse` in units of `unit_ms`.
fn time_in_text(
    text: Text,
    parse: fn(&[u8]) -> Result<i64, WideIdError>,
    unit_ms: i64,
) -> TimestampWithTimeZone {
    let units = parse(text.bytes())
        .map_err(|e| wide_error(e, text))
        .or_report();
    timestamp_of_unix_ms(units * unit_ms).expect("48-bit ms and 32-bit seconds fit")
}

/// A ULID's or ObjectID's error, with the character it names as a message shows it.
fn wide_error(error: WideIdError, text: Text) -> IdError {
    let character = match error {
        WideIdError::BadCharacter { position, .. } => text_arg::char_at(text.bytes(), position - 1),
        _ => String::new(),
    };
    IdError::Wide { error, character }
}

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
