-- Cluster operations on one server, two other databases of it standing as nodes: the
-- planner, rebalance_plan, the views node_status and shard_status, alter_node, remove_node,
-- and every refusal of rebalance, drain_node, rebalance_stop. (Rebalances and drains that
-- move shards, under load: reliability/t_cluster_rebalance.sh; a failover:
-- reliability/t_cluster_failover.sh.)
\set VERBOSITY sqlstate
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id_router CASCADE;
RESET client_min_messages;

-- == The planner, on its own ==
CREATE TEMPORARY TABLE placed (shard integer, node text, bytes bigint);
CREATE FUNCTION pg_temp.plan(strategy text, drain text, nodes text[])
RETURNS TABLE (shard integer, source text, target text, weight bigint) LANGUAGE sql AS $$
    SELECT * FROM snowflake_id_router.plan_moves(strategy, drain, nodes,
        (SELECT coalesce(array_agg(shard ORDER BY shard), '{}') FROM placed),
        (SELECT coalesce(array_agg(node ORDER BY shard), '{}') FROM placed),
        (SELECT coalesce(array_agg(bytes ORDER BY shard), '{}') FROM placed))
$$;
-- What each node holds once a plan is carried out.
CREATE FUNCTION pg_temp.after(strategy text, drain text, nodes text[])
RETURNS TABLE (node text, shards bigint, bytes numeric) LANGUAGE sql AS $$
    SELECT coalesce(m.target, p.node), count(*), sum(p.bytes)
      FROM placed p LEFT JOIN pg_temp.plan(strategy, drain, nodes) m ON m.shard = p.shard
     GROUP BY 1 ORDER BY 1
$$;
-- 1,000 shards on two nodes spread over three: each ends within one shard of the others,
-- the two givers give alike (their highest shards), and no shard moves twice.
INSERT INTO placed SELECT g, CASE WHEN g < 500 THEN 'a' ELSE 'b' END, 1000 + (g % 7) * 100000 FROM generate_series(0, 999) g;
SELECT source, target, count(*), min(shard), max(shard) FROM pg_temp.plan('by_shard_count', NULL, '{a,b,c}') GROUP BY 1, 2 ORDER BY 1, 2;
SELECT * FROM pg_temp.after('by_shard_count', NULL, '{a,b,c}');
SELECT count(*) = count(DISTINCT shard) AS each_shard_once FROM pg_temp.plan('by_shard_count', NULL, '{a,b,c}');
-- Balanced already: nothing to do (also with a node holding nothing and no shard at all).
SELECT count(*) FROM pg_temp.plan('by_shard_count', NULL, '{a,b}');
SELECT count(*) FROM snowflake_id_router.plan_moves('by_shard_count', NULL, '{a,b,c}', '{}', '{}', '{}');
-- By size: the nodes end within a tenth of the mean of each other.
SELECT (max(bytes) - min(bytes)) / avg(bytes) <= 0.1 AS within_a_tenth, sum(shards)
  FROM pg_temp.after('by_disk_size', NULL, '{a,b,c}');
-- One big shard among small ones: it stays (moving it would unbalance the receiver), small ones go.
TRUNCATE placed;
INSERT INTO placed SELECT g, 'a', CASE WHEN g = 0 THEN 50000000 ELSE 10000 END FROM generate_series(0, 99) g;
INSERT INTO placed SELECT g, 'b', 10000 FROM generate_series(100, 199) g;
SELECT count(*) FILTER (WHERE shard = 0) AS big_moved, count(*) AS moved FROM pg_temp.plan('by_disk_size', NULL, '{a,b}');
-- A drain: every shard of the node goes, heaviest first to the lightest; the others stay.
TRUNCATE placed;
INSERT INTO placed SELECT g, CASE WHEN g < 50 THEN 'a' WHEN g < 70 THEN 'b' ELSE 'c' END, 1000 FROM generate_series(0, 99) g;
SELECT * FROM pg_temp.after('by_shard_count', 'a', '{a,b,c}');
SELECT count(*) FILTER (WHERE source <> 'a') AS moved_from_others FROM pg_temp.plan('by_shard_count', 'a', '{a,b,c}');
-- Refusals: the only node drained (55000), an unknown strategy, a shard without a node (22023), NULL (22004).
SELECT * FROM snowflake_id_router.plan_moves('by_shard_count', 'a', '{a}', '{1}', '{a}', '{1}');
SELECT * FROM pg_temp.plan('by_rows', NULL, '{a,b,c}');
SELECT * FROM snowflake_id_router.plan_moves('by_shard_count', NULL, '{a}', '{1}', '{z}', '{1}');
SELECT * FROM snowflake_id_router.plan_moves('by_shard_count', NULL, '{a}', '{1}', '{a}', '{}');
SELECT * FROM snowflake_id_router.plan_moves(NULL, NULL, '{a}', '{1}', '{a}', '{1}');

-- == Two databases of this server as nodes ==
CREATE DATABASE sfops_a;
CREATE DATABASE sfops_b;
\c sfops_a
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
CREATE SCHEMA tpl;
CREATE TABLE tpl.posts (id bigint PRIMARY KEY, body text);
SELECT count(create_shard('s' || g, g, template => 'tpl')) FROM generate_series(0, 5) g;
INSERT INTO s1.posts (body) SELECT 'x' FROM generate_series(1, 10);
\c sfops_b
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
CREATE SCHEMA tpl;
CREATE TABLE tpl.posts (id bigint PRIMARY KEY, body text);
SELECT create_shard('s7', 7, template => 'tpl');   -- a copy the map does not send calls to
\c snowflake_regress
\set VERBOSITY sqlstate
CREATE FUNCTION pg_temp.connstr(db text) RETURNS text LANGUAGE sql
RETURN format('host=%s port=%s dbname=%s', current_setting('unix_socket_directories'), current_setting('port'), db);
SELECT add_node('a', pg_temp.connstr('sfops_a')), add_node('b', pg_temp.connstr('sfops_b'));
SELECT assign_shards(0, 4096, 'a'), assign_shards(4096, 4096, 'b');

-- The views: one query per node.
SELECT node, reachable, error, wal_level IS NOT NULL AS wal_level, in_recovery, shards_mapped, shards_served,
       bytes > 0 AS bytes, moves_running, leftovers, standbys
  FROM node_status;
SELECT shard, node, mapped, schema_name, tables, newest_at <= clock_timestamp() AS newest_past,
       ahead_of_clock < interval '0' AS behind_clock, ids_last_minute
  FROM shard_status;
-- rebalance_plan: the shards with data spread (6 on a, none mapped to b holds data).
SELECT batch, source, target, shards, bytes FROM rebalance_plan();          -- bytes: by_disk_size only
SELECT count(*) AS batches, bool_and(source = 'a' AND target = 'b') AS a_to_b, bool_and(bytes > 0) AS bytes
  FROM rebalance_plan('by_disk_size');
SELECT batch, source, target, shards FROM rebalance_plan(batch_size => 2);
SELECT batch, source, target, shards FROM rebalance_plan(drain => 'a');
-- Refusals.
SELECT * FROM rebalance_plan('by_rows');
SELECT * FROM rebalance_plan(batch_size => 0);
SELECT * FROM rebalance_plan(NULL);
SELECT * FROM rebalance_plan(drain => 'nope');
CALL rebalance('by_rows');
CALL rebalance(batch_size => 9000);
CALL rebalance(parallel_moves => 0);                 -- 22023: 1 to 8 batches at once
CALL drain_node('a', parallel_moves => NULL);        -- 22004
CALL drain_node(NULL);
CALL drain_node('nope');
BEGIN;
CALL rebalance();                                    -- 2D000: it commits, so not in a transaction block
ROLLBACK;
SELECT rebalance_stop();                             -- none running
SELECT count(*) FROM rebalance_status;               -- none of the refused left a record
-- A rebalance whose session is gone (no session start recorded matches): interrupted; rebalance_stop marks it
-- stopped; the view counts its batches.
INSERT INTO snowflake_id_router.rebalance (id, kind, strategy, batch_size, template, state, pid, started)
VALUES (1, 'rebalance', 'by_shard_count', 2, 'tpl', 'running', pg_backend_pid(), now() - interval '1 minute');
INSERT INTO snowflake_id_router.rebalance_batch (rebalance, batch, source, target, shards, state, started, ended)
VALUES (1, 1, 'a', 'b', '{4,5}', 'done', now() - interval '50 s', now() - interval '40 s'),
       (1, 2, 'a', 'b', '{3}', 'planned', NULL, NULL);
SELECT id, kind, state, batches, batches_done, shards, shards_done, shards_left, current_batch, time_left FROM rebalance_status;
SELECT rebalance_stop();
SELECT id, state, ended IS NOT NULL AS ended FROM rebalance_status;
-- SELECT on rebalance_status is all it takes to read it (docs/cluster.md).
CREATE ROLE router_ops_reader;
GRANT SELECT ON rebalance_status TO router_ops_reader;
SET ROLE router_ops_reader;
SELECT count(*) > 0 AS readable, count(*) FILTER (WHERE state IS NOT NULL) = count(*) AS states FROM rebalance_status;
RESET ROLE;
DROP OWNED BY router_ops_reader;
DROP ROLE router_ops_reader;
DELETE FROM snowflake_id_router.rebalance;
SELECT remove_node(NULL);
SELECT remove_node('nope');
SELECT remove_node('a');                             -- 55000: it holds shards
SELECT alter_node(NULL, 'x');
SELECT alter_node('a', NULL);
SELECT alter_node('nope', pg_temp.connstr('sfops_a'));
SELECT alter_node('a', pg_temp.connstr('sfops_b'));          -- 55000: another database
SELECT alter_node('a', pg_temp.connstr('sfops_a') || ' password=x');   -- 22023
SELECT alter_node('a', pg_temp.connstr('sfops_a') || ' service=x');    -- 22023: a service can hold a user and password
-- The same database by another spelling: accepted, and every shard of a follows at once.
SELECT alter_node('a', format('postgresql:///sfops_a?host=%s&port=%s', current_setting('unix_socket_directories'), current_setting('port')));
SELECT count(*) AS options_of_a FROM pg_foreign_server, unnest(srvoptions) o
 WHERE srvname = 'snowflake_id' AND o LIKE '%sfops_a%';
SELECT node, reachable FROM node_status;
-- A node without shards goes (b's shards unassigned by hand, as the owner may), once it
-- serves none: the copy s7 there is refused by name, then dropped there.
DELETE FROM snowflake_id_router.shard WHERE node = 'b';
\set VERBOSITY terse
SELECT remove_node('b');
\c sfops_b
SELECT drop_shard('s7', true);
\c snowflake_regress
\set VERBOSITY sqlstate
SELECT remove_node('b');
SELECT name FROM snowflake_id_router.node ORDER BY 1;

-- Who may: superusers, or roles granted.
CREATE ROLE router_ops_user;
SET ROLE router_ops_user;
SELECT * FROM rebalance_plan();
CALL rebalance();
CALL drain_node('a');
SELECT rebalance_stop();
SELECT alter_node('a', 'host=x');
SELECT remove_node('a');
SELECT * FROM node_status;
SELECT * FROM shard_status;
SELECT * FROM rebalance_status;
RESET ROLE;
-- Granted what the documentation says, it may rebalance, one batch at a time: batches
-- moving at once run in loopback sessions of the extension's owner, kept open across the
-- procedure's commits, which only a superuser may hold (42501, whatever else holds).
GRANT USAGE ON SCHEMA snowflake_id_router TO router_ops_user;
GRANT EXECUTE ON PROCEDURE rebalance(text, integer, text, integer),
                           snowflake_id_router.run_rebalance(text, text, integer, text, integer) TO router_ops_user;
GRANT EXECUTE ON FUNCTION snowflake_id_router.require_primary(text) TO router_ops_user;
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid FROM pg_proc p
              WHERE p.pronamespace = 'snowflake_id_router'::regnamespace AND p.proname LIKE 'rebalance\_%' LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO router_ops_user', f);
    END LOOP;
END $$;
SET ROLE router_ops_user;
\set VERBOSITY default
CALL rebalance(parallel_moves => 2);
\set VERBOSITY sqlstate
RESET ROLE;
DROP OWNED BY router_ops_user;
DROP ROLE router_ops_user;
-- The functions: SECURITY DEFINER with search_path pinned, where they are functions; the
-- procedures (which commit) are neither, and run only SECURITY DEFINER steps.
SELECT p.oid::regprocedure, p.prokind, p.prosecdef, p.proconfig
  FROM pg_proc p WHERE p.proname IN ('rebalance', 'drain_node', 'rebalance_plan', 'rebalance_stop', 'alter_node', 'remove_node')
 ORDER BY p.oid::regprocedure::text;

SET client_min_messages = warning;
DROP EXTENSION snowflake_id_router CASCADE;
DROP EXTENSION plproxy;
DROP EXTENSION IF EXISTS dblink;
DROP DATABASE sfops_a;
DROP DATABASE sfops_b;
RESET client_min_messages;
