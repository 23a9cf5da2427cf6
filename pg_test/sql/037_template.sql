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
-- Whichever form made it, a shard's function ends as <schema>.next_id(), commented, the
-- tables' defaults calling it; nothing is left under the name it was made under, and an
-- application role with rights on the table and sequence only inserts through it.
SELECT p.oid::regprocedure AS function, obj_description(p.oid, 'pg_proc') AS comment
  FROM pg_proc p WHERE p.pronamespace IN ('tshard7'::regnamespace, 'tshard8'::regnamespace) ORDER BY 1;
SELECT count(*) AS left_under_another_name FROM pg_proc WHERE proname LIKE 'snowflake\_id\_new\_%';
CREATE ROLE snowflake_reg_app;
GRANT USAGE ON SCHEMA tshard7 TO snowflake_reg_app;
GRANT INSERT, SELECT ON tshard7.posts TO snowflake_reg_app;
GRANT USAGE ON SEQUENCE tshard7.table_id_seq TO snowflake_reg_app;
SET ROLE snowflake_reg_app;
INSERT INTO tshard7.posts (user_id, body) VALUES (3, 'as an application') RETURNING id_shard(id) AS shard;
RESET ROLE;
DROP OWNED BY snowflake_reg_app;
DROP ROLE snowflake_reg_app;
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
CREATE TYPE tpl_view.mood AS ENUM ('ok');
SELECT create_shard('tshard11', 11, template => 'tpl_view');
CREATE SCHEMA tpl_fn;
CREATE TABLE tpl_fn.t (id bigint PRIMARY KEY);
CREATE AGGREGATE tpl_fn.total(integer) (sfunc = int4pl, stype = integer);
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
-- Only a single-column bigint (or snowflake) primary key is the shard's ID: a key of two
-- bigint columns keeps its columns as they are (neither defaults to next_id()); an INCLUDE
-- column is not part of the key.
CREATE SCHEMA tpl_keys;
CREATE TABLE tpl_keys.pairs (a bigint, b bigint, PRIMARY KEY (a, b));
CREATE TABLE tpl_keys.covered (id bigint, note text, PRIMARY KEY (id) INCLUDE (note));
CREATE TABLE tpl_keys.ints (id integer PRIMARY KEY);
CREATE TABLE tpl_keys.flakes (id snowflake PRIMARY KEY);
SELECT create_shard('tshard16', 16, template => 'tpl_keys');
SELECT a.attrelid::regclass AS "table", a.attname, pg_get_expr(d.adbin, d.adrelid) AS "default"
  FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE a.attrelid IN ('tshard16.pairs'::regclass, 'tshard16.covered'::regclass, 'tshard16.ints'::regclass,
                      'tshard16.flakes'::regclass)
   AND a.attnum > 0 ORDER BY 1, a.attnum;
INSERT INTO tshard16.flakes DEFAULT VALUES;
SELECT id_shard(id) AS flake_shard FROM tshard16.flakes;
-- Row-level security and policies are copied: enabled and forced as in the template, each
-- policy with its command, roles, kind and expressions.
CREATE ROLE snowflake_reg_reader;
CREATE SCHEMA tpl_rls;
CREATE TABLE tpl_rls.notes (id bigint PRIMARY KEY, owner_name text NOT NULL, body text);
ALTER TABLE tpl_rls.notes ENABLE ROW LEVEL SECURITY;
ALTER TABLE tpl_rls.notes FORCE ROW LEVEL SECURITY;
CREATE POLICY own ON tpl_rls.notes FOR SELECT TO snowflake_reg_reader USING (owner_name = current_user);
CREATE POLICY no_shouting ON tpl_rls.notes AS RESTRICTIVE FOR INSERT WITH CHECK (body = lower(body));
CREATE TABLE tpl_rls.open (id bigint PRIMARY KEY);
SELECT create_shard('tshard17', 17, template => 'tpl_rls');
SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity FROM pg_class c
 WHERE c.relnamespace = 'tshard17'::regnamespace AND c.relkind = 'r' ORDER BY 1;
SELECT tablename, policyname, permissive, roles, cmd, qual, with_check FROM pg_policies
 WHERE schemaname = 'tshard17' ORDER BY 1, 2;
INSERT INTO tshard17.notes (owner_name, body) VALUES ('snowflake_reg_reader', 'mine'), ('someone', 'theirs');
GRANT USAGE ON SCHEMA tshard17 TO snowflake_reg_reader;
GRANT SELECT ON tshard17.notes TO snowflake_reg_reader;
SET ROLE snowflake_reg_reader;
SELECT owner_name, body FROM tshard17.notes;
RESET ROLE;
-- The replica identity is copied: FULL, NOTHING, and USING INDEX by the copy's index made
-- from the template's, whatever name either has (LIKE names its copies after the new table),
-- among indexes of other shapes. So the template, its shards and a move's copy have one
-- fingerprint, the identity's index marked.
CREATE SCHEMA tpl_ident;
CREATE TABLE tpl_ident.events (id bigint NOT NULL, at timestamptz NOT NULL, kind text NOT NULL, note text);
CREATE UNIQUE INDEX event_key ON tpl_ident.events (at, id);
CREATE UNIQUE INDEX events_id_kind ON tpl_ident.events (id, kind);
CREATE UNIQUE INDEX event_ident ON tpl_ident.events (kind, id) INCLUDE (at);
CREATE INDEX events_kind ON tpl_ident.events (kind, id);
ALTER TABLE tpl_ident.events REPLICA IDENTITY USING INDEX event_ident;
CREATE TABLE tpl_ident.log (line text);
ALTER TABLE tpl_ident.log REPLICA IDENTITY FULL;
CREATE TABLE tpl_ident.scratch (id bigint PRIMARY KEY, v text);
ALTER TABLE tpl_ident.scratch REPLICA IDENTITY NOTHING;
CREATE TABLE tpl_ident.plain (id bigint PRIMARY KEY);
SELECT create_shard('tshard19', 19, template => 'tpl_ident');
SELECT c.relname, c.relreplident, i.indexrelid::regclass AS identity_index, pg_get_indexdef(i.indexrelid) AS def
  FROM pg_class c LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisreplident
 WHERE c.relnamespace = 'tshard19'::regnamespace AND c.relkind = 'r' ORDER BY 1;
SELECT snowflake_id_node.fingerprint('tshard19') = snowflake_id_node.fingerprint('tpl_ident') AS same_layout;
SELECT l FROM unnest(snowflake_id_node.fingerprint('tshard19')) l WHERE l LIKE '%replica identity%';
-- Another identity index on the shard alone is a difference, named.
ALTER TABLE tshard19.events REPLICA IDENTITY USING INDEX events_id_kind_idx;
SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('tshard19'), snowflake_id_node.fingerprint('tpl_ident'),
                                                'the shard', 'the template') AS other_identity;
SELECT drop_shard('tshard19', cascade => true);
DROP SCHEMA tpl_ident CASCADE;
-- A policy that reads a table of the template would read the template's in every copy: refused
-- (0A000), as are rules, which create_shard does not copy. Nothing is made.
CREATE FUNCTION pg_temp.refusal(schema_name text, shard integer, template text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM create_shard(schema_name, shard, template => template);
    RETURN 'accepted';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
CREATE SCHEMA tpl_policy_reads;
CREATE TABLE tpl_policy_reads.members (name text PRIMARY KEY);
CREATE TABLE tpl_policy_reads.notes (id bigint PRIMARY KEY, owner_name text);
CREATE POLICY members_only ON tpl_policy_reads.notes USING (owner_name IN (SELECT name FROM tpl_policy_reads.members));
SELECT pg_temp.refusal('tshard18', 18, 'tpl_policy_reads');
CREATE SCHEMA tpl_policy_self;
CREATE TABLE tpl_policy_self.notes (id bigint PRIMARY KEY, owner_name text);
CREATE POLICY first ON tpl_policy_self.notes USING (id = (SELECT min(n.id) FROM tpl_policy_self.notes n));
SELECT pg_temp.refusal('tshard18', 18, 'tpl_policy_self');
CREATE SCHEMA tpl_trigger;
CREATE TABLE tpl_trigger.notes (id bigint PRIMARY KEY, body text);
CREATE FUNCTION public.snowflake_reg_touch() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
CREATE TRIGGER touch BEFORE UPDATE ON tpl_trigger.notes FOR EACH ROW EXECUTE FUNCTION public.snowflake_reg_touch();
CREATE RULE no_delete AS ON DELETE TO tpl_trigger.notes DO INSTEAD NOTHING;
SELECT pg_temp.refusal('tshard18', 18, 'tpl_trigger');
SELECT to_regnamespace('tshard18') IS NULL AS nothing_made;
-- create_shards with a template: every shard made and filled in one call (the template read
-- and checked once), idempotent; NULL template is the three-argument form.
SELECT create_shards('tmany', 30, 3, template => 'tpl');
SELECT create_shards('tmany', 30, 3, template => 'tpl');
SELECT s.schema_name, s.shard, count(c.oid) AS tables, bool_and(id_shard(next_id(s.sequence)) = s.shard) AS own_shard
  FROM snowflake_id_shards s JOIN pg_class c ON c.relnamespace = to_regnamespace(s.schema_name) AND c.relkind = 'r'
 WHERE s.shard BETWEEN 30 AND 32 GROUP BY 1, 2 ORDER BY 2;
SELECT create_shards('tnull', 40, 1, template => NULL);
SELECT count(*) AS tables_in_plain_shard FROM pg_class WHERE relnamespace = 'tnull40'::regnamespace AND relkind = 'r';
SELECT create_shards('tmany', 30, 3, template => 'tmany31');
SELECT create_shards('tx', 8190, 5, template => 'tpl');
SELECT create_shards('tx', 50, 1, template => 'no_such_schema');
-- A system schema is no template (42939): pg_catalog's tables are pinned, so it would read as
-- empty. A template table named as a LIKE copy names an earlier table's index is in the way
-- (42P07), not silently left out; nothing is made.
SELECT create_shard('tx', 50, template => 'pg_catalog');
SELECT create_shard('tx', 50, template => 'information_schema');
CREATE SCHEMA tpl_clash;
CREATE TABLE tpl_clash.a (id bigint, CONSTRAINT a_key PRIMARY KEY (id));
CREATE TABLE tpl_clash.a_pkey (id bigint PRIMARY KEY);
SELECT create_shard('tclash', 51, template => 'tpl_clash');
SELECT to_regnamespace('tclash') IS NULL AS nothing_made;
-- One statement reads a template once for all its calls, until the template changes: the
-- statement's own ALTER TABLE on it is read by the next call (here refused: another role's
-- function, 42501), and nothing of the statement is left.
SET ROLE mallory_tpl;
CREATE FUNCTION mal.pick2() RETURNS text LANGUAGE sql RETURN 'mallory''s';
RESET ROLE;
DO $$
BEGIN
    PERFORM create_shard('tstmt1', 20, template => 'tpl_keys');
    ALTER TABLE tpl_keys.ints ADD COLUMN note text DEFAULT mal.pick2();
    PERFORM create_shard('tstmt2', 21, template => 'tpl_keys');
END $$;
SELECT count(*) AS shards_left FROM snowflake_id_shards WHERE shard IN (20, 21);
-- A role granted the catalog may make shards from a template it can lock: the lock takes
-- UPDATE, DELETE or TRUNCATE on the template's tables, as LOCK TABLE would (42501 with only
-- SELECT); nothing is made until it can.
CREATE ROLE snowflake_reg_maker;
SELECT current_database() AS db \gset
GRANT CREATE ON DATABASE :"db" TO snowflake_reg_maker;
GRANT SELECT, INSERT, UPDATE, DELETE ON snowflake_id_shard TO snowflake_reg_maker;
GRANT USAGE ON SCHEMA tpl_keys TO snowflake_reg_maker;
GRANT SELECT ON ALL TABLES IN SCHEMA tpl_keys TO snowflake_reg_maker;
SET ROLE snowflake_reg_maker;
SELECT create_shard('tmaker', 19, template => 'tpl_keys');
RESET ROLE;
SELECT to_regnamespace('tmaker') IS NULL AS nothing_made;
GRANT UPDATE ON ALL TABLES IN SCHEMA tpl_keys TO snowflake_reg_maker;
SET ROLE snowflake_reg_maker;
SELECT create_shard('tmaker', 19, template => 'tpl_keys');
SELECT count(*) AS tables, min(relowner::regrole::text) AS owner FROM pg_class
 WHERE relnamespace = 'tmaker'::regnamespace AND relkind = 'r';
SELECT drop_shard('tmaker', cascade => true);
RESET ROLE;
REVOKE ALL ON SCHEMA tpl_keys FROM snowflake_reg_maker;
REVOKE ALL ON ALL TABLES IN SCHEMA tpl_keys FROM snowflake_reg_maker;
REVOKE ALL ON snowflake_id_shard FROM snowflake_reg_maker;
REVOKE CREATE ON DATABASE :"db" FROM snowflake_reg_maker;
DROP ROLE snowflake_reg_maker;
-- The surface: the template forms called on NULL input, VOLATILE, PARALLEL UNSAFE, commented.
SELECT p.oid::regprocedure, p.provolatile, p.proisstrict, p.proparallel, p.proconfig,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc p WHERE p.proname IN ('create_shard', 'create_shards') ORDER BY 1;
SET client_min_messages = warning;
DROP SCHEMA tpl, tpl_view, tpl_fn, tpl_mal, tpl_op, mal, tpl_keys, tpl_rls, tpl_policy_reads, tpl_policy_self,
    tpl_trigger, tpl_clash CASCADE;
DROP FUNCTION public.snowflake_reg_touch();
SELECT drop_shard(schema_name, cascade => true) FROM snowflake_id_shards WHERE shard IN (7, 8, 9, 12, 13, 16, 17, 30, 31, 32, 40);
DROP ROLE mallory_tpl;
DROP ROLE snowflake_reg_reader;
RESET client_min_messages;
