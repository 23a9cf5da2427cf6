//! snowflake_id: Instagram-style 64-bit, time-sortable IDs minted inside PostgreSQL.
//!
//! The SQL surface, one screen: each function converts types and hands the work to plain
//! Rust (`layout`, the bit arithmetic; `generator`, the ID generator). Errors become
//! PostgreSQL errors with their SQLSTATE in `error`.

use pgrx::prelude::*;

pub mod error;
pub mod generator;
pub mod layout;
pub mod sequence_state;

use error::OrReport;

::pgrx::pg_module_magic!(name, version);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    generator::init();
}

/// A `regclass` argument taken as the bare OID: `next_id` locks and opens the sequence
/// itself, as `nextval()` does, rather than having it opened for every call.
pub struct Regclass(pg_sys::Oid);

impl FromDatum for Regclass {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _: pg_sys::Oid) -> Option<Self> {
        (!is_null).then(|| Regclass(pg_sys::Oid::from(datum.value() as u32)))
    }
}

// SAFETY: a regclass datum is an OID by value, exactly what FromDatum reads.
unsafe impl<'fcx> pgrx::callconv::ArgAbi<'fcx> for Regclass {
    unsafe fn unbox_arg_unchecked(arg: pgrx::callconv::Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe { arg.unbox_arg_using_from_datum() }.unwrap_or_else(|| panic!("argument {index} must not be null"))
    }
}

pgrx::impl_sql_translatable!(Regclass, arg_only = "regclass");

/// Milliseconds between 1970-01-01 and PostgreSQL's epoch, 2000-01-01 (both UTC).
const PG_EPOCH_UNIX_MS: i64 = 946_684_800_000;

fn unix_ms_of(ts: TimestampWithTimeZone) -> i64 {
    // Floor, so that a time is truncated to its millisecond; ±infinity saturate and fail
    // the layout's range check.
    ts.into_inner().div_euclid(1000).saturating_add(PG_EPOCH_UNIX_MS)
}

fn timestamp_of(unix_ms: i64) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from((unix_ms - PG_EPOCH_UNIX_MS) * 1000)
        .unwrap_or_else(|_| error!("ID time {unix_ms} ms is outside PostgreSQL's timestamp range"))
}

fn parts(id: i64) -> layout::Parts {
    layout::decompose(id).or_report()
}

/// Next ID for a logical shard (0-8191) from a sequence: ms since 2011-08-24 21:07:01.721 UTC << 23 | shard << 10 | counter; never repeats, strictly increases per sequence.
#[pg_extern(volatile, parallel_unsafe)]
fn next_id(shard: i32, seq: Regclass) -> i64 {
    generator::next_id(shard, seq.0).or_report()
}

/// Time an ID was made, exact to the millisecond.
#[pg_extern(immutable, parallel_safe)]
fn id_timestamp(id: i64) -> TimestampWithTimeZone {
    timestamp_of(parts(id).ms + layout::EPOCH_UNIX_MS)
}

/// Logical shard (0-8191) an ID was made for.
#[pg_extern(immutable, parallel_safe)]
fn id_shard(id: i64) -> i32 {
    parts(id).shard
}

/// Per-shard counter (0-1023) of an ID within its millisecond.
#[pg_extern(immutable, parallel_safe)]
fn id_sequence(id: i64) -> i32 {
    parts(id).seq
}

/// The ID for a time (truncated to its millisecond), shard and counter; make_id(ts) is the smallest ID of that millisecond, for ranges and partition bounds.
#[pg_extern(immutable, parallel_safe)]
fn make_id(ts: TimestampWithTimeZone, shard: default!(i32, 0), seq: default!(i32, 0)) -> i64 {
    let ms = layout::ms_since_epoch(unix_ms_of(ts)).or_report();
    layout::compose(ms, shard as i64, seq as i64).or_report()
}

extension_sql!(
    r#"
CREATE FUNCTION id_decode(id bigint, OUT ts timestamptz, OUT shard integer, OUT seq integer)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (@extschema@.id_timestamp(id), @extschema@.id_shard(id), @extschema@.id_sequence(id));
"#,
    name = "id_decode",
    requires = [id_timestamp, id_shard, id_sequence]
);

extension_sql!(
    r#"
COMMENT ON FUNCTION next_id(integer, regclass) IS
  'Next ID for a logical shard (0-8191) from a sequence: ms since 2011-08-24 21:07:01.721 UTC << 23 | shard << 10 | counter; never repeats, strictly increases per sequence.';
COMMENT ON FUNCTION id_timestamp(bigint) IS 'Time an ID was made, exact to the millisecond.';
COMMENT ON FUNCTION id_shard(bigint) IS 'Logical shard (0-8191) an ID was made for.';
COMMENT ON FUNCTION id_sequence(bigint) IS 'Per-shard counter (0-1023) of an ID within its millisecond.';
COMMENT ON FUNCTION id_decode(bigint) IS 'An ID taken apart: its time (exact to the millisecond), shard and counter.';
COMMENT ON FUNCTION make_id(timestamptz, integer, integer) IS
  'The ID for a time (truncated to its millisecond), shard and counter; make_id(ts) is the smallest ID of that millisecond, for ranges and partition bounds.';
"#,
    name = "comments",
    finalize
);

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn smoke() {
        Spi::run("CREATE SEQUENCE s").unwrap();
        let a = Spi::get_one::<i64>("SELECT next_id(5, 's')").unwrap().unwrap();
        let b = Spi::get_one::<i64>("SELECT next_id(5, 's')").unwrap().unwrap();
        assert!(b > a);
        assert_eq!(Spi::get_one::<i32>(&format!("SELECT id_shard({b})")).unwrap(), Some(5));
    }
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
