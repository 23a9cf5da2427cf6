-- snowflake_id_router 0.2.0: logical shards over several PostgreSQL servers.
--
-- The router database holds the map (logical shard -> node) and a PL/Proxy cluster named
-- snowflake_id with 8192 partitions, partition n = logical shard n: an ID's own shard bits
-- (id_shard(id)) name the partition, so `RUN ON id_shard(id)` reaches the node that made it.
-- The cluster is SQL/MED (`CREATE SERVER snowflake_id FOREIGN DATA WRAPPER plproxy`), so no
-- one else's plproxy.get_cluster_* functions are touched; the server's option pN is shard
-- n's node connect string, kept equal to the map by triggers on the map table (whoever
-- writes it: these functions, or a restore). PL/Proxy reloads a SQL/MED cluster on the
-- server's syscache invalidation, so every router session follows a map change from its
-- next transaction on, without a restart. A shard assigned to no node has a connect string
-- libpq refuses by name: `invalid connection option "shard_7_is_assigned_to_no_node"`.
--
-- move_shard(shard, node) moves one shard online: the target makes the shard's schema from
-- a template (create_shard(..., template => ...)), PG 15 logical replication copies its rows
-- while writes go on, then a short cutover fences writes on the source (statement triggers
-- raising 40001, committed under an EXCLUSIVE lock so no write in flight or queued can slip
-- past), waits until a marker row written after the fence has been applied on the target,
-- carries the sequence's last_value (replication does not carry sequences) and commits the
-- map flip through a loopback connection, so it is visible to all router sessions at once
-- and survives the caller's transaction. Any failure before the flip undoes the fence and
-- removes the subscription, publication and slot: the source keeps serving the shard and
-- the move can be re-run.
--
-- Connect strings are readable by every role through pg_foreign_server, so add_node refuses
-- passwords in them: put passwords in ~/.pgpass of the router's (and nodes') server user,
-- or in the server's user mapping (CREATE USER MAPPING ... SERVER snowflake_id OPTIONS
-- (user, password)), which PL/Proxy appends to every partition's connect string.
\echo Use "CREATE EXTENSION snowflake_id_router CASCADE" to load this file. \quit

CREATE SCHEMA snowflake_id_router;
COMMENT ON SCHEMA snowflake_id_router IS 'Internals of the snowflake_id_router extension: the shard map and helpers.';
REVOKE ALL ON SCHEMA snowflake_id_router FROM PUBLIC;

CREATE TABLE snowflake_id_router.node (
    name text PRIMARY KEY CHECK (name <> '' AND octet_length(name) <= 63),
    connstr text NOT NULL
);
COMMENT ON TABLE snowflake_id_router.node IS 'Data nodes: name and libpq connect string (no password).';
CREATE TABLE snowflake_id_router.shard (
    shard integer PRIMARY KEY CHECK (shard BETWEEN 0 AND 8191),
    node text NOT NULL REFERENCES snowflake_id_router.node (name) ON UPDATE CASCADE
);
COMMENT ON TABLE snowflake_id_router.shard IS 'The shard map: logical shard -> node. Shards absent are assigned to no node.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.node', '');
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.shard', '');

-- Connect string of a shard assigned to no node: libpq refuses it, naming the shard.
CREATE FUNCTION snowflake_id_router.unassigned(shard integer) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN pg_catalog.format('shard_%s_is_assigned_to_no_node=1', shard);
COMMENT ON FUNCTION snowflake_id_router.unassigned(integer) IS
  'Connect string of a shard assigned to no node: libpq refuses it with invalid connection option "shard_N_is_assigned_to_no_node".';

-- The cluster: 8192 partitions, all assigned to no node at first.
DO $$
BEGIN
    EXECUTE 'CREATE SERVER snowflake_id FOREIGN DATA WRAPPER plproxy OPTIONS ('
        || (SELECT string_agg(format('p%s %L', n, snowflake_id_router.unassigned(n)), ', ' ORDER BY n)
              FROM generate_series(0, 8191) n)
        || ')';
END
$$;
COMMENT ON SERVER snowflake_id IS
  'PL/Proxy cluster of snowflake_id_router: partition n is logical shard n; options follow the shard map.';
CREATE USER MAPPING FOR PUBLIC SERVER snowflake_id;

-- Keeps the server's options equal to the map, in the transaction that changes the map.
CREATE FUNCTION snowflake_id_router.sync_cluster() RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    opts text;
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
        EXECUTE 'ALTER SERVER snowflake_id OPTIONS (' || opts || ')';
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.sync_cluster() IS
  'Trigger: sets the snowflake_id server''s partition options from the shard map.';
CREATE TRIGGER sync_cluster_insert AFTER INSERT ON snowflake_id_router.shard
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_router.sync_cluster();
CREATE TRIGGER sync_cluster_update AFTER UPDATE ON snowflake_id_router.shard
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_router.sync_cluster();
CREATE TRIGGER sync_cluster_delete AFTER DELETE ON snowflake_id_router.shard
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_router.sync_cluster();
CREATE TRIGGER sync_cluster_node AFTER UPDATE ON snowflake_id_router.node
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_router.sync_cluster();

-- == dblink, wherever it is installed ==

CREATE FUNCTION snowflake_id_router.dblink_schema() RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN (SELECT quote_ident(n.nspname) FROM pg_catalog.pg_extension e
          JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'dblink');
COMMENT ON FUNCTION snowflake_id_router.dblink_schema() IS 'Schema of the dblink extension, quoted.';

CREATE FUNCTION snowflake_id_router.connect(conn text, connstr text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d text := snowflake_id_router.dblink_schema();
    open text[];
BEGIN
    EXECUTE format('SELECT %s.dblink_get_connections()', d) INTO open;
    IF conn = ANY (open) THEN
        EXECUTE format('SELECT %s.dblink_disconnect($1::text)', d) USING conn;
    END IF;
    EXECUTE format('SELECT %s.dblink_connect($1::text, $2::text)', d) USING conn, connstr;
    -- Every name sent below is schema-qualified; the remote session trusts no schema.
    EXECUTE format('SELECT %s.dblink_exec($1::text, $2::text)', d)
        USING conn, 'SET search_path = pg_catalog, pg_temp';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.connect(text, text) IS
  'Opens (or reopens) dblink connection conn with search_path = pg_catalog, pg_temp.';

CREATE FUNCTION snowflake_id_router.disconnect(conn text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d text := snowflake_id_router.dblink_schema();
    open text[];
BEGIN
    EXECUTE format('SELECT %s.dblink_get_connections()', d) INTO open;
    IF conn = ANY (open) THEN
        EXECUTE format('SELECT %s.dblink_disconnect($1::text)', d) USING conn;
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.disconnect(text) IS 'Closes dblink connection conn if open.';

CREATE FUNCTION snowflake_id_router.exec(conn text, sql text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    status text;
BEGIN
    EXECUTE format('SELECT %s.dblink_exec($1::text, $2::text)', snowflake_id_router.dblink_schema())
        INTO status USING conn, sql;
    RETURN status;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.exec(text, text) IS
  'Runs sql on dblink connection conn (one implicit transaction; remote errors keep their SQLSTATE).';

CREATE FUNCTION snowflake_id_router.fetch(conn text, sql text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v text;
BEGIN
    EXECUTE format('SELECT v FROM %s.dblink($1::text, $2::text) AS r(v text)', snowflake_id_router.dblink_schema())
        INTO v USING conn, sql;
    RETURN v;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.fetch(text, text) IS
  'First column of the first row of sql (one text column) run on dblink connection conn; NULL if no row.';

-- Polls sql (returning one boolean) on conn until it is true; 57014 after timeout.
CREATE FUNCTION snowflake_id_router.wait_until(conn text, sql text, timeout interval, what text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := clock_timestamp() + timeout;
BEGIN
    WHILE clock_timestamp() < deadline LOOP
        IF coalesce(snowflake_id_router.fetch(conn, sql)::boolean, false) THEN
            RETURN;
        END IF;
        PERFORM pg_sleep(0.002);
    END LOOP;
    RAISE EXCEPTION '% did not happen within %', what, timeout USING ERRCODE = 'query_canceled';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.wait_until(text, text, interval, text) IS
  'Polls a boolean query on a dblink connection until true; 57014 after the timeout.';

-- A libpq connect string value, quoted.
CREATE FUNCTION snowflake_id_router.conn_value(v text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN '''' || replace(replace(v, '\', '\\'), '''', '\''') || '''';
COMMENT ON FUNCTION snowflake_id_router.conn_value(text) IS 'A libpq connect string value, quoted.';

-- The router's own database, for the loopback connection that commits a map flip.
CREATE FUNCTION snowflake_id_router.self_connstr() RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN coalesce(nullif(current_setting('snowflake_id_router.self_connstr', true), ''),
    format('host=%s port=%s dbname=%s user=%s',
        snowflake_id_router.conn_value(coalesce(nullif(trim(split_part(current_setting('unix_socket_directories'), ',', 1)), ''), 'localhost')),
        current_setting('port'),
        snowflake_id_router.conn_value(current_database()),
        snowflake_id_router.conn_value(current_user)));
COMMENT ON FUNCTION snowflake_id_router.self_connstr() IS
  'Connect string of this router database: setting snowflake_id_router.self_connstr, else its first unix socket, port, database and user.';

CREATE FUNCTION snowflake_id_router.setting(name text, fallback text) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN coalesce(nullif(current_setting('snowflake_id_router.' || name, true), ''), fallback);
COMMENT ON FUNCTION snowflake_id_router.setting(text, text) IS 'Setting snowflake_id_router.<name>, or fallback when unset.';

-- Removes what a failed or finished move leaves behind: the target's subscription, the
-- source's publication and slot, the fence and marker, and (undo) the target's copy.
-- Each step on its own: a node that is down is skipped with a WARNING.
CREATE FUNCTION snowflake_id_router.clean_move(shard integer, schema_name text, src_connstr text, dst_connstr text,
                                               undo boolean) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    sub text := 'snowflake_id_move_' || shard;
    s text := quote_ident(schema_name);
    sf text;
    deadline timestamptz;
BEGIN
    IF dst_connstr IS NOT NULL THEN
        BEGIN
            PERFORM snowflake_id_router.connect('snowflake_id_router_clean', dst_connstr);
            IF snowflake_id_router.fetch('snowflake_id_router_clean',
                   format('SELECT count(*)::text FROM pg_catalog.pg_subscription WHERE subname = %L', sub)) <> '0' THEN
                -- Detach the slot first: the source may be unreachable; its slot is dropped below.
                PERFORM snowflake_id_router.exec('snowflake_id_router_clean', format('ALTER SUBSCRIPTION %I DISABLE', sub));
                PERFORM snowflake_id_router.exec('snowflake_id_router_clean', format('ALTER SUBSCRIPTION %I SET (slot_name = NONE)', sub));
                PERFORM snowflake_id_router.exec('snowflake_id_router_clean', format('DROP SUBSCRIPTION %I', sub));
            END IF;
            IF schema_name IS NOT NULL THEN
                IF undo THEN
                    sf := snowflake_id_router.fetch('snowflake_id_router_clean',
                        $q$SELECT quote_ident(n.nspname) FROM pg_catalog.pg_extension e
                             JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'snowflake_id'$q$);
                    IF snowflake_id_router.fetch('snowflake_id_router_clean', format(
                           'SELECT count(*)::text FROM %s.snowflake_id_shards WHERE schema_name = %L AND shard = %s',
                           sf, schema_name, shard)) <> '0' THEN
                        PERFORM snowflake_id_router.fetch('snowflake_id_router_clean', format(
                            'SELECT %s.drop_shard(%L, cascade => true)::text', sf, schema_name));
                        PERFORM snowflake_id_router.exec('snowflake_id_router_clean',
                            format('DROP SCHEMA IF EXISTS %s CASCADE', s));
                    END IF;
                ELSE
                    PERFORM snowflake_id_router.exec('snowflake_id_router_clean',
                        format('DROP TABLE IF EXISTS %s.snowflake_id_move_marker', s));
                END IF;
            END IF;
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            RAISE WARNING 'shard %: could not clean up on the target: %', shard, SQLERRM;
        END;
    END IF;
    IF src_connstr IS NOT NULL THEN
        BEGIN
            PERFORM snowflake_id_router.connect('snowflake_id_router_clean', src_connstr);
            PERFORM snowflake_id_router.exec('snowflake_id_router_clean', format('DROP PUBLICATION IF EXISTS %I', sub));
            -- A walsender may still hold the slot (its subscriber just died): end it, then drop.
            deadline := clock_timestamp() + interval '10 s';
            WHILE snowflake_id_router.fetch('snowflake_id_router_clean', format(
                      'SELECT count(*)::text FROM pg_catalog.pg_replication_slots WHERE slot_name = %L', sub)) <> '0' LOOP
                PERFORM snowflake_id_router.fetch('snowflake_id_router_clean', format(
                    'SELECT pg_catalog.pg_terminate_backend(active_pid)::text FROM pg_catalog.pg_replication_slots
                      WHERE slot_name = %L AND active_pid IS NOT NULL', sub));
                BEGIN
                    PERFORM snowflake_id_router.fetch('snowflake_id_router_clean', format(
                        'SELECT pg_catalog.pg_drop_replication_slot(%L)::text', sub));
                EXCEPTION WHEN query_canceled OR OTHERS THEN
                    IF clock_timestamp() > deadline THEN RAISE; END IF;
                    PERFORM pg_sleep(0.05);
                END;
            END LOOP;
            IF schema_name IS NOT NULL AND undo THEN
                -- The fence goes with its function; the source serves the shard again.
                PERFORM snowflake_id_router.exec('snowflake_id_router_clean',
                    format('DROP FUNCTION IF EXISTS %s.snowflake_id_fence() CASCADE; DROP TABLE IF EXISTS %s.snowflake_id_move_marker', s, s));
            END IF;
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            RAISE WARNING 'shard %: could not clean up on the source: %', shard, SQLERRM;
        END;
    END IF;
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_clean');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.clean_move(integer, text, text, text, boolean) IS
  'Removes a move''s subscription, publication, slot and marker; with undo, also the fence on the source and the copy on the target.';

-- == The user-facing functions ==

CREATE FUNCTION add_node(name text, connstr text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF name IS NULL OR connstr IS NULL THEN
        RAISE EXCEPTION 'add_node: name and connstr must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF name = '' OR octet_length(name) > 63 THEN
        RAISE EXCEPTION 'node name % is invalid: give 1 to 63 bytes', quote_literal(name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF connstr ~* '(^|\s)password\s*=' OR connstr ~* '^postgres(ql)?://[^/@]*:[^/@]*@' THEN
        RAISE EXCEPTION 'the connect string of node % holds a password', quote_literal(name)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Connect strings are readable by every role (pg_foreign_server.srvoptions).',
                  HINT = 'Put the password in ~/.pgpass of the router''s server user, or in the user mapping: ALTER USER MAPPING FOR PUBLIC SERVER snowflake_id OPTIONS (ADD password ''...'').';
    END IF;
    IF connstr ~ '^\s*$' THEN
        RAISE EXCEPTION 'the connect string of node % is empty', quote_literal(name) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = add_node.name) THEN
        RAISE EXCEPTION 'node % already exists', quote_literal(name) USING ERRCODE = 'duplicate_object';
    END IF;
    INSERT INTO snowflake_id_router.node VALUES (name, connstr);
END
$$;
COMMENT ON FUNCTION add_node(text, text) IS
  'Registers a data node by name and libpq connect string (no password: use ~/.pgpass or the user mapping).';

CREATE FUNCTION assign_shards(first_shard integer, count integer, node text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    taken text;
BEGIN
    IF first_shard IS NULL OR count IS NULL OR node IS NULL THEN
        RAISE EXCEPTION 'assign_shards: first_shard, count and node must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF count < 1 OR first_shard NOT BETWEEN 0 AND 8191 OR first_shard::bigint + count - 1 > 8191 THEN
        RAISE EXCEPTION 'shards % to % are out of range: valid shards are 0 to 8191, count at least 1',
            first_shard, first_shard::bigint + count - 1 USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    IF NOT EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = assign_shards.node) THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object',
            HINT = 'Register it with add_node(name, connstr).';
    END IF;
    -- Serialises with move_shard and other assign_shards on the same map.
    LOCK TABLE snowflake_id_router.shard IN SHARE ROW EXCLUSIVE MODE;
    SELECT format('shard %s is on node %s', s.shard, quote_literal(s.node)) INTO taken
      FROM snowflake_id_router.shard s
     WHERE s.shard BETWEEN first_shard AND first_shard + count - 1 AND s.node <> assign_shards.node
     ORDER BY s.shard LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot assign shards % to % to node %: %', first_shard, first_shard + count - 1,
            quote_literal(node), taken USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'A shard that holds data changes node with move_shard(shard, node).';
    END IF;
    INSERT INTO snowflake_id_router.shard
    SELECT n, assign_shards.node FROM generate_series(first_shard, first_shard + count - 1) n
    ON CONFLICT DO NOTHING;
END
$$;
COMMENT ON FUNCTION assign_shards(integer, integer, text) IS
  'Assigns shards first_shard .. first_shard + count - 1 (assigned to no node, or to this node) to node; idempotent.';

CREATE VIEW shard_map AS
    SELECT s.shard, s.node, n.connstr
      FROM snowflake_id_router.shard s JOIN snowflake_id_router.node n ON n.name = s.node
     ORDER BY s.shard;
COMMENT ON VIEW shard_map IS 'The shard map: logical shard, its node and the node''s connect string (assigned shards only).';

CREATE FUNCTION move_shard(shard integer, node text, template text DEFAULT 'tpl') RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    src text;
    src_connstr text;
    dst_connstr text;
    schema_name text;
    s text;                -- schema_name, quoted
    sfs text;              -- snowflake_id's schema on the source, quoted
    sfd text;              -- ... on the target
    src_seq text;
    dst_seq text;
    src_tables text[];     -- the shard's tables, names quoted (an array: a quoted name may hold ', ')
    dst_tables text[];
    lock_list text;
    fence_sql text;
    sub text := 'snowflake_id_move_' || shard;
    step text := 'connecting';
    flipped boolean := false;
    src_last bigint;
    copied bigint;
    t_start timestamptz := clock_timestamp();
    t_fence timestamptz;
    t_flip timestamptz;
    copy_timeout interval;
    cutover_timeout interval;
    st text;
    msg text;
    det text;
BEGIN
    IF shard IS NULL OR node IS NULL OR template IS NULL THEN
        RAISE EXCEPTION 'move_shard: shard, node and template must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF shard NOT BETWEEN 0 AND 8191 THEN
        RAISE EXCEPTION 'shard % is out of range: valid shards are 0 to 8191', shard USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    SELECT n.connstr INTO dst_connstr FROM snowflake_id_router.node n WHERE n.name = move_shard.node;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object',
            HINT = 'Register it with add_node(name, connstr).';
    END IF;
    -- One move of a shard at a time (across sessions); held to the end of the transaction.
    IF NOT pg_try_advisory_xact_lock(hashtext('snowflake_id_router.move_shard'), shard) THEN
        RAISE EXCEPTION 'shard % is being moved by another session', shard USING ERRCODE = 'lock_not_available';
    END IF;
    SELECT m.node, n.connstr INTO src, src_connstr
      FROM snowflake_id_router.shard m JOIN snowflake_id_router.node n ON n.name = m.node
     WHERE m.shard = move_shard.shard;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'shard % is assigned to no node', shard USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'A shard without data is placed with assign_shards(first_shard, count, node).';
    END IF;
    IF src = node THEN
        RAISE NOTICE 'shard % is already on node %', shard, quote_literal(node);
        RETURN;
    END IF;
    copy_timeout := snowflake_id_router.setting('copy_timeout', '60 s')::interval;
    cutover_timeout := snowflake_id_router.setting('cutover_timeout', '5 s')::interval;

    BEGIN
        PERFORM snowflake_id_router.connect('snowflake_id_router_src', src_connstr);
        PERFORM snowflake_id_router.connect('snowflake_id_router_dst', dst_connstr);
        step := 'checking the nodes';
        IF snowflake_id_router.fetch('snowflake_id_router_src', 'SHOW wal_level') <> 'logical' THEN
            RAISE EXCEPTION 'node % (the source) runs with wal_level = %', quote_literal(src),
                snowflake_id_router.fetch('snowflake_id_router_src', 'SHOW wal_level')
                USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Set wal_level = logical there and restart it.';
        END IF;
        sfs := snowflake_id_router.fetch('snowflake_id_router_src',
            $q$SELECT quote_ident(n.nspname) FROM pg_catalog.pg_extension e
                 JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'snowflake_id'$q$);
        sfd := snowflake_id_router.fetch('snowflake_id_router_dst',
            $q$SELECT quote_ident(n.nspname) FROM pg_catalog.pg_extension e
                 JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'snowflake_id'$q$);
        IF sfs IS NULL OR sfd IS NULL THEN
            RAISE EXCEPTION 'node % has no snowflake_id extension', quote_literal(CASE WHEN sfs IS NULL THEN src ELSE node END)
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        schema_name := snowflake_id_router.fetch('snowflake_id_router_src',
            format('SELECT schema_name FROM %s.snowflake_id_shards WHERE shard = %s', sfs, shard));
        IF schema_name IS NULL THEN
            RAISE EXCEPTION 'node % has no schema for shard %', quote_literal(src), shard
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'create_shard(schema_name, shard, template => ...) makes it there.';
        END IF;
        s := quote_ident(schema_name);
        src_seq := snowflake_id_router.fetch('snowflake_id_router_src',
            format('SELECT sequence::text FROM %s.snowflake_id_shards WHERE shard = %s', sfs, shard));
        IF snowflake_id_router.fetch('snowflake_id_router_dst', format(
               'SELECT count(*)::text FROM %s.snowflake_id_shards WHERE schema_name = %L AND shard <> %s',
               sfd, schema_name, shard)) <> '0'
           OR snowflake_id_router.fetch('snowflake_id_router_dst', format(
               'SELECT count(*)::text FROM pg_catalog.pg_namespace WHERE nspname = %L
                  AND nspname NOT IN (SELECT schema_name FROM %s.snowflake_id_shards WHERE shard = %s)',
               schema_name, sfd, shard)) <> '0' THEN
            RAISE EXCEPTION 'node % already has a schema % that is not a copy of shard %', quote_literal(node), s, shard
                USING ERRCODE = 'duplicate_schema';
        END IF;

        step := 'removing what an earlier attempt left';
        PERFORM snowflake_id_router.clean_move(shard, schema_name, src_connstr, dst_connstr, true);
        -- A copy of this shard on the target under another name is stale too.
        IF snowflake_id_router.fetch('snowflake_id_router_dst', format(
               'SELECT count(*)::text FROM %s.snowflake_id_shards WHERE shard = %s', sfd, shard)) <> '0' THEN
            RAISE EXCEPTION 'node % already has shard % (schema %)', quote_literal(node), shard,
                snowflake_id_router.fetch('snowflake_id_router_dst', format(
                    'SELECT quote_ident(schema_name) FROM %s.snowflake_id_shards WHERE shard = %s', sfd, shard))
                USING ERRCODE = 'duplicate_object', HINT = 'Drop that copy (drop_shard) if it is stale.';
        END IF;

        step := 'checking the shard''s tables';
        src_tables := snowflake_id_router.fetch('snowflake_id_router_src', format(
            $q$SELECT coalesce(array_agg(quote_ident(c.relname) ORDER BY c.relname), '{}')::text
                 FROM pg_catalog.pg_class c WHERE c.relnamespace = %L::regnamespace AND c.relkind IN ('r', 'p')
                  AND c.relname <> 'snowflake_id_move_marker'$q$, s));
        IF cardinality(src_tables) = 0 THEN
            RAISE EXCEPTION 'shard % (schema % on node %) has no tables to move', shard, s, quote_literal(src)
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        -- Logical replication needs a replica identity for UPDATE and DELETE; without one,
        -- publishing would make the source refuse them.
        det := snowflake_id_router.fetch('snowflake_id_router_src', format(
            $q$SELECT string_agg(quote_ident(c.relname), ', ' ORDER BY c.relname)
                 FROM pg_catalog.pg_class c WHERE c.relnamespace = %L::regnamespace AND c.relkind IN ('r', 'p')
                  AND NOT (c.relreplident = 'f'
                       OR (c.relreplident = 'd' AND EXISTS (SELECT FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisprimary))
                       OR (c.relreplident = 'i' AND EXISTS (SELECT FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisreplident)))$q$, s));
        IF det IS NOT NULL THEN
            RAISE EXCEPTION 'shard % cannot move: table(s) % of schema % have no primary key or replica identity', shard, det, s
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;

        step := 'making the shard on the target';
        PERFORM snowflake_id_router.fetch('snowflake_id_router_dst',
            format('SELECT %s.create_shard(%L, %s, template => %L)::text', sfd, schema_name, shard, template));
        dst_tables := snowflake_id_router.fetch('snowflake_id_router_dst', format(
            $q$SELECT coalesce(array_agg(quote_ident(c.relname) ORDER BY c.relname), '{}')::text
                 FROM pg_catalog.pg_class c WHERE c.relnamespace = %L::regnamespace AND c.relkind IN ('r', 'p')$q$, s));
        IF dst_tables <> src_tables THEN
            RAISE EXCEPTION 'template % on node % makes tables (%), but shard % on node % has (%)',
                quote_literal(template), quote_literal(node), array_to_string(dst_tables, ', '), shard, quote_literal(src), array_to_string(src_tables, ', ')
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        dst_seq := snowflake_id_router.fetch('snowflake_id_router_dst',
            format('SELECT sequence::text FROM %s.snowflake_id_shards WHERE shard = %s', sfd, shard));

        step := 'copying the rows';
        -- The marker: a row written after the fence; seen on the target, everything before it is there.
        PERFORM snowflake_id_router.exec('snowflake_id_router_src',
            format('CREATE TABLE %s.snowflake_id_move_marker (fenced boolean)', s));
        PERFORM snowflake_id_router.exec('snowflake_id_router_dst',
            format('CREATE TABLE %s.snowflake_id_move_marker (fenced boolean)', s));
        PERFORM snowflake_id_router.exec('snowflake_id_router_src',
            format('CREATE PUBLICATION %I FOR TABLES IN SCHEMA %s', sub, s));
        PERFORM snowflake_id_router.exec('snowflake_id_router_dst',
            format('CREATE SUBSCRIPTION %I CONNECTION %L PUBLICATION %I', sub, src_connstr, sub));
        PERFORM snowflake_id_router.wait_until('snowflake_id_router_dst', format(
            $q$SELECT (count(*) > 0 AND bool_and(r.srsubstate = 'r'))::text
                 FROM pg_catalog.pg_subscription_rel r JOIN pg_catalog.pg_subscription u ON u.oid = r.srsubid
                WHERE u.subname = %L$q$, sub), copy_timeout, format('the initial copy of shard %s', shard));

        step := 'connecting to the router itself';
        -- The loopback connection for the flip, opened now to keep it out of the pause.
        -- Bounded: a caller whose own transaction holds the map locked would wait forever.
        PERFORM snowflake_id_router.connect('snowflake_id_router_self', snowflake_id_router.self_connstr());
        PERFORM snowflake_id_router.exec('snowflake_id_router_self',
            format('SET lock_timeout = %L', snowflake_id_router.setting('lock_timeout', '2 s')));

        step := 'fencing writes on the source';
        -- EXCLUSIVE blocks every writer and lets readers through; the triggers commit before
        -- the lock goes, so a writer that waited for it sees them (it takes its lock, then
        -- reads the catalog). TRUNCATE is fenced too.
        SELECT string_agg(format('%s.%s', s, t), ', '), string_agg(format(
                   'CREATE TRIGGER snowflake_id_fence BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s.%s
                      FOR EACH STATEMENT EXECUTE FUNCTION %s.snowflake_id_fence();', s, t, s), ' ')
          INTO lock_list, fence_sql
          FROM unnest(src_tables) t;
        t_fence := clock_timestamp();
        PERFORM snowflake_id_router.exec('snowflake_id_router_src', format(
            $q$SELECT pg_catalog.set_config('lock_timeout', %L, true);
               LOCK TABLE %s IN EXCLUSIVE MODE;
               CREATE FUNCTION %s.snowflake_id_fence() RETURNS trigger LANGUAGE plpgsql
               SET search_path = pg_catalog, pg_temp AS $f$
               BEGIN
                   RAISE EXCEPTION 'shard %s is moving to another node: write refused, retry it'
                       USING ERRCODE = 'serialization_failure',
                             HINT = 'Retry the transaction: once the move commits the router sends it to the new node.';
               END
               $f$;
               %s$q$, snowflake_id_router.setting('lock_timeout', '2 s'), lock_list, s, shard, fence_sql));
        step := 'waiting for the target to catch up';
        src_last := snowflake_id_router.fetch('snowflake_id_router_src', format(
            'INSERT INTO %s.snowflake_id_move_marker VALUES (true); SELECT last_value::text FROM %s', s, src_seq));
        PERFORM snowflake_id_router.wait_until('snowflake_id_router_dst',
            format('SELECT EXISTS (SELECT FROM %s.snowflake_id_move_marker)::text', s),
            cutover_timeout, format('catching up with shard %s after the fence', shard));

        step := 'carrying the sequence';
        -- Replication does not carry sequences: the target continues above every ID the
        -- source issued, whatever its clock says.
        PERFORM snowflake_id_router.fetch('snowflake_id_router_dst', format(
            'SELECT pg_catalog.setval(%L::regclass, greatest(%s, (SELECT last_value FROM %s)), true)::text',
            dst_seq, src_last, dst_seq));

        step := 'flipping the map';
        -- Through a loopback connection: committed now, for every router session, whatever
        -- becomes of the caller's transaction.
        BEGIN
            IF snowflake_id_router.exec('snowflake_id_router_self', format(
                   'UPDATE snowflake_id_router.shard SET node = %L WHERE shard = %s AND node = %L',
                   node, shard, src)) <> 'UPDATE 1' THEN
                RAISE EXCEPTION 'the map of shard % changed during the move', shard USING ERRCODE = 'serialization_failure';
            END IF;
            flipped := true;
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            -- Did the commit happen after all (the connection broke on the reply)?
            BEGIN
                PERFORM snowflake_id_router.connect('snowflake_id_router_self', snowflake_id_router.self_connstr());
                flipped := snowflake_id_router.fetch('snowflake_id_router_self', format(
                    'SELECT node FROM snowflake_id_router.shard WHERE shard = %s', shard)) = node;
            EXCEPTION WHEN query_canceled OR OTHERS THEN
                flipped := false;
            END;
            IF NOT flipped THEN
                RAISE;
            END IF;
        END;
        t_flip := clock_timestamp();
        copied := snowflake_id_router.fetch('snowflake_id_router_dst', format(
            'SELECT (%s)::text', (SELECT string_agg(format('(SELECT count(*) FROM %s.%s)', s, t), ' + ')
                                    FROM unnest(src_tables) t)))::bigint;
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
        IF NOT flipped THEN
            PERFORM snowflake_id_router.disconnect('snowflake_id_router_src');
            PERFORM snowflake_id_router.disconnect('snowflake_id_router_dst');
            PERFORM snowflake_id_router.disconnect('snowflake_id_router_self');
            PERFORM snowflake_id_router.clean_move(shard, schema_name, src_connstr, dst_connstr, true);
            RAISE EXCEPTION 'moving shard % from node % to node % failed while %: %', shard, quote_literal(src),
                quote_literal(node), step, msg
                USING ERRCODE = st, DETAIL = coalesce(nullif(det, ''), 'The step raised no further detail.'),
                      HINT = format('Shard %s is still served by node %s, which accepts writes again; the subscription, publication and slot are removed. Re-run move_shard when the cause is fixed.',
                                    shard, quote_literal(src));
        END IF;
        RAISE WARNING 'shard % moved to node %, but: %', shard, quote_literal(node), msg;
    END;

    -- The map names the target from here on. A router transaction that began before the
    -- flip may still send a write to the source (where the fence refuses it, 40001): let
    -- such transactions end (bounded) before the source copy goes.
    -- Nothing below may fail the call: the move is done.
    BEGIN
        FOR i IN 1 .. 200 LOOP
            PERFORM pg_stat_clear_snapshot();
            EXIT WHEN NOT EXISTS (SELECT FROM pg_catalog.pg_stat_activity a
                                   WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
                                     AND a.backend_type = 'client backend' AND a.xact_start < t_flip
                                     -- (other moves in progress send no writes)
                                     AND a.pid NOT IN (SELECT l.pid FROM pg_catalog.pg_locks l
                                                        WHERE l.locktype = 'advisory' AND l.granted
                                                          AND l.classid::integer = hashtext('snowflake_id_router.move_shard')));
            PERFORM pg_sleep(0.01);
        END LOOP;
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        RAISE WARNING 'shard % moved to node %, but waiting for older router transactions failed: %', shard, quote_literal(node), SQLERRM;
    END;
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_src');
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_dst');
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_self');
    PERFORM snowflake_id_router.clean_move(shard, schema_name, src_connstr, dst_connstr, false);
    -- The source copy is dropped: its fence goes with it.
    BEGIN
        PERFORM snowflake_id_router.connect('snowflake_id_router_src', src_connstr);
        PERFORM snowflake_id_router.fetch('snowflake_id_router_src',
            format('SELECT %s.drop_shard(%L, cascade => true)::text', sfs, schema_name));
        PERFORM snowflake_id_router.exec('snowflake_id_router_src', format('DROP SCHEMA IF EXISTS %s CASCADE', s));
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_src');
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        RAISE WARNING 'shard % moved to node %, but its old copy (schema % on node %) could not be dropped: %',
            shard, quote_literal(node), s, quote_literal(src), SQLERRM;
    END;
    RAISE NOTICE 'shard % moved from node % to node %: % rows, % ms in all, writes fenced for % ms',
        shard, quote_literal(src), quote_literal(node), copied,
        round(extract(epoch FROM clock_timestamp() - t_start) * 1000),
        round(extract(epoch FROM t_flip - t_fence) * 1000, 1);
END
$$;
COMMENT ON FUNCTION move_shard(integer, text, text) IS
  'Moves a logical shard to another node online: copy by logical replication, fenced cutover (writes get 40001), sequence carried, map flipped; a failure leaves the shard on its node.';

-- Superuser only, unless granted: these run as the extension's owner (SECURITY DEFINER).
REVOKE ALL ON FUNCTION add_node(text, text), assign_shards(integer, integer, text),
    move_shard(integer, text, text) FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_router FROM PUBLIC;
REVOKE ALL ON shard_map FROM PUBLIC;
