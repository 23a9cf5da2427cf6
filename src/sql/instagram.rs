//! The core SQL surface, Instagram's layout: `next_id`, the decoders and `make_id`. Each
//! function converts types and hands the work to the generator (`pg::generator`) or the
//! layout (`id::layouts`); errors carry their SQLSTATE (`pg::error`). What each does for its
//! caller is its `COMMENT` in sql/id/instagram.sql, which also declares the two fmgr functions.

use crate::id::layouts::Decoded;
use crate::id::layouts::INSTAGRAM;
use crate::pg::error::OrReport;
use crate::pg::template_read::TextBytes;
use crate::pg::time::{timestamp_of_unix_ms, unix_ms_of};
use crate::pg::{fmgr, generator};
use pgrx::prelude::*;

fn parts(id: i64) -> Decoded {
    INSTAGRAM.decode(id).or_report()
}

// `next_id`'s two column-default forms are plain version-1 fmgr functions, as C writes them,
// rather than `#[pg_extern]`s: called once per INSERT, after the rest of the INSERT has
// evicted their code from the CPU's caches, their cost there is mostly the code they touch,
// and pgrx's generic wrapper (argument iterator, memory-context switch, return boxing, each
// a function of its own elsewhere in the library) touches more code than the work itself.
// `#[pg_guard]` still turns a panic into an ERROR. Their SQL declarations (sql/id/instagram.sql)
// are what `#[pg_extern]` wrote for them.

fmgr::pg_function_info_v1!(pg_finfo_next_id_wrapper);
/// `next_id(shard integer, seq regclass)`.
///
/// # Safety
/// Called by PostgreSQL's fmgr, as `next_id(shard integer, seq regclass)`, STRICT.
#[pg_guard]
#[no_mangle]
pub unsafe extern "C-unwind" fn next_id_wrapper(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the caller's.
    let (shard, seq) = unsafe { (fmgr::arg_i32(fcinfo, 0), fmgr::arg_oid(fcinfo, 1)) };
    generator::issue_instagram(shard, seq).or_report().into()
}

fmgr::pg_function_info_v1!(pg_finfo_next_id_continuing_wrapper);
/// `next_id(seq regclass)`: the shard is that of the newest ID the sequence holds.
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
    generator::issue_continuing(seq).or_report().into()
}

#[pg_extern(immutable, parallel_safe)]
fn id_timestamp(id: i64) -> TimestampWithTimeZone {
    let unix_ms = parts(id).time + INSTAGRAM.epoch_unix_ms;
    timestamp_of_unix_ms(unix_ms)
        .unwrap_or_else(|| error!("ID time {unix_ms} ms is outside PostgreSQL's timestamp range"))
}

#[pg_extern(immutable, parallel_safe)]
fn id_shard(id: i64) -> i32 {
    parts(id).values[0] as i32
}

#[pg_extern(immutable, parallel_safe)]
fn id_sequence(id: i64) -> i32 {
    parts(id).values[1] as i32
}

#[pg_extern(immutable, parallel_safe)]
fn make_id(ts: TimestampWithTimeZone, shard: default!(i32, 0), seq: default!(i32, 0)) -> i64 {
    let ms = INSTAGRAM.time_of(unix_ms_of(ts)).or_report();
    INSTAGRAM
        .compose(ms, &[shard as i64, seq as i64])
        .or_report()
}

/// `snowflake_id_internal.template_read(template oid)`, declared in sql/installer/installer.sql: the
/// template's tables locked, then read (`pg::template_read`). Its row: kind, rel, name,
/// detail, deps (spelled out: pgrx reads it off the signature).
#[allow(clippy::type_complexity)]
#[pg_extern(sql = false)]
fn template_read(
    template: pg_sys::Oid,
) -> TableIterator<
    'static,
    (
        String,
        Option<pg_sys::Oid>,
        Option<TextBytes>,
        Option<TextBytes>,
        Option<TextBytes>,
    ),
> {
    TableIterator::new(crate::pg::template_read::read(template))
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use crate::id::layouts::INSTAGRAM;
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
            (INSTAGRAM.max_time(), 8191, 1023),
            (123_456_789_012, 4096, 512),
        ];
        for (ms, shard, seq) in cases {
            let id = INSTAGRAM.compose(ms, &[shard, seq]).unwrap();
            let unix_ms = ms + INSTAGRAM.epoch_unix_ms;
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
