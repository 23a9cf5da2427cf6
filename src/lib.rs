//! snowflake_id: Instagram-style 64-bit, time-sortable IDs minted inside PostgreSQL.
//!
//! The SQL surface, one screen: each function converts types and hands the work to plain
//! Rust (`layout`, the bit arithmetic; `generator`, the ID generator). Errors become
//! PostgreSQL errors with their SQLSTATE in `error`.

use pgrx::prelude::*;

mod conninfo;
pub mod error;
mod fmgr;
pub mod generator;
pub mod layout;
pub mod layouts;
pub mod mask;
mod pg_mirror;
mod sequence_cache;
pub mod sequence_state;
pub mod sql_apps;
pub mod sql_layouts;
mod template_read;
pub mod text_form;
pub mod wide_ids;

use error::OrReport;
use sequence_state::PG_EPOCH_UNIX_MS;

::pgrx::pg_module_magic!(name, version);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    generator::init();
    sql_apps::init();
}

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
unsafe impl<'fcx> pgrx::callconv::ArgAbi<'fcx> for Regclass {
    unsafe fn unbox_arg_unchecked(arg: pgrx::callconv::Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe { arg.unbox_arg_using_from_datum() }
            .unwrap_or_else(|| panic!("argument {index} must not be null"))
    }
}

pgrx::impl_sql_translatable!(Regclass, arg_only = "regclass");

fn unix_ms_of(ts: TimestampWithTimeZone) -> i64 {
    // ±infinity become i64::MAX/MIN, which fail the layout's range check and are named
    // as infinity in its message.
    if ts.is_infinity() {
        return i64::MAX;
    }
    if ts.is_neg_infinity() {
        return i64::MIN;
    }
    // Floor, so that a time is truncated to its millisecond.
    ts.into_inner()
        .div_euclid(1000)
        .saturating_add(PG_EPOCH_UNIX_MS)
}

fn timestamp_of(unix_ms: i64) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from((unix_ms - PG_EPOCH_UNIX_MS) * 1000)
        .unwrap_or_else(|_| error!("ID time {unix_ms} ms is outside PostgreSQL's timestamp range"))
}

fn parts(id: i64) -> layout::Parts {
    layout::decompose(id).or_report()
}

// `next_id`'s two column-default forms are plain version-1 fmgr functions, as C writes them,
// rather than `#[pg_extern]`s: called once per INSERT, after the rest of the INSERT has
// evicted their code from the CPU's caches, their cost there is mostly the code they touch,
// and pgrx's generic wrapper (argument iterator, memory-context switch, return boxing, each
// a function of its own elsewhere in the library) touches more code than the work itself. `#[pg_guard]` still turns a
// panic into an ERROR. Their SQL declarations (the `next_id` blocks below) are what
// `#[pg_extern]` wrote for them.

fmgr::pg_function_info_v1!(pg_finfo_next_id_wrapper);
/// Next ID for a logical shard (0-8191) from a sequence: ms since 2011-08-24 21:07:01.721 UTC << 23 | shard << 10 | counter; never repeats, strictly increases per sequence.
///
/// # Safety
/// Called by PostgreSQL's fmgr, as `next_id(shard integer, seq regclass)`, STRICT.
#[pg_guard]
#[no_mangle]
pub unsafe extern "C-unwind" fn next_id_wrapper(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the caller's.
    let (shard, seq) = unsafe { (fmgr::arg_i32(fcinfo, 0), fmgr::arg_oid(fcinfo, 1)) };
    generator::next_id(shard, seq).or_report().into()
}

fmgr::pg_function_info_v1!(pg_finfo_next_id_continuing_wrapper);
/// Next ID from a shard's sequence, for the shard of the newest ID it holds (create_shard sets it; or setval(seq, make_id(now(), shard))): next_id(shard, seq) without restating the shard.
///
/// # Safety
/// Called by PostgreSQL's fmgr, as `next_id(seq regclass)`, STRICT.
#[pg_guard]
#[no_mangle]
pub unsafe extern "C-unwind" fn next_id_continuing_wrapper(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: the caller's.
    let seq = unsafe { fmgr::arg_oid(fcinfo, 0) };
    generator::next_id_continuing(seq).or_report().into()
}

extension_sql!(
    r#"
CREATE FUNCTION next_id(shard integer, seq regclass) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'next_id_wrapper';
"#,
    name = "next_id"
);

extension_sql!(
    r#"
CREATE FUNCTION next_id(seq regclass) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'next_id_continuing_wrapper';
"#,
    name = "next_id_continuing"
);

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

// The per-schema shard installer (create_shard, create_shards, drop_shard, snowflake_id_shards).
extension_sql_file!(
    "../sql/installer.sql",
    name = "installer",
    requires = ["next_id", make_id, "template_read"]
);

// The node side of snowflake_id_router's protocol (schema snowflake_id_node).
extension_sql_file!("../sql/node.sql", name = "node", requires = ["installer"]);
// What the router's node_status, shard_status and rebalancer read on a node.
extension_sql_file!(
    "../sql/node_status.sql",
    name = "node_status",
    requires = ["node", "installer", id_timestamp, make_id]
);

extension_sql!(
    r#"
COMMENT ON FUNCTION next_id(integer, regclass) IS
  'Next ID for a logical shard (0-8191) from a sequence: ms since 2011-08-24 21:07:01.721 UTC << 23 | shard << 10 | counter; never repeats, strictly increases per sequence.';
COMMENT ON FUNCTION next_id(regclass) IS
  'Next ID from a shard''s sequence, for the shard of the newest ID it holds (create_shard sets it; or setval(seq, make_id(now(), shard))): next_id(shard, seq) without restating the shard.';
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
    use crate::layout;
    use pgrx::prelude::*;

    fn one_i64(sql: &str) -> i64 {
        Spi::get_one::<i64>(sql).unwrap().unwrap()
    }

    #[pg_test]
    fn sql_and_the_pure_layout_agree() {
        let cases = [
            (0, 0, 0),
            (1, 1, 1),
            (1_387_263_000, 1341, 905),
            (layout::MAX_MS, 8191, 1023),
            (123_456_789_012, 4096, 512),
        ];
        for (ms, shard, seq) in cases {
            let id = layout::compose(ms, shard, seq).unwrap();
            let unix_ms = ms + layout::EPOCH_UNIX_MS;
            let sql = format!("SELECT make_id(to_timestamp({unix_ms} / 1000.0), {shard}, {seq})");
            assert_eq!(one_i64(&sql), id, "{sql}");
            let back = format!("SELECT (extract(epoch FROM id_timestamp({id})) * 1000)::bigint");
            assert_eq!(one_i64(&back), unix_ms);
            assert_eq!(one_i64(&format!("SELECT id_shard({id})::bigint")), shard);
            assert_eq!(one_i64(&format!("SELECT id_sequence({id})::bigint")), seq);
        }
    }

    #[pg_test]
    fn interleaved_sequences_each_keep_their_own_state() {
        // Calls alternate between two sequences (each call misses the per-backend cache's
        // latest entry) and move among each sequence's own shards: a of 0-2, b of 3-5 (IDs
        // of one shard come from one sequence; two sequences issuing for the same shard may
        // well repeat each other's IDs). Each sequence's IDs must strictly increase in call
        // order and its state must be its own newest ID, so all 20,000 are distinct.
        Spi::run("CREATE SEQUENCE a; CREATE SEQUENCE b").unwrap();
        Spi::run(
            "CREATE TEMP TABLE calls AS
               SELECT g, s, next_id(s * 3 + g % 3, CASE s WHEN 0 THEN 'a' ELSE 'b' END::regclass) id
               FROM generate_series(1, 20000) g, LATERAL (SELECT g % 2 AS s) x",
        )
        .unwrap();
        assert_eq!(one_i64("SELECT count(DISTINCT id) FROM calls"), 20000);
        let out_of_order =
            "SELECT count(*) FROM (SELECT id, lag(id) OVER (PARTITION BY s ORDER BY g) AS prev
                              FROM calls) x WHERE id <= prev";
        assert_eq!(one_i64(out_of_order), 0);
        for (seq, s) in [("a", 0), ("b", 1)] {
            let newest = format!("SELECT max(id) FROM calls WHERE s = {s}");
            let held = format!("SELECT last_value FROM {seq}");
            assert_eq!(one_i64(&held), one_i64(&newest), "{seq}");
        }
    }

    #[pg_test]
    #[should_panic(expected = "cannot hold snowflake IDs")]
    fn altering_a_sequence_is_seen_by_the_next_statement() {
        // The per-statement check cache must notice our own transaction's ALTER SEQUENCE.
        Spi::run("CREATE SEQUENCE shrinks").unwrap();
        assert!(one_i64("SELECT next_id(1, 'shrinks')") > 0);
        Spi::run("ALTER SEQUENCE shrinks AS integer RESTART 1").unwrap();
        one_i64("SELECT next_id(1, 'shrinks')");
    }

    #[pg_test]
    #[should_panic(expected = "is not a sequence")]
    fn a_table_is_not_a_sequence() {
        Spi::run("CREATE TABLE not_seq (x int)").unwrap();
        one_i64("SELECT next_id(1, 'not_seq')");
    }

    #[pg_test]
    fn waiting_paces_a_saturated_shard_to_the_clock() {
        Spi::run("SET snowflake_id.max_lead = 0; CREATE SEQUENCE paced").unwrap();
        // 10,240 IDs need at least 10 ms of ID time; without borrowing ahead, the statement
        // cannot finish before the clock has reached the last ID's millisecond (less the
        // one being waited for).
        let behind = Spi::get_one::<bool>(
            "WITH ids AS (SELECT next_id(2, 'paced') id FROM generate_series(1, 10240))
             SELECT max(id_timestamp(id)) <= clock_timestamp() + interval '1 ms'
                AND count(DISTINCT id_timestamp(id)) >= 10 FROM ids",
        );
        assert_eq!(behind, Ok(Some(true)));
    }
}

/// Every `COMMENT ON FUNCTION` is its function's doc comment, word for word.
#[cfg(test)]
mod comment_tests {
    #[test]
    fn comments_are_the_doc_comments() {
        let src = include_str!("lib.rs");
        let lines: Vec<&str> = src.lines().collect();
        let mut checked = 0;
        for (i, line) in lines.iter().enumerate() {
            // A #[pg_extern] `fn name(`, or a function written out for fmgr,
            // `pub unsafe extern "C-unwind" fn symbol(`, whose SQL name is that of the
            // CREATE FUNCTION naming its symbol.
            let (name, attr) = if let Some(symbol) = line
                .strip_prefix("pub unsafe extern \"C-unwind\" fn ")
                .and_then(|l| l.split('(').next())
            {
                let declared = &src[..src.find(&format!("'MODULE_PATHNAME', '{symbol}'")).unwrap()];
                let create = &declared[declared.rfind("CREATE FUNCTION ").unwrap() + 16..];
                (&create[..create.find('(').unwrap()], "")
            } else if let Some(name) = line.strip_prefix("fn ").and_then(|l| l.split('(').next()) {
                let attr = lines[i - 1];
                if !attr.starts_with("#[pg_extern") {
                    continue;
                }
                (name, attr)
            } else {
                continue;
            };
            // The SQL name: `name = "..."` in the attribute, else the one found above.
            let name = attr
                .split("name = \"")
                .nth(1)
                .and_then(|n| n.split('"').next())
                .unwrap_or(name);
            // The first line of the doc comment above the attributes.
            let mut above = i - 1;
            while lines[above].starts_with("#[") {
                above -= 1;
            }
            while lines[above - 1].starts_with("///") {
                above -= 1;
            }
            let doc = lines[above].trim_start_matches("/// ");
            let comment = format!("COMMENT ON FUNCTION {name}(");
            let found = src.match_indices(&comment).any(|(at, _)| {
                let text = &src[at..];
                let quoted = &text[text.find('\'').unwrap() + 1..];
                quoted[..quoted.find("';").unwrap()].replace("''", "'") == doc
            });
            assert!(found, "no COMMENT of {name} says: {doc}");
            checked += 1;
        }
        assert_eq!(
            checked, 6,
            "each of the 6 SQL functions written in Rust here has its doc comment right above it"
        );
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
