-- Other people's IDs: named 64-bit layouts, Twitter-layout generation, UUID/ULID/ObjectID
-- times. Each layout is checked against an example its owners published (cited below and
-- in docs/other-ids.md's table); errors show their SQLSTATE.
SET timezone = 'UTC';
\set VERBOSITY sqlstate
-- Discord, discord.com/developers/docs/reference#snowflakes: 175928847299117063 is
-- 2016-04-30 11:18:25.796 UTC, internal worker 1, internal process 0, increment 7.
SELECT * FROM id_decode(175928847299117063, 'discord');
SELECT (id_decode(175928847299117063, 'discord')).fields->>'worker' AS worker;
-- Twitter, developer.twitter.com .../data-dictionary/example-payloads: Tweet
-- 1307025659294674945 "created_at": "2020-09-18T18:36:15.000Z" (the API shows seconds).
SELECT * FROM id_decode(1307025659294674945, 'twitter');
-- pgEdge, pgEdge/snowflake docs/snowflake_functions.md: get_epoch(136169504773242881) =
-- 1704996539.845, i.e. 2024-01-11 13:08:59.845-05. Fields by snowflake.c's masks.
SELECT * FROM id_decode(136169504773242881, 'pgedge');
-- Mastodon, docs.joinmastodon.org/entities/Status: "id": "103270115826048975",
-- "created_at": "2019-12-08T03:48:33.901Z" (the ID is stamped at INSERT, 52 ms earlier).
SELECT * FROM id_decode(103270115826048975, 'mastodon');
-- TSID, f4b6a3/tsid-creator README: TSID.from("0123456789ABC") (38390726480144748 as a
-- long) and getInstant() // 2020-04-15T22:31:02.458Z.
SELECT * FROM id_decode(38390726480144748, 'tsid');
-- Instagram, "Sharding & IDs at Instagram": 1387263000 ms after the epoch, shard 1341,
-- counter 905; the named layout and the one-argument decoders agree.
SELECT * FROM id_decode((1387263000::bigint << 23) | (1341 << 10) | 905, 'instagram');
SELECT (SELECT (ts, shard, seq)::text FROM id_decode((1387263000::bigint << 23) | (1341 << 10) | 905)) AS one_argument;
-- Sonyflake (sony/sonyflake publishes no example ID; sonyflake.go's layout): 10 ms units
-- since 2014-09-01 UTC. 2020-01-01 00:00:00.12 UTC, sequence 7, machine 49320.
SELECT * FROM id_decode((16830720012::bigint << 24) | (7 << 16) | 49320, 'sonyflake');
-- Exact to the unit: consecutive time values are one unit apart, in every layout.
SELECT layout, id_timestamp(1::bigint << shift, layout) - id_timestamp(0, layout) AS one_unit
  FROM (VALUES ('instagram', 23), ('twitter', 22), ('discord', 22), ('sonyflake', 24),
               ('pgedge', 22), ('mastodon', 16), ('tsid', 22)) v(layout, shift);
-- The largest bigint: each layout's horizon and all-ones fields (masks, no sign extension).
SELECT layout, d.* FROM unnest(ARRAY['instagram', 'twitter', 'discord', 'sonyflake', 'pgedge', 'mastodon', 'tsid']) layout,
       id_decode(9223372036854775807, layout) d;
-- Layout names are case-insensitive.
SELECT id_timestamp(175928847299117063, 'Discord') = id_timestamp(175928847299117063, 'discord') AS same;
-- A deployment's own epoch: Twitter's layout from 2026-01-01 lasts to 2095.
SELECT id_timestamp(0, 'twitter', '2026-01-01+00') AS epoch,
       id_timestamp(9223372036854775807, 'twitter', '2026-01-01+00') AS horizon;
SELECT * FROM id_decode((1000::bigint << 22) | (3 << 12) | 4, 'twitter', '2026-01-01+00');
-- An epoch anywhere in PostgreSQL's range (4714 BC to 294276 AD): every time it and the ID
-- give is exact up to the last microsecond PostgreSQL holds; one millisecond past it is 22008.
SELECT id_timestamp(0, 'instagram', '294276-12-31 23:59:59+00') AS late_epoch,
       id_timestamp(999::bigint << 23, 'instagram', '294276-12-31 23:59:59+00') AS last_millisecond,
       (id_decode(0, 'discord', '294276-12-31 23:59:59.999+00')).ts AS decoded,
       id_timestamp(0, 'twitter', '4714-11-24 00:00:00+00 BC') AS earliest,
       id_timestamp(1000::bigint << 22, 'twitter', '4714-11-24 00:00:00+00 BC') AS a_second_later;
SELECT id_timestamp(1000::bigint << 23, 'instagram', '294276-12-31 23:59:59+00');
SELECT id_timestamp(1 << 22, 'discord', '294276-12-31 23:59:59.999+00');
SELECT id_timestamp(1 << 24, 'sonyflake', '294276-12-31 23:59:59.999+00');
SELECT id_timestamp(9223372036854775807, 'mastodon', '294276-12-31 23:59:59+00');
-- Agrees with exact integer arithmetic (extract(epoch ...) is numeric) over a spread of IDs
-- covering each layout's whole range, for every layout.
SELECT count(*) AS checked, count(*) FILTER (WHERE extract(epoch FROM id_timestamp(id, layout)) * 1000
                                             <> (id >> shift) * unit + epoch) AS disagreements
  FROM generate_series(0, 9223372036854775807 - 9223372036854775807 / 997, 9223372036854775807 / 997) id,
       (VALUES ('instagram', 23, 1314220021721, 1), ('twitter', 22, 1288834974657, 1),
               ('discord', 22, 1420070400000, 1), ('sonyflake', 24, 1409529600000, 10),
               ('pgedge', 22, 1672531200000, 1), ('mastodon', 16, 0, 1),
               ('tsid', 22, 1577836800000, 1)) v(layout, shift, epoch, unit);

-- Errors: an unknown layout (22023) names the valid ones; a negative ID (22003) names the layout.
\set VERBOSITY default
SELECT id_timestamp(1, 'snowflake');
-- A long name is shortened in the message.
SELECT id_timestamp(1, repeat('x', 100));
SELECT id_timestamp(-1, 'twitter');
SELECT id_fields(-9223372036854775808, 'sonyflake');
SELECT id_timestamp(1, 'twitter', '2026-01-01 00:00:00.0005+00');
\set VERBOSITY sqlstate
SELECT * FROM id_decode(-42, 'tsid');
SELECT id_timestamp(1, '');
SELECT id_timestamp(1, 'twitter', 'infinity');
SELECT id_timestamp(9223372036854775807, 'mastodon', '294000-01-01+00');
-- STRICT: NULL in, NULL out.
SELECT id_timestamp(NULL, 'twitter') IS NULL AS a, id_timestamp(1, NULL) IS NULL AS b,
       id_fields(1, NULL) IS NULL AS c, uuid_timestamp(NULL) IS NULL AS d, ulid_timestamp(NULL) IS NULL AS e;
-- Existing calls keep resolving to the one-argument functions, unknown-typed literals too.
SELECT id_timestamp(123) = id_timestamp(123, 'instagram') AS same, id_timestamp('123') AS literal;
SELECT pg_get_function_identity_arguments(p.oid) AS id_timestamp_overloads
  FROM pg_proc p WHERE p.proname = 'id_timestamp' AND p.pronamespace = 'public'::regnamespace ORDER BY 1;

-- Generation in Twitter's layout: the node in bits 12-21, 4096 per millisecond, strictly
-- increasing, never repeating; mixing layouts on one sequence still increases.
CREATE SEQUENCE tw;
CREATE TEMP TABLE ids AS
  SELECT g, next_id(1023, 'tw', 'twitter', '2026-01-01+00') AS id FROM generate_series(1, 20000) g;
SELECT count(DISTINCT id) = 20000 AS distinct_ids,
       bool_and((id >> 12) & 1023 = 1023) AS node_1023,
       (SELECT count(*) FROM (SELECT id <= lag(id) OVER (ORDER BY g) AS back FROM ids) x WHERE back) AS out_of_order,
       max(id_timestamp(id, 'twitter', '2026-01-01+00')) < clock_timestamp() + interval '1001 ms' AS within_max_lead
  FROM ids;
SELECT next_id(5, 'tw', 'twitter') > (SELECT max(id) FROM ids) AS twitter_epoch_after;
SELECT (next_id(7, 'tw', 'instagram') >> 10) & 8191 AS instagram_shard;
-- Discord's and pgEdge's layouts generate too (node = the fields above the counter); a
-- fresh sequence starts at the clock with counter 0.
CREATE SEQUENCE dc;
CREATE SEQUENCE pe;
SELECT (id_decode(next_id(33, 'dc', 'discord'), 'discord')).fields AS discord_fields,
       (id_decode(next_id(1, 'pe', 'pgedge'), 'pgedge')).fields AS pgedge_fields;
DROP SEQUENCE dc, pe;
-- Errors: a node out of range (22003), a layout next_id does not fill (22023).
\set VERBOSITY default
SELECT next_id(1024, 'tw', 'twitter');
SELECT next_id(1, 'tw', 'sonyflake');
\set VERBOSITY sqlstate
SELECT next_id(-1, 'tw', 'discord');
SELECT next_id(1, 'tw', 'mastodon');
SELECT next_id(1, 'tw', 'twitter', '2026-01-01 00:00:00.0001+00');
-- An epoch later than the clock (a typo: 2062 for 2026) would make IDs claim its time (22023).
SELECT next_id(1, 'tw', 'twitter', '2262-01-01+00');
SELECT next_id(1, 'tw', 'nope');
-- Not a sequence, as next_id(shard, seq).
CREATE TABLE not_seq (x int);
SELECT next_id(1, 'not_seq', 'twitter');
DROP TABLE not_seq;
DROP SEQUENCE tw;

-- UUIDs: RFC 9562 Appendix A's test vectors, all 2022-02-22 19:22:22 UTC.
SELECT uuid_timestamp('C232AB00-9414-11EC-B3C8-9F6BDECED846') AS v1,
       uuid_timestamp('1EC9414C-232A-6B00-B3C8-9F6BDECED846') AS v6,
       uuid_timestamp('017F22E2-79B0-7CC3-98C4-DC0C0C07398F') AS v7;
-- v1/v6 count 100 ns: shown to the microsecond, truncated.
SELECT uuid_timestamp('1EC9414C-232A-6B00-B3C8-9F6BDECED846'::uuid) AS whole,
       uuid_timestamp('1EC9414C-232A-6B09-B3C8-9F6BDECED846'::uuid) AS plus_9_ticks,
       uuid_timestamp('1EC9414C-232A-6B0A-B3C8-9F6BDECED846'::uuid) AS plus_10_ticks;
-- Versions without a time: 22023 (RFC 9562 A.3's v4, A.4's v5, the nil UUID).
\set VERBOSITY default
SELECT uuid_timestamp('919108F7-52D1-4320-9BAC-F847DB4148A8');
SELECT uuid_timestamp('00000000-0000-0000-0000-000000000000');
\set VERBOSITY sqlstate
SELECT uuid_timestamp('5DF41881-3AED-5515-88A7-2F4A814CF09E');
SELECT uuid_timestamp(gen_random_uuid());
-- ULID, ulid/javascript README: ulid(1469918176385) // 01ARYZ6S41TSV4RRFFQ69G5FAV.
SELECT ulid_timestamp('01ARYZ6S41TSV4RRFFQ69G5FAV') AS ulid,
       ulid_timestamp('01aryz6s41tsv4rrffq69g5fav') AS lower_case,
       ulid_timestamp('7ZZZZZZZZZZZZZZZZZZZZZZZZZ') AS largest;
-- Bad ULID text: 22P02 naming the character.
\set VERBOSITY default
SELECT ulid_timestamp('01ARYZ6S41TSV4RRFFQ69G5FAU');
SELECT ulid_timestamp('01ARYZ6S41');
SELECT ulid_timestamp('8ZZZZZZZZZZZZZZZZZZZZZZZZZ');
\set VERBOSITY sqlstate
SELECT ulid_timestamp('01ARYZ6S41TSV4RRFFQ69G5FAI');
SELECT ulid_timestamp('01ARYZ6S41TSV4RRFFQ69G5FA✓');
SELECT ulid_timestamp('');
-- MongoDB, mongodb.com/docs/manual/reference/method/ObjectId.getTimestamp:
-- ObjectId("507c7f79bcf86cd7994f6c0e").getTimestamp() is ISODate("2012-10-15T21:26:17Z").
SELECT objectid_timestamp('507c7f79bcf86cd7994f6c0e') AS objectid,
       objectid_timestamp('507C7F79BCF86CD7994F6C0E') AS upper_case,
       objectid_timestamp('ffffffffffffffffffffffff') AS largest;
\set VERBOSITY default
SELECT objectid_timestamp('507c7f79bcf86cd7994f6c0g');
\set VERBOSITY sqlstate
SELECT objectid_timestamp('507c7f79bcf86cd7994f6c0');
SELECT objectid_timestamp('ObjectId("507c7f79bcf86cd7994f6c0e")');

-- IMMUTABLE: usable in an expression index on Discord IDs, and folded to constants.
CREATE TABLE messages (id bigint PRIMARY KEY);
CREATE INDEX messages_time ON messages (id_timestamp(id, 'discord'));
INSERT INTO messages SELECT (g::bigint * 86400000) << 22 FROM generate_series(0, 3000) g;
ANALYZE messages;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM messages WHERE id_timestamp(id, 'discord') >= '2016-01-01';
RESET enable_seqscan;
SELECT count(*) AS since_2016 FROM messages WHERE id_timestamp(id, 'discord') >= '2016-01-01';
DROP TABLE messages;
