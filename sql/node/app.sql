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
    nsp text;
    previous text := pg_catalog.current_setting('search_path');
BEGIN
    SELECT s.schema_name INTO nsp FROM @extschema@.snowflake_id_shards s
     WHERE s.shard OPERATOR(pg_catalog.=) use_shard.shard;
    IF nsp IS NULL THEN
        RAISE EXCEPTION 'shard % is not served by this node', shard
            USING ERRCODE = 'SF001', HINT = 'reload the shard map';
    END IF;
    PERFORM pg_catalog.set_config('search_path',
        pg_catalog.concat_ws(', ', 'pg_catalog', pg_catalog.quote_ident(nsp), NULLIF(previous, '')), true);
    RETURN nsp;
END
$$;
COMMENT ON FUNCTION @extschema@.use_shard(integer) IS
  'For this transaction: SF001 unless this node serves the shard (reload the shard map), else puts the shard''s schema first in search_path and returns it.';
-- (Every role may call it: a function's default privileges. No GRANT: an explicit ACL equal
-- to the default would not survive pg_upgrade as written, which dumps the default as none.)
