-- Applications that route by shard themselves (docs/app-routing.md): a node's use_shard,
-- which serves only the shards the node serves (SF001 otherwise) and puts the shard's schema
-- first in search_path for the transaction; the router's app_map, which a role with no other
-- right reads, and its version, which changes with every change of the map. (Under real
-- moves, with the Python clients: reliability/t_app_routing.sh.)
\set VERBOSITY sqlstate
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
RESET client_min_messages;
CREATE SCHEMA app_tpl;
CREATE TABLE app_tpl.items (id bigint PRIMARY KEY, v text NOT NULL);
SELECT count(create_shard('app_' || s, s, template => 'app_tpl')) FROM generate_series(7101, 7104) s;
-- What use_shard answers, as the application sees it: the schema, or the error's fields.
CREATE FUNCTION pg_temp.use(shard integer) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    msg text;
    hint text;
    detail text;
BEGIN
    RETURN 'served: ' || use_shard(shard) || '; search_path = ' || current_setting('search_path');
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT, detail = PG_EXCEPTION_DETAIL;
    RETURN format('%s: %s (hint: %s; detail: %s)', SQLSTATE, msg, nullif(hint, ''), nullif(detail, ''));
END
$$;

-- An application role with rights on its tables only: use_shard is everyone's.
CREATE ROLE app_user;
GRANT USAGE ON SCHEMA app_7101 TO app_user;
GRANT SELECT, INSERT ON app_7101.items TO app_user;
SET ROLE app_user;
SET search_path = "$user", public;
BEGIN;
SELECT use_shard(7101);
SELECT current_setting('search_path') AS in_transaction;
INSERT INTO items VALUES (1, 'one');
SELECT * FROM items;
COMMIT;
SELECT current_setting('search_path') AS after_commit;       -- the transaction's only
BEGIN;
SELECT use_shard(7101);
ROLLBACK;
SELECT current_setting('search_path') AS after_rollback;
-- Outside a transaction block it lasts its own statement: a client begins first.
SELECT use_shard(7101);
SELECT current_setting('search_path') AS autocommit;
-- A shard this node never had: SF001, telling the client to reload the map.
SELECT pg_temp.use(42);
\set VERBOSITY default
BEGIN;
SELECT use_shard(42);
ROLLBACK;
\set VERBOSITY sqlstate
RESET ROLE;
RESET search_path;

-- The moves' states, as their records on this node say (written here by hand; the steps
-- that write them: 047_node_moves.sql). A fenced source still serves (its writes get 40001
-- from the fence); a sealed source does not (its schema is the old copy), nor a target's
-- copy before it is activated; an activated one does.
INSERT INTO snowflake_id_node.move (key, router, role, peer, shards, schemas, state, marker) VALUES
    ('app/1', 'r', 'source', 'p', '{7101}', '{app_7101}', 'copying', 'm1'),
    ('app/2', 'r', 'source', 'p', '{7102}', '{app_7102}', 'fenced', 'm2'),
    ('app/3', 'r', 'source', 'p', '{7103}', '{app_7103}', 'sealed', 'm3'),
    ('app/4', 'r', 'target', 'p', '{7104}', '{app_7104}', 'incoming', 'm4');
SELECT s, pg_temp.use(s) FROM generate_series(7101, 7104) s;
UPDATE snowflake_id_node.move SET state = 'serving' WHERE key = 'app/4';
SELECT pg_temp.use(7104) AS activated;
DELETE FROM snowflake_id_node.move WHERE key LIKE 'app/%';
-- A dropped shard (a completed move's source) is not served either.
SELECT drop_shard('app_7103', cascade => true);
SELECT pg_temp.use(7103) AS dropped;
-- The schema's name is quoted in search_path.
SELECT create_shard('App Shard', 7105, template => 'app_tpl');
BEGIN;
SELECT pg_temp.use(7105) AS quoted;
ROLLBACK;
-- pg_catalog stays first: a session whose path names it later does not reach a built-in
-- name of the shard schema's owner (here a now() of its own) through use_shard.
CREATE FUNCTION "App Shard".now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT '2000-01-01 00:00+00'::timestamptz $$;
BEGIN;
SET LOCAL search_path = public, pg_catalog;
SELECT use_shard(7105) IS NOT NULL AS used;
SELECT now() = '2000-01-01 00:00+00' AS owners_now_ran;
ROLLBACK;
SELECT count(drop_shard(schema_name, cascade => true)) FROM snowflake_id_shards WHERE shard BETWEEN 7101 AND 7105;
DROP SCHEMA app_tpl CASCADE;
REVOKE ALL ON SCHEMA public FROM app_user;

-- The router's map for applications.
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id_router CASCADE;
RESET client_min_messages;
SELECT current_database() AS regress_db \gset
CREATE DATABASE app_reg_a;
CREATE DATABASE app_reg_b;
\c app_reg_a
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
\c app_reg_b
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
\c :regress_db
\set VERBOSITY sqlstate
SELECT add_node('a', format('host=%s port=%s dbname=app_reg_a', current_setting('unix_socket_directories'), current_setting('port'))),
       add_node('b', format('host=%s port=%s dbname=app_reg_b', current_setting('unix_socket_directories'), current_setting('port')));
SELECT assign_shards(0, 3, 'a'), assign_shards(3, 2, 'b');
-- A role with no right on the router reads the map, and nothing else of it.
SELECT current_setting('unix_socket_directories') AS sockets, current_setting('port') AS port \gset
SET ROLE app_user;
SELECT shard, node, replace(replace(connstr, :'sockets', 'SOCKETS'), :'port', 'PORT') AS connstr, map_version > 0 AS versioned
  FROM snowflake_id_router.app_map();
SELECT max(map_version) AS v FROM snowflake_id_router.app_map() \gset
SELECT count(*) FROM snowflake_id_router.shard;                 -- 42501
SELECT count(*) FROM snowflake_id_router.node;                  -- 42501
SELECT snowflake_id_router.map_version();                       -- 42501
SELECT count(*) FROM shard_map;                                 -- 42501
RESET ROLE;
-- Its version changes with every change of the map: an assignment, a flip (the move's
-- UPDATE of the map, here by hand), alter_node.
CREATE FUNCTION pg_temp.version_went_up() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v bigint := (SELECT DISTINCT map_version FROM snowflake_id_router.app_map());
    went_up boolean := v > current_setting('app.v')::bigint;
BEGIN
    PERFORM set_config('app.v', v::text, false);
    RETURN went_up;
END
$$;
SELECT set_config('app.v', :'v', false) IS NOT NULL AS noted;
SELECT assign_shards(5, 1, 'b');
SELECT pg_temp.version_went_up() AS assigned;
UPDATE snowflake_id_router.shard SET node = 'a' WHERE shard = 4;
SELECT pg_temp.version_went_up() AS flipped, (SELECT node FROM snowflake_id_router.app_map() WHERE shard = 4) AS shard_4;
SELECT alter_node('b', format('dbname=app_reg_b port=%s host=%s', current_setting('port'), current_setting('unix_socket_directories')));
SELECT pg_temp.version_went_up() AS altered,
       (SELECT DISTINCT connstr ~ '^dbname=' FROM snowflake_id_router.app_map() WHERE node = 'b') AS new_connstr;
SELECT p.prosecdef, p.provolatile, p.proconfig FROM pg_proc p WHERE p.oid = 'snowflake_id_router.app_map()'::regprocedure;
SELECT DISTINCT map_version AS v FROM snowflake_id_router.app_map() \gset

-- The map on every node: pushed by the router at each assignment, flip (a move's clean-up;
-- the flip by hand above is in the push of alter_node) and alter_node. A role with no other
-- right reads it there, the router's map under the router's version, and cannot change it.
\c app_reg_a
\set VERBOSITY sqlstate
SET ROLE app_user;
SELECT shard, node, connstr ~ '^dbname=' AS new_connstr, map_version = :v AS current FROM app_map();
SELECT snowflake_id_node.apply_map('r', :v + 1, '[]', '{}', '{}');    -- 42501
SELECT count(*) FROM snowflake_id_node.app_map;                       -- 42501
RESET ROLE;
SELECT p.prosecdef, p.provolatile, p.proconfig, has_function_privilege('app_user', p.oid, 'EXECUTE') AS app_user_may,
       pg_get_userbyid(p.proowner) = current_user AS owners
  FROM pg_proc p WHERE p.oid = 'app_map()'::regprocedure;
SELECT has_table_privilege('app_user', 'snowflake_id_node.app_map', 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE') AS app_user_on_table;
-- A push older than the map kept (two pushes out of order) changes nothing; a newer one is
-- kept whole, with its version.
SELECT snowflake_id_node.apply_map(m.router, :v - 1, '[]', '{}', '{}') = :v AS kept FROM snowflake_id_node.app_map m;
SELECT count(*) AS shards, min(map_version) = :v AS current FROM app_map();
SELECT snowflake_id_node.apply_map(m.router, :v + 1, '[{"name": "c", "connstr": "dbname=c"}]', '{7}', '{c}') = :v + 1 AS newer
  FROM snowflake_id_node.app_map m;
SELECT shard, node, connstr, map_version = :v + 1 AS newer FROM app_map();
\c :regress_db

DROP EXTENSION snowflake_id_router CASCADE;
DROP EXTENSION plproxy;
DROP DATABASE app_reg_a;
DROP DATABASE app_reg_b;
DROP ROLE app_user;
