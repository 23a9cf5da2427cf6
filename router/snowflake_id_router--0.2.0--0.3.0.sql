-- Assembled by scripts/assemble-sql from router/sql/: edit the sources, not this file.
\echo Use "ALTER EXTENSION snowflake_id_router UPDATE TO '0.3.0'" to load this file. \quit

-- ==== router/sql/upgrade/from-0.2.0.sql ====
-- What 0.3.0 changes in the router's tables and drops of 0.2.0's objects, before the
-- functions (router/sql/[1-9]*.sql, all CREATE OR REPLACE) are loaded again.

-- The router now reads node identities and parses connect strings through snowflake_id
-- 0.3.0's snowflake_id_node schema.
DO $$
BEGIN
    IF to_regprocedure('snowflake_id_node.conninfo(text)') IS NULL THEN
        RAISE EXCEPTION 'snowflake_id_router 0.3.0 needs snowflake_id 0.3.0'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'ALTER EXTENSION snowflake_id UPDATE first.';
    END IF;
END
$$;

-- Settings: session settings no longer steer the router (snowflake_id_router.setting).
DROP FUNCTION snowflake_id_router.setting(text, text);
DROP FUNCTION snowflake_id_router.self_connstr();

-- Node identities, recorded when each node is next reached.
ALTER TABLE snowflake_id_router.node ADD COLUMN identity text UNIQUE;
COMMENT ON TABLE snowflake_id_router.node IS
  'Data nodes: name, libpq connect string (normalised, no secret) and identity (system identifier/database OID; NULL until first reached, for nodes added by 0.2.0).';

-- Connect strings as libpq reads them, each value quoted (0.2.0 stored them as given, and
-- let secrets through in some syntaxes): none may keep a secret. (conn_value is 0.2.0's,
-- the same as 0.3.0's.)
DO $$
DECLARE
    n record;
    secret text;
    normal text;
BEGIN
    FOR n IN SELECT * FROM snowflake_id_router.node ORDER BY name LOOP
        SELECT string_agg(c.keyword, ', ') FILTER (WHERE c.secret),
               string_agg(c.keyword || '=' || snowflake_id_router.conn_value(c.value), ' ')
          INTO secret, normal FROM snowflake_id_node.conninfo(n.connstr) c;
        IF secret IS NOT NULL THEN
            RAISE EXCEPTION 'the connect string of node % holds a secret (%)', quote_literal(n.name), secret
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = 'Connect strings are readable by every role (pg_foreign_server.srvoptions).',
                      HINT = 'Remove it (UPDATE snowflake_id_router.node SET connstr = ...) and put the password in ~/.pgpass of the router''s server user, then update again.';
        END IF;
        UPDATE snowflake_id_router.node SET connstr = normal WHERE name = n.name AND connstr <> normal;
    END LOOP;
END
$$;

-- ==== router/sql/01_settings.sql ====
-- Settings of the router's own operations. Code that runs with the extension owner's rights
-- reads no session setting: these are rows of a table only its owner may write (a
-- superuser: UPDATE/INSERT here), dumped with the router. Only overrides are stored; the
-- defaults are in snowflake_id_router.setting(name).
CREATE TABLE snowflake_id_router.setting (
    name text PRIMARY KEY
        CHECK (name IN ('lock_timeout', 'copy_timeout', 'cutover_timeout', 'cleanup_timeout', 'status_timeout', 'self_connstr')),
    value text NOT NULL,
    -- A timeout of 0 would mean no timeout at all.
    CHECK (name = 'self_connstr' OR (value::interval > interval '0' AND value::interval <= interval '1 day'))
);
COMMENT ON TABLE snowflake_id_router.setting IS
  'Overrides of the router''s settings (timeouts, the loopback connect string); writable by the extension''s owner only.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.setting', '');

-- ==== router/sql/02_operations.sql ====
-- Rebalances and drains (rebalance(), drain_node()): one row each, and the batches of its
-- plan. Each runs in its caller's session as a procedure that commits after every batch, so
-- these rows show its progress to every session, and outlive the session: a call after an
-- interruption (the session terminated, the router restarted, rebalance_stop(), a failed
-- batch) resumes the unfinished one. While it runs, its session holds the router's
-- rebalance lock (snowflake_id_router.rebalance_lock()): a row in state running whose
-- session no longer holds it was interrupted.
CREATE TABLE snowflake_id_router.rebalance (
    id integer PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('rebalance', 'drain')),
    node text,                                   -- the node drained (not a reference: history outlives it)
    strategy text NOT NULL CHECK (strategy IN ('by_shard_count', 'by_disk_size')),
    batch_size integer NOT NULL CHECK (batch_size BETWEEN 1 AND 8192),
    template text NOT NULL,
    state text NOT NULL CHECK (state IN ('running', 'stopped', 'failed', 'done', 'abandoned')),
    pid integer,                                 -- the session that runs (or last ran) it
    stop_requested timestamptz,                  -- by rebalance_stop(): stop after the current batch
    started timestamptz NOT NULL,
    ended timestamptz,
    error text,
    CHECK ((kind = 'drain') = (node IS NOT NULL))
);
-- At most one unfinished: a new call resumes it, or abandons it for a different operation.
CREATE UNIQUE INDEX rebalance_unfinished ON snowflake_id_router.rebalance ((true))
    WHERE state IN ('running', 'stopped', 'failed');
COMMENT ON TABLE snowflake_id_router.rebalance IS
  'Rebalances and drains: kind, strategy, state, times, error; the view rebalance_status shows them.';

CREATE TABLE snowflake_id_router.rebalance_batch (
    rebalance integer REFERENCES snowflake_id_router.rebalance (id) ON DELETE CASCADE,
    batch integer,
    source text NOT NULL,
    target text NOT NULL,
    shards integer[] NOT NULL,
    bytes bigint NOT NULL,                       -- at planning time
    move bigint,                                 -- its move (move_history), once made
    state text NOT NULL CHECK (state IN ('planned', 'moving', 'done', 'failed')),
    started timestamptz,
    ended timestamptz,
    error text,
    PRIMARY KEY (rebalance, batch)
);
COMMENT ON TABLE snowflake_id_router.rebalance_batch IS
  'The batches of each rebalance or drain: shards moved together (one move_shards) from source to target, and how that went.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.rebalance', '');
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.rebalance_batch', '');

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

-- A connect string as libpq reads it (PQconninfoParse, through snowflake_id), each value
-- quoted: whatever PL/Proxy, dblink or a subscription appends to it stays an option of its
-- own. Secrets are refused: connect strings are readable by every role.
CREATE OR REPLACE FUNCTION snowflake_id_router.normalize_connstr(connstr text) RETURNS text
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    secret text;
    normal text;
BEGIN
    SELECT string_agg(c.keyword, ', ') FILTER (WHERE c.secret),
           string_agg(c.keyword || '=' || snowflake_id_router.conn_value(c.value), ' ')
      INTO secret, normal FROM snowflake_id_node.conninfo(connstr) c;
    IF secret IS NOT NULL THEN
        RAISE EXCEPTION 'the connect string holds a secret (%)', secret
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Connect strings are readable by every role (pg_foreign_server.srvoptions).',
                  HINT = 'Put the password in ~/.pgpass of the router''s server user (see docs/security.md).';
    END IF;
    IF normal IS NULL THEN
        RAISE EXCEPTION 'the connect string is empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN normal;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.normalize_connstr(text) IS
  'A connect string as libpq reads it, as key=''value'' pairs; 22023 for a secret or what libpq refuses.';

-- The router's settings: an override in snowflake_id_router.setting, else the default.
CREATE OR REPLACE FUNCTION snowflake_id_router.setting(name text) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN coalesce((SELECT s.value FROM snowflake_id_router.setting s WHERE s.name = setting.name),
                CASE setting.name
                    WHEN 'lock_timeout' THEN '2 s'
                    WHEN 'copy_timeout' THEN '60 s'
                    WHEN 'cutover_timeout' THEN '5 s'
                    WHEN 'cleanup_timeout' THEN '10 s'
                    -- A node's answer to node_status, shard_status and a rebalance's plan.
                    WHEN 'status_timeout' THEN '10 s'
                    -- The loopback connection: the first unix socket (else localhost), port,
                    -- this database, and the role running the router's functions (the
                    -- extension's owner, as these run SECURITY DEFINER).
                    WHEN 'self_connstr' THEN format('host=%s port=%s dbname=%s user=%s',
                        snowflake_id_router.conn_value(coalesce(nullif(trim(split_part(current_setting('unix_socket_directories'), ',', 1)), ''), 'localhost')),
                        snowflake_id_router.conn_value(current_setting('port')),
                        snowflake_id_router.conn_value(current_database()),
                        snowflake_id_router.conn_value(current_user))
                END);
COMMENT ON FUNCTION snowflake_id_router.setting(text) IS
  'A router setting: its override in snowflake_id_router.setting, else its default.';

-- Options every connection the router makes to a node carries (before the node's own, which
-- win where they repeat one): a name in pg_stat_activity, and TCP keepalives, so that a
-- node whose network to the router is cut ends the session, and with it the node locks it
-- holds (docs/cluster-design.md: proof of life).
CREATE OR REPLACE FUNCTION snowflake_id_router.connect_options() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN 'application_name=''snowflake_id_router'' keepalives=1 keepalives_idle=5 keepalives_interval=2 keepalives_count=3 connect_timeout=10';
COMMENT ON FUNCTION snowflake_id_router.connect_options() IS
  'Options of every router connection to a node: application name, TCP keepalives, connect timeout.';

-- Opens dblink connection conn to a node and checks that it reaches the database the node
-- was registered as (its identity), recording the identity of a node added by 0.2.0.
CREATE OR REPLACE FUNCTION snowflake_id_router.connect_node(conn text, node text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n snowflake_id_router.node;
    found_identity text;
BEGIN
    SELECT * INTO n FROM snowflake_id_router.node r WHERE r.name = connect_node.node;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM snowflake_id_router.connect(conn, snowflake_id_router.connect_options() || ' ' || n.connstr);
    found_identity := snowflake_id_router.remote_identity(conn, node);
    IF n.identity IS NULL THEN
        PERFORM snowflake_id_router.check_new_identity(node, found_identity);
        UPDATE snowflake_id_router.node r SET identity = found_identity WHERE r.name = connect_node.node;
    ELSIF n.identity <> found_identity THEN
        PERFORM snowflake_id_router.disconnect(conn);
        RAISE EXCEPTION 'node % now reaches another database (identity %, registered as %)',
            quote_literal(node), found_identity, n.identity
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A node is identified by its system identifier and database OID. Repoint it with alter_node(name, connstr) only to the same database (or its promoted standby).';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.connect_node(text, text) IS
  'Opens dblink connection conn to a node and checks that it reaches the database the node is registered as; 55000 otherwise.';

-- The identity of what dblink connection conn reaches (a node with snowflake_id 0.3.0).
CREATE OR REPLACE FUNCTION snowflake_id_router.remote_identity(conn text, node text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN snowflake_id_router.fetch(conn, 'SELECT snowflake_id_node.identity()');
EXCEPTION WHEN undefined_function OR invalid_schema_name THEN
    RAISE EXCEPTION 'node % does not run snowflake_id 0.3.0 or later', quote_literal(node)
        USING ERRCODE = 'object_not_in_prerequisite_state',
              HINT = 'There: ALTER EXTENSION snowflake_id UPDATE (or CREATE EXTENSION snowflake_id).';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.remote_identity(text, text) IS
  'The identity (system identifier/database OID) of what a dblink connection reaches; 55000 if snowflake_id is older than 0.3.0 there.';

-- Opens the loopback connection conn to this router database (setting self_connstr) and
-- checks that it reaches this very database: map flips and move records go through it.
CREATE OR REPLACE FUNCTION snowflake_id_router.connect_self(conn text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    found_identity text;
BEGIN
    PERFORM snowflake_id_router.connect(conn, snowflake_id_router.setting('self_connstr'));
    found_identity := snowflake_id_router.remote_identity(conn, 'self');
    IF found_identity IS DISTINCT FROM snowflake_id_node.identity() THEN
        PERFORM snowflake_id_router.disconnect(conn);
        RAISE EXCEPTION 'the loopback connection reaches another database (identity %, this router is %)',
            found_identity, snowflake_id_node.identity()
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Correct self_connstr in snowflake_id_router.setting, or delete it to use the default.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.connect_self(text) IS
  'Opens the loopback dblink connection to this router database and checks that it reaches this very database.';

-- A node about to be known by identity: not one already registered under another name (one
-- server under two names: a move between them would copy a shard onto itself), and not this
-- router (routed calls would come back to it, each taking a connection, until none is left).
CREATE OR REPLACE FUNCTION snowflake_id_router.check_new_identity(node text, new_identity text) RETURNS void
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    other text;
BEGIN
    SELECT n.name INTO other FROM snowflake_id_router.node n WHERE n.identity = new_identity AND n.name <> node;
    IF FOUND THEN
        RAISE EXCEPTION 'node % is the same database as node % (identity %)', quote_literal(node), quote_literal(other), new_identity
            USING ERRCODE = 'duplicate_object',
                  HINT = 'A node is identified by its system identifier and database OID, whatever connect string reaches it.';
    END IF;
    IF new_identity = snowflake_id_node.identity() THEN
        RAISE EXCEPTION 'node % is this router database itself (identity %)', quote_literal(node), new_identity
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A router routes to data nodes; a shard placed here would route every call back to the router.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.check_new_identity(text, text) IS
  'Refuses an identity already registered under another node name (42710) or this router''s own (55000).';

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
DECLARE
    normal text;
    found_identity text;
BEGIN
    IF name IS NULL OR connstr IS NULL THEN
        RAISE EXCEPTION 'add_node: name and connstr must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF name = '' OR octet_length(name) > 63 THEN
        RAISE EXCEPTION 'node name % is invalid: give 1 to 63 bytes', quote_literal(name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    normal := snowflake_id_router.normalize_connstr(connstr);
    IF EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = add_node.name) THEN
        RAISE EXCEPTION 'node % already exists', quote_literal(name) USING ERRCODE = 'duplicate_object';
    END IF;
    -- Known by what it is: reach it once and read its identity.
    PERFORM snowflake_id_router.connect('snowflake_id_router_add', snowflake_id_router.connect_options() || ' ' || normal);
    found_identity := snowflake_id_router.remote_identity('snowflake_id_router_add', name);
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_add');
    PERFORM snowflake_id_router.check_new_identity(name, found_identity);
    IF EXISTS (SELECT FROM snowflake_id_node.conninfo(normal) c WHERE c.keyword = 'user') THEN
        RAISE WARNING 'the connect string of node % names a user: every role''s routed calls will connect as %',
            quote_literal(name), (SELECT c.value FROM snowflake_id_node.conninfo(normal) c WHERE c.keyword = 'user')
            USING DETAIL = 'PL/Proxy connects as the calling role only when the connect string names no user.';
    END IF;
    INSERT INTO snowflake_id_router.node (name, connstr, identity) VALUES (name, normal, found_identity);
END
$$;
COMMENT ON FUNCTION add_node(text, text) IS
  'Registers a data node by name and libpq connect string (no password: use ~/.pgpass); it must be reachable, and is known by its identity.';

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


-- ==== router/sql/30_move.sql ====
-- Removes what a failed or finished move leaves behind: the target's subscription, the
-- source's publication and slot, the fence and marker, and (undo) the target's copy.
-- Each step on its own: a node that is down is skipped with a WARNING.
CREATE OR REPLACE FUNCTION snowflake_id_router.clean_move(shard integer, schema_name text, src_connstr text, dst_connstr text,
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

CREATE OR REPLACE FUNCTION move_shard(shard integer, node text, template text DEFAULT 'tpl') RETURNS void
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
    copy_timeout := snowflake_id_router.setting('copy_timeout')::interval;
    cutover_timeout := snowflake_id_router.setting('cutover_timeout')::interval;

    BEGIN
        PERFORM snowflake_id_router.connect_node('snowflake_id_router_src', src);
        PERFORM snowflake_id_router.connect_node('snowflake_id_router_dst', node);
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
        PERFORM snowflake_id_router.connect_self('snowflake_id_router_self');
        PERFORM snowflake_id_router.exec('snowflake_id_router_self',
            format('SET lock_timeout = %L', snowflake_id_router.setting('lock_timeout')));

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
               %s$q$, snowflake_id_router.setting('lock_timeout'), lock_list, s, shard, fence_sql));
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
                PERFORM snowflake_id_router.connect_self('snowflake_id_router_self');
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
        PERFORM snowflake_id_router.connect_node('snowflake_id_router_src', src);
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

-- ==== router/sql/40_nodes.sql ====
-- == Seeing the nodes: one query per node, sent to all at once ==

-- Runs sql (a query returning one jsonb value) on every node, in parallel: each node is
-- reached (identity checked against the registry), sent its query, and only then are the
-- answers collected, so the nodes work at the same time and the total is about the
-- slowest node's time, not the sum. A node that cannot be reached, refuses, times out
-- (status_timeout) or turns out to be another database gives a row with its error and no
-- result, never an error of the whole call: a status view must work best when a node is down.
CREATE OR REPLACE FUNCTION snowflake_id_router.on_nodes(sql text)
RETURNS TABLE (node text, error text, result jsonb)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d text := snowflake_id_router.dblink_schema();
    nodes snowflake_id_router.node[];
    conns text[] := '{}';
    errors text[] := '{}';
    found_identity text;
    answer jsonb;
    remote_error text;
BEGIN
    SELECT coalesce(array_agg(n ORDER BY n.name), '{}') INTO nodes FROM snowflake_id_router.node n;
    FOR i IN 1 .. cardinality(nodes) LOOP
        conns[i] := 'snowflake_id_router_node_' || i;
        BEGIN
            PERFORM snowflake_id_router.connect(conns[i], snowflake_id_router.connect_options() || ' ' || nodes[i].connstr);
            PERFORM snowflake_id_router.exec(conns[i], format('SET statement_timeout = %L',
                extract(epoch FROM snowflake_id_router.setting('status_timeout')::interval) * 1000));
            EXECUTE format('SELECT %s.dblink_send_query($1, $2)', d) USING conns[i],
                format('SELECT snowflake_id_node.identity(), (%s)', sql);
        EXCEPTION WHEN OTHERS THEN
            errors[i] := SQLERRM;
        END;
    END LOOP;
    FOR i IN 1 .. cardinality(nodes) LOOP
        answer := NULL;
        IF errors[i] IS NULL THEN
            -- fail => false: a remote error comes back as dblink_error_message, not raised.
            EXECUTE format('SELECT r.i, r.a FROM %s.dblink_get_result($1, false) AS r(i text, a jsonb)', d)
               INTO found_identity, answer USING conns[i];
            EXECUTE format('SELECT %s.dblink_error_message($1)', d) INTO remote_error USING conns[i];
            IF remote_error IS DISTINCT FROM 'OK' THEN
                errors[i] := CASE WHEN remote_error LIKE '%snowflake_id_node.%does not exist%'
                                  THEN 'the node runs snowflake_id older than 0.3.0 (there: ALTER EXTENSION snowflake_id UPDATE)'
                                  ELSE coalesce(remote_error, 'no answer') END;
                answer := NULL;
            ELSIF found_identity IS DISTINCT FROM coalesce(nodes[i].identity, found_identity) THEN
                errors[i] := format('the connect string reaches another database (identity %s, registered as %s)',
                                    found_identity, nodes[i].identity);
                answer := NULL;
            END IF;
        END IF;
        PERFORM snowflake_id_router.disconnect(conns[i]);
        node := nodes[i].name;
        error := errors[i];
        result := answer;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.on_nodes(text) IS
  'Runs a query returning one jsonb on every node at once (identities checked): per node the answer, or the error that kept it.';

-- The router's own resources on a node, and whether a live move owns them: names made by
-- this router (sfid_<router8>_<move>) whose move is not running now are leftovers.
CREATE OR REPLACE FUNCTION snowflake_id_router.leftovers(names text[]) RETURNS text[]
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN ARRAY(SELECT x FROM unnest(names) x ORDER BY x);
COMMENT ON FUNCTION snowflake_id_router.leftovers(text[]) IS
  'Of the names of move resources found on a node, those no live move owns.';

CREATE OR REPLACE FUNCTION snowflake_id_router.node_status()
RETURNS TABLE (node text, reachable boolean, error text, wal_level text, in_recovery boolean,
               shards_mapped integer, shards_served integer, rows bigint, bytes bigint,
               leftover_slots text[], leftover_publications text[], leftover_subscriptions text[],
               slot_wal_bytes bigint, free_slots integer, free_wal_senders integer,
               standbys integer, sync_standbys integer, standby_lag_bytes bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT o.node, o.error IS NULL, o.error, s.wal_level, s.in_recovery,
           (SELECT count(*) FROM snowflake_id_router.shard m WHERE m.node = o.node)::integer,
           s.shards, s.rows, s.bytes,
           snowflake_id_router.leftovers(s.slots), snowflake_id_router.leftovers(s.publications),
           snowflake_id_router.leftovers(s.subscriptions),
           s.slot_wal_bytes, s.free_slots, s.free_wal_senders, s.standbys, s.sync_standbys, s.standby_lag_bytes
      FROM snowflake_id_router.on_nodes('SELECT to_jsonb(s) FROM snowflake_id_node.node_stats() s') o
      LEFT JOIN LATERAL jsonb_to_record(o.result) AS s(
           wal_level text, in_recovery boolean, shards integer, tables integer, rows bigint, bytes bigint,
           slots text[], publications text[], subscriptions text[], slot_wal_bytes bigint,
           free_slots integer, free_wal_senders integer, standbys integer, sync_standbys integer,
           standby_lag_bytes bigint) ON true
     ORDER BY o.node;
END;
COMMENT ON FUNCTION snowflake_id_router.node_status() IS 'The rows of the view node_status.';

CREATE OR REPLACE VIEW node_status AS SELECT * FROM snowflake_id_router.node_status();
COMMENT ON VIEW node_status IS
  'Each node, asked now (one query per node, all at once): reachable, wal_level, shards mapped and served, rows (estimated) and bytes, leftovers of moves, WAL held by slots, free slots and WAL senders, standbys and their lag.';

-- One row per shard a node serves (with data: a schema made by create_shard), from every
-- node that answers; mapped is false for a copy the map does not send calls to (a shard
-- made on the wrong node, a copy left behind). A node that does not answer is named in a
-- WARNING: its shards are missing from the result.
CREATE OR REPLACE FUNCTION snowflake_id_router.shard_status()
RETURNS TABLE (shard integer, node text, mapped boolean, schema_name text, tables integer, rows bigint,
               bytes bigint, newest_id bigint, newest_at timestamptz, ahead_of_clock interval,
               ids_last_minute bigint)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o record;
BEGIN
    FOR o IN SELECT * FROM snowflake_id_router.on_nodes(
                 $q$SELECT coalesce(jsonb_agg(to_jsonb(s)), '[]') FROM snowflake_id_node.shard_stats(true) s$q$) LOOP
        IF o.error IS NOT NULL THEN
            RAISE WARNING 'node %: %', quote_literal(o.node), o.error
                USING DETAIL = 'The shards of this node are not listed.';
            CONTINUE;
        END IF;
        RETURN QUERY
        SELECT x.shard, o.node, m.node IS NOT DISTINCT FROM o.node, x.schema_name, x.tables, x.rows, x.bytes,
               x.newest_id, x.newest_at, x.ahead_of_clock, x.ids_last_minute
          FROM jsonb_to_recordset(o.result) AS x(
                   shard integer, schema_name text, tables integer, rows bigint, bytes bigint, newest_id bigint,
                   newest_at timestamptz, ahead_of_clock interval, ids_last_minute bigint)
          LEFT JOIN snowflake_id_router.shard m ON m.shard = x.shard;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.shard_status() IS 'The rows of the view shard_status.';

CREATE OR REPLACE VIEW shard_status AS SELECT * FROM snowflake_id_router.shard_status() ORDER BY shard, node;
COMMENT ON VIEW shard_status IS
  'Each shard a node serves, asked now (one query per node, all at once): node, whether the map sends its calls there, schema, tables, rows (estimated), bytes, newest ID, its time and lead over the node''s clock, rows with an ID of the last minute.';

-- == Repointing and removing nodes ==

-- A node reached through another connect string: its promoted standby after a failover, a
-- new address. The new string must reach the same database (identity: system identifier
-- and database OID, which a promoted physical standby keeps), one that is not in recovery
-- (a standby not yet promoted would refuse every write). The connect string of every shard
-- of the node changes in this one transaction (the map's trigger), so every router session
-- routes there from its next transaction on, all at once.
CREATE OR REPLACE FUNCTION alter_node(node text, connstr text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n snowflake_id_router.node;
    normal text;
    found_identity text;
    recovering boolean;
BEGIN
    IF node IS NULL OR connstr IS NULL THEN
        RAISE EXCEPTION 'alter_node: node and connstr must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    normal := snowflake_id_router.normalize_connstr(connstr);
    -- One map change at a time (as the map's trigger does), read after the lock.
    LOCK TABLE snowflake_id_router.node IN SHARE ROW EXCLUSIVE MODE;
    SELECT * INTO n FROM snowflake_id_router.node x WHERE x.name = alter_node.node;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object',
            HINT = 'Register it with add_node(name, connstr).';
    END IF;
    BEGIN
        PERFORM snowflake_id_router.connect('snowflake_id_router_alter', snowflake_id_router.connect_options() || ' ' || normal);
        found_identity := snowflake_id_router.remote_identity('snowflake_id_router_alter', node);
        recovering := snowflake_id_router.fetch('snowflake_id_router_alter', 'SELECT pg_catalog.pg_is_in_recovery()::text');
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_alter');
    EXCEPTION WHEN OTHERS THEN
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_alter');
        RAISE;
    END;
    IF n.identity IS NULL THEN
        -- Registered by 0.2.0 and never reached since: the old connect string, if it still
        -- reaches anything, says what the node is.
        BEGIN
            PERFORM snowflake_id_router.connect('snowflake_id_router_alter', snowflake_id_router.connect_options() || ' ' || n.connstr);
            n.identity := snowflake_id_router.remote_identity('snowflake_id_router_alter', node);
        EXCEPTION WHEN OTHERS THEN
            PERFORM snowflake_id_router.check_new_identity(node, found_identity);
            RAISE WARNING 'node % had no recorded identity and its old connect string reaches nothing: it is now known as %',
                quote_literal(node), found_identity
                USING DETAIL = 'Whether the new connect string reaches the same database as the old one could not be checked.';
        END;
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_alter');
    END IF;
    IF found_identity <> n.identity THEN
        RAISE EXCEPTION 'the new connect string of node % reaches another database (identity %, node % is %)',
            quote_literal(node), found_identity, quote_literal(node), n.identity
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'alter_node repoints a node to the same database: another address of it, or its promoted physical standby (same system identifier and database OID).';
    END IF;
    IF recovering THEN
        RAISE EXCEPTION 'the new connect string of node % reaches a server in recovery (a standby)', quote_literal(node)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Promote it first (pg_ctl promote, or SELECT pg_promote() there), then run alter_node again.';
    END IF;
    UPDATE snowflake_id_router.node x SET connstr = normal, identity = found_identity WHERE x.name = alter_node.node;
END
$$;
COMMENT ON FUNCTION alter_node(text, text) IS
  'Repoints a node to a new connect string reaching the same database (another address, its promoted standby), for every router session at once.';

-- Removes a node that holds no shard: drain_node moves its shards off first.
CREATE OR REPLACE FUNCTION remove_node(node text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    held integer;
    first_held integer;
BEGIN
    IF node IS NULL THEN
        RAISE EXCEPTION 'remove_node: node must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- Serialises with assign_shards and map flips: no shard can be assigned to it meanwhile.
    LOCK TABLE snowflake_id_router.shard IN SHARE ROW EXCLUSIVE MODE;
    IF NOT EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = remove_node.node) THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object';
    END IF;
    SELECT count(*), min(s.shard) INTO held, first_held FROM snowflake_id_router.shard s WHERE s.node = remove_node.node;
    IF held > 0 THEN
        RAISE EXCEPTION 'node % still holds % shard(s), the first shard %', quote_literal(node), held, first_held
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('CALL drain_node(%L) moves them to the other nodes.', node);
    END IF;
    DELETE FROM snowflake_id_router.node n WHERE n.name = remove_node.node;
END
$$;
COMMENT ON FUNCTION remove_node(text) IS
  'Removes a node that holds no shard (55000 otherwise: drain_node first).';

-- ==== router/sql/41_rebalance.sql ====
-- == Rebalancing and draining ==
--
-- rebalance() spreads the shards that hold data (those a node serves: a schema made by
-- create_shard, where the map sends their calls) evenly over the nodes; drain_node(node)
-- moves every shard off one node. Both plan batches of shards, each moved by one
-- move_shards() (one copy, one fence, one flip for the batch), and run them as a procedure
-- in the caller's session, committing after every batch: the plan and its progress are rows
-- of snowflake_id_router.rebalance and rebalance_batch, seen by every session
-- (rebalance_status) and kept when the session dies. A later call repairs the dead move
-- (repair_moves: completed if it was sealed, else undone), plans again from the map as it
-- then is, and goes on under the same rebalance: shards already moved stay moved.
--
-- The planner (plan_moves) sees each shard's node and weight (1 by_shard_count, its bytes
-- by_disk_size) and is pure: rebalance_plan() shows what it would do. It moves each shard
-- at most once, in O(shards x nodes):
--   drain: the node's shards, heaviest first, each to the node that then weighs least;
--   rebalance: each node heavier than the mean by more than the tolerance (half a shard
--   by_shard_count, so counts end within one of each other; a tenth of the mean
--   by_disk_size, as Citus's default threshold) gives its shards, heaviest first, to the
--   lightest node until it is down to the mean, skipping a shard that would take it below
--   the mean, or the receiver above it, by more than the tolerance.

-- The session-level advisory lock of a running rebalance or drain (one at a time per
-- router): its proof of life, held across the procedure's commits, gone with its session.
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_lock() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN hashtext('snowflake_id_router.rebalance');
COMMENT ON FUNCTION snowflake_id_router.rebalance_lock() IS
  'Class of the session advisory lock (class, 0) a running rebalance or drain holds.';

-- The session holding the rebalance lock of this database, if any.
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_holder() RETURNS integer
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN (SELECT l.pid FROM pg_locks l
         WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
           AND l.classid = snowflake_id_router.rebalance_lock()::oid AND l.objid = 0
           AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
         LIMIT 1);
COMMENT ON FUNCTION snowflake_id_router.rebalance_holder() IS
  'PID of the session running a rebalance or drain on this router, or NULL.';

CREATE OR REPLACE FUNCTION snowflake_id_router.plan_moves(strategy text, drain text, nodes text[],
                                                          shards integer[], owners text[], weights bigint[])
RETURNS TABLE (shard integer, source text, target text, weight bigint)
LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k integer := cardinality(nodes);
    load bigint[];             -- per node (index in nodes): the weight it holds as planned
    receiving boolean[];       -- per node: may be given shards (every node but the drained one)
    mean numeric;
    tolerance numeric;
    g integer;
    r integer;
    s record;
BEGIN
    IF strategy IS NULL OR nodes IS NULL OR shards IS NULL OR owners IS NULL OR weights IS NULL THEN
        RAISE EXCEPTION 'plan_moves: only drain may be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF strategy NOT IN ('by_shard_count', 'by_disk_size') THEN
        RAISE EXCEPTION 'strategy % is unknown: give by_shard_count or by_disk_size', quote_literal(strategy)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(owners) <> cardinality(shards) OR cardinality(weights) <> cardinality(shards)
       OR EXISTS (SELECT FROM unnest(owners) o WHERE o IS NULL OR NOT o = ANY (nodes))
       OR (drain IS NOT NULL AND NOT drain = ANY (nodes)) THEN
        RAISE EXCEPTION 'plan_moves: every shard needs one node of nodes, and a weight' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    load := array_fill(0::bigint, ARRAY[k]);
    receiving := array_fill(true, ARRAY[k]);
    IF drain IS NOT NULL THEN
        receiving[array_position(nodes, drain)] := false;
    END IF;
    IF NOT true = ANY (receiving) THEN
        RAISE EXCEPTION 'node % is the only node: there is no node to move its shards to', quote_literal(drain)
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Add a node first (add_node).';
    END IF;
    FOR s IN SELECT u.owner, sum(CASE strategy WHEN 'by_shard_count' THEN 1 ELSE greatest(u.bytes, 1) END) AS w
               FROM unnest(owners, weights) u(owner, bytes) GROUP BY u.owner LOOP
        load[array_position(nodes, s.owner)] := s.w;
    END LOOP;

    -- The drained node's shards, heaviest first, each to the node that then weighs least.
    IF drain IS NOT NULL THEN
        FOR s IN SELECT u.shard, u.bytes, CASE strategy WHEN 'by_shard_count' THEN 1 ELSE greatest(u.bytes, 1) END AS w
                   FROM unnest(shards, owners, weights) u(shard, owner, bytes)
                  WHERE u.owner = drain ORDER BY 3 DESC, u.shard LOOP
            SELECT i INTO r FROM generate_subscripts(nodes, 1) i WHERE receiving[i] ORDER BY load[i], i LIMIT 1;
            load[r] := load[r] + s.w;
            shard := s.shard; source := drain; target := nodes[r]; weight := s.bytes;
            RETURN NEXT;
        END LOOP;
        RETURN;
    END IF;

    -- Rebalance: the nodes heavier than the mean, heaviest first, give to the lightest.
    mean := (SELECT sum(l) FROM unnest(load) l)::numeric / k;
    tolerance := CASE strategy WHEN 'by_shard_count' THEN 0.5 ELSE mean / 10 END;
    FOR g IN SELECT i FROM generate_subscripts(nodes, 1) i WHERE load[i] > mean + tolerance ORDER BY load[i] DESC, i LOOP
        FOR s IN SELECT u.shard, u.bytes, CASE strategy WHEN 'by_shard_count' THEN 1 ELSE greatest(u.bytes, 1) END AS w
                   FROM unnest(shards, owners, weights) u(shard, owner, bytes)
                  WHERE u.owner = nodes[g] ORDER BY 3 DESC, u.shard DESC LOOP
            EXIT WHEN load[g] <= mean;
            CONTINUE WHEN load[g] - s.w < mean - tolerance;
            SELECT i INTO r FROM generate_subscripts(nodes, 1) i WHERE i <> g ORDER BY load[i], i LIMIT 1;
            CONTINUE WHEN load[r] + s.w > mean + tolerance;
            load[g] := load[g] - s.w;
            load[r] := load[r] + s.w;
            shard := s.shard; source := nodes[g]; target := nodes[r]; weight := s.bytes;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.plan_moves(text, text, text[], integer[], text[], bigint[]) IS
  'The planner of rebalance and drain_node: given each shard''s node and bytes, the moves that balance the nodes (or empty one), each shard at most once.';

-- The shards that hold data, where the map sends them: (shard, node, bytes), one query per
-- node. Every node must answer (55000 naming the first that does not): a plan that missed
-- one node's shards would pile shards onto it.
CREATE OR REPLACE FUNCTION snowflake_id_router.data_shards()
RETURNS TABLE (shard integer, node text, bytes bigint)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o record;
BEGIN
    FOR o IN SELECT * FROM snowflake_id_router.on_nodes(
                 $q$SELECT coalesce(jsonb_agg(jsonb_build_array(s.shard, s.bytes)), '[]') FROM snowflake_id_node.shard_stats(false) s$q$) LOOP
        IF o.error IS NOT NULL THEN
            RAISE EXCEPTION 'node % cannot be asked for its shards: %', quote_literal(o.node), o.error
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Planning needs every node: bring it back, repoint it (alter_node), or drain it and remove it (remove_node).';
        END IF;
        RETURN QUERY
        SELECT (x->>0)::integer, o.node, (x->>1)::bigint
          FROM jsonb_array_elements(o.result) x
          JOIN snowflake_id_router.shard m ON m.shard = (x->>0)::integer AND m.node = o.node;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.data_shards() IS
  'Each shard a node serves where the map names that node, with its bytes (one query per node; 55000 if a node does not answer).';

CREATE OR REPLACE FUNCTION snowflake_id_router.check_plan_args(strategy text, batch_size integer, drain text) RETURNS void
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF strategy IS NULL OR batch_size IS NULL THEN
        RAISE EXCEPTION 'strategy and batch_size must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF strategy NOT IN ('by_shard_count', 'by_disk_size') THEN
        RAISE EXCEPTION 'strategy % is unknown: give by_shard_count or by_disk_size', quote_literal(strategy)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF batch_size NOT BETWEEN 1 AND 8192 THEN
        RAISE EXCEPTION 'batch_size % is out of range: give 1 to 8192 shards per move', batch_size
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF drain IS NOT NULL AND NOT EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = drain) THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(drain) USING ERRCODE = 'undefined_object';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.check_plan_args(text, integer, text) IS
  'Refuses NULL (22004), an unknown strategy or a batch size out of 1..8192 (22023), an unknown node (42704).';

-- The batches that would balance the nodes (or empty node drain) now: each shard's move
-- grouped by source and target, batch_size shards at most per batch, the pairs taking turns
-- so that a rebalance stopped half-way has taken about as much from each node.
CREATE OR REPLACE FUNCTION snowflake_id_router.plan(strategy text, batch_size integer, drain text)
RETURNS TABLE (batch integer, source text, target text, shards integer[], bytes bigint)
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    nodes text[];
    data_shards integer[];
    owners text[];
    sizes bigint[];
BEGIN
    PERFORM snowflake_id_router.check_plan_args(strategy, batch_size, drain);
    SELECT coalesce(array_agg(n.name ORDER BY n.name), '{}') INTO nodes FROM snowflake_id_router.node n;
    SELECT coalesce(array_agg(d.shard), '{}'), coalesce(array_agg(d.node), '{}'), coalesce(array_agg(d.bytes), '{}')
      INTO data_shards, owners, sizes FROM snowflake_id_router.data_shards() d;
    RETURN QUERY
    WITH moves AS (
        SELECT m.*, (row_number() OVER (PARTITION BY m.source, m.target ORDER BY m.shard) - 1) / batch_size AS turn
          FROM snowflake_id_router.plan_moves(strategy, drain, nodes, data_shards, owners, sizes) m)
    SELECT (row_number() OVER (ORDER BY m.turn, m.source, m.target))::integer, m.source, m.target,
           array_agg(m.shard ORDER BY m.shard), sum(m.weight)::bigint
      FROM moves m GROUP BY m.turn, m.source, m.target
     ORDER BY 1;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.plan(text, integer, text) IS
  'The batches of shards a rebalance (drain NULL) or drain would move now.';

CREATE OR REPLACE FUNCTION rebalance_plan(strategy text DEFAULT 'by_shard_count', batch_size integer DEFAULT 32,
                                          drain text DEFAULT NULL)
RETURNS TABLE (batch integer, source text, target text, shards integer[], bytes bigint)
LANGUAGE sql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT * FROM snowflake_id_router.plan(strategy, batch_size, drain);
END;
COMMENT ON FUNCTION rebalance_plan(text, integer, text) IS
  'The batches CALL rebalance(strategy, batch_size) (or, with drain, drain_node) would move now, without moving anything: batch, source, target, shards, bytes.';

-- Ends this session's hold on the rebalance lock (however many times it took it).
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_release() RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    WHILE snowflake_id_router.rebalance_holder() IS NOT DISTINCT FROM pg_backend_pid() LOOP
        PERFORM pg_advisory_unlock(snowflake_id_router.rebalance_lock(), 0);
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_release() IS 'Releases the rebalance lock this session holds.';

-- The first step of rebalance() and drain_node(): the lock, dead moves repaired, then the
-- unfinished rebalance resumed (same kind, and same node for a drain) or abandoned, and a
-- plan of what is left to do. Returns the rebalance's id.
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_begin(drain text, strategy text, batch_size integer, template text)
RETURNS integer
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    kind text := CASE WHEN drain IS NULL THEN 'rebalance' ELSE 'drain' END;
    holder integer;
    r snowflake_id_router.rebalance;
    rid integer;
    first_batch integer;
    planned record;
BEGIN
    PERFORM snowflake_id_router.check_plan_args(strategy, batch_size, drain);
    IF template IS NULL THEN
        RAISE EXCEPTION 'template must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    holder := snowflake_id_router.rebalance_holder();
    IF holder IS DISTINCT FROM pg_backend_pid()
       AND (holder IS NOT NULL OR NOT pg_try_advisory_lock(snowflake_id_router.rebalance_lock(), 0)) THEN
        SELECT * INTO r FROM snowflake_id_router.rebalance x WHERE x.state = 'running';
        RAISE EXCEPTION '% % is running in session %', coalesce(r.kind, 'a rebalance'), r.id,
            coalesce(snowflake_id_router.rebalance_holder(), r.pid)
            USING ERRCODE = 'lock_not_available',
                  HINT = 'rebalance_status shows its progress; rebalance_stop() stops it after its current batch.';
    END IF;
    BEGIN
        -- A move cut short with a session of an earlier run is completed (sealed) or undone
        -- now, before the map is read.
        PERFORM @extschema@.repair_moves();
        SELECT * INTO r FROM snowflake_id_router.rebalance x WHERE x.state IN ('running', 'stopped', 'failed') FOR UPDATE;
        IF FOUND AND r.kind = kind AND r.node IS NOT DISTINCT FROM drain THEN
            rid := r.id;
            UPDATE snowflake_id_router.rebalance x
               SET strategy = rebalance_begin.strategy, batch_size = rebalance_begin.batch_size,
                   template = rebalance_begin.template, state = 'running', pid = pg_backend_pid(),
                   stop_requested = NULL, ended = NULL, error = NULL
             WHERE x.id = rid;
            -- A batch cut short: done if the move was completed (a repair completes a move
            -- sealed before its session died), else planned again below with the rest.
            UPDATE snowflake_id_router.rebalance_batch b SET state = 'done', ended = clock_timestamp(), error = NULL
             WHERE b.rebalance = rid AND b.state IN ('moving', 'failed')
               AND NOT EXISTS (SELECT FROM unnest(b.shards) s
                                WHERE NOT EXISTS (SELECT FROM snowflake_id_router.shard m WHERE m.shard = s AND m.node = b.target));
            DELETE FROM snowflake_id_router.rebalance_batch b WHERE b.rebalance = rid AND b.state <> 'done';
            RAISE NOTICE '% % resumed: % batch(es) done before', kind, rid,
                (SELECT count(*) FROM snowflake_id_router.rebalance_batch b WHERE b.rebalance = rid);
        ELSE
            IF FOUND THEN
                UPDATE snowflake_id_router.rebalance x SET state = 'abandoned', ended = coalesce(x.ended, clock_timestamp())
                 WHERE x.id = r.id;
                RAISE NOTICE '% % (unfinished) is abandoned for this %: the shards it moved stay moved', r.kind, r.id, kind;
            END IF;
            LOCK TABLE snowflake_id_router.rebalance IN SHARE ROW EXCLUSIVE MODE;
            rid := coalesce((SELECT max(x.id) FROM snowflake_id_router.rebalance x), 0) + 1;
            INSERT INTO snowflake_id_router.rebalance (id, kind, node, strategy, batch_size, template, state, pid, started)
            VALUES (rid, kind, drain, strategy, batch_size, template, 'running', pg_backend_pid(), clock_timestamp());
        END IF;
        first_batch := coalesce((SELECT max(b.batch) FROM snowflake_id_router.rebalance_batch b WHERE b.rebalance = rid), 0);
        INSERT INTO snowflake_id_router.rebalance_batch (rebalance, batch, source, target, shards, bytes, state)
        SELECT rid, first_batch + p.batch, p.source, p.target, p.shards, p.bytes, 'planned'
          FROM snowflake_id_router.plan(strategy, batch_size, drain) p;
        SELECT count(*) AS batches, coalesce(sum(cardinality(b.shards)), 0) AS shards,
               coalesce(sum(b.bytes), 0) AS bytes INTO planned
          FROM snowflake_id_router.rebalance_batch b WHERE b.rebalance = rid AND b.state = 'planned';
        RAISE NOTICE '% %: % shard(s), % bytes, to move in % batch(es)', kind, rid, planned.shards, planned.bytes, planned.batches;
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        PERFORM snowflake_id_router.rebalance_release();
        RAISE;
    END;
    RETURN rid;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_begin(text, text, integer, text) IS
  'First step of rebalance and drain_node: takes the rebalance lock, resumes or starts a rebalance record, plans its batches.';

-- Gives the shards of a drained node that hold no data (no schema there) to the other
-- nodes, by the map alone: contiguous runs, one per node.
CREATE OR REPLACE FUNCTION snowflake_id_router.remap_empty(drained text) RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    moved integer;
BEGIN
    WITH empty AS (
        SELECT s.shard, ntile((SELECT count(*) FROM snowflake_id_router.node n WHERE n.name <> drained)::integer)
                            OVER (ORDER BY s.shard) AS part
          FROM snowflake_id_router.shard s WHERE s.node = drained),
    receiver AS (
        SELECT n.name, row_number() OVER (ORDER BY n.name) AS part
          FROM snowflake_id_router.node n WHERE n.name <> drained)
    UPDATE snowflake_id_router.shard s SET node = r.name
      FROM empty e JOIN receiver r USING (part)
     WHERE s.shard = e.shard AND s.node = drained;
    GET DIAGNOSTICS moved = ROW_COUNT;
    RETURN moved;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.remap_empty(text) IS
  'Maps the shards of a drained node that hold no data to the other nodes (map only).';

-- The next batch to move (its shards still where the plan found them), marked moving; NULL
-- when the rebalance is over: stopped (rebalance_stop) or done. A drain with nothing left to
-- move looks at its node again (a shard made there meanwhile is planned too), then hands the
-- node's shards without data to the other nodes.
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_next(rid integer) RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r snowflake_id_router.rebalance;
    b snowflake_id_router.rebalance_batch;
    still integer[];
    looked_again integer := 0;
    remapped integer;
BEGIN
    SELECT * INTO STRICT r FROM snowflake_id_router.rebalance x WHERE x.id = rid;
    IF r.stop_requested IS NOT NULL THEN
        UPDATE snowflake_id_router.rebalance x SET state = 'stopped', ended = clock_timestamp() WHERE x.id = rid;
        PERFORM snowflake_id_router.rebalance_release();
        RAISE NOTICE '% % stopped (rebalance_stop): % of % batch(es) done', r.kind, rid,
            (SELECT count(*) FILTER (WHERE x.state = 'done') FROM snowflake_id_router.rebalance_batch x WHERE x.rebalance = rid),
            (SELECT count(*) FROM snowflake_id_router.rebalance_batch x WHERE x.rebalance = rid)
            USING HINT = CASE r.kind WHEN 'drain' THEN format('CALL drain_node(%L) resumes it.', r.node)
                                     ELSE 'CALL rebalance() resumes it.' END;
        RETURN NULL;
    END IF;
    LOOP
        SELECT * INTO b FROM snowflake_id_router.rebalance_batch x
         WHERE x.rebalance = rid AND x.state = 'planned' ORDER BY x.batch LIMIT 1;
        IF NOT FOUND THEN
            IF r.kind = 'drain' AND looked_again < 3 THEN
                looked_again := looked_again + 1;
                INSERT INTO snowflake_id_router.rebalance_batch (rebalance, batch, source, target, shards, bytes, state)
                SELECT rid, (SELECT max(x.batch) FROM snowflake_id_router.rebalance_batch x WHERE x.rebalance = rid) + p.batch,
                       p.source, p.target, p.shards, p.bytes, 'planned'
                  FROM snowflake_id_router.plan(r.strategy, r.batch_size, r.node) p;
                CONTINUE WHEN FOUND;
                remapped := snowflake_id_router.remap_empty(r.node);
                RAISE NOTICE 'drain %: % shard(s) of node % without data mapped to the other nodes', rid, remapped, quote_literal(r.node);
            END IF;
            UPDATE snowflake_id_router.rebalance x SET state = 'done', ended = clock_timestamp() WHERE x.id = rid;
            PERFORM snowflake_id_router.rebalance_release();
            RAISE NOTICE '% % done: % shard(s) moved in % batch(es)', r.kind, rid,
                (SELECT coalesce(sum(cardinality(x.shards)), 0) FROM snowflake_id_router.rebalance_batch x WHERE x.rebalance = rid),
                (SELECT count(*) FROM snowflake_id_router.rebalance_batch x WHERE x.rebalance = rid);
            RETURN NULL;
        END IF;
        -- A shard moved meanwhile by someone else is no longer this batch's to move.
        still := ARRAY(SELECT s FROM unnest(b.shards) s
                        WHERE EXISTS (SELECT FROM snowflake_id_router.shard m WHERE m.shard = s AND m.node = b.source)
                        ORDER BY s);
        IF cardinality(still) = 0 THEN
            DELETE FROM snowflake_id_router.rebalance_batch x WHERE x.rebalance = rid AND x.batch = b.batch;
            CONTINUE;
        END IF;
        UPDATE snowflake_id_router.rebalance_batch x SET state = 'moving', started = clock_timestamp(), shards = still
         WHERE x.rebalance = rid AND x.batch = b.batch;
        RETURN b.batch;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_next(integer) IS
  'Next batch of a rebalance or drain to move (marked moving), or NULL when it is stopped or done (lock released).';

-- Moves one batch: one move_shards() of its shards. Lock conflicts (another move of one of
-- the shards, the fence's lock_timeout under a long transaction) are tried again, twice,
-- after a pause: one such moment should not stop a rebalance of thousands of shards.
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_move(rid integer, batch integer) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    b snowflake_id_router.rebalance_batch;
    tpl text;
    left_behind integer;
BEGIN
    SELECT * INTO STRICT b FROM snowflake_id_router.rebalance_batch x WHERE x.rebalance = rid AND x.batch = rebalance_move.batch;
    SELECT x.template INTO STRICT tpl FROM snowflake_id_router.rebalance x WHERE x.id = rid;
    FOR attempt IN 1 .. 3 LOOP
        BEGIN
            b.move := @extschema@.move_shards(b.shards, b.target, tpl);
            EXIT;
        EXCEPTION WHEN lock_not_available OR serialization_failure THEN
            IF attempt = 3 THEN
                RAISE;
            END IF;
            RAISE NOTICE 'batch % of rebalance %: %; trying again', batch, rid, SQLERRM;
            PERFORM pg_sleep(attempt);
        END;
    END LOOP;
    SELECT min(s) INTO left_behind FROM unnest(b.shards) s
     WHERE NOT EXISTS (SELECT FROM snowflake_id_router.shard m WHERE m.shard = s AND m.node = b.target);
    IF left_behind IS NOT NULL THEN
        RAISE EXCEPTION 'shard % is not on node % after its move', left_behind, quote_literal(b.target)
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    UPDATE snowflake_id_router.rebalance_batch x SET state = 'done', ended = clock_timestamp(), move = b.move
     WHERE x.rebalance = rid AND x.batch = rebalance_move.batch;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_move(integer, integer) IS
  'Moves one batch of a rebalance or drain (move_shards), and records it done.';

-- A step failed (or was cancelled: then the rebalance counts as stopped): recorded, the
-- lock released. Returns the message and hint to raise.
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_failed(rid integer, batch integer, code text, why text,
                                                                OUT message text, OUT hint text)
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r snowflake_id_router.rebalance;
    b snowflake_id_router.rebalance_batch;
BEGIN
    SELECT * INTO STRICT r FROM snowflake_id_router.rebalance x WHERE x.id = rid;
    SELECT * INTO b FROM snowflake_id_router.rebalance_batch x WHERE x.rebalance = rid AND x.batch = rebalance_failed.batch;
    UPDATE snowflake_id_router.rebalance_batch x SET state = 'failed', ended = clock_timestamp(), error = why
     WHERE x.rebalance = rid AND x.batch = rebalance_failed.batch;
    UPDATE snowflake_id_router.rebalance x
       SET state = CASE WHEN code = '57014' THEN 'stopped' ELSE 'failed' END, ended = clock_timestamp(), error = why
     WHERE x.id = rid;
    PERFORM snowflake_id_router.rebalance_release();
    message := CASE WHEN b.batch IS NULL THEN format('%s %s: %s', r.kind, rid, why)
                    ELSE format('%s %s, batch %s (shard(s) %s from node %L to node %L): %s', r.kind, rid, b.batch,
                                array_to_string(b.shards, ', '), b.source, b.target, why) END;
    hint := CASE r.kind WHEN 'drain' THEN format('CALL drain_node(%L)', r.node) ELSE 'CALL rebalance()' END
         || ' resumes it where it stopped, once the cause is fixed; rebalance_status shows what is done.';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_failed(integer, integer, text, text) IS
  'Records a failed step of a rebalance or drain and releases its lock; the message and hint to raise.';

-- The loop of rebalance() and drain_node(), in the caller's session: a commit before the
-- first step (so that a call inside a transaction block, where a procedure cannot commit,
-- fails with 2D000 before it takes anything), after the plan, after marking each batch
-- moving (seen by rebalance_status) and after each batch. Each step is a SECURITY DEFINER
-- function: a procedure that commits cannot be one.
CREATE OR REPLACE PROCEDURE snowflake_id_router.run_rebalance(drain text, strategy text, batch_size integer, template text)
LANGUAGE plpgsql
AS $$
DECLARE
    rid integer;
    batch integer;
    st text;
    msg text;
    det text;
    failure record;
BEGIN
    COMMIT;
    rid := snowflake_id_router.rebalance_begin(drain, strategy, batch_size, template);
    COMMIT;
    LOOP
        batch := NULL;
        BEGIN
            batch := snowflake_id_router.rebalance_next(rid);
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
        END;
        IF st IS NULL THEN
            COMMIT;
            EXIT WHEN batch IS NULL;
            BEGIN
                PERFORM snowflake_id_router.rebalance_move(rid, batch);
            EXCEPTION WHEN query_canceled OR OTHERS THEN
                GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
            END;
        END IF;
        IF st IS NOT NULL THEN
            failure := snowflake_id_router.rebalance_failed(rid, batch, st, msg);
            COMMIT;
            RAISE EXCEPTION USING ERRCODE = st, MESSAGE = failure.message, HINT = failure.hint,
                                  DETAIL = coalesce(nullif(det, ''), 'The step raised no further detail.');
        END IF;
        COMMIT;
    END LOOP;
END
$$;
COMMENT ON PROCEDURE snowflake_id_router.run_rebalance(text, text, integer, text) IS
  'The loop of rebalance and drain_node: plan, then each batch moved and committed.';

CREATE OR REPLACE PROCEDURE rebalance(strategy text DEFAULT 'by_shard_count', batch_size integer DEFAULT 32,
                                      template text DEFAULT 'tpl')
LANGUAGE plpgsql
AS $$
BEGIN
    CALL snowflake_id_router.run_rebalance(NULL, strategy, batch_size, template);
END
$$;
COMMENT ON PROCEDURE rebalance(text, integer, text) IS
  'Spreads the shards that hold data evenly over the nodes (by_shard_count or by_disk_size), batch_size shards per move, committing after each batch; resumes an interrupted one; rebalance_stop() stops it.';

CREATE OR REPLACE PROCEDURE drain_node(node text, strategy text DEFAULT 'by_shard_count', batch_size integer DEFAULT 32,
                                       template text DEFAULT 'tpl')
LANGUAGE plpgsql
AS $$
BEGIN
    IF node IS NULL THEN
        RAISE EXCEPTION 'drain_node: node must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    CALL snowflake_id_router.run_rebalance(node, strategy, batch_size, template);
END
$$;
COMMENT ON PROCEDURE drain_node(text, text, integer, text) IS
  'Moves every shard off a node (those with data by move_shards, batch_size per move, committing after each batch; the others by the map); resumes an interrupted drain.';

-- Asks the running rebalance or drain to stop after its current batch (it records itself
-- stopped; CALL it again to resume). One whose session is gone is marked stopped at once.
CREATE OR REPLACE FUNCTION rebalance_stop() RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r snowflake_id_router.rebalance;
BEGIN
    SELECT * INTO r FROM snowflake_id_router.rebalance x WHERE x.state = 'running' FOR UPDATE;
    IF NOT FOUND THEN
        RAISE NOTICE 'no rebalance or drain is running';
        RETURN false;
    END IF;
    IF snowflake_id_router.rebalance_holder() IS DISTINCT FROM r.pid THEN
        UPDATE snowflake_id_router.rebalance x SET state = 'stopped', ended = clock_timestamp(), stop_requested = clock_timestamp()
         WHERE x.id = r.id;
        RAISE NOTICE '% % was interrupted (its session % is gone): now stopped', r.kind, r.id, r.pid;
    ELSE
        UPDATE snowflake_id_router.rebalance x SET stop_requested = clock_timestamp() WHERE x.id = r.id;
        RAISE NOTICE '% % (session %) stops after its current batch', r.kind, r.id, r.pid
            USING HINT = 'rebalance_status shows when it has stopped.';
    END IF;
    RETURN true;
END
$$;
COMMENT ON FUNCTION rebalance_stop() IS
  'Asks the running rebalance or drain to stop after its current batch; false if none is running.';

CREATE OR REPLACE VIEW rebalance_status AS
SELECT r.id, r.kind, r.node, r.strategy,
       CASE WHEN r.state <> 'running' THEN r.state
            WHEN NOT EXISTS (SELECT FROM pg_catalog.pg_locks l
                              WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.pid = r.pid
                                AND l.classid = pg_catalog.hashtext('snowflake_id_router.rebalance')::oid AND l.objid = 0
                                AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()))
                 THEN 'interrupted'
            WHEN r.stop_requested IS NOT NULL THEN 'stopping'
            ELSE 'running' END AS state,
       r.pid, r.started, r.ended, b.batches, b.batches_done, b.shards, b.shards_done, b.shards - b.shards_done AS shards_left,
       c.batch AS current_batch, c.source AS current_source, c.target AS current_target, c.shards AS current_shards,
       c.started AS current_since,
       CASE WHEN r.state = 'running' AND b.shards_done > 0
            THEN b.moving_time / b.shards_done * (b.shards - b.shards_done) END AS time_left,
       r.error
  FROM snowflake_id_router.rebalance r
  CROSS JOIN LATERAL (
       SELECT count(*)::integer AS batches, (count(*) FILTER (WHERE x.state = 'done'))::integer AS batches_done,
              coalesce(sum(cardinality(x.shards)), 0)::integer AS shards,
              coalesce(sum(cardinality(x.shards)) FILTER (WHERE x.state = 'done'), 0)::integer AS shards_done,
              sum(x.ended - x.started) FILTER (WHERE x.state = 'done') AS moving_time
         FROM snowflake_id_router.rebalance_batch x WHERE x.rebalance = r.id) b
  LEFT JOIN snowflake_id_router.rebalance_batch c ON c.rebalance = r.id AND c.state = 'moving'
 ORDER BY r.id DESC;
COMMENT ON VIEW rebalance_status IS
  'Each rebalance and drain, newest first: state (running, stopping, interrupted, stopped, failed, done, abandoned), batches and shards planned and done, the batch moving now, estimated time left, error.';

-- ==== router/sql/90_grants.sql ====
REVOKE ALL ON FUNCTION add_node(text, text), assign_shards(integer, integer, text),
    move_shard(integer, text, text) FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_router FROM PUBLIC;
REVOKE ALL ON shard_map FROM PUBLIC;
REVOKE ALL ON FUNCTION rebalance_plan(text, integer, text), rebalance_stop(), alter_node(text, text),
    remove_node(text) FROM PUBLIC;
REVOKE ALL ON PROCEDURE rebalance(text, integer, text), drain_node(text, text, integer, text) FROM PUBLIC;
REVOKE ALL ON ALL PROCEDURES IN SCHEMA snowflake_id_router FROM PUBLIC;
REVOKE ALL ON node_status, shard_status, rebalance_status FROM PUBLIC;
