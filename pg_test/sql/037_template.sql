-- create_shard(schema_name, shard, template => 'tpl'): the shard layout declared once.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
\set VERBOSITY sqlstate
CREATE SCHEMA tpl;
CREATE TABLE tpl.posts (
    id bigint PRIMARY KEY,
    user_id bigint NOT NULL CHECK (user_id > 0),
    body text NOT NULL DEFAULT '',
    UNIQUE (user_id, body)
);
CREATE INDEX posts_by_user ON tpl.posts (user_id, id);
COMMENT ON COLUMN tpl.posts.body IS 'what was said';
CREATE TABLE tpl.likes (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, post_id bigint NOT NULL);
CREATE TABLE tpl.tags (name text PRIMARY KEY);
SELECT create_shard('tshard7', 7, template => 'tpl');
-- Every table, with its columns, constraints and indexes; bigint primary keys default to
-- the shard's own next_id() (an identity column too), other keys keep theirs.
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS not_null,
       a.attidentity AS identity, pg_get_expr(d.adbin, d.adrelid) AS "default"
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
  LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
 WHERE c.relnamespace = 'tshard7'::regnamespace AND c.relkind = 'r' ORDER BY 1, a.attnum;
SELECT conrelid::regclass AS "table", contype, pg_get_constraintdef(oid) AS def
  FROM pg_constraint WHERE connamespace = 'tshard7'::regnamespace ORDER BY 1, 2, 3;
SELECT indexrelid::regclass AS index, pg_get_indexdef(indexrelid) AS def FROM pg_index
 WHERE indrelid = 'tshard7.posts'::regclass ORDER BY 1;
SELECT col_description('tshard7.posts'::regclass, 3) AS comment;
INSERT INTO tshard7.posts (user_id, body) VALUES (1, 'a'), (2, 'b');
INSERT INTO tshard7.likes (post_id) SELECT id FROM tshard7.posts;
SELECT count(*) AS rows, bool_and(id_shard(id) = 7) AS shard_7 FROM tshard7.posts;
SELECT count(*) AS rows, bool_and(id_shard(id) = 7) AS shard_7 FROM tshard7.likes;
INSERT INTO tshard7.posts (user_id, body) VALUES (-1, 'c');
-- Idempotent; the two-argument form still works, and the catalog lists each shard once.
SELECT create_shard('tshard7', 7, template => 'tpl');
SELECT create_shard('tshard8', 8);
SELECT schema_name, shard FROM snowflake_id_shards WHERE schema_name LIKE 'tshard%' ORDER BY shard;
SELECT count(*) AS tables_in_plain_shard FROM pg_class WHERE relnamespace = 'tshard8'::regnamespace AND relkind = 'r';
-- Names quoted, never executed.
SELECT create_shard('t"s; DROP TABLE tpl.tags; --', 9, template => 'tpl');
SELECT to_regclass('tpl.tags') IS NOT NULL AS tags_survive,
       (SELECT count(*) FROM pg_class WHERE relnamespace = quote_ident('t"s; DROP TABLE tpl.tags; --')::regnamespace
         AND relkind = 'r') AS tables;
-- Refused: a missing template (3F000), a name over 63 bytes (42622), a shard as its own
-- template (22023).
SELECT create_shard('tshard10', 10, template => 'no_such_schema');
SELECT create_shard('tshard10', 10, template => repeat('t', 64));
SELECT create_shard('tpl', 10, template => 'tpl');
-- Refused (42809): a template that is not a plain schema of tables.
CREATE SCHEMA tpl_view;
CREATE TABLE tpl_view.t (id bigint PRIMARY KEY);
CREATE VIEW tpl_view.v AS SELECT 1 AS x;
SELECT create_shard('tshard11', 11, template => 'tpl_view');
CREATE SCHEMA tpl_fn;
CREATE TABLE tpl_fn.t (id bigint PRIMARY KEY);
CREATE FUNCTION tpl_fn.f() RETURNS int LANGUAGE sql RETURN 1;
SELECT create_shard('tshard11', 11, template => 'tpl_fn');
SELECT create_shard('tshard11', 11, template => 'tshard7');
SELECT to_regnamespace('tshard11') IS NULL AS nothing_made;
-- Refused (42501): a template whose tables would run another role's code in every shard.
CREATE ROLE mallory_tpl;
CREATE SCHEMA mal AUTHORIZATION mallory_tpl;
SET ROLE mallory_tpl;
CREATE FUNCTION mal.pick() RETURNS text LANGUAGE sql RETURN 'harmless, for now';
RESET ROLE;
CREATE SCHEMA tpl_mal;
CREATE TABLE tpl_mal.t (id bigint PRIMARY KEY, note text DEFAULT mal.pick());
SELECT create_shard('tshard12', 12, template => 'tpl_mal');
SELECT to_regnamespace('tshard12') IS NULL AS nothing_made;
-- Nor through an operator: its function would run in every shard's CHECK (42501).
SET ROLE mallory_tpl;
CREATE FUNCTION mal.same(bigint, bigint) RETURNS boolean LANGUAGE sql RETURN $1 = $2;
CREATE OPERATOR mal.=== (FUNCTION = mal.same, LEFTARG = bigint, RIGHTARG = bigint);
RESET ROLE;
CREATE SCHEMA tpl_op;
CREATE TABLE tpl_op.t (id bigint PRIMARY KEY, x bigint CHECK (x OPERATOR(mal.===) x));
SELECT create_shard('tshard15', 15, template => 'tpl_op');
SELECT to_regnamespace('tshard15') IS NULL AS nothing_made;
-- The same function owned by the caller is fine.
ALTER FUNCTION mal.pick() OWNER TO CURRENT_USER;
SELECT create_shard('tshard12', 12, template => 'tpl_mal');
INSERT INTO tshard12.t DEFAULT VALUES;
SELECT id_shard(id) AS shard, note FROM tshard12.t;
-- template => NULL is the two-argument form (a shard without tables), not a silent no-op;
-- a NULL schema or shard beside a template is refused (22004).
SELECT create_shard('tshard13', 13, template => NULL);
SELECT schema_name, shard FROM snowflake_id_shards WHERE shard = 13;
SELECT create_shard(NULL, 14, template => 'tpl');
-- The surface: three arguments, called on NULL input, VOLATILE, PARALLEL UNSAFE, commented.
SELECT p.oid::regprocedure, p.provolatile, p.proisstrict, p.proparallel, p.proconfig,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc p WHERE p.proname = 'create_shard' ORDER BY 1;
SET client_min_messages = warning;
DROP SCHEMA tpl, tpl_view, tpl_fn, tpl_mal, tpl_op, mal CASCADE;
SELECT drop_shard(schema_name, cascade => true) FROM snowflake_id_shards WHERE shard IN (7, 8, 9, 12, 13);
DROP ROLE mallory_tpl;
RESET client_min_messages;
