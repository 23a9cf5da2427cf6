-- Many sequences in one session: what next_id remembers per sequence (its lock, its checks,
-- the buffer and file of its page) never mixes two sequences up, and follows a sequence to
-- its new file when ALTER SEQUENCE ... RESTART or TRUNCATE ... RESTART IDENTITY gives it one.
SET timezone = 'UTC';
\set VERBOSITY sqlstate
CREATE SCHEMA many;
CREATE SEQUENCE many.s0; CREATE SEQUENCE many.s1; CREATE SEQUENCE many.s2; CREATE SEQUENCE many.s3;
-- 4 sequences in rotation, call after call, each on its own shard: per sequence, IDs
-- strictly increase in issue order and the sequence's last_value is its newest ID.
CREATE TABLE many.ids AS
  SELECT g AS n, g % 4 AS k, next_id(g % 4, ('{many.s0,many.s1,many.s2,many.s3}'::regclass[])[g % 4 + 1]) AS id
    FROM generate_series(1, 40000) g;
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids, bool_and(id_shard(id) = k) AS shard_of_its_sequence
  FROM many.ids;
SELECT count(*) AS out_of_order
  FROM (SELECT id, lag(id) OVER (PARTITION BY k ORDER BY n) AS prev FROM many.ids) x
 WHERE id <= prev;
SELECT k, max(id) = CASE k WHEN 0 THEN (SELECT last_value FROM many.s0) WHEN 1 THEN (SELECT last_value FROM many.s1)
                           WHEN 2 THEN (SELECT last_value FROM many.s2) ELSE (SELECT last_value FROM many.s3) END
       AS last_value_is_newest
  FROM many.ids GROUP BY k ORDER BY k;
-- ALTER SEQUENCE ... RESTART (committed, between statements of this session) gives s1 a new
-- file: the next ID must be written there (last_value shows it), not into the old page.
SELECT next_id(1, 'many.s1') > 0 AS warm;
ALTER SEQUENCE many.s1 RESTART;
SELECT last_value = 1 AND NOT is_called AS restarted FROM many.s1;
SELECT next_id(1, 'many.s1') = (SELECT last_value FROM many.s1) AS written_to_the_new_file;
-- The same in one transaction, with the other sequences used in between.
BEGIN;
SELECT next_id(2, 'many.s2') > 0 AS warm, next_id(3, 'many.s3') > 0 AS warm;
ALTER SEQUENCE many.s2 RESTART;
SELECT next_id(3, 'many.s3') > 0 AS other, next_id(2, 'many.s2') = (SELECT last_value FROM many.s2) AS written_to_the_new_file;
COMMIT;
SELECT next_id(2, 'many.s2') = (SELECT last_value FROM many.s2) AS still_the_new_file;
-- TRUNCATE ... RESTART IDENTITY of a table owning the sequence, also a new file.
CREATE TABLE many.owner (id bigint);
ALTER SEQUENCE many.s0 OWNED BY many.owner.id;
SELECT next_id(0, 'many.s0') > 0 AS warm;
TRUNCATE many.owner RESTART IDENTITY;
SELECT next_id(0, 'many.s0') = (SELECT last_value FROM many.s0) AS written_to_the_new_file;
-- A sequence dropped and another created (likely in the freed buffer): no confusion.
SELECT next_id(3, 'many.s3') > 0 AS warm;
DROP SEQUENCE many.s3;
CREATE SEQUENCE many.s3;
SELECT next_id(3, 'many.s3') = (SELECT last_value FROM many.s3) AS written_to_the_new_sequence;
SELECT next_id(3, 'many.dropped');
DROP SCHEMA many CASCADE;
