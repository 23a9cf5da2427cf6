-- create_shard(..., template => ...) and code its copies would reach by name at run time
-- (found by the adversarial pass of issue 19, item 2): built-in functions that run a query
-- given as text (ts_rewrite, query_to_xml), or read a relation or schema named by text
-- (table_to_xml of a regclass computed at run time, schema_to_xml), let a template's
-- default, constraint or policy run mallory's function as whoever writes to a shard. The
-- trust walk follows pg_depend, which records none of these: each such template must be
-- refused (42501, or 0A000 as for triggers), and no copy of it may make mallory superuser.
-- (Fails on dd19a96: every template here is accepted, and the ts_rewrite copy's first INSERT
-- by a superuser makes mallory superuser.)
CREATE EXTENSION IF NOT EXISTS snowflake_id;
\set VERBOSITY sqlstate
SET client_min_messages = warning;
CREATE ROLE snowflake_reg_mallory2;
CREATE SCHEMA m2 AUTHORIZATION snowflake_reg_mallory2;
SET ROLE snowflake_reg_mallory2;
CREATE FUNCTION m2.escalate() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        ALTER ROLE snowflake_reg_mallory2 SUPERUSER;
    END IF;
    RETURN 'x';
END $$;
CREATE VIEW m2.v AS SELECT m2.escalate() AS e;
RESET ROLE;
CREATE FUNCTION pg_temp.try(template text, shard integer) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM create_shard('tshard_' || template, shard, template => template);
    RETURN 'accepted';
EXCEPTION WHEN insufficient_privilege OR feature_not_supported THEN
    RETURN 'refused' || CASE WHEN to_regnamespace('tshard_' || template) IS NULL THEN '' ELSE ' (but a schema was made)' END;
END $$;
CREATE SCHEMA tn_rewrite;     -- ts_rewrite runs its second argument as a query
CREATE TABLE tn_rewrite.posts (id bigint PRIMARY KEY,
    q tsquery DEFAULT ts_rewrite('a'::tsquery, 'SELECT ''a''::tsquery, m2.escalate()::tsquery'));
CREATE SCHEMA tn_query_xml;   -- query_to_xml runs its first
CREATE TABLE tn_query_xml.posts (id bigint PRIMARY KEY,
    note text DEFAULT query_to_xml('SELECT m2.escalate()', false, false, '')::text);
CREATE SCHEMA tn_regclass;    -- a view named by text at run time
CREATE TABLE tn_regclass.posts (id bigint PRIMARY KEY,
    note text CHECK (table_to_xml(('m2.' || 'v')::regclass, false, false, '') IS NOT NULL));
CREATE SCHEMA tn_schema_xml;  -- every view of a schema named by text
CREATE TABLE tn_schema_xml.posts (id bigint PRIMARY KEY, body text);
CREATE POLICY reads ON tn_schema_xml.posts USING (schema_to_xml('m2', false, false, '') IS NOT NULL);
CREATE SCHEMA tn_set_config; -- set_config changes the writer's session (search_path: m2 first)
CREATE TABLE tn_set_config.posts (id bigint PRIMARY KEY,
    note text DEFAULT set_config('search_path', 'm2, pg_catalog', false));
CREATE SCHEMA tn_lo_export;  -- a function PUBLIC may not run: writes a server file as the writer
CREATE TABLE tn_lo_export.posts (id bigint PRIMARY KEY,
    note text CHECK (lo_export(0::oid, '/tmp/x') IS NOT NULL));
CREATE SCHEMA tn_read_file;  -- the same, reading one
CREATE TABLE tn_read_file.posts (id bigint PRIMARY KEY, note text DEFAULT pg_read_file('postgresql.conf'));
SELECT n.nspname AS template, pg_temp.try(n.nspname, 850 + (row_number() OVER (ORDER BY n.nspname))::integer) AS result
  FROM pg_namespace n WHERE n.nspname LIKE 'tn\_%' ORDER BY 1;
-- End to end (ts_rewrite needs no libxml): had the copy been made, a superuser's INSERT
-- would run m2.escalate() as the superuser.
DO $$ BEGIN IF to_regclass('tshard_tn_rewrite.posts') IS NOT NULL THEN
    INSERT INTO tshard_tn_rewrite.posts (id) VALUES (1);
END IF; END $$;
SELECT rolsuper AS mallory_superuser FROM pg_roles WHERE rolname = 'snowflake_reg_mallory2';
SELECT count(*) AS shards_made FROM snowflake_id_shards WHERE shard BETWEEN 851 AND 860;
DO $$ BEGIN PERFORM drop_shard(schema_name, cascade => true) FROM snowflake_id_shards WHERE shard BETWEEN 851 AND 860; END $$;
-- The refusal names the function and why.
\set VERBOSITY terse
SELECT create_shard('tshard_x', 870, template => 'tn_set_config');
SELECT create_shard('tshard_x', 870, template => 'tn_read_file');
\set VERBOSITY sqlstate
DROP SCHEMA tn_rewrite, tn_query_xml, tn_regclass, tn_schema_xml, tn_set_config, tn_lo_export, tn_read_file, m2 CASCADE;
DROP ROLE snowflake_reg_mallory2;
RESET client_min_messages;
