-- next_id(shard, seq): the generator's guarantees as users rely on them.
SET timezone = 'UTC';
\set VERBOSITY sqlstate
CREATE SCHEMA insta5;
CREATE SEQUENCE insta5.table_id_seq;
CREATE TABLE insta5.our_table (
    id bigint NOT NULL DEFAULT next_id(5, 'insta5.table_id_seq') PRIMARY KEY,
    n bigint NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- One statement of 1,000,000 rows (about 1,000 times a millisecond's 1,024 counters):
-- no duplicate (the primary key would refuse one), issue order strictly increasing, every
-- ID on shard 5, and the ID times within the documented lead of the clock.
SELECT clock_timestamp() AS before_insert \gset
INSERT INTO insta5.our_table (n) SELECT g FROM generate_series(1, 1000000) g;
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids,
       bool_and(id_shard(id) = 5) AS all_shard_5,
       min(id_timestamp(id)) >= :'before_insert'::timestamptz - interval '1 ms' AS not_before_clock,
       max(id_timestamp(id) - at) <= interval '1001 ms' AS lead_within_max_lead
  FROM insta5.our_table;
SELECT count(*) AS out_of_order
  FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev FROM insta5.our_table) x
 WHERE id <= prev;
-- The sequence holds the newest ID; WAL is written 100 ms of ID time ahead of it.
SELECT last_value = (SELECT max(id) FROM insta5.our_table) AS last_value_is_newest_id,
       is_called FROM insta5.table_id_seq;
CHECKPOINT;
SELECT next_id(5, 'insta5.table_id_seq') IS NOT NULL AS issued;
SELECT log_cnt - last_value = 100::bigint << 23 AS logged_100ms_ahead FROM insta5.table_id_seq;
-- Several shards on one sequence still strictly increase (shard 9 then 2 then 9).
CREATE SEQUENCE mixed;
SELECT a < b AND b < c AS increasing, id_shard(a), id_shard(b), id_shard(c)
  FROM (SELECT next_id(9, 'mixed') a) x, LATERAL (SELECT next_id(2, 'mixed') b) y,
       LATERAL (SELECT next_id(9, 'mixed') c) z;
-- Any CACHE setting: next_id does not use the cache.
CREATE SEQUENCE cached CACHE 100;
SELECT count(DISTINCT next_id(1, 'cached')) AS distinct_ids FROM generate_series(1, 5000);
-- A sequence Instagram's PL/pgSQL used holds a small counter: it just works.
CREATE SEQUENCE old_insta;
SELECT setval('old_insta', 5001);
SELECT id_timestamp(next_id(5, 'old_insta')) > now() - interval '1 minute' AS starts_at_the_clock;
-- The clock behind the sequence (a restore onto a server whose clock is an hour behind,
-- or NTP stepping back): IDs continue above the newest, in the same millisecond.
CREATE SEQUENCE ahead;
SELECT make_id(now() + interval '1 hour', 3, 7) AS base \gset
SELECT setval('ahead', :base) = :base AS set_an_hour_ahead;
SELECT next_id(3, 'ahead') = :base + 1 AS continues_above;
-- setval(.., false) means "this value is next", as for nextval.
SELECT make_id(now() + interval '2 hours', 3, 0) AS base \gset
SELECT setval('ahead', :base, false) = :base AS set_not_called;
SELECT next_id(3, 'ahead') = :base AS issues_that_value;
-- Not transactional, like nextval: an ID issued in a rolled-back subtransaction is not reissued.
CREATE SEQUENCE sub;
BEGIN;
SAVEPOINT a;
SELECT next_id(1, 'sub') AS first \gset
ROLLBACK TO a;
SELECT next_id(1, 'sub') > :first AS not_reissued;
COMMIT;
-- Temporary and unlogged sequences work too.
CREATE TEMP SEQUENCE tmp;
CREATE UNLOGGED SEQUENCE unl;
SELECT next_id(1, 'tmp') < next_id(1, 'tmp') AS temp_ok, next_id(1, 'unl') < next_id(1, 'unl') AS unlogged_ok;
-- snowflake_id.max_lead = 0: a saturated shard waits for the clock instead of borrowing,
-- so no ID is ahead of the clock by more than the millisecond being waited for.
SET snowflake_id.max_lead = 0;
CREATE SEQUENCE paced;
CREATE TEMP TABLE paced_ids AS
  SELECT next_id(1, 'paced') AS id, clock_timestamp() AS at FROM generate_series(1, 5000);
SELECT count(DISTINCT id) AS distinct_ids, max(id_timestamp(id) - at) <= interval '1 ms' AS lead_at_most_1ms,
       count(DISTINCT id_timestamp(id)) >= 5 AS used_5_ms_at_least
  FROM paced_ids;
RESET snowflake_id.max_lead;
-- The horizon: the last IDs are issued, then 22003; never a wrap or a negative ID.
CREATE SEQUENCE last_ids;
SELECT setval('last_ids', make_id('2046-06-27 17:00:49.496+00', 5, 1021));
SELECT next_id(5, 'last_ids') = make_id('2046-06-27 17:00:49.496+00', 5, 1022) AS second_to_last;
SELECT next_id(5, 'last_ids') = make_id('2046-06-27 17:00:49.496+00', 5, 1023) AS last;
\set VERBOSITY default
SELECT next_id(5, 'last_ids');
\set VERBOSITY sqlstate
SELECT last_value > 0 AS still_positive FROM last_ids;
-- Errors, each with nextval()'s SQLSTATE.
SELECT next_id(8192, 'insta5.table_id_seq');
SELECT next_id(-1, 'insta5.table_id_seq');
SELECT next_id(5, 'insta5.our_table');
SELECT next_id(5, 'no_such_sequence');
CREATE SEQUENCE small AS integer;
\set VERBOSITY terse
SELECT next_id(5, 'small');
\set VERBOSITY sqlstate
SELECT next_id(5, 'small');
SELECT next_id(NULL, 'small') IS NULL AS strict_shard, next_id(5, NULL) IS NULL AS strict_seq;
BEGIN READ ONLY;
SELECT next_id(5, 'insta5.table_id_seq');
ROLLBACK;
BEGIN READ ONLY;
SELECT next_id(5, 'tmp') > 0 AS temp_sequence_in_read_only_ok;
ROLLBACK;
-- Rights: USAGE or UPDATE on the sequence, as for nextval(); SELECT alone is not enough.
CREATE ROLE snowflake_reg_user;
GRANT USAGE ON SCHEMA insta5 TO snowflake_reg_user;
SET ROLE snowflake_reg_user;
SELECT next_id(5, 'insta5.table_id_seq');
SELECT nextval('insta5.table_id_seq');
RESET ROLE;
GRANT SELECT ON insta5.table_id_seq TO snowflake_reg_user;
SET ROLE snowflake_reg_user;
SELECT next_id(5, 'insta5.table_id_seq');
RESET ROLE;
GRANT UPDATE ON insta5.table_id_seq TO snowflake_reg_user;
SET ROLE snowflake_reg_user;
SELECT next_id(5, 'insta5.table_id_seq') > 0 AS update_suffices;
RESET ROLE;
REVOKE UPDATE ON insta5.table_id_seq FROM snowflake_reg_user;
GRANT USAGE ON insta5.table_id_seq TO snowflake_reg_user;
SET ROLE snowflake_reg_user;
SELECT next_id(5, 'insta5.table_id_seq') > 0 AS usage_suffices;
RESET ROLE;
-- A revoke takes effect for the next statement, even within one transaction.
BEGIN;
SET LOCAL ROLE snowflake_reg_user;
SELECT next_id(5, 'insta5.table_id_seq') > 0 AS before_revoke;
RESET ROLE;
REVOKE USAGE ON insta5.table_id_seq FROM snowflake_reg_user;
SET LOCAL ROLE snowflake_reg_user;
SELECT next_id(5, 'insta5.table_id_seq');
ROLLBACK;
-- A session remembers its checks across transactions, until another session's catalog
-- change reaches it: a revoke committed elsewhere refuses this session's next call.
CREATE EXTENSION dblink;
GRANT USAGE ON insta5.table_id_seq TO snowflake_reg_user;
SET ROLE snowflake_reg_user;
SELECT next_id(5, 'insta5.table_id_seq') > 0 AS checked_and_remembered;
SELECT next_id(5, 'insta5.table_id_seq') > 0 AS still_granted;
RESET ROLE;
SELECT dblink_exec(format('dbname=%s host=%s port=%s', current_database(),
    current_setting('unix_socket_directories'), current_setting('port')),
  'REVOKE USAGE ON insta5.table_id_seq FROM snowflake_reg_user');
SET ROLE snowflake_reg_user;
SELECT next_id(5, 'insta5.table_id_seq');
RESET ROLE;
DROP EXTENSION dblink;
REVOKE ALL ON insta5.table_id_seq FROM snowflake_reg_user;
REVOKE ALL ON SCHEMA insta5 FROM snowflake_reg_user;
DROP ROLE snowflake_reg_user;
DROP SCHEMA insta5 CASCADE;
DROP SEQUENCE mixed, cached, old_insta, ahead, sub, unl, paced, last_ids, small;
