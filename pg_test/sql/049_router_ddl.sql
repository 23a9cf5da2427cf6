-- alter_shards, template_status and a follower router, on one server: the nodes and the
-- second router are other databases of it. (Under load, interrupted, with moves:
-- reliability/t_alter_shards.sh.)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id_router CASCADE;
RESET client_min_messages;
-- (A procedure, committing first: the router's functions that write its tables refuse to
-- run inside a transaction block or a subtransaction no procedure began, 25001.)
CREATE PROCEDURE public.ddl_reg_refusal(q text, INOUT ddl_reg_refusal text DEFAULT NULL) LANGUAGE plpgsql AS $$
BEGIN
    COMMIT;
    BEGIN
        EXECUTE q;
        ddl_reg_refusal := 'no error';
    EXCEPTION WHEN OTHERS THEN
        ddl_reg_refusal := SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9]{6,}/[0-9]+', 'IDENTITY', 'g');
    END;
END
$$;
SELECT current_database() AS regress_db \gset
-- Two nodes, each a template and three shards.
CREATE DATABASE ddl_reg_node_a;
CREATE DATABASE ddl_reg_node_b;
\c ddl_reg_node_a
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
CREATE SCHEMA tpl;
CREATE TABLE tpl.posts (id bigint PRIMARY KEY, body text NOT NULL);
SELECT count(create_shard('s' || g, g, template => 'tpl')) FROM generate_series(0, 2) g;
\c ddl_reg_node_b
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
CREATE SCHEMA tpl;
CREATE TABLE tpl.posts (id bigint PRIMARY KEY, body text NOT NULL);
SELECT count(create_shard('s' || g, g, template => 'tpl')) FROM generate_series(100, 102) g;
\c :regress_db
SELECT add_node(n, format('host=%s port=%s dbname=ddl_reg_%s', current_setting('unix_socket_directories'), current_setting('port'), n))
  FROM (VALUES ('node_a'), ('node_b')) v(n);
SELECT assign_shards(0, 100, 'node_a'), assign_shards(100, 100, 'node_b');

-- A change on every schema of every node, one transaction a node.
SELECT node, state, schemas FROM alter_shards($$ALTER TABLE %I.posts ADD COLUMN note text NOT NULL DEFAULT ''$$);
SELECT change, ddl, state, node, node_state, schemas, error FROM schema_change_status;
SELECT node, matches, difference, changes_behind, shards_checked, shards_differing FROM template_status(shards => true);
-- Refused before any node is reached, each with its SQLSTATE.
CALL ddl_reg_refusal($q$SELECT alter_shards('CREATE INDEX CONCURRENTLY ON %I.posts (note)')$q$);
CALL ddl_reg_refusal($q$SELECT alter_shards('VACUUM %I.posts')$q$);
CALL ddl_reg_refusal($q$SELECT alter_shards('ALTER TABLE %I.posts ADD a int; DROP TABLE %I.posts')$q$);
CALL ddl_reg_refusal($q$SELECT alter_shards('ALTER TABLE %I.posts ADD b text DEFAULT ''50%''')$q$);
CALL ddl_reg_refusal($q$SELECT alter_shards('ALTER TABLE posts ADD b text')$q$);
CALL ddl_reg_refusal($q$SELECT alter_shards(NULL)$q$);
CALL ddl_reg_refusal($q$SELECT alter_shards($$COMMENT ON TABLE %I.posts IS 'posts of %I'$$)$q$);
CALL ddl_reg_refusal($q$SELECT alter_shards('CREATE TABLE %I.copy AS SELECT * FROM %I.posts')$q$);
CALL ddl_reg_refusal($q$SELECT alter_shards('CREATE MATERIALIZED VIEW %I.n AS SELECT count(*) FROM %I.posts')$q$);
-- Refused while a move is unfinished (its mover gone): its hidden copies must not change.
INSERT INTO snowflake_id_router.move (shards, source, target, source_identity, target_identity, template, state)
VALUES ('{1}', 'node_a', 'node_b', 'a', 'b', 'tpl', 'sealing');
CALL ddl_reg_refusal($q$SELECT alter_shards('COMMENT ON TABLE %I.posts IS ''x''')$q$);
-- (That record, as a move's states go: only the transitions move_may_go allows, each
-- through record_move; 55000 for any other.)
CALL ddl_reg_refusal($q$SELECT snowflake_id_router.record_move(id, 'checking', NULL, NULL, NULL, NULL, NULL, NULL) FROM snowflake_id_router.move$q$);
SELECT snowflake_id_router.record_move(id, 'flipped', NULL, NULL, NULL, NULL, 'e', NULL) FROM snowflake_id_router.move;
CALL ddl_reg_refusal($q$SELECT snowflake_id_router.record_move(id, 'done', NULL, NULL, NULL, NULL, NULL, NULL) FROM snowflake_id_router.move$q$);
-- (Only by its owner, the session driving it: 55000 for another, as for a mover whose
-- move a repair took over.)
CALL ddl_reg_refusal($q$SELECT snowflake_id_router.record_move(id, 'cleaning', NULL, NULL, NULL, NULL, NULL, '1/2') FROM snowflake_id_router.move$q$);
SELECT snowflake_id_router.record_move(id, 'cleaning', NULL, NULL, NULL, NULL, NULL, NULL) FROM snowflake_id_router.move;
SELECT snowflake_id_router.record_move(id, 'done', NULL, NULL, NULL, NULL, NULL, NULL) FROM snowflake_id_router.move;
SELECT state, error, flipped IS NOT NULL AS flipped, ended IS NOT NULL AS ended, map_version IS NOT NULL AS map_version
  FROM snowflake_id_router.move;
CALL ddl_reg_refusal($q$SELECT snowflake_id_router.record_move(id, 'undone', NULL, NULL, NULL, NULL, NULL, NULL) FROM snowflake_id_router.move$q$);
DELETE FROM snowflake_id_router.move;
-- Refused by a node's template, before any node changes: nothing recorded.
CALL ddl_reg_refusal($q$SELECT alter_shards('ALTER TABLE %I.posts ADD COLUMN note text')$q$);
SELECT count(*) AS changes FROM snowflake_id_router.schema_change;
-- A node that cannot be reached: refused, or skipped and then behind.
UPDATE snowflake_id_router.node SET connstr = 'host=/nonexistent port=1 dbname=x' WHERE name = 'node_b';
CALL ddl_reg_refusal($q$SELECT alter_shards('CREATE INDEX ON %I.posts (note)')$q$);
SELECT node, state, schemas FROM alter_shards('CREATE INDEX ON %I.posts (note)', skip_unreachable => true);
SELECT change, state, node, node_state FROM schema_change_status WHERE change = 2;
SELECT node, fingerprint IS NULL AS unreachable, changes_behind FROM template_status();
-- A later change waits until node_b has the earlier one; calling it again finishes it there.
UPDATE snowflake_id_router.node SET connstr = format('host=%s port=%s dbname=ddl_reg_node_b',
    current_setting('unix_socket_directories'), current_setting('port')) WHERE name = 'node_b';
CALL ddl_reg_refusal($q$SELECT alter_shards('COMMENT ON TABLE %I.posts IS ''posts''')$q$);
SET client_min_messages = warning;
SELECT node, state, schemas FROM alter_shards('CREATE INDEX ON %I.posts (note)');
RESET client_min_messages;
SELECT change, state, node, node_state, schemas FROM schema_change_status WHERE change = 2;
SELECT node, matches, changes_behind, shards_differing FROM template_status(shards => true);
-- A node whose template differs is named, with its first difference.
\c ddl_reg_node_b
ALTER TABLE tpl.posts ADD COLUMN extra integer;
\c :regress_db
SELECT node, matches, difference FROM template_status();
\c ddl_reg_node_b
ALTER TABLE tpl.posts DROP COLUMN extra;
\c :regress_db
-- Who may: superusers, or roles granted EXECUTE; alter_shards superusers only, even with
-- EXECUTE granted (its statement runs as a superuser on every node).
CREATE ROLE ddl_reg_user;
GRANT EXECUTE ON FUNCTION alter_shards(text, text, boolean) TO ddl_reg_user;
SET SESSION AUTHORIZATION ddl_reg_user;
CALL ddl_reg_refusal($q$SELECT alter_shards('COMMENT ON TABLE %I.posts IS ''x''')$q$);
CALL ddl_reg_refusal($q$SELECT template_status()$q$);
CALL ddl_reg_refusal($q$SELECT add_router('r', 'host=x')$q$);
CALL ddl_reg_refusal($q$SELECT remove_router('r')$q$);
CALL ddl_reg_refusal($q$SELECT abandon_schema_change(1)$q$);
CALL ddl_reg_refusal($q$SELECT * FROM schema_change_status$q$);
CALL ddl_reg_refusal($q$SELECT * FROM router_status$q$);
RESET SESSION AUTHORIZATION;
REVOKE EXECUTE ON FUNCTION alter_shards(text, text, boolean) FROM ddl_reg_user;
DROP ROLE ddl_reg_user;

-- A follower router: another database with the extension, empty.
CREATE DATABASE ddl_reg_router_b;
\c ddl_reg_router_b
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id_router CASCADE;
CREATE PROCEDURE ddl_reg_refusal(q text, INOUT ddl_reg_refusal text DEFAULT NULL) LANGUAGE plpgsql AS $$
BEGIN
    COMMIT;
    BEGIN
        EXECUTE q;
        ddl_reg_refusal := 'no error';
    EXCEPTION WHEN OTHERS THEN
        ddl_reg_refusal := SQLSTATE || ': ' || SQLERRM;
    END;
END
$$;
\c :regress_db
SELECT add_router('router_b', format('host=%s port=%s dbname=ddl_reg_router_b', current_setting('unix_socket_directories'), current_setting('port')));
SELECT name, role, map_version = snowflake_id_router.map_version() AS current, behind_since, error FROM router_status;
-- A monitoring role reads router_status with SELECT on the view alone (issue 33).
CREATE ROLE ddl_reg_monitor;
GRANT SELECT ON router_status TO ddl_reg_monitor;
SET SESSION AUTHORIZATION ddl_reg_monitor;
SELECT name, role, current FROM router_status;
SELECT name, versions_behind FROM router_status;
RESET SESSION AUTHORIZATION;
REVOKE SELECT ON router_status FROM ddl_reg_monitor;
DROP ROLE ddl_reg_monitor;
CALL ddl_reg_refusal(format($q$SELECT add_router('again', 'host=%s port=%s dbname=ddl_reg_router_b')$q$,
                              current_setting('unix_socket_directories'), current_setting('port')));
CALL ddl_reg_refusal(format($q$SELECT add_router('myself', 'host=%s port=%s dbname=%s')$q$,
                              current_setting('unix_socket_directories'), current_setting('port'), current_database()));
CALL ddl_reg_refusal(format($q$SELECT add_router('a_node', 'host=%s port=%s dbname=ddl_reg_node_a')$q$,
                              current_setting('unix_socket_directories'), current_setting('port')));
CALL ddl_reg_refusal($q$SELECT add_router('router_c', 'host=x password=secret')$q$);
-- A router database is no node: the follower, this router itself.
CALL ddl_reg_refusal(format($q$SELECT add_node('follower', 'host=%s port=%s dbname=ddl_reg_router_b')$q$,
                              current_setting('unix_socket_directories'), current_setting('port')));
CALL ddl_reg_refusal(format($q$SELECT add_node('myself', 'host=%s port=%s dbname=%s')$q$,
                              current_setting('unix_socket_directories'), current_setting('port'), current_database()));
\c ddl_reg_router_b
-- The follower has the map, and refuses cluster functions, naming the primary.
SELECT count(*) AS shards, count(DISTINCT node) AS nodes FROM shard_map;
SELECT role FROM router_status;
CALL ddl_reg_refusal($q$SELECT alter_shards('COMMENT ON TABLE %I.posts IS ''x''')$q$) \gset
SELECT :'ddl_reg_refusal' LIKE '55000: alter_shards runs on the primary router, and this router follows router database%' AS refused;
CALL ddl_reg_refusal($q$SELECT assign_shards(500, 1, 'node_a')$q$) \gset
SELECT :'ddl_reg_refusal' LIKE '55000: assign_shards runs on the primary router%' AS refused;
CALL ddl_reg_refusal($q$SELECT add_router('x', 'host=x')$q$) \gset
SELECT :'ddl_reg_refusal' LIKE '55000: add_router runs on the primary router%' AS refused;
\c :regress_db
-- A map change reaches the follower at the next push.
SELECT assign_shards(500, 10, 'node_a');
SELECT snowflake_id_router.push_map();
\c ddl_reg_router_b
SELECT count(*) AS shards FROM shard_map;
\c :regress_db
-- A follower that cannot be reached is marked behind; the next push catches it up.
UPDATE snowflake_id_router.router SET connstr = 'host=/nonexistent port=1 dbname=x';
SELECT assign_shards(600, 10, 'node_a');
SET client_min_messages = error;
SELECT snowflake_id_router.push_map() AS all_current;
RESET client_min_messages;
SELECT name, current, behind_since IS NOT NULL AS behind, error IS NOT NULL AS has_error FROM router_status;
UPDATE snowflake_id_router.router SET connstr = format('host=%s port=%s dbname=ddl_reg_router_b',
    current_setting('unix_socket_directories'), current_setting('port'));
SELECT snowflake_id_router.push_map() AS all_current;
SELECT name, current, behind_since FROM router_status;
-- Removed, it stops following and its map is emptied.
SELECT remove_router('router_b');
SELECT count(*) AS routers FROM router_status;
\c ddl_reg_router_b
SELECT count(*) AS shards, (SELECT count(*) FROM router_status) AS routers FROM shard_map;
\c :regress_db
-- Nor is a router database that follows no one.
CALL ddl_reg_refusal(format($q$SELECT add_node('router_b', 'host=%s port=%s dbname=ddl_reg_router_b')$q$,
                              current_setting('unix_socket_directories'), current_setting('port')));

SET client_min_messages = warning;
DROP EXTENSION snowflake_id_router CASCADE;
DROP EXTENSION plproxy;
DROP EXTENSION IF EXISTS dblink;
DROP PROCEDURE ddl_reg_refusal(text, text);
DROP DATABASE ddl_reg_node_a;
DROP DATABASE ddl_reg_node_b;
DROP DATABASE ddl_reg_router_b;
