-- snowflake_id_router on one server: the map, the PL/Proxy cluster it keeps, the refusals.
-- (Moves between servers: reliability/t_router_moves.sh.)
\set VERBOSITY sqlstate
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id_router CASCADE;
RESET client_min_messages;
SELECT extname, CASE WHEN extname LIKE 'snowflake%' THEN extversion = (SELECT default_version FROM pg_available_extensions WHERE name = extname) END AS current  -- (PL/Proxy's differs by version)
  FROM pg_extension WHERE extname IN ('plproxy', 'snowflake_id', 'snowflake_id_router') ORDER BY 1;
-- The router makes its connections through snowflake_id's own registry, not dblink.
SELECT requires FROM pg_available_extension_versions WHERE name = 'snowflake_id_router' AND version = (SELECT default_version FROM pg_available_extensions WHERE name = 'snowflake_id_router');
-- The cluster: 8192 partitions, all assigned to no node at first.
SELECT srvname, array_length(srvoptions, 1) AS options, srvoptions[8] AS p7 FROM pg_foreign_server WHERE srvname = 'snowflake_id';
-- A node: another database of this server, with snowflake_id and a function to route to.
SELECT current_database() AS regress_db, current_user AS regress_user_at_start \gset
CREATE DATABASE router_reg_node;
\c router_reg_node
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
CREATE FUNCTION where_am_i(shard integer) RETURNS text LANGUAGE sql RETURN 'on ' || current_database();
\c :regress_db
\set VERBOSITY sqlstate
-- The map follows add_node and assign_shards. The connect string is stored as libpq reads
-- it (here a URI), each value quoted.
SELECT add_node('n1', format('postgresql://%s@:%s/router_reg_node?host=%s',
                             current_user, current_setting('port'), current_setting('unix_socket_directories')));
SELECT replace(replace(connstr, current_setting('unix_socket_directories'), 'SOCKETS'), current_setting('port'), 'PORT') AS connstr,
       identity ~ '^[0-9]+/[0-9]+/[0-9a-f-]{36}$' AS identified FROM snowflake_id_router.node;
SELECT assign_shards(0, 8, 'n1');
SELECT assign_shards(4, 8, 'n1');       -- idempotent where already on this node
SELECT count(*) AS assigned, min(shard), max(shard), min(node) FROM shard_map;
SELECT srvoptions[8] = 'p7=' || (SELECT connstr FROM shard_map WHERE shard = 7) AS p7_follows_map,
       srvoptions[13] AS p12, srvoptions[8192] AS p8191
  FROM pg_foreign_server WHERE srvname = 'snowflake_id';
-- Routing: RUN ON shard and RUN ON id_shard(id) reach the node; an unassigned shard fails by name.
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
SELECT assign_shards(12, 1, 'n1');
SELECT routed(12);
-- A node is known by what it is: the same database under another name or spelling, and
-- this router itself, are refused.
SELECT add_node('n1_again', format('dbname=router_reg_node port=%s host=%s',
                                   current_setting('port'), current_setting('unix_socket_directories')));  -- 42710
SELECT add_node('me', format('host=%s port=%s dbname=%s', current_setting('unix_socket_directories'),
                             current_setting('port'), current_database()));                               -- 55000
-- Secrets in a connect string are refused in every syntax libpq reads (they would be
-- readable by every role in pg_foreign_server), without being echoed.
SELECT add_node('other', 'host=x password=secret');                        -- 22023
SELECT add_node('other', $$dbname='postgres'password=S3cret1$$);           -- 22023
SELECT add_node('other', 'postgresql://u@/db?host=/tmp/x&password=S3cret2'); -- 22023
SELECT add_node('other', 'host=/tmp/x sslpassword=S3cret3');               -- 22023
SELECT add_node('other', 'postgresql://u:secret@x/db');                    -- 22023
SELECT add_node('other', 'host=x port');                                   -- 22023, libpq's own message
-- So is a connection service, which libpq reads only when it connects: its entry can hold a
-- user and a password that no check here would see. In both syntaxes, without a file.
SELECT add_node('other', 'service=nodes host=x');                          -- 22023
SELECT add_node('other', 'host=x servicefile=/tmp/x/pg_service.conf');     -- 22023
SELECT add_node('other', 'postgresql://x/db?service=nodes');               -- 22023
SELECT add_node('other', 'postgresql:///db?host=/tmp/x&servicefile=%2Ftmp%2Fx');  -- 22023
-- So is a password file of the caller's choosing, and more than one server: PL/Proxy's
-- routed calls, unchecked, would land on the next one listed when the first is down.
SELECT add_node('other', 'host=x passfile=/tmp/x/pgpass');                 -- 22023
-- And any option not among those a node's may hold (connstr_keywords): one that writes a
-- file as the server user, hands on its credentials, or changes the protocol.
SELECT add_node('other', 'host=x sslkeylogfile=/tmp/x/keys');              -- 22023
SELECT add_node('other', 'postgresql://x/db?gssdelegation=1');             -- 22023
SELECT add_node('other', 'host=x replication=database');                   -- 22023
SELECT add_node('other', 'host=x options=''-c default_transaction_read_only=on''');  -- 22023
SELECT add_node('other', 'postgresql://x/db?options=-c%20session_replication_role%3Dreplica');  -- 22023
SELECT add_node('other', 'host=/tmp/x,/tmp/y port=5432');                  -- 22023
SELECT add_node('other', 'hostaddr=127.0.0.1,127.0.0.2 port=5432');        -- 22023
SELECT add_node('other', 'host=x port=5432,5433');                         -- 22023
SELECT add_node('other', 'postgresql://x:5432,y:5433/db');                 -- 22023
SELECT add_node('other', 'postgresql:///db?host=/tmp/x,/tmp/y');           -- 22023
-- Nor a hostaddr beside a host: libpq would send host's password from ~/.pgpass to the address.
SELECT add_node('other', 'host=node-a.internal hostaddr=127.0.0.1 port=5432');     -- 22023
SELECT add_node('other', 'postgresql://node-a.internal:5432/db?hostaddr=127.0.0.1');  -- 22023
SELECT count(*) AS nodes_named_other FROM snowflake_id_router.node WHERE name = 'other';
\set VERBOSITY default
SELECT add_node('other', 'postgresql://x:5432,y:5433/db');
SELECT add_node('other', $$dbname='postgres'password=S3cret1$$);
SELECT add_node('other', 'postgresql://x/db?service=nodes');
\set VERBOSITY sqlstate
-- Settings are not session settings: a session's SET steers nothing; only the owner writes them.
SET snowflake_id_router.self_connstr = 'dbname=decoy';
SET snowflake_id_router.lock_timeout = '0';
SELECT snowflake_id_router.setting('self_connstr') = format('host=''%s'' port=''%s'' dbname=''%s'' user=''%s''', current_setting('unix_socket_directories'), current_setting('port'), current_database(), current_user) AS default_loopback,
       snowflake_id_router.setting('lock_timeout') AS lock_timeout;
RESET snowflake_id_router.self_connstr;
RESET snowflake_id_router.lock_timeout;
INSERT INTO snowflake_id_router.setting VALUES ('lock_timeout', '0');      -- 23514: no timeout is no bound
INSERT INTO snowflake_id_router.setting VALUES ('self_connstr',
    format('host=%s port=%s dbname=router_reg_node', current_setting('unix_socket_directories'), current_setting('port')));
SELECT snowflake_id_router.connect_self('x');                             -- 55000: the loopback must reach this database
DELETE FROM snowflake_id_router.setting;
SELECT snowflake_id_router.connect_self('x'), snowflake_id_router.disconnect('x');
-- Refusals, each with its SQLSTATE.
-- A database whose owner made a schema snowflake_id_node and an identity() of their own:
-- the router reads nothing but pg_catalog there before it knows the schema is the
-- extension's, so their function never runs (as the router's superuser): 55000.
CREATE ROLE router_reg_dbowner LOGIN CREATEDB;
SET ROLE router_reg_dbowner;
CREATE DATABASE router_reg_fake;
RESET ROLE;
\c router_reg_fake router_reg_dbowner
CREATE SCHEMA snowflake_id_node;
CREATE FUNCTION snowflake_id_node.identity() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE 'ALTER ROLE router_reg_dbowner SUPERUSER';
    END IF;
    RETURN '1/1';
END $$;
\c :regress_db :regress_user_at_start
\set VERBOSITY sqlstate
SELECT add_node('fake', format('host=%s port=%s dbname=router_reg_fake', current_setting('unix_socket_directories'), current_setting('port')));  -- 55000
SELECT rolsuper AS fake_owner_superuser FROM pg_roles WHERE rolname = 'router_reg_dbowner';
SELECT count(*) AS fake_nodes FROM snowflake_id_router.node WHERE name = 'fake';
DROP DATABASE router_reg_fake;
DROP ROLE router_reg_dbowner;
SELECT add_node('n1', 'host=elsewhere');                         -- 42710 duplicate
SELECT add_node('other', 'host=/nonexistent port=1 dbname=x');   -- 08001: a node must be reachable to be added
SELECT add_node(NULL, 'host=x');                                 -- 22004
SELECT add_node(repeat('n', 64), 'host=x');                      -- 22023
SELECT assign_shards(8190, 3, 'n1');                           -- 22003
SELECT assign_shards(-1, 1, 'n1');                             -- 22003
SELECT assign_shards(20, 0, 'n1');                             -- 22003
SELECT assign_shards(20, 1, 'nowhere');                          -- 42704
SELECT assign_shards(20, 1, NULL);                               -- 22004
-- Another node, which then becomes unreachable (its connect string changed by hand).
CREATE DATABASE router_reg_other;
\c router_reg_other
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
\c :regress_db
\set VERBOSITY sqlstate
SELECT add_node('other', format('host=%s port=%s dbname=router_reg_other', current_setting('unix_socket_directories'), current_setting('port')));
SELECT assign_shards(5, 2, 'other');                             -- 55000 already on 'n1'
SELECT move_shard(8192, 'other');                                -- 22003
SELECT move_shard(5, 'nowhere');                                 -- 42704
SELECT move_shard(100, 'other');                                 -- 55000 assigned to no node
SELECT move_shard(NULL, 'other');                                -- 22004
SELECT move_shard(5, 'n1');                                    -- already there: a notice
-- move_shards: several shards of one node in one move; the same refusals, and its own.
SELECT move_shards(NULL, 'other');                               -- 22004
SELECT move_shards('{5,NULL}', 'other');                         -- 22004
SELECT move_shards('{}', 'other');                               -- 22023
SELECT move_shards('{5,8192}', 'other');                         -- 22003
SELECT move_shards('{5,6}', 'nowhere');                          -- 42704
SELECT move_shards('{5,100}', 'other');                          -- 55000 shard 100 assigned to no node
SELECT move_shards('{5,5,6}', 'n1') IS NULL AS nothing_to_do;    -- already there: a notice, no move
CREATE DATABASE router_reg_third;
\c router_reg_third
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
\c :regress_db
\set VERBOSITY sqlstate
SELECT add_node('third', format('host=%s port=%s dbname=router_reg_third', current_setting('unix_socket_directories'), current_setting('port')));
SELECT assign_shards(100, 1, 'third');
SELECT move_shards('{5,100}', 'other');                          -- 55000 on two nodes
\set VERBOSITY default
SELECT move_shards('{5,100}', 'other');
\set VERBOSITY sqlstate
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT move_shards('{5}', 'other');                              -- 25000: the map is read afresh as the move goes
ROLLBACK;
-- A target that cannot be reached: 08001, and the shard stays where it was.
UPDATE snowflake_id_router.node SET connstr = 'host=/nonexistent port=1 dbname=x' WHERE name = 'other';
SELECT move_shard(5, 'other');
SELECT node FROM shard_map WHERE shard = 5;
SELECT count(*) AS moves_recorded FROM move_history;             -- none: it failed before its record
-- repair_moves() finds nothing to repair, and says which nodes it could not look at.
SELECT move, shards, regexp_replace(outcome, ': .*', '') AS outcome FROM repair_moves();
-- Who may: superusers, or roles granted EXECUTE; the map (connect strings) is not public.
CREATE ROLE router_reg_user;
SET ROLE router_reg_user;
SELECT add_node('evil', 'host=evil');                            -- 42501
SELECT assign_shards(100, 1, 'n1');                            -- 42501
SELECT move_shard(5, 'other');                                   -- 42501
SELECT move_shards('{5}', 'other');                              -- 42501
SELECT * FROM repair_moves();                                    -- 42501
SELECT * FROM move_history;                                      -- 42501
INSERT INTO snowflake_id_router.breakpoint VALUES ('copying');   -- 42501: the test hook is the owner's
SELECT * FROM shard_map;                                         -- 42501
SELECT * FROM snowflake_id_router.node;                          -- 42501
INSERT INTO snowflake_id_router.setting VALUES ('copy_timeout', '1 h');  -- 42501
SELECT snowflake_id_node.conninfo('host=x');                     -- 42501: the node schema is internal
SELECT routed(7);                                                -- 42501: no USAGE on the server
RESET ROLE;
-- The functions: SECURITY DEFINER with search_path pinned, each commented.
SELECT p.oid::regprocedure, p.prosecdef, p.proconfig, p.provolatile, p.proisstrict, p.proparallel,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc p WHERE p.oid IN ('add_node(text,text)'::regprocedure, 'assign_shards(integer,integer,text)'::regprocedure,
                                 'move_shard(integer,text,text)'::regprocedure, 'move_shards(integer[],text,text)'::regprocedure,
                                 'repair_moves()'::regprocedure) ORDER BY 1;
SELECT count(*) AS functions_without_comment
  FROM pg_depend d JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake_id_router')
   AND obj_description(p.oid, 'pg_proc') IS NULL;
-- A function body read when it is first called (not a SQL-standard one) is read under the
-- session's standard_conforming_strings, which a database's owner may turn off for every
-- session there: '\d' would then mean 'd'. Each of both extensions' with a backslash in its
-- body pins it.
SELECT p.oid::regprocedure AS reads_backslashes_as_the_session_says
  FROM pg_depend d JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.refobjid IN (SELECT oid FROM pg_extension WHERE extname IN ('snowflake_id', 'snowflake_id_router'))
   AND p.prosqlbody IS NULL AND p.prolang <> (SELECT l.oid FROM pg_language l WHERE l.lanname = 'c') AND strpos(p.prosrc, chr(92)) > 0
   AND NOT coalesce('standard_conforming_strings=on' = ANY (p.proconfig), false)
 ORDER BY 1;
DROP ROLE router_reg_user;
-- Routing needs no credentials in the user mapping (PL/Proxy connects as the calling role:
-- trust here, ~/.pgpass or certificates elsewhere), and an application role that may use
-- the server cannot log in anywhere through it with dblink: it has no password to give.
SELECT current_user AS regress_user \gset
CREATE EXTENSION IF NOT EXISTS dblink;
CREATE ROLE router_reg_app LOGIN;
GRANT USAGE ON FOREIGN SERVER snowflake_id TO router_reg_app;
SELECT srvname, umoptions FROM pg_user_mappings WHERE srvname = 'snowflake_id';
\c - router_reg_app
\set VERBOSITY sqlstate
SELECT routed(7);
SELECT dblink_connect('x', 'snowflake_id');                      -- 2F003: no password, no connection
-- Nor can it make a mapping of its own naming another user (PL/Proxy would log in as that
-- user with whatever password the router's server user keeps): 42501, nothing made.
CREATE USER MAPPING FOR CURRENT_USER SERVER snowflake_id OPTIONS (user 'postgres');  -- 42501
SELECT count(*) AS own_mappings FROM pg_user_mappings WHERE srvname = 'snowflake_id' AND usename = current_user;
SELECT routed(7);
\c - :regress_user
\set VERBOSITY sqlstate
REVOKE USAGE ON FOREIGN SERVER snowflake_id FROM router_reg_app;
DROP ROLE router_reg_app;
DROP FUNCTION routed(integer), routed_by_id(bigint);
SET client_min_messages = warning;
DROP EXTENSION snowflake_id_router CASCADE;
DROP EXTENSION plproxy;
DROP EXTENSION IF EXISTS dblink;
-- (The node databases stay: dropping them would wait for this session's routed connections.)
RESET client_min_messages;
