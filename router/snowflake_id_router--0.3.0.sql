-- Assembled by scripts/assemble-sql from router/sql/: edit the sources, not this file.
\echo Use "CREATE EXTENSION snowflake_id_router CASCADE" to load this file. \quit

-- ==== router/sql/00_schema.sql ====
-- snowflake_id_router: logical shards over several PostgreSQL servers.
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

-- ==== router/sql/01_moves.sql ====
-- The records of moves (docs/cluster-design.md, "A move, step by step"): one row per move,
-- written step by step through the loopback connection, so each step is committed before
-- the next begins, whatever becomes of the mover's session or transaction. A move whose
-- state is neither done nor undone is finished by repair_moves() (and by the next move of
-- its shards) once its mover is gone.
CREATE TABLE snowflake_id_router.move (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    shards integer[] NOT NULL CHECK (cardinality(shards) > 0),
    source text NOT NULL,
    target text NOT NULL,
    source_identity text NOT NULL,
    target_identity text NOT NULL,
    template text NOT NULL,
    schemas text[],
    state text NOT NULL DEFAULT 'planned' CHECK (state IN ('planned', 'checking', 'preparing', 'copying', 'fencing',
        'catching up', 'sealing', 'sealed', 'flipping', 'flipped', 'cleaning', 'undoing', 'done', 'undone')),
    suboid oid,
    started timestamptz NOT NULL DEFAULT clock_timestamp(),
    fenced timestamptz,
    flipped timestamptz,
    ended timestamptz,
    rows bigint,
    error text
);
COMMENT ON TABLE snowflake_id_router.move IS
  'Moves of shards between nodes, one row each, recorded step by step (the view move_history shows them).';
CREATE INDEX ON snowflake_id_router.move USING gin (shards) WHERE state NOT IN ('done', 'undone');
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.move', '');
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.move_id_seq', '');

-- Test hook: a mover reaching a step named here waits until the row is gone (it notes
-- when it arrived), so a test can interrupt it at exactly that step. Owner only.
CREATE TABLE snowflake_id_router.breakpoint (
    step text PRIMARY KEY,
    reached timestamptz,
    pid integer
);
COMMENT ON TABLE snowflake_id_router.breakpoint IS
  'Test hook: a mover reaching a step named here notes it (reached, pid) and waits until the row is deleted.';

-- ==== router/sql/01_settings.sql ====
-- Settings of the router's own operations. Code that runs with the extension owner's rights
-- reads no session setting: these are rows of a table only its owner may write (a
-- superuser: UPDATE/INSERT here), dumped with the router. Only overrides are stored; the
-- defaults are in snowflake_id_router.setting(name).
CREATE TABLE snowflake_id_router.setting (
    name text PRIMARY KEY
        CHECK (name IN ('lock_timeout', 'copy_timeout', 'cutover_timeout', 'cleanup_timeout', 'self_connstr')),
    value text NOT NULL,
    -- A timeout of 0 would mean no timeout at all.
    CHECK (name = 'self_connstr' OR (value::interval > interval '0' AND value::interval <= interval '1 day'))
);
COMMENT ON TABLE snowflake_id_router.setting IS
  'Overrides of the router''s settings (timeouts, the loopback connect string); writable by the extension''s owner only.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.setting', '');

-- ==== router/sql/10_dblink.sql ====
-- == dblink, wherever it is installed ==

CREATE OR REPLACE FUNCTION snowflake_id_router.dblink_schema() RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN (SELECT quote_ident(n.nspname) FROM pg_catalog.pg_extension e
          JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'dblink');
COMMENT ON FUNCTION snowflake_id_router.dblink_schema() IS 'Schema of the dblink extension, quoted.';

CREATE OR REPLACE FUNCTION snowflake_id_router.connect(conn text, connstr text) RETURNS void
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

CREATE OR REPLACE FUNCTION snowflake_id_router.disconnect(conn text) RETURNS void
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

CREATE OR REPLACE FUNCTION snowflake_id_router.exec(conn text, sql text) RETURNS text
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

CREATE OR REPLACE FUNCTION snowflake_id_router.fetch(conn text, sql text) RETURNS text
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
CREATE OR REPLACE FUNCTION snowflake_id_router.wait_until(conn text, sql text, timeout interval, what text) RETURNS void
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
CREATE OR REPLACE FUNCTION snowflake_id_router.conn_value(v text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN '''' || replace(replace(v, '\', '\\'), '''', '\''') || '''';
COMMENT ON FUNCTION snowflake_id_router.conn_value(text) IS 'A libpq connect string value, quoted.';

-- The router's own database, for the loopback connection that commits a map flip.
CREATE OR REPLACE FUNCTION snowflake_id_router.self_connstr() RETURNS text
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

CREATE OR REPLACE FUNCTION snowflake_id_router.setting(name text, fallback text) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN coalesce(nullif(current_setting('snowflake_id_router.' || name, true), ''), fallback);
COMMENT ON FUNCTION snowflake_id_router.setting(text, text) IS 'Setting snowflake_id_router.<name>, or fallback when unset.';

-- ==== router/sql/15_interim.sql ====
-- INTERIM, until the lead's connect_node, connect_self and setting(name) land on main
-- (router/sql/10_dblink.sql there): delete this file then.
CREATE OR REPLACE FUNCTION snowflake_id_router.connect_node(conn text, node text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    connstr text;
BEGIN
    SELECT n.connstr INTO connstr FROM snowflake_id_router.node n WHERE n.name = connect_node.node;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM snowflake_id_router.connect(conn, 'keepalives=1 keepalives_idle=5 keepalives_interval=2 keepalives_count=3 connect_timeout=10 ' || connstr);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.connect_node(text, text) IS 'INTERIM: opens dblink connection conn to node.';
CREATE OR REPLACE FUNCTION snowflake_id_router.connect_self(conn text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_router.connect(conn, snowflake_id_router.self_connstr() || ' connect_timeout=10');
    IF snowflake_id_router.fetch(conn, 'SELECT snowflake_id_node.identity()') IS DISTINCT FROM snowflake_id_node.identity() THEN
        PERFORM snowflake_id_router.disconnect(conn);
        RAISE EXCEPTION 'the loopback connection reaches another database' USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.connect_self(text) IS 'INTERIM: opens the loopback connection.';
CREATE OR REPLACE FUNCTION snowflake_id_router.setting(name text) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN coalesce((SELECT s.value FROM snowflake_id_router.setting s WHERE s.name = setting.name),
                CASE setting.name WHEN 'lock_timeout' THEN '2 s' WHEN 'copy_timeout' THEN '60 s'
                                  WHEN 'cutover_timeout' THEN '5 s' WHEN 'cleanup_timeout' THEN '10 s' END);
COMMENT ON FUNCTION snowflake_id_router.setting(text) IS 'INTERIM: a router setting.';

-- ==== router/sql/20_map.sql ====
-- Keeps the server's options equal to the map, in the transaction that changes the map.
CREATE OR REPLACE FUNCTION snowflake_id_router.sync_cluster() RETURNS trigger
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

CREATE OR REPLACE FUNCTION assign_shards(first_shard integer, count integer, node text) RETURNS void
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

CREATE OR REPLACE VIEW shard_map AS
    SELECT s.shard, s.node, n.connstr
      FROM snowflake_id_router.shard s JOIN snowflake_id_router.node n ON n.name = s.node
     ORDER BY s.shard;
COMMENT ON VIEW shard_map IS 'The shard map: logical shard, its node and the node''s connect string (assigned shards only).';


-- ==== router/sql/31_remote.sql ====
-- == Calls on nodes and on the router itself, every one bounded ==
--
-- A move talks to its nodes through dblink connections named 'sfid:<node>' (one per node
-- per session, reused by the repairs the move runs) and to its own database through
-- 'sfid:self', the loopback connection that commits each step's record and the flip.
-- Every call is sent asynchronously and polled against a deadline, then cancelled: a
-- blocking dblink call cannot be interrupted, while a poll (pg_sleep) can, so a mover
-- waiting on a node can always be cancelled or terminated, and its node sessions, which
-- hold its shard locks, end with it.

-- Opens the connection to node (identity checked), or returns the one this session has.
-- Its session watches the router: if the mover dies, it ends (and its locks go) within
-- seconds, even while it runs a statement or the network is cut.
CREATE OR REPLACE FUNCTION snowflake_id_router.node_conn(node text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    conn text := 'sfid:' || node;
    open text[];
BEGIN
    EXECUTE format('SELECT %s.dblink_get_connections()', snowflake_id_router.dblink_schema()) INTO open;
    IF conn = ANY (open) THEN
        RETURN conn;
    END IF;
    PERFORM snowflake_id_router.connect_node(conn, node);
    PERFORM snowflake_id_router.call(conn, format(
        $q$SELECT concat_ws(' ', set_config('application_name', %L, false), set_config('client_connection_check_interval', '1s', false),
                  set_config('tcp_keepalives_idle', '5', false), set_config('tcp_keepalives_interval', '2', false),
                  set_config('tcp_keepalives_count', '3', false), set_config('statement_timeout', '0', false),
                  set_config('lock_timeout', '0', false), set_config('idle_in_transaction_session_timeout', '0', false))$q$,
        'snowflake_id_router mover ' || pg_backend_pid()), interval '10 s', format('setting up the session on node %L', node));
    RETURN conn;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.node_conn(text) IS
  'The dblink connection sfid:<node> of this session to node (opened, identity checked, if not yet open).';

-- The loopback connection to this router database (connect_self checks it reaches it).
CREATE OR REPLACE FUNCTION snowflake_id_router.loopback() RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    open text[];
BEGIN
    EXECUTE format('SELECT %s.dblink_get_connections()', snowflake_id_router.dblink_schema()) INTO open;
    IF 'sfid:self' = ANY (open) THEN
        RETURN 'sfid:self';
    END IF;
    PERFORM snowflake_id_router.connect_self('sfid:self');
    PERFORM snowflake_id_router.call('sfid:self', format(
        $q$SELECT concat_ws(' ', set_config('application_name', %L, false), set_config('lock_timeout', %L, false),
                            set_config('statement_timeout', '0', false))$q$,
        'snowflake_id_router loopback ' || pg_backend_pid(), snowflake_id_router.ms(snowflake_id_router.timeout('lock_timeout'))),
        interval '10 s', 'setting up the loopback connection');
    RETURN 'sfid:self';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.loopback() IS
  'The loopback connection sfid:self of this session to this router database (opened and checked if not yet open).';

-- Closes every connection of this session named sfid:*, releasing the node locks held
-- through them. Never fails.
CREATE OR REPLACE FUNCTION snowflake_id_router.disconnect_all() RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    d text := snowflake_id_router.dblink_schema();
    open text[];
    c text;
BEGIN
    EXECUTE format('SELECT %s.dblink_get_connections()', d) INTO open;
    FOR c IN SELECT x FROM unnest(open) x WHERE x LIKE 'sfid:%' LOOP
        BEGIN
            EXECUTE format('SELECT %s.dblink_disconnect($1::text)', d) USING c;
        EXCEPTION WHEN OTHERS THEN
            NULL;  -- a broken connection is gone already
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.disconnect_all() IS
  'Closes this session''s sfid:* dblink connections (node locks held through them go with them).';

-- Sends sql on conn without waiting.
CREATE OR REPLACE FUNCTION snowflake_id_router.send(conn text, sql text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    sent integer;
BEGIN
    EXECUTE format('SELECT %s.dblink_send_query($1::text, $2::text)', snowflake_id_router.dblink_schema())
        INTO sent USING conn, sql;
    IF sent IS DISTINCT FROM 1 THEN
        RAISE EXCEPTION 'could not send a query on connection %', conn USING ERRCODE = 'connection_failure';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.send(text, text) IS 'Sends sql on dblink connection conn without waiting for it.';

-- The result (first column of the first row, as text) of what was sent on conn, waited for
-- until deadline; then the query is cancelled and 57014 raised. A remote error is raised
-- again with its SQLSTATE, detail and hint, its message prefixed by what and where.
CREATE OR REPLACE FUNCTION snowflake_id_router.receive(conn text, deadline timestamptz, what text) RETURNS text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    d text := snowflake_id_router.dblink_schema();
    busy integer;
    nap double precision := 0.0002;
    result text;
    st text;
    msg text;
    det text;
    hnt text;
    place text := CASE WHEN conn = 'sfid:self' THEN 'the router' ELSE format('node %L', substr(conn, 6)) END;
BEGIN
    LOOP
        EXECUTE format('SELECT %s.dblink_is_busy($1::text)', d) INTO busy USING conn;
        EXIT WHEN busy = 0;
        IF clock_timestamp() >= deadline THEN
            EXECUTE format('SELECT %s.dblink_cancel_query($1::text)', d) USING conn;
            PERFORM snowflake_id_router.drain(conn, clock_timestamp() + interval '2 s');
            RAISE EXCEPTION '% on % did not finish in time', what, place USING ERRCODE = 'query_canceled';
        END IF;
        PERFORM pg_sleep(nap);
        nap := least(nap * 2, 0.01);
    END LOOP;
    BEGIN
        EXECUTE format('SELECT v FROM %s.dblink_get_result($1::text) AS r(v text)', d) INTO result USING conn;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        PERFORM snowflake_id_router.drain(conn, clock_timestamp() + interval '2 s');
        msg := format('%s on %s: %s', what, place, msg);
        PERFORM snowflake_id_router.raise_error(st, msg, det, hnt);
    END;
    PERFORM snowflake_id_router.drain(conn, clock_timestamp() + interval '2 s');
    RETURN result;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.receive(text, timestamptz, text) IS
  'Waits (until deadline, then cancels: 57014) for what was sent on dblink connection conn; returns the first column of its first row.';

-- Raises an error with its SQLSTATE and message, and its detail and hint if not empty.
CREATE OR REPLACE FUNCTION snowflake_id_router.raise_error(sqlstate text, message text, detail text, hint text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    detail := nullif(detail, '');
    hint := nullif(hint, '');
    IF detail IS NULL AND hint IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message;
    ELSIF detail IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message, HINT = hint;
    ELSIF hint IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message, DETAIL = detail;
    ELSE
        RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message, DETAIL = detail, HINT = hint;
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.raise_error(text, text, text, text) IS
  'Raises an error with its SQLSTATE and message, and its detail and hint where not empty.';

-- Consumes what is left of the results on conn; a connection that stays busy past deadline
-- (a cancel that does not take) is closed.
CREATE OR REPLACE FUNCTION snowflake_id_router.drain(conn text, deadline timestamptz) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    d text := snowflake_id_router.dblink_schema();
    busy integer;
    n integer;
BEGIN
    FOR i IN 1 .. 100 LOOP
        BEGIN
            EXECUTE format('SELECT %s.dblink_is_busy($1::text)', d) INTO busy USING conn;
            IF busy = 1 THEN
                IF clock_timestamp() >= deadline THEN
                    PERFORM snowflake_id_router.disconnect(conn);
                    RETURN;
                END IF;
                PERFORM pg_sleep(0.005);
                CONTINUE;
            END IF;
            EXECUTE format('SELECT count(*) FROM %s.dblink_get_result($1::text, false) AS r(v text)', d) INTO n USING conn;
            -- An empty result is the end (the queries sent here return one row or fail).
            EXIT WHEN n = 0;
        EXCEPTION WHEN OTHERS THEN
            PERFORM snowflake_id_router.disconnect(conn);
            RETURN;
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.drain(text, timestamptz) IS
  'Consumes the remaining results on dblink connection conn; closes it if it stays busy past deadline.';

-- send, then receive within timeout.
CREATE OR REPLACE FUNCTION snowflake_id_router.call(conn text, sql text, timeout interval, what text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM snowflake_id_router.send(conn, sql);
    RETURN snowflake_id_router.receive(conn, clock_timestamp() + timeout, what);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.call(text, text, interval, text) IS
  'Runs sql on dblink connection conn, bounded by timeout (then cancelled: 57014); the first column of its first row.';

-- Polls sql (a boolean) on conn until true; 57014 at the deadline.
CREATE OR REPLACE FUNCTION snowflake_id_router.poll(conn text, sql text, deadline timestamptz, what text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    nap double precision := 0.001;
BEGIN
    LOOP
        EXIT WHEN snowflake_id_router.call(conn, sql, greatest(deadline - clock_timestamp(), interval '0'), what)::boolean;
        IF clock_timestamp() >= deadline THEN
            RAISE EXCEPTION '% on % did not finish in time', what, format('node %L', substr(conn, 6))
                USING ERRCODE = 'query_canceled';
        END IF;
        PERFORM pg_sleep(nap);
        nap := least(nap * 2, 0.02);
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.poll(text, text, timestamptz, text) IS
  'Polls a boolean query on dblink connection conn until it is true; 57014 at the deadline.';

-- A step's record, committed through the loopback connection: UPDATE ... SET sets.
CREATE OR REPLACE FUNCTION snowflake_id_router.note(move_id bigint, sets text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM snowflake_id_router.call(snowflake_id_router.loopback(),
        format('UPDATE snowflake_id_router.move SET %s WHERE id = %s RETURNING id', sets, move_id),
        snowflake_id_router.timeout('lock_timeout') + interval '1 s', 'recording the move');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.note(bigint, text) IS
  'Commits a change to a move''s record through the loopback connection.';

-- Enters a step: recorded, then the test hook.
CREATE OR REPLACE FUNCTION snowflake_id_router.enter(move_id bigint, state text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM snowflake_id_router.note(move_id, format('state = %L', state));
    PERFORM snowflake_id_router.pause_at(state);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.enter(bigint, text) IS 'Records that a move enters a step, then pauses there if a test asks.';

-- The test hook: waits while snowflake_id_router.breakpoint has a row for step.
CREATE OR REPLACE FUNCTION snowflake_id_router.pause_at(step text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    IF EXISTS (SELECT FROM snowflake_id_router.breakpoint b WHERE b.step = pause_at.step) THEN
        PERFORM snowflake_id_router.call(snowflake_id_router.loopback(), format(
            'UPDATE snowflake_id_router.breakpoint SET reached = clock_timestamp(), pid = %s WHERE step = %L RETURNING step',
            pg_backend_pid(), step), interval '10 s', 'noting a breakpoint');
        WHILE EXISTS (SELECT FROM snowflake_id_router.breakpoint b WHERE b.step = pause_at.step) LOOP
            PERFORM pg_sleep(0.01);
        END LOOP;
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.pause_at(text) IS
  'Test hook: while snowflake_id_router.breakpoint has a row for step, waits (after noting it reached it).';

-- ==== router/sql/32_move.sql ====
-- == Moves (docs/cluster-design.md, "A move, step by step") ==
--
-- move_shards(shards, node) moves shards from the one node holding them to node: the
-- target makes the shards' schemas from a template, logical replication copies their rows
-- while writes go on, a short fenced cutover seals the source, the sequences are carried
-- and the map flipped through the loopback connection. Each step is recorded on the router
-- (snowflake_id_router.move, committed through the loopback connection before the step
-- runs) and on the node it changes (snowflake_id_node.move, in the step's transaction). A
-- failure before the seal undoes both sides; from the seal on the move is completed, by
-- the mover or, if it died, by repair_moves() or the next move of its shards.

-- A timeout of the router's settings (snowflake_id_router.setting), at least 1 ms.
CREATE OR REPLACE FUNCTION snowflake_id_router.timeout(name text) RETURNS interval
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN greatest(snowflake_id_router.setting(name)::interval, interval '1 ms');
COMMENT ON FUNCTION snowflake_id_router.timeout(text) IS
  'A timeout of the router''s settings (lock_timeout, copy_timeout, cutover_timeout, cleanup_timeout), at least 1 ms.';

-- An interval as a value for a node's lock_timeout (milliseconds, never 0: 0 is no limit).
CREATE OR REPLACE FUNCTION snowflake_id_router.ms(i interval) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN greatest(ceil(extract(epoch FROM i) * 1000), 1)::bigint::text;
COMMENT ON FUNCTION snowflake_id_router.ms(interval) IS 'An interval in whole milliseconds (at least 1), for a node''s lock_timeout.';

-- The key of a move on its nodes: the router's short identity and the move's id. The
-- names of what it makes there (publication, slot, subscription, marker, fence triggers)
-- are 'sfid_' and the key with '_' for '/': two router databases never share one.
CREATE OR REPLACE FUNCTION snowflake_id_router.move_key(move_id bigint) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN left(md5(snowflake_id_node.identity()), 8) || '/' || move_id;
COMMENT ON FUNCTION snowflake_id_router.move_key(bigint) IS 'The key of a move on its nodes: <router8>/<move id>.';

-- The router's shard locks for a move (transaction level): 55P03 when another session
-- moves or repairs one of the shards, or runs a schema change.
CREATE OR REPLACE FUNCTION snowflake_id_router.lock_router(shards integer[]) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    s integer;
BEGIN
    IF NOT pg_try_advisory_xact_lock_shared(snowflake_id_node.lock_class(), -1) THEN
        RAISE EXCEPTION 'a schema change (alter_shards) is running on this router: moves wait until it is done'
            USING ERRCODE = 'lock_not_available';
    END IF;
    FOREACH s IN ARRAY shards LOOP
        IF NOT pg_try_advisory_xact_lock(snowflake_id_node.lock_class(), s) THEN
            RAISE EXCEPTION 'shard % is being moved or repaired by another session (pid %)', s,
                (SELECT l.pid FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
                    AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                    AND l.classid = snowflake_id_node.lock_class()::oid AND l.objid::bigint = s AND l.objsubid = 2 LIMIT 1)
                USING ERRCODE = 'lock_not_available';
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.lock_router(integer[]) IS
  'Takes the router''s locks for moving shards (to the end of the transaction); 55P03 when another session holds one.';

CREATE OR REPLACE FUNCTION move_shards(shards integer[], node text, template text DEFAULT 'tpl') RETURNS bigint
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    todo integer[];
    here integer[];
    src text;
    bad text;
BEGIN
    IF shards IS NULL OR node IS NULL OR template IS NULL OR array_position(shards, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'move_shards: shards, node and template must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF cardinality(shards) = 0 THEN
        RAISE EXCEPTION 'move_shards: no shard given' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT min(s)::text INTO bad FROM unnest(shards) s WHERE s NOT BETWEEN 0 AND 8191;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'shard % is out of range: valid shards are 0 to 8191', bad USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    IF NOT EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = move_shards.node) THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object',
            HINT = 'Register it with add_node(name, connstr).';
    END IF;
    -- The map is read with fresh snapshots while the move runs.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'move_shards runs only in a READ COMMITTED transaction, not %', current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    todo := ARRAY(SELECT DISTINCT s FROM unnest(shards) s ORDER BY 1);
    PERFORM snowflake_id_router.lock_router(todo);
    SELECT min(x.s)::text INTO bad FROM unnest(todo) x(s)
     WHERE NOT EXISTS (SELECT FROM snowflake_id_router.shard m WHERE m.shard = x.s);
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'shard % is assigned to no node', bad USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'A shard without data is placed with assign_shards(first_shard, count, node).';
    END IF;
    SELECT string_agg(format('shard %s is on node %s', f.shard, quote_literal(f.node)), ' and ' ORDER BY f.node)
      INTO bad FROM (SELECT DISTINCT ON (m.node) m.shard, m.node FROM snowflake_id_router.shard m
                      WHERE m.shard = ANY (todo) AND m.node <> move_shards.node ORDER BY m.node, m.shard) f
    HAVING count(*) > 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'shards % are on different nodes: %', todo, bad USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'One move takes shards from one node: move them in one call per node.';
    END IF;
    -- An interrupted move of these shards is completed or undone first, even when they are
    -- already where they are asked to go (a move interrupted after its flip).
    BEGIN
        PERFORM snowflake_id_router.repair_shards(todo);
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        PERFORM snowflake_id_router.disconnect_all();
        RAISE;
    END;
    here := ARRAY(SELECT m.shard FROM snowflake_id_router.shard m WHERE m.shard = ANY (todo) AND m.node = move_shards.node ORDER BY 1);
    IF cardinality(here) > 0 THEN
        RAISE NOTICE '% already on node %', CASE WHEN cardinality(here) = 1 THEN format('shard %s is', here[1])
                                                  ELSE format('shards %s are', array_to_string(here, ', ')) END,
            quote_literal(node);
    END IF;
    todo := ARRAY(SELECT x FROM unnest(todo) x WHERE x <> ALL (here));
    IF cardinality(todo) = 0 THEN
        RETURN NULL;
    END IF;
    SELECT m.node INTO src FROM snowflake_id_router.shard m WHERE m.shard = todo[1];
    BEGIN
        RETURN snowflake_id_router.run_move(todo, src, node, template);
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        PERFORM snowflake_id_router.disconnect_all();
        RAISE;
    END;
END
$$;
COMMENT ON FUNCTION move_shards(integer[], text, text) IS
  'Moves shards (all on one node) to node online, in one copy, fence and flip; returns the move''s id (move_history), NULL if all are there already.';

CREATE OR REPLACE FUNCTION move_shard(shard integer, node text, template text DEFAULT 'tpl') RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    IF shard IS NULL THEN
        RAISE EXCEPTION 'move_shard: shard, node and template must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM @extschema@.move_shards(ARRAY[shard], node, template);
END
$$;
COMMENT ON FUNCTION move_shard(integer, text, text) IS
  'Moves a logical shard to another node online: move_shards(ARRAY[shard], node, template).';

-- A move from its record to the seal; then complete_move. Before the seal, any failure
-- (or cancel) undoes both sides; the error says what step failed and what is left.
CREATE OR REPLACE FUNCTION snowflake_id_router.run_move(shards integer[], source text, target text, template text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    router text := snowflake_id_node.identity();
    self text := snowflake_id_router.loopback();
    src text;
    dst text;
    src_id text;
    dst_id text;
    move_id bigint;
    k text;
    schemas text[];
    roles text[];
    src_prints text;
    dst_prints text;
    src_rows text;
    dst_rows text;
    suboid oid;
    sequences text;
    step text := 'connecting to the nodes';
    sealed boolean := false;
    copy_deadline timestamptz;
    fence_deadline timestamptz;
    t_fence timestamptz;
    what_left text;
    st text;
    msg text;
    det text;
    hnt text;
    lock_ms text := snowflake_id_router.ms(snowflake_id_router.timeout('lock_timeout'));
    long_step interval := snowflake_id_router.timeout('copy_timeout');
BEGIN
    src := snowflake_id_router.node_conn(source);
    dst := snowflake_id_router.node_conn(target);
    src_id := snowflake_id_router.call(src, 'SELECT snowflake_id_node.identity()', interval '10 s', 'reading the identity');
    dst_id := snowflake_id_router.call(dst, 'SELECT snowflake_id_node.identity()', interval '10 s', 'reading the identity');
    IF src_id = dst_id THEN
        RAISE EXCEPTION 'nodes % and % are the same database (%): a shard cannot move onto the node it is on',
            quote_literal(source), quote_literal(target), src_id USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    move_id := snowflake_id_router.call(self, format(
        'INSERT INTO snowflake_id_router.move (shards, source, target, source_identity, target_identity, template)
         VALUES (%L, %L, %L, %L, %L, %L) RETURNING id', shards, source, target, src_id, dst_id, template),
        interval '10 s', 'recording the move')::bigint;
    k := snowflake_id_router.move_key(move_id);
    PERFORM snowflake_id_router.pause_at('planned');
    BEGIN
        step := 'locking the shards on the nodes';
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.lock_shards(%L)', shards), interval '10 s', step);
        PERFORM snowflake_id_router.call(dst, format('SELECT snowflake_id_node.lock_shards(%L)', shards), interval '10 s', step);

        PERFORM snowflake_id_router.enter(move_id, 'checking');
        step := 'checking';
        schemas := snowflake_id_router.call(src, format('SELECT snowflake_id_node.source_check(%L, %L, %L)', router, dst_id, shards),
                                            long_step, 'checking the source');
        roles := snowflake_id_router.call(src, format('SELECT snowflake_id_node.roles(%L)', schemas), long_step, 'checking the source');
        PERFORM snowflake_id_router.call(dst, format('SELECT snowflake_id_node.target_check(%L, %L, %L, %L, %L, %L)',
                                                     router, src_id, shards, schemas, roles, template), long_step, 'checking the target');
        PERFORM snowflake_id_router.note(move_id, format('schemas = %L', schemas));

        PERFORM snowflake_id_router.enter(move_id, 'preparing');
        step := 'preparing';
        PERFORM snowflake_id_router.call(dst, format('SELECT snowflake_id_node.prepare_target(%L, %L, %L, %L, %L, %L)',
                                                     k, router, src_id, shards, schemas, template), long_step, 'making the copies');
        -- The copies must be what the shards are, before any row moves.
        PERFORM snowflake_id_router.compare_fingerprints(src, dst, schemas, shards,
            format('node %L', source), format('the copy made from template %L on node %L', template, target),
            clock_timestamp() + long_step);
        PERFORM snowflake_id_router.call(dst, format('SELECT snowflake_id_node.set_grants(%L, %L)', k,
            snowflake_id_router.call(src, format('SELECT snowflake_id_node.grants(%L)', schemas), long_step, 'reading the privileges')),
            long_step, 'giving the copies their owners and privileges');
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.prepare_source(%L, %L, %L, %L, %L)',
                                                     k, router, dst_id, shards, schemas), long_step, 'preparing the source');

        PERFORM snowflake_id_router.enter(move_id, 'copying');
        copy_deadline := clock_timestamp() + snowflake_id_router.timeout('copy_timeout');
        step := 'publishing';
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.publish(%L)', k), long_step, step);
        step := 'making the replication slot';
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.make_slot(%L)', k),
                                         greatest(copy_deadline - clock_timestamp(), interval '0'), step);
        step := 'subscribing';
        suboid := snowflake_id_router.call(dst, format('SELECT snowflake_id_node.subscribe(%L, %L)', k,
                                                       (SELECT n.connstr FROM snowflake_id_router.node n WHERE n.name = source)),
                                           greatest(copy_deadline - clock_timestamp(), interval '0'), step)::oid;
        PERFORM snowflake_id_router.note(move_id, format('suboid = %s', suboid));
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.note_subscription(%L, %s)', k, suboid), long_step, step);
        PERFORM snowflake_id_router.pause_at('subscribed');
        step := 'copying the rows';
        PERFORM snowflake_id_router.poll(dst, format('SELECT snowflake_id_node.copy_done(%L)', k), copy_deadline, 'the initial copy');
        -- The flip must not meet the map locked (by the caller's own transaction, say): find
        -- out now, and have the loopback session ready for it.
        step := 'rehearsing the flip';
        PERFORM snowflake_id_router.call(self, format('SELECT snowflake_id_router.rehearse_flip(%s)', move_id),
                                         snowflake_id_router.timeout('lock_timeout') + interval '10 s', step);

        -- The fenced part: writes to the shards wait or get 40001 until the flip. The fence's
        -- lock is bounded by lock_timeout, what follows up to the seal by cutover_timeout;
        -- recorded once, before the seal (a repair reads the nodes' records for the rest).
        PERFORM snowflake_id_router.enter(move_id, 'fencing');
        step := 'fencing writes on the source';
        t_fence := clock_timestamp();
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.set_fence(%L, %L)', k, lock_ms),
                                         snowflake_id_router.timeout('lock_timeout') + interval '1 s', step);
        fence_deadline := clock_timestamp() + snowflake_id_router.timeout('cutover_timeout');
        PERFORM snowflake_id_router.pause_at('fenced');
        step := 'waiting for the target to catch up';
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.mark(%L)', k),
                                         greatest(fence_deadline - clock_timestamp(), interval '0'), 'writing the marker');
        PERFORM snowflake_id_router.pause_at('catching up');
        PERFORM snowflake_id_router.poll(dst, format('SELECT snowflake_id_node.marked(%L)', k), fence_deadline,
                                         'catching up after the fence');
        -- The same rows on both sides; the copies' definitions for the seal to compare.
        step := 'comparing the copies';
        PERFORM snowflake_id_router.send(src, format('SELECT snowflake_id_node.row_counts(%L)', k));
        PERFORM snowflake_id_router.send(dst, format(
            'SELECT ARRAY[ARRAY(SELECT snowflake_id_node.fingerprint(s)::text FROM unnest(%L::text[]) WITH ORDINALITY u(s, o) ORDER BY o)::text,
                          snowflake_id_node.row_counts(%L)]', schemas, k));
        src_rows := snowflake_id_router.receive(src, fence_deadline, 'counting rows');
        dst_rows := snowflake_id_router.receive(dst, fence_deadline, 'reading the copies');
        dst_prints := (dst_rows::text[])[1];
        dst_rows := (dst_rows::text[])[2];
        IF src_rows IS DISTINCT FROM dst_rows THEN
            RAISE EXCEPTION 'the copy on node % does not hold the rows of node %: %', quote_literal(target), quote_literal(source),
                snowflake_id_node.fingerprint_difference(string_to_array(src_rows, E'\n'), string_to_array(dst_rows, E'\n'),
                                                         format('node %L', source), format('node %L', target))
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;

        PERFORM snowflake_id_router.note(move_id, format('state = %L, fenced = %L, rows = %s', 'sealing', t_fence,
            (SELECT coalesce(sum(substring(l FROM ': (\d+) rows$')::bigint), 0) FROM unnest(string_to_array(src_rows, E'\n')) l)));
        PERFORM snowflake_id_router.pause_at('sealing');
        step := 'sealing the source';
        sequences := snowflake_id_router.call(src, format('SELECT snowflake_id_node.seal(%L, %L, %L)', k, dst_prints, lock_ms),
                                              greatest(fence_deadline - clock_timestamp(), interval '0')
                                              + snowflake_id_router.timeout('lock_timeout'), step);
        sealed := true;
        PERFORM snowflake_id_router.pause_at('sealed');
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        IF NOT sealed THEN
            what_left := snowflake_id_router.undo_move(move_id, format('%s while %s: %s', st, step, msg));
            IF what_left IS DISTINCT FROM 'sealed' THEN
                PERFORM snowflake_id_router.disconnect_all();
                msg := format('moving %s from node %L to node %L failed while %s: %s',
                              CASE WHEN cardinality(shards) = 1 THEN 'shard ' || shards[1] ELSE 'shards ' || array_to_string(shards, ', ') END,
                              source, target, step, msg);
                det := concat_ws(' ', nullif(det, ''), nullif(hnt, ''));
                hnt := CASE WHEN what_left IS NULL
                            THEN format('The shards stay on node %L, which takes their writes again; everything the move made is removed (move %s in move_history). Re-run the move once the cause is fixed.',
                                        source, move_id)
                            ELSE format('The shards stay on node %L, which takes their writes again. Left for SELECT repair_moves() to remove: %s (move %s).',
                                        source, what_left, move_id) END;
                PERFORM snowflake_id_router.raise_error(st, msg, det, hnt);
            END IF;
            -- The seal committed after all (its reply was lost): complete the move.
        END IF;
    END;
    PERFORM snowflake_id_router.complete_move(move_id, sequences);
    PERFORM snowflake_id_router.disconnect_all();
    RETURN move_id;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.run_move(integer[], text, text, text) IS
  'A move of shards from source to target, recorded step by step; undone on a failure before the seal, completed after it.';

-- The schemas' fingerprints on both nodes (read at once), equal or 55000 naming the first
-- difference; returns the target's, as an array literal.
CREATE OR REPLACE FUNCTION snowflake_id_router.compare_fingerprints(src text, dst text, schemas text[], shards integer[],
                                                                    src_name text, dst_name text, deadline timestamptz)
RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    q text := format('SELECT ARRAY(SELECT snowflake_id_node.fingerprint(s)::text FROM unnest(%L::text[]) WITH ORDINALITY u(s, o) ORDER BY o)',
                     schemas);
    a text[];
    b text[];
BEGIN
    PERFORM snowflake_id_router.send(src, q);
    PERFORM snowflake_id_router.send(dst, q);
    a := snowflake_id_router.receive(src, deadline, 'reading the shards'' definitions');
    b := snowflake_id_router.receive(dst, deadline, 'reading the copies'' definitions');
    FOR i IN 1 .. cardinality(schemas) LOOP
        IF a[i] IS DISTINCT FROM b[i] THEN
            RAISE EXCEPTION 'shard % (schema %) differs from its copy: %', shards[i], quote_ident(schemas[i]),
                snowflake_id_node.fingerprint_difference(a[i]::text[], b[i]::text[], src_name, dst_name)
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'A move carries rows, not definitions: give the target''s template (or the shard) the same tables, columns, types, constraints and indexes.';
        END IF;
    END LOOP;
    RETURN b::text;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.compare_fingerprints(text, text, text[], integer[], text, text, timestamptz) IS
  'Compares the fingerprints of schemas on two nodes; 55000 naming the first difference.';

-- The state of a move's record on a node (NULL: none), through this session's connection,
-- after taking the move's shard locks there.
CREATE OR REPLACE FUNCTION snowflake_id_router.node_state(node text, move_id bigint, shards integer[]) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    conn text := snowflake_id_router.node_conn(node);
BEGIN
    PERFORM snowflake_id_router.call(conn, format('SELECT snowflake_id_node.lock_shards(%L)', shards), interval '10 s',
                                     'locking the shards');
    RETURN snowflake_id_router.call(conn, format('SELECT state FROM snowflake_id_node.move WHERE key = %L',
                                                 snowflake_id_router.move_key(move_id)), interval '10 s', 'reading the move''s record');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.node_state(text, bigint, integer[]) IS
  'The state of a move''s record on node (NULL: none), read under the move''s shard locks there.';

-- Undoes a move that has not been sealed, target first, each node on its own. Returns
-- NULL when everything is removed (state undone), 'sealed' when the source turns out to be
-- sealed (complete it instead), or what is left where (state undoing, for repair_moves()).
CREATE OR REPLACE FUNCTION snowflake_id_router.undo_move(move_id bigint, reason text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    k text := snowflake_id_router.move_key(move_id);
    src_state text;
    src_ok boolean := false;
    left_over text[] := '{}';
    wait text := snowflake_id_router.timeout('cleanup_timeout')::text;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    -- The source first, to learn whether it was sealed (a seal whose reply was lost).
    BEGIN
        src_state := snowflake_id_router.node_state(m.source, move_id, m.shards);
        src_ok := true;
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        left_over := left_over || format('on node %L (the source, %s): what the move made there', m.source, SQLERRM);
    END;
    IF src_state = 'sealed' THEN
        PERFORM snowflake_id_router.note(move_id, format('state = %L', 'sealed'));
        RETURN 'sealed';
    END IF;
    IF NOT src_ok AND m.state IN ('sealing', 'sealed', 'flipping') THEN
        -- It may have been sealed: the target's copy may be the one to keep. Nothing undone.
        PERFORM snowflake_id_router.note(move_id, format('error = %L', reason));
        RETURN left_over[1] || '; the move may have sealed the source, so its copy on node '
               || quote_literal(m.target) || ' is kept until the source can be reached';
    END IF;
    PERFORM snowflake_id_router.note(move_id, format('state = %L, error = %L', 'undoing', reason));
    BEGIN
        PERFORM snowflake_id_router.node_state(m.target, move_id, m.shards);
        PERFORM snowflake_id_router.call(snowflake_id_router.node_conn(m.target), format(
            'SELECT snowflake_id_node.undo(r.key, %L, %s) FROM snowflake_id_node.move r WHERE r.key = %L',
            wait, coalesce(m.suboid, 0), k), snowflake_id_router.timeout('cleanup_timeout') + interval '5 s',
            'undoing the move on the target');
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        left_over := left_over || format('on node %L (the target): %s', m.target, SQLERRM);
    END;
    IF src_ok THEN
        BEGIN
            PERFORM snowflake_id_router.call(snowflake_id_router.node_conn(m.source), format(
                'SELECT snowflake_id_node.undo(r.key, %L, %s) FROM snowflake_id_node.move r WHERE r.key = %L',
                wait, coalesce(m.suboid, 0), k), snowflake_id_router.timeout('cleanup_timeout') + interval '5 s',
                'undoing the move on the source');
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            left_over := left_over || format('on node %L (the source): %s', m.source, SQLERRM);
        END;
    END IF;
    IF cardinality(left_over) = 0 THEN
        PERFORM snowflake_id_router.note(move_id, format('state = %L, ended = clock_timestamp()', 'undone'));
        RETURN NULL;
    END IF;
    RETURN array_to_string(left_over, '; ');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.undo_move(bigint, text) IS
  'Undoes a move not yet sealed on both nodes; NULL when all is removed, ''sealed'' if it was sealed after all, else what is left where.';

-- Completes a sealed move: the target activated (sequences carried), the map flipped, then
-- the clean-up. A failure before the flip raises (the shards' writes stay refused until a
-- repair completes it); one in the clean-up is a WARNING, the move being done.
CREATE OR REPLACE FUNCTION snowflake_id_router.complete_move(move_id bigint, sequences text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    k text := snowflake_id_router.move_key(move_id);
    src_state text;
    dst_state text;
    step text := 'activating the copies';
    bound interval := snowflake_id_router.timeout('cleanup_timeout');
    left_over text[] := '{}';
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    IF m.state NOT IN ('flipped', 'cleaning') THEN
        BEGIN
            IF sequences IS NULL THEN
                -- A repair: the nodes' records say where the move is.
                src_state := snowflake_id_router.node_state(m.source, move_id, m.shards);
                dst_state := snowflake_id_router.node_state(m.target, move_id, m.shards);
                IF src_state IS DISTINCT FROM 'sealed' OR dst_state NOT IN ('incoming', 'serving') THEN
                    RAISE EXCEPTION 'move % cannot be completed: its record is % on node % and % on node %', move_id,
                        coalesce(src_state, 'absent'), quote_literal(m.source), coalesce(dst_state, 'absent'), quote_literal(m.target)
                        USING ERRCODE = 'object_not_in_prerequisite_state';
                END IF;
                PERFORM snowflake_id_router.note(move_id, format('state = %L', 'sealed'));
                IF dst_state = 'incoming' THEN
                    sequences := snowflake_id_router.call(snowflake_id_router.node_conn(m.source),
                        format('SELECT snowflake_id_node.sequences(%L)', k), bound, 'reading the sequences');
                END IF;
            ELSE
                dst_state := 'incoming';  -- the mover's own call, right after the seal
            END IF;
            IF dst_state = 'incoming' THEN
                PERFORM snowflake_id_router.call(snowflake_id_router.node_conn(m.target),
                    format('SELECT snowflake_id_node.activate(%L, %L)', k, sequences), bound, 'carrying the sequences');
            END IF;
            PERFORM snowflake_id_router.pause_at('flipping');
            step := 'flipping the map';
            PERFORM snowflake_id_router.call(snowflake_id_router.loopback(), format('SELECT snowflake_id_router.flip(%s)', move_id),
                                             snowflake_id_router.timeout('lock_timeout') + bound, step);
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            PERFORM snowflake_id_router.note(move_id, format('error = %L', SQLSTATE || ' while ' || step || ': ' || SQLERRM));
            PERFORM snowflake_id_router.disconnect_all();
            RAISE EXCEPTION 'move % of % from node % to node % is sealed but failed while %: %', move_id,
                CASE WHEN cardinality(m.shards) = 1 THEN 'shard ' || m.shards[1] ELSE 'shards ' || array_to_string(m.shards, ', ') END,
                quote_literal(m.source), quote_literal(m.target), step, SQLERRM
                USING ERRCODE = SQLSTATE,
                      HINT = format('The copy on node %s is complete and node %s refuses the shards'' writes (40001) until the move is completed: SELECT repair_moves() completes it once the cause is fixed.',
                                    quote_literal(m.target), quote_literal(m.source));
        END;
        PERFORM snowflake_id_router.pause_at('flipped');
    END IF;
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    PERFORM snowflake_id_router.enter(move_id, 'cleaning');
    PERFORM snowflake_id_router.wait_for_older_transactions(m.flipped);
    BEGIN
        dst_state := snowflake_id_router.node_state(m.target, move_id, m.shards);
        IF dst_state IS NOT NULL THEN
            PERFORM snowflake_id_router.call(snowflake_id_router.node_conn(m.target),
                format('SELECT snowflake_id_node.finish(%L)', k), bound, 'removing the subscription and marker');
        END IF;
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        left_over := left_over || format('on node %L: %s', m.target, SQLERRM);
    END;
    PERFORM snowflake_id_router.pause_at('cleaning the source');
    BEGIN
        src_state := snowflake_id_router.node_state(m.source, move_id, m.shards);
        IF src_state IS NOT NULL THEN
            PERFORM snowflake_id_router.call(snowflake_id_router.node_conn(m.source),
                format('SELECT snowflake_id_node.drop_copy(%L, %L, %L)', k,
                       snowflake_id_router.ms(snowflake_id_router.timeout('lock_timeout')), bound),
                bound + snowflake_id_router.timeout('lock_timeout') + interval '5 s', 'dropping the old copy');
        END IF;
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        left_over := left_over || format('on node %L: %s', m.source, SQLERRM);
    END;
    IF cardinality(left_over) > 0 THEN
        PERFORM snowflake_id_router.note(move_id, format('error = %L', 'clean-up: ' || array_to_string(left_over, '; ')));
        RAISE WARNING 'move % of % to node % is done, but its clean-up is not: %', move_id,
            CASE WHEN cardinality(m.shards) = 1 THEN 'shard ' || m.shards[1] ELSE 'shards ' || array_to_string(m.shards, ', ') END,
            quote_literal(m.target), array_to_string(left_over, '; ')
            USING HINT = 'SELECT repair_moves() finishes it once the cause is fixed.';
        RETURN;
    END IF;
    PERFORM snowflake_id_router.note(move_id, format('state = %L, ended = clock_timestamp()', 'done'));
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    RAISE NOTICE '% moved from node % to node %: % rows, % ms in all, writes fenced for % ms',
        CASE WHEN cardinality(m.shards) = 1 THEN 'shard ' || m.shards[1] ELSE 'shards ' || array_to_string(m.shards, ', ') END,
        quote_literal(m.source), quote_literal(m.target), m.rows,
        round(extract(epoch FROM m.ended - m.started) * 1000),
        round(extract(epoch FROM m.flipped - m.fenced) * 1000, 1);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.complete_move(bigint, text) IS
  'Completes a sealed move: activates the copies, flips the map, removes the old copy and what the move made.';

-- The flip, run through the loopback connection (committed at once for every router
-- session): the map of the move's shards from its source to its target, and its record.
-- The one place a move changes the map.
CREATE OR REPLACE FUNCTION snowflake_id_router.flip(move_id bigint) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id FOR UPDATE;
    IF m.state IN ('flipped', 'cleaning', 'done') THEN
        RETURN 'flipped already';
    END IF;
    IF m.state NOT IN ('sealing', 'sealed', 'flipping') THEN
        RAISE EXCEPTION 'move % is %: only a sealed move flips the map', move_id, m.state
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    UPDATE snowflake_id_router.shard s SET node = m.target WHERE s.shard = ANY (m.shards) AND s.node = m.source;
    IF (SELECT count(*) FROM snowflake_id_router.shard s WHERE s.shard = ANY (m.shards) AND s.node = m.target)
       <> cardinality(m.shards) THEN
        RAISE EXCEPTION 'the map of shards % changed during move %', m.shards, move_id USING ERRCODE = 'serialization_failure';
    END IF;
    UPDATE snowflake_id_router.move r SET state = 'flipped', flipped = clock_timestamp() WHERE r.id = move_id;
    RETURN 'flipped';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.flip(bigint) IS
  'Flips the map of a sealed move''s shards to its target and records it (run through the loopback connection).';

-- The flip rehearsed in a subtransaction rolled back: the map's rows can be locked (within
-- the loopback session's lock_timeout) and every cache the flip needs is loaded, so the
-- real flip, under the fence, is quick. Run through the loopback connection.
CREATE OR REPLACE FUNCTION snowflake_id_router.rehearse_flip(move_id bigint) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    BEGIN
        UPDATE snowflake_id_router.shard s SET node = m.target WHERE s.shard = ANY (m.shards) AND s.node = m.source;
        IF (SELECT count(*) FROM snowflake_id_router.shard s WHERE s.shard = ANY (m.shards) AND s.node = m.target)
           <> cardinality(m.shards) THEN
            RAISE EXCEPTION 'the map of shards % changed during move %', m.shards, move_id USING ERRCODE = 'serialization_failure';
        END IF;
        RAISE EXCEPTION 'rehearsal' USING ERRCODE = 'SFRH0';
    EXCEPTION WHEN SQLSTATE 'SFRH0' THEN
        NULL;
    END;
    RETURN 'rehearsed';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rehearse_flip(bigint) IS
  'Rehearses a move''s flip and rolls it back: checks the map can be locked and warms the loopback session.';

-- A router transaction that began before the flip may still send a write to the source,
-- where the sealed fence refuses it (40001); let such transactions end (bounded by
-- lock_timeout) before the source's copy goes and the refusal becomes "not on this node".
CREATE OR REPLACE FUNCTION snowflake_id_router.wait_for_older_transactions(since timestamptz) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    deadline timestamptz := clock_timestamp() + snowflake_id_router.timeout('lock_timeout');
BEGIN
    WHILE clock_timestamp() < deadline LOOP
        PERFORM pg_stat_clear_snapshot();
        EXIT WHEN NOT EXISTS (SELECT FROM pg_stat_activity a
                               WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
                                 AND a.backend_type = 'client backend' AND a.xact_start < since
                                 -- (movers and their loopback sessions send no routed writes)
                                 AND a.application_name NOT LIKE 'snowflake\_id\_router %'
                                 AND a.pid NOT IN (SELECT l.pid FROM pg_locks l
                                                    WHERE l.locktype = 'advisory' AND l.granted
                                                      AND l.classid = snowflake_id_node.lock_class()::oid));
        PERFORM pg_sleep(0.01);
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.wait_for_older_transactions(timestamptz) IS
  'Waits (at most lock_timeout) until no router transaction that began before since is running.';

-- ==== router/sql/33_repair.sql ====
-- == Repair: moves whose mover is gone ==
--
-- A move's mover holds the router's locks of its shards for its transaction and its shard
-- locks on both nodes through its node sessions. A move record that is neither done nor
-- undone and whose router locks can be taken belongs to a mover that is gone: a move
-- sealed on its source is completed, any other undone. repair_moves() does this for every
-- such move, and removes what this router's moves left on the nodes without a record on the
-- router (a restored dump, say); every move does it first for the moves of its own shards.

-- Repairs one move whose mover is gone; the caller holds its router locks.
CREATE OR REPLACE FUNCTION snowflake_id_router.repair_move(move_id bigint) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    left_over text;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    IF m.state NOT IN ('sealed', 'flipping', 'flipped', 'cleaning') THEN
        left_over := snowflake_id_router.undo_move(move_id, coalesce(m.error, format('interrupted while %s', m.state)));
        IF left_over IS NULL THEN
            RETURN 'undone';
        ELSIF left_over <> 'sealed' THEN
            RETURN 'not undone yet: left ' || left_over;
        END IF;
    END IF;
    PERFORM snowflake_id_router.complete_move(move_id);
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    RETURN CASE WHEN m.state = 'done' THEN 'completed' ELSE 'completed, clean-up not done: ' || coalesce(m.error, m.state) END;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.repair_move(bigint) IS
  'Completes (if sealed) or undoes a move whose mover is gone; the caller holds its router locks.';

-- Repairs the interrupted moves of these shards (at the start of a move of them).
CREATE OR REPLACE FUNCTION snowflake_id_router.repair_shards(shards integer[]) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    outcome text;
    repaired boolean := false;
BEGIN
    FOR m IN SELECT * FROM snowflake_id_router.move r
              WHERE r.shards && repair_shards.shards AND r.state NOT IN ('done', 'undone') ORDER BY r.id LOOP
        PERFORM snowflake_id_router.lock_router(m.shards);
        outcome := snowflake_id_router.repair_move(m.id);
        RAISE NOTICE 'interrupted move % of shards % (node % to node %): %', m.id, m.shards, quote_literal(m.source),
            quote_literal(m.target), outcome;
        repaired := true;
    END LOOP;
    IF repaired THEN
        -- The node sessions also hold the repaired moves' shard locks: start afresh.
        PERFORM snowflake_id_router.disconnect_all();
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.repair_shards(integer[]) IS
  'Completes or undoes the interrupted moves of shards (their movers gone).';

CREATE OR REPLACE FUNCTION repair_moves() RETURNS TABLE (move bigint, shards integer[], outcome text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    n record;
    r record;
    router text := snowflake_id_node.identity();
    router8 text := left(md5(snowflake_id_node.identity()), 8);
    wait text := snowflake_id_router.timeout('cleanup_timeout')::text;
    bound interval := snowflake_id_router.timeout('cleanup_timeout') + interval '5 s';
    conn text;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'repair_moves runs only in a READ COMMITTED transaction, not %', current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    FOR m IN SELECT * FROM snowflake_id_router.move x WHERE x.state NOT IN ('done', 'undone') ORDER BY x.id LOOP
        move := m.id;
        shards := m.shards;
        BEGIN
            PERFORM snowflake_id_router.lock_router(m.shards);
            BEGIN
                outcome := snowflake_id_router.repair_move(m.id);
            EXCEPTION WHEN query_canceled OR OTHERS THEN
                outcome := format('not repaired: %s (%s)', SQLERRM, SQLSTATE);
            END;
        EXCEPTION WHEN lock_not_available THEN
            outcome := 'running: ' || m.state;
        END;
        PERFORM snowflake_id_router.disconnect_all();
        RETURN NEXT;
    END LOOP;
    -- What this router's moves left on the nodes without a record to follow.
    FOR n IN SELECT x.name FROM snowflake_id_router.node x ORDER BY x.name LOOP
        BEGIN
            conn := snowflake_id_router.node_conn(n.name);
            FOR r IN SELECT * FROM json_to_recordset(snowflake_id_router.call(conn, 'SELECT snowflake_id_node.moves()',
                                                                                bound, 'reading the move records')::json)
                         AS x(key text, router text, role text, state text, shards integer[], alive boolean)
                      WHERE x.router = router AND NOT x.alive
                        AND NOT EXISTS (SELECT FROM snowflake_id_router.move y
                                         WHERE y.id::text = split_part(x.key, '/', 2) AND y.state NOT IN ('done', 'undone'))
            LOOP
                move := NULLIF(split_part(r.key, '/', 2), '')::bigint;
                shards := r.shards;
                IF r.state IN ('sealed', 'serving') THEN
                    outcome := format('left on node %L: a record of move %s, %s, which this router does not know', n.name, r.key, r.state);
                    RAISE WARNING '%', outcome USING HINT = 'Look at the node''s snowflake_id_node.move; see docs/cluster.md.';
                ELSE
                    BEGIN
                        PERFORM snowflake_id_router.lock_router(r.shards);
                        PERFORM snowflake_id_router.call(conn, format('SELECT snowflake_id_node.lock_shards(%L)', r.shards),
                                                         bound, 'locking the shards');
                        PERFORM snowflake_id_router.call(conn, format('SELECT snowflake_id_node.undo(%L, %L, 0)', r.key, wait),
                                                         bound, 'undoing a move without a record');
                        PERFORM snowflake_id_router.call(conn, format('SELECT snowflake_id_node.unlock_shards(%L)', r.shards),
                                                         bound, 'unlocking the shards');
                        outcome := format('undone on node %L (a record without a move on this router)', n.name);
                    EXCEPTION WHEN query_canceled OR OTHERS THEN
                        outcome := format('not undone on node %L: %s (%s)', n.name, SQLERRM, SQLSTATE);
                    END;
                END IF;
                RETURN NEXT;
            END LOOP;
            FOR r IN SELECT x FROM unnest(snowflake_id_router.call(conn,
                         format('SELECT snowflake_id_node.drop_orphans(%L, %L)', router8, wait), bound,
                         'removing what moves left without a record')::text[]) x LOOP
                move := NULL;
                shards := NULL;
                outcome := format('removed on node %L: %s', n.name, r.x);
                RETURN NEXT;
            END LOOP;
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            move := NULL;
            shards := NULL;
            outcome := format('node %L not checked: %s (%s)', n.name, SQLERRM, SQLSTATE);
            RAISE WARNING '%', outcome;
            RETURN NEXT;
        END;
        PERFORM snowflake_id_router.disconnect_all();
    END LOOP;
    PERFORM snowflake_id_router.disconnect_all();
END
$$;
COMMENT ON FUNCTION repair_moves() IS
  'Completes (if sealed) or undoes every move whose mover is gone, and removes what this router''s moves left on the nodes without a record; one row per move or leftover.';

CREATE OR REPLACE VIEW move_history AS
    SELECT m.id AS move, m.shards, m.source, m.target, m.started, m.ended, m.rows,
           coalesce(m.flipped, m.ended) - m.fenced AS write_pause,
           CASE WHEN m.state IN ('done', 'undone') THEN m.state
                WHEN EXISTS (SELECT FROM pg_catalog.pg_locks l
                              WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                                AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
                                AND l.classid = snowflake_id_node.lock_class()::oid AND l.objid::bigint = m.shards[1])
                THEN 'running: ' || m.state
                ELSE 'interrupted: ' || m.state END AS outcome,
           m.error
      FROM snowflake_id_router.move m
     ORDER BY m.id;
COMMENT ON VIEW move_history IS
  'Each move: shards, nodes, start, end, rows, write pause (fence to flip), outcome (done, undone, running or interrupted at a step) and error.';

-- ==== router/sql/90_grants.sql ====
-- Superuser only, unless granted: these run as the extension's owner (SECURITY DEFINER).
REVOKE ALL ON FUNCTION add_node(text, text), assign_shards(integer, integer, text),
    move_shard(integer, text, text), move_shards(integer[], text, text), repair_moves() FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_router FROM PUBLIC;
REVOKE ALL ON shard_map, move_history FROM PUBLIC;
