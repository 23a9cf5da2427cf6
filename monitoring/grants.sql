-- The monitoring role the exporter connects to the router as (docs/monitoring.md): it may
-- read the five status views monitoring/queries.yaml reads, and nothing else. Not a
-- superuser, no pg_monitor (the queries read no server statistics of the router itself).
-- Run on the primary router (and on each follower that a second exporter would read) as a
-- superuser: psql -d <router database> -f monitoring/grants.sql. It can run again.
-- Authentication is yours to add (a password in ~/.pgpass, a pg_hba.conf line for the
-- exporter's host), as for any role.
SELECT 'CREATE ROLE snowflake_id_monitor LOGIN'
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'snowflake_id_monitor') \gexec

-- The views (in the schema snowflake_id_router was created in) ...
GRANT SELECT ON node_status, shard_status, move_history, rebalance_status, router_status
   TO snowflake_id_monitor;
-- ... and the functions they call, whose EXECUTE a view does not pass on (docs/cluster.md,
-- the grants each view needs): node_status and shard_status read these SECURITY DEFINER
-- functions; move_history asks whether a move's state is final and reads the class of the
-- moves' advisory locks. (rebalance_status's session_alive is PUBLIC's already; router_status
-- reads the map's version itself, with the view owner's rights: SELECT on it is enough.)
GRANT EXECUTE ON FUNCTION snowflake_id_router.node_status(), snowflake_id_router.shard_status(),
      snowflake_id_router.move_finished(snowflake_id_router.move_state), snowflake_id_node.lock_class()
   TO snowflake_id_monitor;
