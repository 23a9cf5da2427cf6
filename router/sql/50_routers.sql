-- == Several routers: the primary and its followers ==
--
-- Cluster functions (add_node, assign_shards, moves, rebalance, alter_node, alter_shards,
-- add_router, remove_router, repair_moves) run on one router database, the primary. Other
-- router databases follow its map (add_router): the primary pushes the whole map to each
-- at every change, in the follower's own transaction, and records the version each has
-- applied. Any router routes every call. A follower refuses cluster functions (55000,
-- naming its primary). A follower that cannot be reached is marked behind; it gets the map
-- at the next push (the next map change, repair_moves(), or push_map()), and until every
-- router has applied a move's flip the move's source copy stays (sealed: a write routed
-- there by a stale follower gets 40001 and is retried, never lost).

-- The map's version goes up with every statement that changes the map.
CREATE OR REPLACE FUNCTION snowflake_id_router.count_map_change() RETURNS trigger
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO snowflake_id_router.map_state AS m (version) VALUES (1)
    ON CONFLICT (one) DO UPDATE SET version = m.version + 1;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.count_map_change() IS
  'Trigger: one more map version for each statement that changes the shard or node table.';
CREATE OR REPLACE TRIGGER count_map_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON snowflake_id_router.shard
    FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_router.count_map_change();
CREATE OR REPLACE TRIGGER count_map_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON snowflake_id_router.node
    FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_router.count_map_change();

CREATE OR REPLACE FUNCTION snowflake_id_router.map_version() RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN coalesce((SELECT m.version FROM snowflake_id_router.map_state m), 0);
COMMENT ON FUNCTION snowflake_id_router.map_version() IS 'The version of this router''s map (0 before any change).';

-- How this router describes itself to its followers (their refusals name it).
CREATE OR REPLACE FUNCTION snowflake_id_router.self_description() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN format('router database %s at %s port %s (identity %s)', quote_ident(current_database()),
    coalesce(host(inet_server_addr()), trim(split_part(current_setting('unix_socket_directories'), ',', 1))),
    current_setting('port'), snowflake_id_node.identity());
COMMENT ON FUNCTION snowflake_id_router.self_description() IS
  'This router database as its followers name it: database, server, port, identity.';

-- 55000 on a follower: cluster functions run on the primary.
-- (SECURITY DEFINER: the procedures granted to an operator's role call it as that role.)
CREATE OR REPLACE FUNCTION snowflake_id_router.require_primary(what text) RETURNS void
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    primary_router text;
BEGIN
    SELECT f.description INTO primary_router FROM snowflake_id_router.follows f;
    IF FOUND THEN
        RAISE EXCEPTION '% runs on the primary router, and this router follows %', what, primary_router
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Call it on the primary; it pushes every map change to this router.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.require_primary(text) IS
  'Raises 55000 naming the primary when this router follows another: cluster functions run on the primary only.';

-- == Follower side (called by the primary over its connections) ==

-- Makes this router database follow the primary with identity primary_identity. It must
-- have no map of its own (a primary's map would be lost) and no followers.
CREATE OR REPLACE FUNCTION snowflake_id_router.follow(primary_identity text, description text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f snowflake_id_router.follows;
BEGIN
    LOCK TABLE snowflake_id_router.follows IN EXCLUSIVE MODE;
    SELECT * INTO f FROM snowflake_id_router.follows;
    IF FOUND THEN
        IF f.identity = primary_identity THEN
            RETURN;
        END IF;
        RAISE EXCEPTION 'router % already follows %', snowflake_id_router.self_description(), f.description
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'remove_router it there first.';
    END IF;
    IF primary_identity = snowflake_id_node.identity() THEN
        RAISE EXCEPTION 'a router cannot follow itself' USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF EXISTS (SELECT FROM snowflake_id_router.node) OR EXISTS (SELECT FROM snowflake_id_router.shard) THEN
        RAISE EXCEPTION 'router % has a map of its own (% nodes, % shards assigned)', snowflake_id_router.self_description(),
            (SELECT count(*) FROM snowflake_id_router.node), (SELECT count(*) FROM snowflake_id_router.shard)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A follower starts empty: CREATE EXTENSION snowflake_id_router CASCADE in a database of its own.';
    END IF;
    IF EXISTS (SELECT FROM snowflake_id_router.router) THEN
        RAISE EXCEPTION 'router % has followers of its own', snowflake_id_router.self_description()
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    INSERT INTO snowflake_id_router.follows (identity, description, since) VALUES (primary_identity, description, now());
END
$$;
COMMENT ON FUNCTION snowflake_id_router.follow(text, text) IS
  'On a follower (called by add_router): follow the primary with this identity; refused with a map or followers of its own.';

-- Stops following: the map goes with it, so that nothing is routed by a map no one updates.
CREATE OR REPLACE FUNCTION snowflake_id_router.unfollow(primary_identity text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    LOCK TABLE snowflake_id_router.follows IN EXCLUSIVE MODE;
    IF NOT EXISTS (SELECT FROM snowflake_id_router.follows f WHERE f.identity = primary_identity) THEN
        RETURN;
    END IF;
    DELETE FROM snowflake_id_router.shard;
    DELETE FROM snowflake_id_router.node;
    DELETE FROM snowflake_id_router.follows;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.unfollow(text) IS
  'On a follower (called by remove_router): stop following that primary; its map is emptied (every call then fails by name).';

-- Applies the primary's map, in this router's transaction: the nodes (upserted, then those
-- absent deleted), the shards (only rows that differ: the PL/Proxy cluster follows by the
-- map's triggers). A push older than the map applied here is ignored (two pushes may
-- arrive out of order); one of the same version is applied again, undoing hand edits.
-- Returns the version applied here.
CREATE OR REPLACE FUNCTION snowflake_id_router.apply_map(primary_identity text, version bigint, nodes jsonb,
                                                         shards integer[], owners text[]) RETURNS bigint
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f snowflake_id_router.follows;
BEGIN
    SELECT * INTO f FROM snowflake_id_router.follows FOR UPDATE;
    IF NOT FOUND OR f.identity <> primary_identity THEN
        RAISE EXCEPTION 'router % does not follow router %', snowflake_id_router.self_description(), primary_identity
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF version < f.map_version THEN
        RETURN f.map_version;
    END IF;
    INSERT INTO snowflake_id_router.node AS n
    SELECT * FROM jsonb_populate_recordset(NULL::snowflake_id_router.node, nodes)
    ON CONFLICT (name) DO UPDATE SET connstr = excluded.connstr, identity = excluded.identity
     WHERE (n.connstr, n.identity) IS DISTINCT FROM (excluded.connstr, excluded.identity);
    DELETE FROM snowflake_id_router.shard s WHERE s.shard <> ALL (shards);
    UPDATE snowflake_id_router.shard s SET node = m.node
      FROM unnest(shards, owners) m(shard, node) WHERE s.shard = m.shard AND s.node <> m.node;
    INSERT INTO snowflake_id_router.shard
    SELECT m.shard, m.node FROM unnest(shards, owners) m(shard, node)
     WHERE NOT EXISTS (SELECT FROM snowflake_id_router.shard s WHERE s.shard = m.shard);
    DELETE FROM snowflake_id_router.node n
     WHERE n.name NOT IN (SELECT x.name FROM jsonb_populate_recordset(NULL::snowflake_id_router.node, nodes) x);
    UPDATE snowflake_id_router.follows SET map_version = version;
    RETURN version;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.apply_map(text, bigint, jsonb, integer[], text[]) IS
  'On a follower (called by the primary): applies the primary''s map of this version, unless a newer one is applied already.';

-- Waits (bounded) until every transaction of this database older than the call has ended,
-- but for the primary's own sessions: afterwards every routed call here follows the map
-- applied before the call. true when they ended in time.
CREATE OR REPLACE FUNCTION snowflake_id_router.await_map(timeout interval) RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := snowflake_id_node.monotonic() + timeout;
BEGIN
    LOOP
        PERFORM pg_stat_clear_snapshot();
        IF NOT EXISTS (SELECT FROM pg_stat_activity a
                        WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
                          AND a.backend_type = 'client backend' AND a.xact_start < now()
                          AND a.pid <> ALL (snowflake_id_router.router_sessions())) THEN
            RETURN true;
        END IF;
        IF snowflake_id_node.monotonic() > deadline THEN
            RETURN false;
        END IF;
        PERFORM snowflake_id_node.sleep(0.01);
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.await_map(interval) IS
  'Waits until every transaction of this database older than the call has ended (the router''s own sessions aside); false after the timeout.';

-- == Primary side ==

-- Opens connection conn to a follower and checks that it reaches the router
-- registered under that name.
CREATE OR REPLACE FUNCTION snowflake_id_router.connect_router(conn text, router_name text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r snowflake_id_router.router;
    found_identity text;
BEGIN
    SELECT * INTO r FROM snowflake_id_router.router x WHERE x.name = router_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'router % does not exist', quote_literal(router_name) USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM snowflake_id_router.connect(conn, snowflake_id_router.connect_options() || ' ' || r.connstr,
                                        format('router %L', router_name));
    found_identity := snowflake_id_router.remote_identity(conn, router_name);
    PERFORM snowflake_id_router.mark_router_session(conn);
    IF found_identity <> r.identity THEN
        PERFORM snowflake_id_router.disconnect(conn);
        RAISE EXCEPTION 'router % now reaches another database (identity %, registered as %)',
            quote_literal(router_name), found_identity, r.identity
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'remove_router it and add_router the database it should reach.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.connect_router(text, text) IS
  'Opens connection conn to a follower router and checks that it reaches the database registered; 55000 otherwise.';

-- The map as committed, read through a loopback connection of its own in one statement (one
-- snapshot: the version and the map it counts): pushed to followers and nodes, they never
-- get a map change that the caller's transaction may yet roll back. {version, nodes (name,
-- connstr, identity), shards, owners (text of arrays)}.
CREATE OR REPLACE FUNCTION snowflake_id_router.committed_map() RETURNS jsonb
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    map jsonb;
BEGIN
    PERFORM snowflake_id_router.connect_self('snowflake_id_router_push_self');
    map := snowflake_id_router.fetch('snowflake_id_router_push_self', $q$
        SELECT jsonb_build_object(
            'version', snowflake_id_router.map_version(),
            'nodes', (SELECT coalesce(jsonb_agg(to_jsonb(n) ORDER BY n.name), '[]') FROM snowflake_id_router.node n),
            'shards', (SELECT coalesce(array_agg(s.shard ORDER BY s.shard), '{}') FROM snowflake_id_router.shard s)::text,
            'owners', (SELECT coalesce(array_agg(s.node ORDER BY s.shard), '{}') FROM snowflake_id_router.shard s)::text)::text$q$)::jsonb;
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_push_self');
    RETURN map;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.committed_map() IS
  'This router''s map as committed (read through a loopback connection of its own), with its version, as jsonb.';

-- Pushes the committed map to every follower (or only to one, by name): each applies it
-- in its own transaction and then waits (cleanup_timeout) for its transactions older than
-- that to end; a follower that fails either is marked behind, with the reason. Returns
-- true when every follower routes by the map pushed. Call it once the map change is
-- committed (a flip is, through the loopback connection); the followers' rows are written
-- in the caller's transaction: call it through the loopback connection to record at once.
CREATE OR REPLACE FUNCTION snowflake_id_router.push_map(only_router text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r snowflake_id_router.router;
    v bigint;
    nodes jsonb;
    shards integer[];
    owners text[];
    applied bigint;
    map jsonb;
    all_current boolean := true;
BEGIN
    map := snowflake_id_router.committed_map();
    v := (map->>'version')::bigint;
    nodes := map->'nodes';
    shards := (map->>'shards')::integer[];
    owners := (map->>'owners')::text[];
    FOR r IN SELECT * FROM snowflake_id_router.router x WHERE only_router IS NULL OR x.name = only_router ORDER BY x.name LOOP
        BEGIN
            PERFORM snowflake_id_router.connect_router('snowflake_id_router_push', r.name);
            applied := snowflake_id_router.fetch('snowflake_id_router_push', format(
                'SELECT snowflake_id_router.apply_map(%L, %s, %L, %L, %L)::text',
                snowflake_id_node.identity(), v, nodes, shards, owners))::bigint;
            IF NOT snowflake_id_router.fetch('snowflake_id_router_push', format(
                   'SELECT snowflake_id_router.await_map(%L)::text',
                   snowflake_id_router.setting('cleanup_timeout')))::boolean THEN
                RAISE EXCEPTION 'transactions older than map version % are still open there after %', applied,
                    snowflake_id_router.setting('cleanup_timeout');
            END IF;
            PERFORM snowflake_id_router.disconnect('snowflake_id_router_push');
            UPDATE snowflake_id_router.router x SET map_version = greatest(x.map_version, applied), behind_since = NULL, error = NULL
             WHERE x.name = r.name;
            all_current := all_current AND applied >= v;
        EXCEPTION WHEN OTHERS THEN
            PERFORM snowflake_id_router.disconnect('snowflake_id_router_push');
            UPDATE snowflake_id_router.router x SET behind_since = coalesce(x.behind_since, now()), error = SQLERRM
             WHERE x.name = r.name;
            all_current := false;
            RAISE WARNING 'router % is behind (map version %, current %): %', quote_literal(r.name), r.map_version, v, SQLERRM
                USING HINT = 'It gets the map at the next map change, repair_moves() or push_map().';
        END;
    END LOOP;
    RETURN all_current;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.push_map(text) IS
  'Pushes this router''s map to every follower (or the one named); marks those that fail behind; true when all route by the current map.';

-- true when every follower has applied map version v (and its older transactions ended).
CREATE OR REPLACE FUNCTION snowflake_id_router.routers_have(v bigint) RETURNS boolean
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN NOT EXISTS (SELECT FROM snowflake_id_router.router r WHERE r.map_version < v);
COMMENT ON FUNCTION snowflake_id_router.routers_have(bigint) IS
  'Whether every follower router routes by map version v or later.';

-- Whether every follower routes by map version v (the map's version with a move's flip, or
-- any later one): if not, the map is pushed first, through the loopback connection (so the
-- followers' rows are committed with the push), each follower bounded by its connect
-- timeout and cleanup_timeout. NULL: the map as it is now.
CREATE OR REPLACE FUNCTION snowflake_id_router.routed_everywhere(v bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    version bigint := coalesce(v, snowflake_id_router.map_version());
BEGIN
    IF snowflake_id_router.routers_have(version) THEN
        RETURN true;
    END IF;
    PERFORM snowflake_id_router.call(snowflake_id_router.loopback(), 'SELECT snowflake_id_router.push_map()::text',
        (SELECT count(*) FROM snowflake_id_router.router) * (snowflake_id_router.timeout('cleanup_timeout') + interval '15 s'),
        'pushing the map to the other routers');
    RETURN snowflake_id_router.routers_have(version);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.routed_everywhere(bigint) IS
  'Whether every follower router routes by map version v or later, after pushing the map to those behind.';

-- alter_node's change of the map: the node's connect string (and identity), committed
-- through the loopback connection for every router session here at once, as long as the
-- node is still as read (40001 otherwise), then pushed to the nodes and followers. Returns whether
-- every router routes by it.
CREATE OR REPLACE FUNCTION snowflake_id_router.repoint_node(node text, old_connstr text, new_connstr text, new_identity text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v bigint;
BEGIN
    v := snowflake_id_router.call(snowflake_id_router.loopback(), format(
        'SELECT snowflake_id_router.set_node(%L, %L, %L, %L)::text', node, old_connstr, new_connstr, new_identity),
        snowflake_id_router.timeout('lock_timeout') + interval '5 s', 'repointing the node')::bigint;
    PERFORM snowflake_id_router.push_nodes();
    RETURN snowflake_id_router.routed_everywhere(v);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.repoint_node(text, text, text, text) IS
  'Commits a node''s new connect string through the loopback connection and pushes the map; whether every router routes by it.';

-- (Run through the loopback connection by repoint_node.) The map's version after it.
CREATE OR REPLACE FUNCTION snowflake_id_router.set_node(node text, old_connstr text, new_connstr text, new_identity text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE snowflake_id_router.node x SET connstr = new_connstr, identity = new_identity
     WHERE x.name = node AND x.connstr = old_connstr;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'node % changed while it was being repointed', quote_literal(node) USING ERRCODE = 'serialization_failure';
    END IF;
    RETURN snowflake_id_router.map_version();
END
$$;
COMMENT ON FUNCTION snowflake_id_router.set_node(text, text, text, text) IS
  'Sets a node''s connect string and identity if its connect string is still old_connstr (40001 otherwise); the map''s version after it.';

-- == The user-facing functions ==

CREATE OR REPLACE FUNCTION add_router(name text, connstr text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    normal text;
    found_identity text;
    other text;
    theirs text;
BEGIN
    PERFORM snowflake_id_router.refuse_transaction_block('add_router');
    IF name IS NULL OR connstr IS NULL THEN
        RAISE EXCEPTION 'add_router: name and connstr must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM snowflake_id_router.require_primary('add_router');
    IF name = '' OR octet_length(name) > 63 THEN
        RAISE EXCEPTION 'router name % is invalid: give 1 to 63 bytes', quote_literal(name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    normal := snowflake_id_router.normalize_connstr(connstr);
    IF EXISTS (SELECT FROM snowflake_id_router.router r WHERE r.name = add_router.name) THEN
        RAISE EXCEPTION 'router % already exists', quote_literal(name) USING ERRCODE = 'duplicate_object';
    END IF;
    PERFORM snowflake_id_router.connect('snowflake_id_router_add', snowflake_id_router.connect_options() || ' ' || normal,
                                        format('router %L', name));
    found_identity := snowflake_id_router.remote_identity('snowflake_id_router_add', name);
    IF found_identity = snowflake_id_node.identity() THEN
        RAISE EXCEPTION 'router % is this router database itself (identity %)', quote_literal(name), found_identity
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    SELECT format('node %s', quote_literal(n.name)) INTO other FROM snowflake_id_router.node n
         WHERE snowflake_id_router.database_of(n.identity) = found_identity;
    IF other IS NULL THEN
        SELECT format('router %s', quote_literal(r.name)) INTO other FROM snowflake_id_router.router r WHERE r.identity = found_identity;
    END IF;
    IF other IS NOT NULL THEN
        RAISE EXCEPTION 'router % is the same database as % (identity %)', quote_literal(name), other, found_identity
            USING ERRCODE = 'duplicate_object';
    END IF;
    theirs := snowflake_id_router.fetch('snowflake_id_router_add',
        $q$SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'snowflake_id_router'$q$);
    IF theirs IS DISTINCT FROM (SELECT e.extversion FROM pg_extension e WHERE e.extname = 'snowflake_id_router') THEN
        RAISE EXCEPTION 'router % runs snowflake_id_router %, this router %', quote_literal(name), coalesce(theirs, '(none)'),
            (SELECT e.extversion FROM pg_extension e WHERE e.extname = 'snowflake_id_router')
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'There: CREATE EXTENSION snowflake_id_router CASCADE, or ALTER EXTENSION snowflake_id_router UPDATE.';
    END IF;
    -- Recorded at once, before the follower follows: a follower that follows this router
    -- while the router does not know it would route by a map no one updates.
    PERFORM snowflake_id_router.connect_self('snowflake_id_router_self');
    PERFORM snowflake_id_router.exec('snowflake_id_router_self', format(
        'INSERT INTO snowflake_id_router.router (name, connstr, identity) VALUES (%L, %L, %L)', name, normal, found_identity));
    BEGIN
        PERFORM snowflake_id_router.fetch('snowflake_id_router_add', format('SELECT snowflake_id_router.follow(%L, %L)::text',
            snowflake_id_node.identity(), snowflake_id_router.self_description()));
    EXCEPTION WHEN OTHERS THEN
        PERFORM snowflake_id_router.exec('snowflake_id_router_self', format(
            'DELETE FROM snowflake_id_router.router WHERE name = %L', name));
        RAISE;
    END;
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_add');
    IF NOT snowflake_id_router.fetch('snowflake_id_router_self', format(
           'SELECT snowflake_id_router.push_map(%L)::text', name))::boolean THEN
        RAISE WARNING 'router % follows this router, but the first push of the map failed: it routes nothing until the next one succeeds',
            quote_literal(name) USING HINT = 'SELECT snowflake_id_router.push_map() once it can be reached.';
    END IF;
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_self');
END
$$;
COMMENT ON FUNCTION add_router(text, text) IS
  'Makes the router database at connstr (empty, same snowflake_id_router version) follow this router''s map: it routes every call; cluster functions stay here.';

CREATE OR REPLACE FUNCTION remove_router(name text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r snowflake_id_router.router;
BEGIN
    PERFORM snowflake_id_router.refuse_transaction_block('remove_router');
    IF name IS NULL THEN
        RAISE EXCEPTION 'remove_router: name must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM snowflake_id_router.require_primary('remove_router');
    SELECT * INTO r FROM snowflake_id_router.router x WHERE x.name = remove_router.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'router % does not exist', quote_literal(name) USING ERRCODE = 'undefined_object';
    END IF;
    BEGIN
        PERFORM snowflake_id_router.connect_router('snowflake_id_router_remove', name);
        PERFORM snowflake_id_router.fetch('snowflake_id_router_remove', format(
            'SELECT snowflake_id_router.unfollow(%L)::text', snowflake_id_node.identity()));
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_remove');
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'router % could not be told to stop following: %', quote_literal(name), SQLERRM
            USING DETAIL = 'It keeps routing by the map it has, which this router no longer updates.',
                  HINT = format('There, once it can be reached: SELECT snowflake_id_router.unfollow(%L); or DROP EXTENSION snowflake_id_router.',
                                snowflake_id_node.identity());
    END;
    -- At once: moves no longer wait for it.
    PERFORM snowflake_id_router.connect_self('snowflake_id_router_self');
    PERFORM snowflake_id_router.exec('snowflake_id_router_self', format(
        'DELETE FROM snowflake_id_router.router WHERE name = %L', name));
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_self');
END
$$;
COMMENT ON FUNCTION remove_router(text) IS
  'Stops a follower router following this one''s map (its map is emptied there); moves no longer wait for it.';

-- The map's version is read here from map_state, not through map_version(): a view reads its
-- tables with its owner's rights but calls functions with its reader's, so SELECT on the
-- view is all a monitoring role needs (nothing it could change).
CREATE OR REPLACE VIEW router_status AS
    SELECT r.name, 'follower'::text AS role, r.connstr, r.map_version,
           r.map_version >= v.version AS current, r.behind_since, r.error,
           greatest(v.version - r.map_version, 0) AS versions_behind
      FROM snowflake_id_router.router r,
           LATERAL (SELECT coalesce((SELECT m.version FROM snowflake_id_router.map_state m), 0) AS version) v
    UNION ALL
    SELECT f.description, 'primary', NULL, f.map_version, NULL, NULL, NULL, NULL
      FROM snowflake_id_router.follows f;
COMMENT ON VIEW router_status IS
  'On the primary: each follower router, the map version it routes by, whether that is current, how many map changes behind, since when and why. On a follower: its primary.';
