-- The per-schema shard installer: create_shard, create_shards, drop_shard, snowflake_id_shards.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
\set VERBOSITY sqlstate
-- Instagram's table definition, verbatim, on a schema made by create_shard.
SELECT create_shard('insta5', 5);
CREATE TABLE insta5.our_table (
    "id" bigint NOT NULL DEFAULT insta5.next_id(),
    "user_id" int NOT NULL,
    PRIMARY KEY ("id")
);
INSERT INTO insta5.our_table (user_id) SELECT g FROM generate_series(1, 50000) g;
SELECT count(DISTINCT id) AS distinct_ids, bool_and(id_shard(id) = 5) AS all_shard_5 FROM insta5.our_table;
-- The generated function: SQL-standard body bound to the extension's generator and the
-- sequence by OID, its own search_path, the caller's rights.
SELECT p.oid::regprocedure AS function, pg_get_function_result(p.oid) AS result, p.prosecdef AS security_definer,
       p.proconfig AS config, p.provolatile AS vol, p.proparallel AS par, prosrc IS NULL OR prosrc = '' AS sql_standard_body
  FROM pg_proc p WHERE p.oid = 'insta5.next_id()'::regprocedure;
-- Bound at creation: the body depends on the extension's generator (next_id(shard, seq)
-- under a name no shard's function has) and on the sequence itself.
SELECT CASE WHEN d.refclassid = 'pg_proc'::regclass THEN d.refobjid::regprocedure::text
            ELSE d.refobjid::regclass::text END AS depends_on
  FROM pg_depend d WHERE d.objid = 'insta5.next_id()'::regprocedure AND d.deptype = 'n'
   AND d.refclassid IN ('pg_proc'::regclass, 'pg_class'::regclass) ORDER BY 1;
-- Idempotent for the same (schema, shard); the catalog lists it once.
SELECT create_shard('insta5', 5);
SELECT * FROM snowflake_id_shards;
-- A shard already given to another schema, or a schema already another shard: 23505.
SELECT create_shard('insta6', 5);
SELECT create_shard('insta5', 6);
-- Out of range: 22003.
SELECT create_shard('insta8192', 8192);
SELECT create_shard('insta_neg', -1);
SELECT create_shards('x', 8000, 200);
SELECT create_shards('x', 0, -1);
-- Hostile input is created literally, never executed.
CREATE TABLE victim (x int);
SELECT create_shard('we"ird; DROP TABLE victim; --', 7);
SELECT to_regclass('victim') IS NOT NULL AS victim_survives,
       "we""ird; DROP TABLE victim; --".next_id() > 0 AS generates;
SELECT schema_name, shard FROM snowflake_id_shards WHERE shard = 7;
-- search_path hijack: a user's own next_id and nextval earlier in the path are never called.
CREATE SCHEMA evil;
CREATE FUNCTION evil.next_id(integer, regclass) RETURNS bigint LANGUAGE sql AS 'SELECT -1::bigint';
CREATE FUNCTION evil.next_id(integer, text) RETURNS bigint LANGUAGE sql AS 'SELECT -2::bigint';
CREATE FUNCTION evil.nextval(regclass) RETURNS bigint LANGUAGE sql AS 'SELECT -3::bigint';
CREATE FUNCTION evil.make_id(timestamptz, integer, integer) RETURNS bigint LANGUAGE sql AS 'SELECT -4::bigint';
SET search_path = evil, public;
SELECT insta5.next_id() > 0 AS not_hijacked;
SELECT create_shard('insta9', 9);
SELECT insta9.next_id() > 0 AS created_under_hostile_path_not_hijacked;
RESET search_path;
-- Rights: the generated function runs as the caller, who needs USAGE or UPDATE on the
-- shard's sequence, exactly as with nextval (42501).
CREATE ROLE snowflake_reg_shard_user;
GRANT USAGE ON SCHEMA insta5 TO snowflake_reg_shard_user;
SET ROLE snowflake_reg_shard_user;
SELECT insta5.next_id();
RESET ROLE;
GRANT USAGE ON SEQUENCE insta5.table_id_seq TO snowflake_reg_shard_user;
SET ROLE snowflake_reg_shard_user;
SELECT insta5.next_id() > 0 AS with_usage;
RESET ROLE;
REVOKE ALL ON SEQUENCE insta5.table_id_seq FROM snowflake_reg_shard_user;
REVOKE ALL ON SCHEMA insta5 FROM snowflake_reg_shard_user;
DROP ROLE snowflake_reg_shard_user;
-- Adopting an Instagram schema in place: the PL/pgSQL function is replaced (same OID, so
-- the column default switches), the sequence kept, and new IDs are above all old ones.
CREATE SCHEMA insta20;
CREATE SEQUENCE insta20.table_id_seq;
CREATE OR REPLACE FUNCTION insta20.next_id(OUT result bigint) AS $$
DECLARE
    our_epoch bigint := 1314220021721;
    seq_id bigint;
    now_millis bigint;
    shard_id int := 20;
BEGIN
    SELECT nextval('insta20.table_id_seq') % 1024 INTO seq_id;
    SELECT FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) INTO now_millis;
    result := (now_millis - our_epoch) << 23;
    result := result | (shard_id << 10);
    result := result | (seq_id);
END;
$$ LANGUAGE PLPGSQL;
CREATE TABLE insta20.our_table ("id" bigint NOT NULL DEFAULT insta20.next_id(), "user_id" int NOT NULL, PRIMARY KEY ("id"));
INSERT INTO insta20.our_table (user_id) SELECT 1 FROM generate_series(1, 1000);
SELECT 'insta20.next_id()'::regprocedure::oid AS old_oid \gset
SELECT create_shard('insta20', 20);
SELECT 'insta20.next_id()'::regprocedure::oid = :old_oid AS same_function,
       (SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.oid = :old_oid) AS language;
INSERT INTO insta20.our_table (user_id) SELECT 2 FROM generate_series(1, 100000);
SELECT min(id) FILTER (WHERE user_id = 2) > max(id) FILTER (WHERE user_id = 1) AS new_above_old,
       count(*) - count(DISTINCT id) AS duplicates FROM insta20.our_table;
-- 2000 shards in one call, one transaction.
SELECT create_shards('many', 1000, 2000);
SELECT count(*) AS shards, min(shard), max(shard) FROM snowflake_id_shards WHERE schema_name LIKE 'many%';
SELECT many1999.next_id() > 0 AND id_shard(many2999.next_id()) = 2999 AS generate;
-- Each made under a name of its own, then renamed next_id: none is left under another name.
SELECT count(*) FILTER (WHERE p.proname = 'next_id' AND p.pronargs = 0) AS next_id_functions,
       count(*) FILTER (WHERE p.proname <> 'next_id') AS other_functions
  FROM snowflake_id_shards s JOIN pg_proc p ON p.pronamespace = s.schema_name::regnamespace
 WHERE s.schema_name LIKE 'many%';
-- drop_shard: refuses while a table's default depends on the shard (2BP01), cascades when told.
SELECT drop_shard('insta5');
SELECT drop_shard('insta5', cascade => true);
SELECT to_regnamespace('insta5') IS NULL AS schema_gone, count(*) AS catalog_rows
  FROM snowflake_id_shards WHERE schema_name = 'insta5';
SELECT drop_shard('insta5');
-- With cascade, a schema create_shard made goes with everything in it, and what was moved
-- out of it too: here its sequence, moved to public.
SELECT create_shard('insta21', 21);
ALTER SEQUENCE insta21.table_id_seq SET SCHEMA public;
SELECT drop_shard('insta21', cascade => true);
SELECT to_regnamespace('insta21') IS NULL AS schema_gone, to_regclass('public.table_id_seq') IS NULL AS moved_sequence_gone;
-- An adopted schema (not made by create_shard) is kept; its table, function and sequence go with cascade.
SELECT drop_shard('insta20', true);
SELECT to_regnamespace('insta20') IS NOT NULL AS adopted_schema_kept;
SELECT count(*) AS drop_many FROM (SELECT drop_shard(schema_name) FROM snowflake_id_shards WHERE schema_name LIKE 'many%') x;
-- A shard's next_id() is made under the name snowflake_id_new_next_id_<shard>, then renamed.
-- A function of that name already in an existing schema (its owner's, made before) is not
-- replaced nor renamed: 42723, and nothing is made.
CREATE SCHEMA insta77;
CREATE FUNCTION insta77.snowflake_id_new_next_id_77() RETURNS bigint LANGUAGE sql RETURN 1;
SELECT create_shard('insta77', 77);
SELECT count(*) AS shard_77_made FROM snowflake_id_shards WHERE shard = 77;
SELECT insta77.snowflake_id_new_next_id_77() AS own_function_kept, to_regproc('insta77.next_id') IS NULL AS no_next_id;
DROP SCHEMA insta77 CASCADE;
SELECT schema_name, shard FROM snowflake_id_shards ORDER BY shard;
SELECT drop_shard('insta9'), drop_shard('we"ird; DROP TABLE victim; --');
DROP SCHEMA evil, insta20 CASCADE;
DROP TABLE victim;
