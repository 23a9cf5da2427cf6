-- The shard map for applications that route by shard themselves (docs/app-routing.md): they
-- read it here once, connect to the nodes it names with their own credentials, and read it
-- again when a node answers SF001 (use_shard: it does not serve that shard).
--
-- The version is the map's (snowflake_id_router.map_version(): one more at every statement
-- that changes the shard or node table, so at every assignment, flip, alter_node and node
-- removal). On a follower router it is the primary's version the follower applied, so that
-- every router of a cluster gives the same map the same version.

-- SECURITY DEFINER: the map's tables are the owner's; it reads them and nothing else, and
-- opens nothing. Connect strings hold no secret (add_node refuses them) and every role
-- reads them already in pg_foreign_server. One statement: one snapshot, so the rows and the
-- version are of the same map.
CREATE OR REPLACE FUNCTION snowflake_id_router.app_map()
    RETURNS TABLE (shard integer, node text, connstr text, map_version bigint)
LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT s.shard, s.node, n.connstr,
           coalesce((SELECT f.map_version FROM snowflake_id_router.follows f), snowflake_id_router.map_version())
      FROM snowflake_id_router.shard s JOIN snowflake_id_router.node n ON n.name = s.node
     ORDER BY s.shard;
END;
COMMENT ON FUNCTION snowflake_id_router.app_map() IS
  'The shard map for applications: each assigned shard, its node and the node''s connect string (no secret), and the map''s version.';
