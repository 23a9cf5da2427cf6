//! The layouts' tests: each named layout against an example its owners published, and
//! decode/compose over every layout's whole range.

use super::*;
use proptest::prelude::*;

/// Milliseconds since 1970 of a UTC date and time, for readable test vectors.
fn utc_ms(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64, ms: i64) -> i64 {
    // Days from civil (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 24 + h) * 60 + mi) * 60_000 + s * 1000 + ms
}

fn decode_at(layout: &Layout, id: i64) -> (i64, Vec<i64>) {
    let d = layout.decode(id).unwrap();
    let ms = layout.unix_ms(d.time, layout.epoch_unix_ms).unwrap();
    (ms, d.values[..layout.fields.len()].to_vec())
}

#[test]
fn epochs_are_the_documented_dates() {
    assert_eq!(INSTAGRAM.epoch_unix_ms, utc_ms(2011, 8, 24, 21, 7, 1, 721));
    assert_eq!(TWITTER.epoch_unix_ms, utc_ms(2010, 11, 4, 1, 42, 54, 657));
    assert_eq!(DISCORD.epoch_unix_ms, utc_ms(2015, 1, 1, 0, 0, 0, 0));
    assert_eq!(SONYFLAKE.epoch_unix_ms, utc_ms(2014, 9, 1, 0, 0, 0, 0));
    assert_eq!(PGEDGE.epoch_unix_ms, utc_ms(2023, 1, 1, 0, 0, 0, 0));
    assert_eq!(TSID.epoch_unix_ms, utc_ms(2020, 1, 1, 0, 0, 0, 0));
}

#[test]
fn instagram_numbers() {
    assert_eq!(INSTAGRAM_SHAPE.max_node(), 8191);
    assert_eq!(INSTAGRAM_SHAPE.max_seq(), 1023);
    assert_eq!(INSTAGRAM_SHAPE.time_shift(), 23);
    assert_eq!(INSTAGRAM_SHAPE.max_ms, (1_i64 << 40) - 1);
    // 2046-06-27 17:00:49.496 UTC, the last millisecond of positive IDs.
    let horizon = INSTAGRAM.epoch_unix_ms + INSTAGRAM.max_time();
    assert_eq!(horizon, 2_413_731_649_496);
    assert_eq!(horizon, utc_ms(2046, 6, 27, 17, 0, 49, 496));
    // Twitter's layout with a 2026 epoch lasts until 2095 (2^41 ms is 69.7 years).
    let end = utc_ms(2026, 1, 1, 0, 0, 0, 0) + TWITTER.max_time();
    assert!(end > utc_ms(2095, 1, 1, 0, 0, 0, 0) && end < utc_ms(2096, 1, 1, 0, 0, 0, 0));
}

#[test]
fn instagram_worked_example() {
    // Instagram Engineering, "Sharding & IDs at Instagram": 1387263000 ms after the epoch,
    // shard 1341 (user 31341 on 2000 shards), sequence 5001 % 1024 = 905.
    let id = INSTAGRAM
        .compose(1_387_263_000, &[1341, 5001 % 1024])
        .unwrap();
    assert_eq!(id, 1_387_263_000 << 23 | 1341 << 10 | 905);
    let d = INSTAGRAM.decode(id).unwrap();
    assert_eq!((d.time, d.values), (1_387_263_000, [1341, 905, 0]));
    // The extremes are masked, not sign-extended: the largest bigint is (horizon, 8191, 1023).
    let last = INSTAGRAM.compose(INSTAGRAM.max_time(), &[8191, 1023]);
    assert_eq!(last, Ok(i64::MAX));
    assert_eq!(
        INSTAGRAM.decode(4096 << 10 | 512).unwrap().values,
        [4096, 512, 0]
    );
}

#[test]
fn discord_documented_example() {
    // discord.com/developers/docs/reference#snowflakes: 175928847299117063 is
    // 2016-04-30 11:18:25.796 UTC, internal worker 1, internal process 0, increment 7.
    assert_eq!(
        decode_at(&DISCORD, 175_928_847_299_117_063),
        (utc_ms(2016, 4, 30, 11, 18, 25, 796), vec![1, 0, 7])
    );
}

#[test]
fn twitter_documented_example() {
    // developer.twitter.com/en/docs/twitter-api/data-dictionary/example-payloads: Tweet
    // "id": "1307025659294674945", "created_at": "2020-09-18T18:36:15.000Z" (the API
    // gives whole seconds; the ID holds the millisecond).
    let (ms, fields) = decode_at(&TWITTER, 1_307_025_659_294_674_945);
    assert_eq!(ms, utc_ms(2020, 9, 18, 18, 36, 15, 195));
    assert_eq!(ms / 1000, utc_ms(2020, 9, 18, 18, 36, 15, 0) / 1000);
    assert_eq!(fields, vec![10, 7, 1]);
}

#[test]
fn pgedge_documented_example() {
    // pgEdge/snowflake docs/snowflake_functions.md: snowflake.get_epoch(136169504773242881)
    // is 1704996539.845, to_timestamp of it 2024-01-11 13:08:59.845-05. (That page gives
    // its node as 1 and count as 3 or 0, which matches neither its own README's bit list
    // nor snowflake.c's masks; snowflake.c's masks are what we decode with: node 0,
    // count 1.)
    let (ms, fields) = decode_at(&PGEDGE, 136_169_504_773_242_881);
    assert_eq!(ms, utc_ms(2024, 1, 11, 18, 8, 59, 845));
    assert_eq!(fields, vec![0, 1]);
    // snowflake.c: node << 12 | count.
    assert_eq!(PGEDGE.compose(5, &[1, 2]).unwrap(), 5 << 22 | 1 << 12 | 2);
}

#[test]
fn mastodon_documented_example() {
    // docs.joinmastodon.org/entities/Status, Example: "id": "103270115826048975",
    // "created_at": "2019-12-08T03:48:33.901Z". The ID's time is when the row was
    // inserted, 52 ms before the created_at Rails stamped.
    let (ms, fields) = decode_at(&MASTODON, 103_270_115_826_048_975);
    assert_eq!(ms, utc_ms(2019, 12, 8, 3, 48, 33, 849));
    assert_eq!(fields, vec![103_270_115_826_048_975 & 0xffff]);
}

#[test]
fn tsid_documented_example() {
    // f4b6a3/tsid-creator README, "More Examples": TSID.from("0123456789ABC") and
    // tsid.getInstant() // 2020-04-15T22:31:02.458Z. As a long (Crockford base32 of the
    // 13 characters): 38390726480144748.
    let (ms, _) = decode_at(&TSID, 38_390_726_480_144_748);
    assert_eq!(ms, utc_ms(2020, 4, 15, 22, 31, 2, 458));
}

#[test]
fn sonyflake_units_of_10_ms() {
    // sony/sonyflake publishes no example ID; its code defines one: sonyflake.go
    // composes elapsedTime << (8 + 16) | sequence << 16 | machineID, with elapsed time
    // in 10 ms units since StartTime 2014-09-01 00:00:00 UTC. 2020-01-01 00:00:00.120 UTC
    // is 16,830,720,012 units; sequence 7, machine 0xC0A8.
    let at = utc_ms(2020, 1, 1, 0, 0, 0, 120);
    let units = (at - SONYFLAKE.epoch_unix_ms) / 10;
    let id = units << 24 | 7 << 16 | 0xC0A8;
    assert_eq!(decode_at(&SONYFLAKE, id), (at, vec![7, 0xC0A8]));
    assert_eq!(SONYFLAKE.compose(units, &[7, 0xC0A8]), Ok(id));
}

#[test]
fn names_are_found_case_insensitively_and_unknown_ones_refused() {
    assert_eq!(by_name(b"Discord"), Some(&DISCORD));
    assert_eq!(by_name(b"snowflake"), None);
    assert_eq!(by_name(b"discord\xe9"), None);
    assert_eq!(by_name(&vec![b'x'; 50 << 20]), None);
    assert_eq!(
        names(),
        "instagram, twitter, discord, sonyflake, pgedge, mastodon, tsid"
    );
    assert_eq!(generated_names(), "instagram, twitter, discord, pgedge");
}

#[test]
fn horizons() {
    // 64-bit layouts lose the time's top bit to the sign; 63-bit ones keep all of it.
    assert_eq!(INSTAGRAM.max_time(), (1 << 40) - 1);
    assert_eq!(TWITTER.max_time(), (1 << 41) - 1);
    assert_eq!(SONYFLAKE.max_time(), (1 << 39) - 1);
    assert_eq!(MASTODON.max_time(), (1 << 47) - 1);
    assert_eq!(TSID.max_time(), (1 << 41) - 1);
}

#[test]
fn shapes_are_time_node_counter() {
    let twitter = TWITTER.shape().unwrap();
    assert_eq!((twitter.node_bits, twitter.seq_bits), (10, 12));
    assert_eq!((twitter.max_node(), twitter.max_seq()), (1023, 4095));
    assert_eq!(twitter.time_shift(), 22);
    let instagram = INSTAGRAM.shape().unwrap();
    assert_eq!((instagram.node_bits, instagram.seq_bits), (13, 10));
    assert_eq!(instagram.max_ms, (1 << 40) - 1);
    assert_eq!(SONYFLAKE.shape(), None);
    assert_eq!(
        MASTODON.generated(),
        Err(LayoutError::NotGenerated { layout: "mastodon" })
    );
}

#[test]
fn a_node_is_named_as_its_layout_names_it() {
    let shape = INSTAGRAM.shape().unwrap();
    assert_eq!(INSTAGRAM.check_node(&shape, 8191), Ok(8191));
    assert_eq!(
        INSTAGRAM.check_node(&shape, 8192),
        Err(LayoutError::FieldOutOfRange {
            layout: "instagram",
            field: "shard",
            value: 8192,
            max: 8191
        })
    );
    let shape = TWITTER.shape().unwrap();
    assert_eq!(
        TWITTER.check_node(&shape, -1),
        Err(LayoutError::FieldOutOfRange {
            layout: "twitter",
            field: "node",
            value: -1,
            max: 1023
        })
    );
}

#[test]
fn times_outside_the_layout_are_refused_with_its_epoch_and_horizon() {
    let (epoch, horizon) = (
        INSTAGRAM.epoch_unix_ms,
        INSTAGRAM.epoch_unix_ms + (1 << 40) - 1,
    );
    let refused = |unix_ms| {
        Err(LayoutError::TimeOutOfRange {
            unix_ms,
            epoch_unix_ms: epoch,
            horizon_unix_ms: horizon,
        })
    };
    assert_eq!(INSTAGRAM.time_of(epoch), Ok(0));
    assert_eq!(INSTAGRAM.time_of(horizon), Ok((1 << 40) - 1));
    assert_eq!(INSTAGRAM.time_of(epoch - 1), refused(epoch - 1));
    assert_eq!(INSTAGRAM.time_of(horizon + 1), refused(horizon + 1));
    assert_eq!(INSTAGRAM.time_of(i64::MAX), refused(i64::MAX));
    assert_eq!(INSTAGRAM.time_of(i64::MIN), refused(i64::MIN));
    assert_eq!(INSTAGRAM.compose(-1, &[0, 0]), refused(epoch - 1));
    assert_eq!(INSTAGRAM.compose(1 << 40, &[0, 0]), refused(horizon + 1));
    // Sonyflake's 10 ms units: a time is rounded down to its unit.
    let sonyflake = SONYFLAKE.epoch_unix_ms;
    assert_eq!(SONYFLAKE.time_of(sonyflake + 19), Ok(1));
}

#[test]
fn negative_ids_are_refused_by_every_layout() {
    for layout in LAYOUTS {
        assert_eq!(layout.decode(-1), Err(LayoutError::NegativeId(-1)));
        assert!(layout.decode(i64::MIN).is_err());
        // The largest bigint decodes to the horizon and all-ones fields.
        let d = layout.decode(i64::MAX).unwrap();
        assert_eq!(d.time, layout.max_time());
        for i in 0..layout.fields.len() {
            assert_eq!(d.values[i], layout.field_max(i));
        }
    }
}

fn layout_strategy() -> impl Strategy<Value = &'static Layout> {
    (0..LAYOUTS.len()).prop_map(|i| LAYOUTS[i])
}

proptest! {
    /// compose -> decode over each layout's whole range: times 0..=max_time, every field
    /// 0..=its max.
    #[test]
    fn compose_decode_round_trip(
        layout in layout_strategy(),
        t in any::<u64>(),
        raw in proptest::array::uniform3(any::<u64>()),
    ) {
        let time = (t % (layout.max_time() as u64 + 1)) as i64;
        let values: Vec<i64> = (0..layout.fields.len())
            .map(|i| (raw[i] % (layout.field_max(i) as u64 + 1)) as i64)
            .collect();
        let id = layout.compose(time, &values).unwrap();
        prop_assert!(id >= 0);
        let d = layout.decode(id).unwrap();
        prop_assert_eq!(d.time, time);
        prop_assert_eq!(&d.values[..layout.fields.len()], &values[..]);
    }

    /// decode -> compose over the whole non-negative bigint range.
    #[test]
    fn decode_compose_round_trip(layout in layout_strategy(), id in 0..=i64::MAX) {
        let d = layout.decode(id).unwrap();
        prop_assert_eq!(layout.compose(d.time, &d.values[..layout.fields.len()]), Ok(id));
    }

    /// Every out-of-range input is refused, naming the layout: negative IDs, times past
    /// the horizon or before the epoch, each field below 0 or above its max.
    #[test]
    fn out_of_range_inputs_are_refused(
        layout in layout_strategy(),
        id in i64::MIN..0,
        over in 1_i64..=i64::MAX / 2,
        which in 0_usize..MAX_FIELDS,
    ) {
        prop_assert_eq!(layout.decode(id), Err(LayoutError::NegativeId(id)));
        let zeros = vec![0; layout.fields.len()];
        let past = layout.max_time().saturating_add(over);
        let refused = |r: Result<i64, LayoutError>| matches!(r, Err(LayoutError::TimeOutOfRange { .. }));
        prop_assert!(refused(layout.compose(past, &zeros)));
        prop_assert!(refused(layout.compose(-over, &zeros)));
        let i = which % layout.fields.len();
        for bad in [-over, layout.field_max(i).saturating_add(over)] {
            let mut values = zeros.clone();
            values[i] = bad;
            prop_assert_eq!(layout.compose(0, &values), Err(LayoutError::FieldOutOfRange {
                layout: layout.name, field: layout.fields[i].name, value: bad, max: layout.field_max(i),
            }));
        }
    }

    /// IDs order like (time, fields...): sorting by ID sorts by time first.
    #[test]
    fn ids_order_like_their_parts(layout in layout_strategy(), a in 0..=i64::MAX, b in 0..=i64::MAX) {
        let (da, db) = (layout.decode(a).unwrap(), layout.decode(b).unwrap());
        prop_assert_eq!(a.cmp(&b), (da.time, da.values).cmp(&(db.time, db.values)));
    }
}
