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

-- Pushes the committed map (committed_map) to every node, all at once (on_nodes: each node
-- bounded by status_timeout), where app_map() gives it to applications that have no router
-- to ask (sql/node/app.sql). Called after each change of what the map lists has committed:
-- an assignment, a move's flip, alter_node, a drain's remapping, and by repair_moves(). A
-- node that misses a push keeps the map it had, under that map's version: a client asks
-- several nodes and takes the highest version. It gets the map at the next push; a WARNING
-- names it (one as well if the committed map cannot be read). Returns true when every node
-- has the map.
CREATE OR REPLACE FUNCTION snowflake_id_router.push_nodes() RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    map jsonb := snowflake_id_router.committed_map();
    missed text;
BEGIN
    SELECT string_agg(format('%L (%s)', p.node, p.error), ', ' ORDER BY p.node) INTO missed
      FROM snowflake_id_router.on_nodes(format('SELECT to_jsonb(snowflake_id_node.apply_map(%L, %s, %L, %L, %L))',
               snowflake_id_node.identity(), map->>'version',
               (SELECT coalesce(jsonb_agg(jsonb_build_object('name', n->>'name', 'connstr', n->>'connstr')), '[]')
                  FROM jsonb_array_elements(map->'nodes') n),
               map->>'shards', map->>'owners')) p
     WHERE p.error IS NOT NULL;
    IF missed IS NOT NULL THEN
        RAISE WARNING 'the shard map of version % did not reach node(s) %', map->>'version', missed
            USING DETAIL = 'Their app_map() gives the map they had, under its older version.',
                  HINT = 'They get it at the next map change, repair_moves() or SELECT snowflake_id_router.push_nodes().';
    END IF;
    RETURN missed IS NULL;
EXCEPTION WHEN OTHERS THEN
    -- (The loopback connection failed: the map change stands, the nodes get it later. A
    -- cancel is not caught here.)
    RAISE WARNING 'the shard map was not pushed to the nodes: %', SQLERRM
        USING HINT = 'They get it at the next map change, repair_moves() or SELECT snowflake_id_router.push_nodes().';
    RETURN false;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.push_nodes() IS
  'Pushes this router''s committed map to every node (app_map() there); WARNING naming those it missed; true when all have it.';
