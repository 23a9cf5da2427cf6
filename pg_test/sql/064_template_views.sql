-- Views in a template (sql/installer/installer.sql, copy_view): create_shard makes each in the
-- shard over the shard's own tables, in the order they read each other, with their options
-- (security_barrier, security_invoker, check_option), and the shard's fingerprint equals the
-- template's. A copy that would read anything but what the template's reads, with the
-- shard's relations for the template's, is refused (55000); so is what a view's copy would
-- leave out (a rule, an INSTEAD OF trigger, a column default: 0A000), and a view that calls
-- another role's code (42501), as a table's default would. A move carries views as it
-- carries tables: the target's copy comes from its template (refusal() no longer names them).
-- Materialized views are copied alike, populated, with their indexes.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
SET client_min_messages = warning;
CREATE SCHEMA vt;
CREATE TABLE vt.users (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE vt.photos (id bigint PRIMARY KEY, user_id bigint NOT NULL REFERENCES vt.users,
                        caption text, created timestamptz NOT NULL DEFAULT now());
CREATE TABLE public.vt_blocked (user_id bigint PRIMARY KEY);
-- Made out of order: top reads recent, which reads both tables and a table outside the
-- template; counts groups by a primary key (the view depends on the key itself).
CREATE VIEW vt.counts AS SELECT u.id, u.name, count(p.id) AS photos
  FROM vt.users u LEFT JOIN vt.photos p ON p.user_id = u.id GROUP BY u.id;
CREATE VIEW vt.recent WITH (security_barrier) AS
  SELECT p.id, p.caption, u.name FROM vt.photos p JOIN vt.users u ON u.id = p.user_id
   WHERE p.created > now() - interval '1 day'
     AND NOT EXISTS (SELECT FROM public.vt_blocked b WHERE b.user_id = u.id);
CREATE VIEW vt.top AS SELECT r.id, upper(r.name) AS who FROM vt.recent r ORDER BY r.id LIMIT 10;
CREATE VIEW vt.named WITH (security_invoker = true) AS SELECT * FROM vt.users WHERE name <> '' WITH LOCAL CHECK OPTION;
SELECT create_shard('vshard1', 6401, template => 'vt');
SELECT c.relname, c.reloptions FROM pg_class c WHERE c.relnamespace = 'vshard1'::regnamespace AND c.relkind = 'v' ORDER BY 1;
-- Each reads the shard's relations, and what is outside the template as the template's does.
SET search_path = pg_catalog;
SELECT v, pg_get_viewdef(v) ~ 'vshard1\.' AS reads_the_shard, pg_get_viewdef(v) ~ '[^_]vt\.' AS reads_the_template,
       pg_get_viewdef(v) ~ 'public\.vt_blocked' AS reads_outside
  FROM unnest('{vshard1.counts,vshard1.named,vshard1.recent,vshard1.top}'::regclass[]) v;
RESET search_path;
-- The copies read the shard's rows, not the template's.
INSERT INTO vt.users VALUES (1, 'template row');
INSERT INTO vshard1.users (name) VALUES ('ann');
INSERT INTO vshard1.photos (user_id, caption) SELECT id, 'hello' FROM vshard1.users;
SELECT who FROM vshard1.top;
SELECT name, photos FROM vshard1.counts;
INSERT INTO vshard1.named (id, name) VALUES (1, '');
SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('vshard1'),
                                                snowflake_id_node.fingerprint('vt'), 'the shard', 'the template') AS difference;
-- Again: nothing changes (idempotent); many shards at once.
SELECT create_shard('vshard1', 6401, template => 'vt');
SELECT create_shards('vshard', 6402, 2, template => 'vt');
SELECT count(*) AS views FROM pg_class c WHERE c.relnamespace IN ('vshard6402'::regnamespace, 'vshard6403'::regnamespace) AND c.relkind = 'v';
-- A shard with views can move: nothing about them refuses it.
SELECT snowflake_id_node.refusal('{vshard1}') AS refusal;
\set VERBOSITY sqlstate
-- What the copy would leave out.
CREATE SCHEMA vt_rule;
CREATE TABLE vt_rule.t (id bigint PRIMARY KEY);
CREATE VIEW vt_rule.v AS SELECT * FROM vt_rule.t;
CREATE RULE ins AS ON INSERT TO vt_rule.v DO INSTEAD INSERT INTO vt_rule.t VALUES (NEW.id);
SELECT create_shard('vshard9', 6409, template => 'vt_rule');
\set VERBOSITY terse
SELECT create_shard('vshard9', 6409, template => 'vt_rule');
\set VERBOSITY sqlstate
DROP RULE ins ON vt_rule.v;
CREATE FUNCTION public.vt_ins() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER ins INSTEAD OF INSERT ON vt_rule.v FOR EACH ROW EXECUTE FUNCTION public.vt_ins();
SELECT create_shard('vshard9', 6409, template => 'vt_rule');
DROP TRIGGER ins ON vt_rule.v;
ALTER VIEW vt_rule.v ALTER COLUMN id SET DEFAULT 7;
SELECT create_shard('vshard9', 6409, template => 'vt_rule');
ALTER VIEW vt_rule.v ALTER COLUMN id DROP DEFAULT;
-- A template table named as one of pg_catalog's: the copy's query would read pg_catalog's.
CREATE TABLE vt_rule.pg_am (id bigint PRIMARY KEY);
CREATE VIEW vt_rule.shadowed AS SELECT id FROM vt_rule.pg_am;
SELECT create_shard('vshard9', 6409, template => 'vt_rule');
\set VERBOSITY terse
SELECT create_shard('vshard9', 6409, template => 'vt_rule');
\set VERBOSITY sqlstate
DROP VIEW vt_rule.shadowed;
SELECT create_shard('vshard9', 6409, template => 'vt_rule');
SELECT to_regclass('vshard9.v') IS NOT NULL AS made;
-- Another role's code in a view's query (42501), and a function no copy may call whoever
-- owns it (42501): a view runs them for whoever reads it (security_invoker) or as its owner.
CREATE ROLE snowflake_reg_vmal;
CREATE SCHEMA vm AUTHORIZATION snowflake_reg_vmal;
SET ROLE snowflake_reg_vmal;
CREATE FUNCTION vm.f(text) RETURNS text LANGUAGE sql IMMUTABLE RETURN $1;
RESET ROLE;
CREATE SCHEMA vt_mal;
CREATE TABLE vt_mal.t (id bigint PRIMARY KEY, b text);
CREATE VIEW vt_mal.v AS SELECT id, vm.f(b) FROM vt_mal.t;
SELECT create_shard('vshard10', 6410, template => 'vt_mal');
DROP VIEW vt_mal.v;
CREATE VIEW vt_mal.v WITH (security_invoker = true) AS SELECT id, set_config('search_path', b, false) FROM vt_mal.t;
SELECT create_shard('vshard10', 6410, template => 'vt_mal');
SELECT to_regnamespace('vshard10') IS NULL AS nothing_made;
-- A materialized view is copied as a view is, populated, with its indexes (a unique one
-- lets REFRESH ... CONCURRENTLY run on the copy); a move refreshes the target's.
CREATE MATERIALIZED VIEW vt_rule.mv WITH (fillfactor = 90) AS SELECT id, id % 3 AS bucket FROM vt_rule.t;
CREATE UNIQUE INDEX mv_id ON vt_rule.mv (id);
CREATE INDEX mv_bucket ON vt_rule.mv ((bucket + 1)) WHERE bucket > 0;
CREATE MATERIALIZED VIEW vt_rule.mv_count AS SELECT count(*) AS n FROM vt_rule.mv;
SELECT create_shard('vshard11', 6411, template => 'vt_rule');
INSERT INTO vshard11.t SELECT g FROM generate_series(1, 5) g;
REFRESH MATERIALIZED VIEW CONCURRENTLY vshard11.mv;
REFRESH MATERIALIZED VIEW vshard11.mv_count;
SELECT (SELECT count(*) FROM vshard11.mv) AS rows, (SELECT n FROM vshard11.mv_count) AS counted, (SELECT count(*) FROM vt_rule.mv) AS template_rows;
SELECT c.relname, pg_get_indexdef(i.indexrelid) LIKE '%vshard11.mv %' AS on_the_copy
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'vshard11.mv'::regclass ORDER BY 1;
SELECT reloptions FROM pg_class WHERE oid = 'vshard11.mv'::regclass;
SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('vshard11'),
                                                snowflake_id_node.fingerprint('vt_rule'), 'the shard', 'the template') AS difference;
SELECT snowflake_id_node.refusal('{vshard11}') AS refusal;
-- Another role's function in a materialized view's index (42501), as in a table's.
DROP MATERIALIZED VIEW vt_rule.mv_count;
CREATE INDEX mv_mal ON vt_rule.mv (vm.f(bucket::text));
SELECT create_shard('vshard12', 6412, template => 'vt_rule');
DROP INDEX vt_rule.mv_mal;
-- Floating-point constants are copied exactly, whatever the caller's extra_float_digits
-- (which the database's owner can set for every session).
CREATE TABLE vt_rule.f (id bigint PRIMARY KEY, score float8 NOT NULL);
CREATE VIEW vt_rule.low WITH (security_barrier) AS SELECT id FROM vt_rule.f WHERE score < '2.5'::float8;
SET extra_float_digits = -15;
SELECT create_shard('vshard14', 6414, template => 'vt_rule');
RESET extra_float_digits;
SELECT pg_get_viewdef('vshard14.low'::regclass) = replace(pg_get_viewdef('vt_rule.low'::regclass), 'vt_rule', 'vshard14') AS exact,
       pg_get_viewdef('vshard14.low'::regclass) LIKE '%2.5%' AS keeps_2_5;
SELECT drop_shard('vshard14', cascade => true);
DROP VIEW vt_rule.low;
DROP TABLE vt_rule.f;
-- A materialized view's index whose name the copy of a table's index took (LIKE names
-- indexes after their table): 42P07, naming both, nothing made.
CREATE TABLE vt_rule.u (id bigint CONSTRAINT u_key PRIMARY KEY);
CREATE INDEX u_pkey ON vt_rule.mv (bucket);
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT create_shard('vshard13', 6413, template => 'vt_rule');
\set SHOW_CONTEXT errors
\set VERBOSITY sqlstate
SELECT to_regnamespace('vshard13') IS NULL AS nothing_made;
DROP INDEX vt_rule.u_pkey;
DROP TABLE vt_rule.u;
RESET client_min_messages;
SET client_min_messages = warning;
SELECT drop_shard(schema_name, cascade => true) FROM snowflake_id_shards WHERE shard IN (6401, 6402, 6403, 6409, 6411);
DROP SCHEMA vt, vt_rule, vt_mal, vm CASCADE;
DROP TABLE public.vt_blocked;
DROP FUNCTION public.vt_ins();
DROP ROLE snowflake_reg_vmal;
