-- snowflake_id_router on one server: the map, the PL/Proxy cluster it keeps, the refusals.
-- (Moves between servers: reliability/t_router_moves.sh.)
\set VERBOSITY sqlstate
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id_router CASCADE;
RESET client_min_messages;
SELECT extname, extversion FROM pg_extension WHERE extname IN ('plproxy', 'snowflake_id', 'dblink', 'snowflake_id_router') ORDER BY 1;
-- The cluster: 8192 partitions, all assigned to no node at first.
SELECT srvname, array_length(srvoptions, 1) AS options, srvoptions[8] AS p7 FROM pg_foreign_server WHERE srvname = 'snowflake_id';
-- This database is the node 'self'; the map follows add_node and assign_shards.
SELECT add_node('self', format('host=%s port=%s dbname=%s', current_setting('unix_socket_directories'),
                               current_setting('port'), current_database()));
SELECT assign_shards(0, 8, 'self');
SELECT assign_shards(4, 8, 'self');       -- idempotent where already on this node
SELECT count(*) AS assigned, min(shard), max(shard), min(node) FROM shard_map;
SELECT srvoptions[8] = 'p7=' || (SELECT connstr FROM shard_map WHERE shard = 7) AS p7_follows_map,
       srvoptions[13] AS p12, srvoptions[8192] AS p8191
  FROM pg_foreign_server WHERE srvname = 'snowflake_id';
-- Routing: RUN ON shard and RUN ON id_shard(id) reach the node; an unassigned shard fails by name.
CREATE FUNCTION where_am_i(shard integer) RETURNS text LANGUAGE sql RETURN 'on ' || current_database();
CREATE FUNCTION routed(shard integer) RETURNS text LANGUAGE plproxy AS $$
    CLUSTER 'snowflake_id'; RUN ON shard; SELECT where_am_i(shard);
$$;
CREATE FUNCTION routed_by_id(id bigint) RETURNS text LANGUAGE plproxy AS $$
    CLUSTER 'snowflake_id'; RUN ON id_shard(id); SELECT where_am_i(id_shard(id));
$$;
SELECT routed(7), routed_by_id(make_id('2024-01-01', 11, 5));
\set VERBOSITY default
SELECT routed(12);
\set VERBOSITY sqlstate
-- A map change is picked up at the next transaction, without a restart.
SELECT assign_shards(12, 1, 'self');
SELECT routed(12);
-- Refusals, each with its SQLSTATE.
SELECT add_node('self', 'host=elsewhere');                       -- 42710 duplicate
SELECT add_node('other', 'host=x password=secret');              -- 22023 password in connstr
SELECT add_node('other', 'postgresql://u:secret@x/db');          -- 22023
SELECT add_node(NULL, 'host=x');                                 -- 22004
SELECT add_node(repeat('n', 64), 'host=x');                      -- 22023
SELECT assign_shards(8190, 3, 'self');                           -- 22003
SELECT assign_shards(-1, 1, 'self');                             -- 22003
SELECT assign_shards(20, 0, 'self');                             -- 22003
SELECT assign_shards(20, 1, 'nowhere');                          -- 42704
SELECT assign_shards(20, 1, NULL);                               -- 22004
SELECT add_node('other', 'host=/nonexistent port=1 dbname=x');
SELECT assign_shards(5, 2, 'other');                             -- 55000 already on 'self'
SELECT move_shard(8192, 'other');                                -- 22003
SELECT move_shard(5, 'nowhere');                                 -- 42704
SELECT move_shard(100, 'other');                                 -- 55000 assigned to no node
SELECT move_shard(NULL, 'other');                                -- 22004
SELECT move_shard(5, 'self');                                    -- already there: a notice
-- A target that cannot be reached: 08001, and the shard stays where it was.
SELECT move_shard(5, 'other');
SELECT node FROM shard_map WHERE shard = 5;
-- Who may: superusers, or roles granted EXECUTE; the map (connect strings) is not public.
CREATE ROLE router_reg_user;
SET ROLE router_reg_user;
SELECT add_node('evil', 'host=evil');                            -- 42501
SELECT assign_shards(100, 1, 'self');                            -- 42501
SELECT move_shard(5, 'other');                                   -- 42501
SELECT * FROM shard_map;                                         -- 42501
SELECT * FROM snowflake_id_router.node;                          -- 42501
SELECT routed(7);                                                -- 42501: no USAGE on the server
RESET ROLE;
-- The functions: SECURITY DEFINER with search_path pinned, each commented.
SELECT p.oid::regprocedure, p.prosecdef, p.proconfig, p.provolatile, p.proisstrict, p.proparallel,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc p WHERE p.oid IN ('add_node(text,text)'::regprocedure, 'assign_shards(integer,integer,text)'::regprocedure,
                                 'move_shard(integer,text,text)'::regprocedure) ORDER BY 1;
SELECT count(*) AS functions_without_comment
  FROM pg_depend d JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake_id_router')
   AND obj_description(p.oid, 'pg_proc') IS NULL;
DROP ROLE router_reg_user;
DROP FUNCTION routed(integer), routed_by_id(bigint), where_am_i(integer);
SET client_min_messages = warning;
DROP EXTENSION snowflake_id_router CASCADE;
DROP EXTENSION plproxy, dblink;
RESET client_min_messages;
