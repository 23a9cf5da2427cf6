-- next_id(seq): next_id(shard, seq) for the shard of the newest ID the sequence holds. The
-- shard is part of the sequence's own state, so whatever carries the sequence (setval,
-- pg_dump, replication, a shard move) carries it; a sequence holding a plain counter names
-- no shard and is refused.
SET timezone = 'UTC';
\set VERBOSITY sqlstate
CREATE SEQUENCE one_arg;
-- A new sequence holds a plain counter: 55000, before and after a nextval().
SELECT next_id('one_arg');
SELECT nextval('one_arg');
SELECT next_id('one_arg');
\set VERBOSITY default
SELECT next_id('one_arg');
\set VERBOSITY sqlstate
-- setval(seq, make_id(now(), shard)) gives it its shard, at both ends of the range.
SELECT setval('one_arg', make_id(now(), 9)) > 0 AS set;
SELECT id_shard(next_id('one_arg')) AS shard;
SELECT setval('one_arg', make_id(now(), 8191, 1023)) > 0 AS set;
SELECT id_shard(next_id('one_arg')) AS shard, id_sequence(currval('one_arg')) AS counter;
SELECT setval('one_arg', make_id(now(), 0)) > 0 AS set;
SELECT id_shard(next_id('one_arg')) AS shard;
-- The two forms share one state: mixed call after call, IDs strictly increase, all shard 0.
CREATE TEMP TABLE mixed AS
  SELECT g, CASE WHEN g % 2 = 0 THEN next_id('one_arg') ELSE next_id(0, 'one_arg') END AS id
    FROM generate_series(1, 5000) g;
SELECT count(DISTINCT id) AS distinct_ids, bool_and(id_shard(id) = 0) AS all_shard_0,
       count(*) FILTER (WHERE id <= prev) AS out_of_order
  FROM (SELECT id, lag(id) OVER (ORDER BY g) AS prev FROM mixed) x;
-- A call in another shard moves the sequence to that shard: next_id(seq) follows the newest ID.
SELECT id_shard(next_id(77, 'one_arg')) AS given, id_shard(next_id('one_arg')) AS followed;
-- Reset to a plain counter, it is refused again: never an ID of shard 0 by accident.
SELECT setval('one_arg', 4398046511103);  -- 2^42 - 1
SELECT next_id('one_arg');
SELECT setval('one_arg', 4398046511104);  -- 2^42: an ID (shard 0, 2011-08-24 21:15:46.009)
SELECT id_shard(next_id('one_arg')) AS shard;
-- The checks are next_id(shard, seq)'s: not a sequence (42809), no right on it (42501),
-- a read-only transaction (25006); NULL gives NULL (STRICT).
CREATE TABLE not_a_sequence ();
SELECT next_id('not_a_sequence');
CREATE ROLE one_arg_user;
SET ROLE one_arg_user;
SELECT next_id('one_arg');
RESET ROLE;
BEGIN READ ONLY;
SELECT next_id('one_arg');
ROLLBACK;
SELECT next_id(NULL::regclass) IS NULL AS null_gives_null;
-- A shard made by create_shard: its sequence names the shard, as a column default.
SELECT create_shard('one_arg_shard', 4321);
CREATE TABLE one_arg_shard.t (id bigint PRIMARY KEY DEFAULT next_id('one_arg_shard.table_id_seq'), v int);
INSERT INTO one_arg_shard.t (v) SELECT g FROM generate_series(1, 3000) g;
SELECT count(DISTINCT id) AS distinct_ids, min(id_shard(id)) AS min_shard, max(id_shard(id)) AS max_shard,
       max(id) = (SELECT last_value FROM one_arg_shard.table_id_seq) AS last_value_is_newest
  FROM one_arg_shard.t;
SET client_min_messages = warning;
SELECT drop_shard('one_arg_shard', true);
RESET client_min_messages;
DROP ROLE one_arg_user;
DROP TABLE not_a_sequence;
DROP SEQUENCE one_arg;
