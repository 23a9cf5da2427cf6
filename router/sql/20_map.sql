-- Keeps the server's options equal to the map, in the transaction that changes the map.
CREATE OR REPLACE FUNCTION snowflake_id_router.sync_cluster() RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    opts text;
    compression text := current_setting('default_toast_compression');
BEGIN
    IF TG_TABLE_NAME = 'node' THEN
        SELECT string_agg(format('SET p%s %L', s.shard, n.connstr), ', ')
          INTO opts FROM new_rows n JOIN snowflake_id_router.shard s ON s.node = n.name;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT string_agg(format('SET p%s %L', o.shard, snowflake_id_router.unassigned(o.shard)), ', ')
          INTO opts FROM old_rows o;
    ELSE
        SELECT string_agg(format('SET p%s %L', s.shard, n.connstr), ', ')
          INTO opts FROM new_rows s JOIN snowflake_id_router.node n ON n.name = s.node;
    END IF;
    IF opts IS NOT NULL THEN
        -- One map change at a time alters the server: two concurrent ALTER SERVERs would
        -- fail with "tuple concurrently updated". A relation lock (self-conflicting, taken
        -- after the FK checks' ROW SHARE) also makes this session read the server's latest
        -- options, committed by whoever held it before.
        LOCK TABLE snowflake_id_router.node IN SHARE ROW EXCLUSIVE MODE;
        -- The options of 8192 shards are a value of over 600 kB, compressed again at each
        -- change (under a move's fence) and read again by every routing session: lz4 where
        -- the server has it (a third faster for the change than pglz).
        BEGIN
            PERFORM set_config('default_toast_compression', 'lz4', true);
        EXCEPTION WHEN invalid_parameter_value THEN
            NULL;
        END;
        EXECUTE 'ALTER SERVER snowflake_id OPTIONS (' || opts || ')';
        PERFORM set_config('default_toast_compression', compression, true);
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.sync_cluster() IS
  'Trigger: sets the snowflake_id server''s partition options from the shard map.';
CREATE OR REPLACE TRIGGER sync_cluster_insert AFTER INSERT ON snowflake_id_router.shard
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_router.sync_cluster();
CREATE OR REPLACE TRIGGER sync_cluster_update AFTER UPDATE ON snowflake_id_router.shard
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_router.sync_cluster();
CREATE OR REPLACE TRIGGER sync_cluster_delete AFTER DELETE ON snowflake_id_router.shard
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_router.sync_cluster();
CREATE OR REPLACE TRIGGER sync_cluster_node AFTER UPDATE ON snowflake_id_router.node
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_router.sync_cluster();

-- == The user-facing functions ==

CREATE OR REPLACE FUNCTION add_node(name text, connstr text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    normal text;
    found_identity text;
    router boolean;
BEGIN
    PERFORM snowflake_id_router.refuse_transaction_block('add_node');
    IF name IS NULL OR connstr IS NULL THEN
        RAISE EXCEPTION 'add_node: name and connstr must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM snowflake_id_router.require_primary('add_node');
    IF name = '' OR octet_length(name) > 63 THEN
        RAISE EXCEPTION 'node name % is invalid: give 1 to 63 bytes', quote_literal(name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    normal := snowflake_id_router.normalize_connstr(connstr);
    IF EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = add_node.name) THEN
        RAISE EXCEPTION 'node % already exists', quote_literal(name) USING ERRCODE = 'duplicate_object';
    END IF;
    -- Known by what it is: reach it once and read its identity; a server that carries a
    -- registered node's mark is that node (or its standby), one without is a new node (a
    -- copy of another's initdb included), and is given a mark of its own.
    PERFORM snowflake_id_router.connect('snowflake_id_router_add', snowflake_id_router.connect_options() || ' ' || normal,
                                        format('node %L', name));
    BEGIN
        found_identity := snowflake_id_router.remote_node_identity('snowflake_id_router_add');
        router := snowflake_id_router.fetch('snowflake_id_router_add',
            $q$SELECT EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname = 'snowflake_id_router')::text$q$)::boolean;
        PERFORM snowflake_id_router.check_new_identity(name, found_identity);
        -- Not a router database (a follower, or any other): shards mapped there would make it
        -- route their calls to itself, or to its own map's nodes.
        IF router THEN
            RAISE EXCEPTION 'node % is a router database (it has the extension snowflake_id_router)', quote_literal(name)
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'A node is a database of data (snowflake_id and the shards); another router database follows this one with add_router(name, connstr).';
        END IF;
        found_identity := snowflake_id_router.mark_node('snowflake_id_router_add', found_identity);
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_add');
    EXCEPTION WHEN OTHERS THEN
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_add');
        RAISE;
    END;
    IF EXISTS (SELECT FROM snowflake_id_node.conninfo(normal) c WHERE c.keyword = 'user') THEN
        RAISE WARNING 'the connect string of node % names a user: every role''s routed calls will connect as %',
            quote_literal(name), (SELECT c.value FROM snowflake_id_node.conninfo(normal) c WHERE c.keyword = 'user')
            USING DETAIL = 'PL/Proxy connects as the calling role only when the connect string names no user.';
    END IF;
    PERFORM snowflake_id_router.commit_apart(format(
        'INSERT INTO snowflake_id_router.node (name, connstr, identity) VALUES (%L, %L, %L)', name, normal, found_identity));
END
$$;
COMMENT ON FUNCTION add_node(text, text) IS
  'Registers a data node by name and libpq connect string (no password: use ~/.pgpass); it must be reachable, not a router database, and is known by its identity.';

CREATE OR REPLACE FUNCTION assign_shards(first_shard integer, count integer, node text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_router.refuse_transaction_block('assign_shards');
    IF first_shard IS NULL OR count IS NULL OR node IS NULL THEN
        RAISE EXCEPTION 'assign_shards: first_shard, count and node must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM snowflake_id_router.require_primary('assign_shards');
    IF count < 1 OR first_shard NOT BETWEEN 0 AND @MAX_SHARD@ OR first_shard::bigint + count - 1 > @MAX_SHARD@ THEN
        RAISE EXCEPTION 'shards % to % are out of range: valid shards are 0 to @MAX_SHARD@, count at least 1',
            first_shard, first_shard::bigint + count - 1 USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    IF NOT EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = assign_shards.node) THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object',
            HINT = 'Register it with add_node(name, connstr).';
    END IF;
    PERFORM snowflake_id_router.commit_apart(format('SELECT snowflake_id_router.set_shards(%s, %s, %L)', first_shard, count, node));
    -- Committed: then pushed to the nodes (app_map() there), which get only a committed map.
    PERFORM snowflake_id_router.push_nodes();
END
$$;
COMMENT ON FUNCTION assign_shards(integer, integer, text) IS
  'Assigns shards first_shard .. first_shard + count - 1 (assigned to no node, or to this node) to node; idempotent.';

-- (Run apart by assign_shards: commit_apart.) Serialises with moves and other map changes.
CREATE OR REPLACE FUNCTION snowflake_id_router.set_shards(first_shard integer, count integer, node text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    taken text;
BEGIN
    LOCK TABLE snowflake_id_router.shard IN SHARE ROW EXCLUSIVE MODE;
    SELECT format('shard %s is on node %s', s.shard, quote_literal(s.node)) INTO taken
      FROM snowflake_id_router.shard s
     WHERE s.shard BETWEEN first_shard AND first_shard + count - 1 AND s.node <> set_shards.node
     ORDER BY s.shard LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot assign shards % to % to node %: %', first_shard, first_shard + count - 1,
            quote_literal(node), taken USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'A shard that holds data changes node with move_shard(shard, node).';
    END IF;
    INSERT INTO snowflake_id_router.shard
    SELECT n, set_shards.node FROM generate_series(first_shard, first_shard + count - 1) n
    ON CONFLICT DO NOTHING;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.set_shards(integer, integer, text) IS
  'assign_shards'' change of the map, committed apart: assigns the shards not on another node to node.';

CREATE OR REPLACE VIEW shard_map AS
    SELECT s.shard, s.node, n.connstr
      FROM snowflake_id_router.shard s JOIN snowflake_id_router.node n ON n.name = s.node
     ORDER BY s.shard;
COMMENT ON VIEW shard_map IS 'The shard map: logical shard, its node and the node''s connect string (assigned shards only).';

