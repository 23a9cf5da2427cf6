-- Decoders and make_id: exact arithmetic, full ranges, SQLSTATE 22003 outside them.
SET timezone = 'UTC';
\set VERBOSITY sqlstate
-- Instagram's worked example: 1387263000 ms after the epoch, shard 1341, counter 5001 % 1024.
SELECT make_id(timestamptz '2011-08-24 21:07:01.721+00' + interval '1387263000 ms', 1341, 5001 % 1024) AS id,
       (1387263000::bigint << 23) | (1341 << 10) | (5001 % 1024) AS expected;
SELECT * FROM id_decode((1387263000::bigint << 23) | (1341 << 10) | 905);
-- The epoch is ID 0; the horizon is the largest bigint.
SELECT make_id('2011-08-24 21:07:01.721+00') AS epoch_id, id_timestamp(0) AS epoch;
SELECT make_id('2046-06-27 17:00:49.496+00', 8191, 1023) AS horizon_id,
       id_timestamp(9223372036854775807) AS horizon;
-- Masks, not sign-extending shifts: shard 8191 and counter 1023 decode as themselves,
-- where the popular (id << 41) >> 51 decoder goes negative.
SELECT id_shard(9223372036854775807) AS shard, id_sequence(9223372036854775807) AS seq,
       (9223372036854775807 << 41) >> 51 AS sign_extending_shard;
SELECT id_shard(make_id('2024-01-01', 4096, 512)) AS shard, id_sequence(make_id('2024-01-01', 4096, 512)) AS seq;
-- Millisecond exactness: a time is truncated to its millisecond, and decodes back exactly.
SELECT make_id('2024-01-01 00:00:00.0009+00') = make_id('2024-01-01') AS truncated,
       id_timestamp(make_id('2024-05-06 07:08:09.123456+00', 7, 9)) AS decoded;
SELECT count(*) AS round_trip_failures
  FROM generate_series(timestamptz '2011-08-24 21:07:01.721+00', '2046-06-27', interval '1234567 seconds 891 ms') ts
 WHERE id_timestamp(make_id(ts, 77, 3)) <> ts OR id_shard(make_id(ts, 77, 3)) <> 77
    OR id_sequence(make_id(ts, 77, 3)) <> 3;
-- IDs sort by time first: make_id(ts) is the smallest ID of its millisecond.
SELECT make_id('2024-01-01 00:00:00.001+00') - 1 = make_id('2024-01-01', 8191, 1023) AS contiguous;
-- Out of range: 22003, with the valid range in the message.
\set VERBOSITY default
SELECT make_id('2046-06-27 17:00:49.497+00');
SELECT make_id('2011-08-24 21:07:01.720+00');
SELECT make_id('2024-01-01', 8192);
SELECT make_id('2024-01-01', -1);
SELECT make_id('2024-01-01', 0, 1024);
SELECT id_timestamp(-1);
\set VERBOSITY sqlstate
SELECT make_id('infinity');
SELECT make_id('-infinity');
SELECT make_id('2024-01-01', 0, -1);
SELECT id_shard(-9223372036854775808);
SELECT id_sequence(-1);
SELECT * FROM id_decode(-42);
-- STRICT: NULL in, NULL out.
SELECT id_timestamp(NULL) IS NULL AS a, make_id(NULL) IS NULL AS b, make_id('2024-01-01', NULL) IS NULL AS c;
-- IMMUTABLE: usable in expression indexes, and make_id() folds to a constant so that a time
-- window is an index range scan on the primary key.
CREATE TABLE events (id bigint PRIMARY KEY, body text);
CREATE INDEX events_shard ON events (id_shard(id));
INSERT INTO events SELECT make_id(timestamptz '2024-01-01' + g * interval '1 hour', g % 16), 'e' || g
  FROM generate_series(0, 24 * 90) g;
ANALYZE events;
EXPLAIN (COSTS OFF) SELECT count(*) FROM events
 WHERE id >= make_id('2024-02-01') AND id < make_id('2024-03-01');
SELECT count(*) AS february_events FROM events
 WHERE id >= make_id('2024-02-01') AND id < make_id('2024-03-01');
SELECT count(*) AS shard_3 FROM events WHERE id_shard(id) = 3;
DROP TABLE events;
