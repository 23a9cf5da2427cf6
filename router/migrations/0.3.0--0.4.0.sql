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

--#include router/sql/10_connections.sql
--#include router/sql/20_map.sql
--#include router/sql/31_remote.sql
--#include router/sql/32_move.sql
--#include router/sql/33_repair.sql
--#include router/sql/40_nodes.sql
--#include router/sql/41_rebalance.sql
--#include router/sql/50_routers.sql
--#include router/sql/52_app_map.sql
--#include router/sql/54_alter_shards.sql
--#include router/sql/56_template_status.sql
--#include router/sql/90_grants.sql
