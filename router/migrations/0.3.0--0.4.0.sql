-- snowflake_id_router 0.3.0 -> 0.4.0 (scripts/build-sql builds
-- snowflake_id_router--0.3.0--0.4.0.sql from this file). What cannot run twice comes first,
-- written here or in 0.4.0-objects.sql (which the fresh install includes too); then every
-- file of functions, whole, in the fresh install's order.

-- The router's functions call snowflake_id_node's of the same release.
DO $$
BEGIN
    IF (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'snowflake_id') <> '0.4.0' THEN
        RAISE EXCEPTION 'snowflake_id_router 0.4.0 needs snowflake_id 0.4.0'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'ALTER EXTENSION snowflake_id UPDATE first.';
    END IF;
END
$$;

-- move.state becomes a type of its own (0.4.0-objects.sql). The view move_history reads the
-- column: until 33_repair.sql makes it again, it reads everything else (CREATE OR REPLACE,
-- so that what was granted on it stays).
CREATE OR REPLACE VIEW move_history AS
    SELECT m.id AS move, m.shards, m.source, m.target, m.started, m.ended, m.rows,
           coalesce(m.flipped, m.ended) - m.fenced AS write_pause, NULL::text AS outcome, m.error
      FROM snowflake_id_router.move m
     ORDER BY m.id;
--#include router/migrations/0.4.0-objects.sql

-- Functions 0.4.0 no longer has.
DROP FUNCTION snowflake_id_router.note(bigint, text);
DROP FUNCTION snowflake_id_router.enter(bigint, text);
DROP FUNCTION snowflake_id_router.fail_move(bigint, text, boolean, text, text, text, text, text);
DROP FUNCTION snowflake_id_router.connect(text, text);
DROP FUNCTION snowflake_id_router.flip(bigint);   -- (now with the move's owner)

--#include router/sql/10_connections.sql
--#include router/sql/20_map.sql
--#include router/sql/31_remote.sql
--#include router/sql/32_move.sql
--#include router/sql/33_repair.sql
--#include router/sql/34_verify.sql
--#include router/sql/35_keep.sql
--#include router/sql/40_nodes.sql
--#include router/sql/41_rebalance.sql
--#include router/sql/42_background.sql
--#include router/sql/44_split.sql
--#include router/sql/50_routers.sql
--#include router/sql/52_app_map.sql
--#include router/sql/54_alter_shards.sql
--#include router/sql/56_template_status.sql
--#include router/sql/58_guard.sql
--#include router/sql/90_grants.sql

-- (After the functions whose SQL bodies called them are made again.)
DROP FUNCTION snowflake_id_router.open_conn(text, text, text, text);
DROP FUNCTION snowflake_id_router.session_alive(integer, timestamptz);   -- (call_alive, 41_rebalance.sql)

-- run_rebalance calls a new function, rebalance_reap: a role granted what docs/cluster.md
-- says a rebalance needs (run_rebalance and the rebalance_* functions) is granted it too.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT a.grantee::regrole AS role FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
              WHERE p.oid = 'snowflake_id_router.run_rebalance(text, text, integer, text, integer)'::regprocedure
                AND a.privilege_type = 'EXECUTE' AND a.grantee NOT IN (0, p.proowner) LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION snowflake_id_router.rebalance_reap(integer, integer[], integer, integer, text, text, text) TO %s',
                                  r.role);
    END LOOP;
END
$$;
