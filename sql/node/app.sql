-- Applications that route by shard themselves (docs/app-routing.md): a client keeps the
-- router's shard map (snowflake_id_router.app_map()), connects to the node it names, and
-- starts every transaction on a shard with use_shard(shard). The node is the judge of what
-- it serves, so a client with a stale map is told (SF001) rather than served from a copy
-- that a move left behind or has not made live yet.
--
-- What a node serves is snowflake_id_shards' one rule: a shard of the catalog, not a move's
-- source once sealed (its schema is the old copy from then on, then dropped) nor a target's
-- copy before it is activated. A fenced source still serves: its writes get 40001 from the
-- fence, its reads the rows as of the fence, as a routed call does.

-- SF001 when this node does not serve the shard; else the shard's schema first in
-- search_path, for this transaction only: after pg_catalog, named first (as it is searched
-- when the path does not name it), so that a session whose path names pg_catalog later does
-- not resolve built-in names (now(), =) to objects of the shard schema's owner. No rights of its own (SECURITY INVOKER): it reads
-- snowflake_id_shards, which every role may read. No SET clause either: one would undo the
-- set_config at return (a function's SET scopes its variable's changes to the call); every
-- name is schema-qualified instead. The check holds at the transaction's start: a move's
-- fence waits for the transactions writing the shard before it seals it.
CREATE OR REPLACE FUNCTION @extschema@.use_shard(shard integer) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
AS $$
DECLARE
    nsp pg_catalog.text;
    previous pg_catalog.text := pg_catalog.current_setting('search_path');
BEGIN
    SELECT s.schema_name INTO nsp FROM @extschema@.snowflake_id_shards s
     WHERE s.shard OPERATOR(pg_catalog.=) use_shard.shard;
    IF nsp IS NULL THEN
        RAISE EXCEPTION 'shard % is not served by this node', shard
            USING ERRCODE = 'SF001', HINT = 'reload the shard map';
    END IF;
    PERFORM pg_catalog.set_config('search_path',
        pg_catalog.concat_ws(', ', 'pg_catalog', pg_catalog.quote_ident(nsp), CASE WHEN previous OPERATOR(pg_catalog.<>) '' THEN previous END), true);
    RETURN nsp;
END
$$;
COMMENT ON FUNCTION @extschema@.use_shard(integer) IS
  'For this transaction: SF001 unless this node serves the shard (reload the shard map), else puts the shard''s schema first in search_path and returns it.';
-- (Every role may call it: a function's default privileges. No GRANT: an explicit ACL equal
-- to the default would not survive pg_upgrade as written, which dumps the default as none.)

-- == The shard map, readable on every node ==
--
-- The router's primary pushes its map to every node at each change of what it lists (an
-- assignment, a move's flip, alter_node, a drain's remapping: snowflake_id_router.push_nodes),
-- so that an application that has read one map needs no router any more: it reads the map
-- again from the nodes it knows, and takes the highest version. A node keeps the map with
-- the version it was pushed with, both in one row: a node that missed a push answers its
-- older map under its older version, never a newer version than the map it holds.

-- (Called by the router's primary, over its connection, after the map change committed
-- there.) Keeps the map of this version unless one newer from the same router is kept
-- already (two pushes may arrive out of order); one of the same version is written again.
-- A map from another router replaces the one kept: the node now belongs to that one's map.
-- Returns the version kept.
CREATE OR REPLACE FUNCTION snowflake_id_node.apply_map(router text, version bigint, nodes jsonb,
                                                       shards integer[], owners text[]) RETURNS bigint
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    kept snowflake_id_node.app_map;
BEGIN
    LOCK TABLE snowflake_id_node.app_map IN SHARE ROW EXCLUSIVE MODE;
    SELECT * INTO kept FROM snowflake_id_node.app_map;
    IF kept.router = apply_map.router AND kept.version > apply_map.version THEN
        RETURN kept.version;
    END IF;
    INSERT INTO snowflake_id_node.app_map AS m (router, version, nodes, shards, owners, applied)
    VALUES (router, version, nodes, shards, owners, now())
    ON CONFLICT (one) DO UPDATE SET router = excluded.router, version = excluded.version, nodes = excluded.nodes,
                                    shards = excluded.shards, owners = excluded.owners, applied = excluded.applied;
    RETURN version;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.apply_map(text, bigint, jsonb, integer[], text[]) IS
  'On a node (called by the router''s primary): keeps its shard map of this version, unless a newer one of the same router is kept.';
REVOKE ALL ON FUNCTION snowflake_id_node.apply_map(text, bigint, jsonb, integer[], text[]) FROM PUBLIC;

-- What an application reads on any node: the map as the router's app_map() gives it, as of
-- the last push this node received (no row before the first). SECURITY DEFINER: the map is
-- kept in snowflake_id_node, closed to every role but the owner; it reads that one row and
-- nothing else, opens nothing, and returns no secret (connect strings hold none: add_node
-- and alter_node refuse them).
CREATE OR REPLACE FUNCTION @extschema@.app_map()
    RETURNS TABLE (shard integer, node text, connstr text, map_version bigint)
LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT s.shard, s.node, n.connstr, m.version
      FROM snowflake_id_node.app_map m,
           unnest(m.shards, m.owners) AS s(shard, node)
           JOIN jsonb_to_recordset(m.nodes) AS n(name text, connstr text) ON n.name = s.node
     ORDER BY s.shard;
END;
COMMENT ON FUNCTION @extschema@.app_map() IS
  'The shard map the router last pushed to this node: each assigned shard, its node and the node''s connect string (no secret), and the map''s version.';
