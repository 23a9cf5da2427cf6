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
    connstr text NOT NULL,
    identity text UNIQUE
);
COMMENT ON TABLE snowflake_id_router.node IS
  'Data nodes: name, libpq connect string (normalised, no secret) and identity (system identifier/database OID; NULL until first reached, for nodes added by 0.2.0).';
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

-- ==== router/sql/01_settings.sql ====
-- Settings of the router's own operations. Code that runs with the extension owner's rights
-- reads no session setting: these are rows of a table only its owner may write (a
-- superuser: UPDATE/INSERT here), dumped with the router. Only overrides are stored; the
-- defaults are in snowflake_id_router.setting(name).
CREATE TABLE snowflake_id_router.setting (
    name text PRIMARY KEY
        CHECK (name IN ('lock_timeout', 'copy_timeout', 'cutover_timeout', 'cleanup_timeout', 'schema_change_timeout', 'self_connstr')),
    value text NOT NULL,
    -- A timeout of 0 would mean no timeout at all.
    CHECK (name = 'self_connstr' OR (value::interval > interval '0' AND value::interval <= interval '1 day'))
);
COMMENT ON TABLE snowflake_id_router.setting IS
  'Overrides of the router''s settings (timeouts, the loopback connect string); writable by the extension''s owner only.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.setting', '');

-- ==== router/sql/03_routers_ddl.sql ====
-- Several routers, and schema changes on every shard (new in 0.3.0).

-- The map's version: one more at every statement that changes the map (the shard or node
-- table), in the transaction that changes it. Absent: version 0.
CREATE TABLE snowflake_id_router.map_state (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    version bigint NOT NULL
);
COMMENT ON TABLE snowflake_id_router.map_state IS
  'The version of this router''s map: counts the statements that changed the shard or node table.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.map_state', '');

-- On the primary: the routers that follow its map, and how far each has applied it.
CREATE TABLE snowflake_id_router.router (
    name text PRIMARY KEY CHECK (name <> '' AND octet_length(name) <= 63),
    connstr text NOT NULL,
    identity text NOT NULL UNIQUE,
    map_version bigint NOT NULL DEFAULT 0,
    behind_since timestamptz,
    error text
);
COMMENT ON TABLE snowflake_id_router.router IS
  'Routers following this one''s map: name, connect string, identity, the map version each routes by, since when it is behind and why.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.router', '');

-- On a follower: the primary whose map it routes by (one row at most), and the version of
-- that map it applied.
CREATE TABLE snowflake_id_router.follows (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    identity text NOT NULL,
    description text NOT NULL,
    map_version bigint NOT NULL DEFAULT 0,
    since timestamptz NOT NULL
);
COMMENT ON TABLE snowflake_id_router.follows IS
  'On a follower router: the primary router it follows (identity, how it describes itself) and the version of its map applied here.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.follows', '');

-- alter_shards: each change, and where it stands on each node. Written through the
-- loopback connection as the change goes, so they outlive the caller's session.
CREATE TABLE snowflake_id_router.schema_change (
    id bigint PRIMARY KEY,
    ddl text NOT NULL,
    template text NOT NULL,
    state text NOT NULL CHECK (state IN ('running', 'done', 'incomplete', 'abandoned')),
    started timestamptz NOT NULL,
    finished timestamptz,
    started_by text NOT NULL,
    error text
);
COMMENT ON TABLE snowflake_id_router.schema_change IS
  'Changes made by alter_shards: the statement, the template, and whether every node has it.';
CREATE TABLE snowflake_id_router.schema_change_node (
    change bigint NOT NULL REFERENCES snowflake_id_router.schema_change (id) ON DELETE CASCADE,
    node text NOT NULL,
    state text NOT NULL CHECK (state IN ('pending', 'done', 'failed', 'skipped')),
    schemas integer,
    seconds numeric,
    at timestamptz,
    error text,
    PRIMARY KEY (change, node)
);
COMMENT ON TABLE snowflake_id_router.schema_change_node IS
  'Where each alter_shards change stands on each node: pending, done (with the schemas changed), failed or skipped (behind).';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.schema_change', '');
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.schema_change_node', '');

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
                    WHEN 'schema_change_timeout' THEN '10 min'
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
    PERFORM snowflake_id_router.require_primary('add_node');
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
    PERFORM snowflake_id_router.require_primary('assign_shards');
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
    PERFORM snowflake_id_router.require_primary('move_shard');
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
    -- Not while alter_shards is half-way across the nodes (it waits for moves, they for it).
    PERFORM snowflake_id_router.lock_schema_changes(false);
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

-- ==== router/sql/50_routers.sql ====
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
CREATE OR REPLACE FUNCTION snowflake_id_router.require_primary(what text) RETURNS void
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
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

-- == Follower side (called by the primary over dblink) ==

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
    deadline timestamptz := clock_timestamp() + timeout;
BEGIN
    LOOP
        PERFORM pg_stat_clear_snapshot();
        IF NOT EXISTS (SELECT FROM pg_stat_activity a
                        WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
                          AND a.backend_type = 'client backend' AND a.xact_start < now()
                          AND a.application_name IS DISTINCT FROM 'snowflake_id_router') THEN
            RETURN true;
        END IF;
        IF clock_timestamp() > deadline THEN
            RETURN false;
        END IF;
        PERFORM pg_sleep(0.01);
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.await_map(interval) IS
  'Waits until every transaction of this database older than the call has ended (the router''s own sessions aside); false after the timeout.';

-- == Primary side ==

-- Opens dblink connection conn to a follower and checks that it reaches the router
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
    PERFORM snowflake_id_router.connect(conn, snowflake_id_router.connect_options() || ' ' || r.connstr);
    found_identity := snowflake_id_router.remote_identity(conn, router_name);
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
  'Opens dblink connection conn to a follower router and checks that it reaches the database registered; 55000 otherwise.';

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
    -- The map as committed, read through the loopback connection in one statement (one
    -- snapshot: the version and the map it counts): a follower never gets a map change
    -- that the caller's transaction may yet roll back.
    PERFORM snowflake_id_router.connect_self('snowflake_id_router_push_self');
    map := snowflake_id_router.fetch('snowflake_id_router_push_self', $q$
        SELECT jsonb_build_object(
            'version', snowflake_id_router.map_version(),
            'nodes', (SELECT coalesce(jsonb_agg(to_jsonb(n) ORDER BY n.name), '[]') FROM snowflake_id_router.node n),
            'shards', (SELECT coalesce(array_agg(s.shard ORDER BY s.shard), '{}') FROM snowflake_id_router.shard s)::text,
            'owners', (SELECT coalesce(array_agg(s.node ORDER BY s.shard), '{}') FROM snowflake_id_router.shard s)::text)::text$q$)::jsonb;
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_push_self');
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
    PERFORM snowflake_id_router.connect('snowflake_id_router_add', snowflake_id_router.connect_options() || ' ' || normal);
    found_identity := snowflake_id_router.remote_identity('snowflake_id_router_add', name);
    IF found_identity = snowflake_id_node.identity() THEN
        RAISE EXCEPTION 'router % is this router database itself (identity %)', quote_literal(name), found_identity
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    SELECT format('node %s', quote_literal(n.name)) INTO other FROM snowflake_id_router.node n WHERE n.identity = found_identity;
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

CREATE OR REPLACE VIEW router_status AS
    SELECT r.name, 'follower'::text AS role, r.connstr, r.map_version,
           r.map_version >= snowflake_id_router.map_version() AS current, r.behind_since, r.error
      FROM snowflake_id_router.router r
    UNION ALL
    SELECT f.description, 'primary', NULL, f.map_version, NULL, NULL, NULL
      FROM snowflake_id_router.follows f;
COMMENT ON VIEW router_status IS
  'On the primary: each follower router, the map version it routes by, whether that is current, since when it is behind and why. On a follower: its primary.';

-- ==== router/sql/54_alter_shards.sql ====
-- == Schema changes on every shard of every node ==
--
-- alter_shards(ddl) runs one statement on the template schema and every shard's schema of
-- every node, %I standing for the schema. Each node applies it in one transaction
-- (snowflake_id_node.schema_change_apply), so a node is all-old or all-new, and records it
-- there under the change's key in the same transaction. The router records the change and
-- each node's state through the loopback connection as it goes: a run that is interrupted
-- (its session ended) or fails on a node resumes where it stopped when alter_shards is
-- called again with the same statement.
--
-- The router-wide schema-change lock: alter_shards holds it alone, moves and rebalances
-- share it (snowflake_id_router.lock_schema_changes), so no move runs while a change is
-- half-way across the nodes. A move between two nodes that differ anyway (a change that
-- is incomplete, a node skipped) is refused by the move's own template check.

-- Takes the router-wide schema-change lock to the end of the transaction: exclusive for
-- alter_shards, shared for a move or rebalance. Waits at most schema_change_timeout for the
-- holders (55P03 after it).
CREATE OR REPLACE FUNCTION snowflake_id_router.lock_schema_changes(exclusive boolean) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    timeout interval := snowflake_id_router.setting('schema_change_timeout')::interval;
BEGIN
    IF exclusive THEN
        IF pg_try_advisory_xact_lock(hashtext('snowflake_id_router.schema_change'), 0) THEN
            RETURN;
        END IF;
    ELSIF pg_try_advisory_xact_lock_shared(hashtext('snowflake_id_router.schema_change'), 0) THEN
        RETURN;
    END IF;
    -- Queued behind the holders (a waiting alter_shards keeps new moves out meanwhile).
    BEGIN
        PERFORM set_config('lock_timeout', (extract(epoch FROM timeout) * 1000)::bigint::text, true);
        IF exclusive THEN
            PERFORM pg_advisory_xact_lock(hashtext('snowflake_id_router.schema_change'), 0);
        ELSE
            PERFORM pg_advisory_xact_lock_shared(hashtext('snowflake_id_router.schema_change'), 0);
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        RAISE EXCEPTION '%', CASE WHEN exclusive THEN format('moves still run after %s', timeout)
                                  ELSE format('a schema change (alter_shards) still runs after %s', timeout) END
            USING ERRCODE = 'lock_not_available',
                  HINT = 'See move_status and schema_change_status; schema_change_timeout (snowflake_id_router.setting) bounds the wait.';
    END;
    -- (The block's lock_timeout went with it; the lock stays with the transaction.)
END
$$;
COMMENT ON FUNCTION snowflake_id_router.lock_schema_changes(boolean) IS
  'The router-wide schema-change lock, to the end of the transaction: exclusive (alter_shards) or shared (moves); 55P03 after schema_change_timeout.';

-- The key under which a node records a change: this router's short identity and the change.
CREATE OR REPLACE FUNCTION snowflake_id_router.schema_change_key(change bigint) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN left(md5(snowflake_id_node.identity()), 8) || '/' || change;
COMMENT ON FUNCTION snowflake_id_router.schema_change_key(bigint) IS
  'The key a node records a change of this router under: <first 8 hex digits of md5(identity)>/<change>.';

CREATE OR REPLACE FUNCTION alter_shards(ddl text, template text DEFAULT 'tpl', skip_unreachable boolean DEFAULT false)
RETURNS TABLE (node text, state text, schemas integer, seconds numeric)
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cid bigint;            -- the change: its id in snowflake_id_router.schema_change
    key text;
    tag text;
    lock_timeout text;
    todo text[];           -- nodes this call applies the change to, in name order
    skipped text[] := '{}';
    n text;
    conn text;
    resumed boolean;
    earlier record;
    t0 timestamptz;
    took numeric;
    done_count integer;
    attempt integer;
    st text;
    msg text;
    hnt text;
    had text[] := '{}';     -- nodes that had the change before this call
    rows_node text[] := '{}';
    rows_state text[] := '{}';
    rows_schemas integer[] := '{}';
    rows_seconds numeric[] := '{}';
BEGIN
    IF ddl IS NULL OR template IS NULL OR skip_unreachable IS NULL THEN
        RAISE EXCEPTION 'alter_shards: ddl, template and skip_unreachable must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM snowflake_id_router.require_primary('alter_shards');
    -- The statement runs as a superuser on every node: granting EXECUTE would hand that out.
    IF NOT (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user) THEN
        RAISE EXCEPTION 'alter_shards runs its statement as a superuser on every node: only a superuser may call it'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF template = '' OR octet_length(template) > 63 THEN
        RAISE EXCEPTION 'template schema name % is invalid', quote_literal(template) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Refused here, before any node is reached: placeholders, one statement, its kind.
    tag := snowflake_id_node.ddl_statement(snowflake_id_node.ddl_for(ddl, template));
    lock_timeout := snowflake_id_router.setting('lock_timeout');

    PERFORM snowflake_id_router.lock_schema_changes(true);
    PERFORM snowflake_id_router.connect_self('snowflake_id_router_self');
    -- The same statement, unfinished: this call resumes it.
    SELECT c.id INTO cid FROM snowflake_id_router.schema_change c
     WHERE c.state IN ('running', 'incomplete') AND c.ddl = alter_shards.ddl AND c.template = alter_shards.template
     ORDER BY c.id DESC LIMIT 1;
    IF cid IS NULL THEN
        SELECT array_agg(x.name ORDER BY x.name) INTO todo FROM snowflake_id_router.node x;
    ELSE
        SELECT array_agg(cn.node ORDER BY cn.node) INTO todo FROM snowflake_id_router.schema_change_node cn
         WHERE cn.change = cid AND cn.state <> 'done'
           AND cn.node IN (SELECT x.name FROM snowflake_id_router.node x);
        SELECT coalesce(array_agg(cn.node ORDER BY cn.node), '{}') INTO had FROM snowflake_id_router.schema_change_node cn
         WHERE cn.change = cid AND cn.state = 'done';
    END IF;
    todo := coalesce(todo, '{}');

    -- Every node reached first: one that cannot be is refused before anything changes,
    -- unless skipped.
    FOREACH n IN ARRAY todo LOOP
        conn := 'snowflake_id_router_ddl_' || n;
        BEGIN
            PERFORM snowflake_id_router.connect_node(conn, n);
            -- A node session whose router session is gone stops within a second (its
            -- change rolled back), rather than holding the node's locks to the end.
            PERFORM snowflake_id_router.exec(conn, 'SET client_connection_check_interval = ''1s''');
        EXCEPTION WHEN connection_exception THEN
            skipped := skipped || n;
        END;
    END LOOP;
    IF cardinality(skipped) > 0 AND NOT skip_unreachable THEN
        RAISE EXCEPTION 'alter_shards: node(s) % cannot be reached; no node was changed', array_to_string(skipped, ', ')
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Bring them back, or call alter_shards(..., skip_unreachable => true): the nodes skipped are listed as behind (schema_change_status) and get the change when alter_shards is called again with the same statement.';
    END IF;
    todo := ARRAY(SELECT x FROM unnest(todo) x WHERE x <> ALL (skipped) ORDER BY x);

    -- Changes run in order on each node: an earlier one it has not got comes first.
    SELECT c.id, c.ddl, cn.node INTO earlier
      FROM snowflake_id_router.schema_change c JOIN snowflake_id_router.schema_change_node cn ON cn.change = c.id
     WHERE c.state IN ('running', 'incomplete') AND (cid IS NULL OR c.id < cid) AND cn.state <> 'done'
       AND cn.node = ANY (todo)
     ORDER BY c.id, cn.node LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'node % has not got schema change % yet: it comes first', quote_literal(earlier.node), earlier.id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('Change %s: %s', earlier.id, earlier.ddl),
                  HINT = format('Finish it by calling alter_shards with that statement again, or give it up: SELECT abandon_schema_change(%s).', earlier.id);
    END IF;

    -- Checked on every node before any changes: the statement on each template (tried and
    -- undone), the room in each lock table. A new change is recorded only once they pass.
    IF cid IS NULL THEN
        -- (Numbered through the loopback: the caller's snapshot may be older.)
        cid := snowflake_id_router.fetch('snowflake_id_router_self',
            'SELECT (coalesce(max(id), 0) + 1)::text FROM snowflake_id_router.schema_change')::bigint;
        resumed := false;
    ELSE
        RAISE NOTICE 'alter_shards resumes schema change %', cid;
        resumed := true;
    END IF;
    key := snowflake_id_router.schema_change_key(cid);
    FOREACH n IN ARRAY todo LOOP
        attempt := 1;
        LOOP
            BEGIN
                PERFORM snowflake_id_router.fetch('snowflake_id_router_ddl_' || n, format(
                    'SELECT snowflake_id_node.schema_change_check(%L, %L, %L, %L)', key, ddl, template, lock_timeout));
                EXIT;
            EXCEPTION WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hnt = PG_EXCEPTION_HINT;
                -- A lock not had in time (the node session of an interrupted call may still
                -- be rolling back): again, a few times.
                IF st IN ('55P03', '40P01') AND attempt < 5 THEN
                    attempt := attempt + 1;
                    PERFORM pg_sleep(0.5 * attempt);
                    CONTINUE;
                END IF;
                IF resumed THEN
                    PERFORM snowflake_id_router.exec('snowflake_id_router_self', format(
                        $q$UPDATE snowflake_id_router.schema_change SET error = %L WHERE id = %s$q$,
                        format('refused on node %s: %s', n, msg), cid));
                END IF;
                RAISE EXCEPTION 'alter_shards: node % refuses the change: %; no node was changed by this call', quote_literal(n), msg
                    USING ERRCODE = st, HINT = coalesce(nullif(hnt, ''), 'Each node tries it on its template, and undoes it, before any node applies it.');
            END;
        END LOOP;
    END LOOP;
    IF NOT resumed THEN
        PERFORM snowflake_id_router.exec('snowflake_id_router_self', format(
            $q$INSERT INTO snowflake_id_router.schema_change (id, ddl, template, state, started, started_by)
               VALUES (%s, %L, %L, 'running', now(), %L);
               INSERT INTO snowflake_id_router.schema_change_node (change, node, state)
               SELECT %s, x, CASE WHEN x = ANY (%L::text[]) THEN 'skipped' ELSE 'pending' END FROM unnest(%L::text[]) x$q$,
            cid, ddl, template, session_user, cid, skipped, todo || skipped));
    ELSE
        PERFORM snowflake_id_router.exec('snowflake_id_router_self', format(
            $q$UPDATE snowflake_id_router.schema_change SET state = 'running', finished = NULL, error = NULL WHERE id = %s;
               UPDATE snowflake_id_router.schema_change_node SET state = 'skipped' WHERE change = %s AND node = ANY (%L::text[])$q$,
            cid, cid, skipped));
    END IF;

    -- Node by node, each in one transaction, each recorded as it ends.
    FOREACH n IN ARRAY todo LOOP
        t0 := clock_timestamp();
        attempt := 1;
        LOOP
            BEGIN
                done_count := snowflake_id_router.fetch('snowflake_id_router_ddl_' || n, format(
                    'SELECT snowflake_id_node.schema_change_apply(%L, %L, %L, %L)::text', key, ddl, template, lock_timeout))::integer;
                EXIT;
            EXCEPTION WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hnt = PG_EXCEPTION_HINT;
                -- A lock not had in time, or a deadlock with the node's own sessions: the
                -- node rolled back; again, a few times.
                IF st IN ('55P03', '40P01') AND attempt < 5 THEN
                    attempt := attempt + 1;
                    PERFORM pg_sleep(0.5 * attempt);
                    CONTINUE;
                END IF;
                PERFORM snowflake_id_router.exec('snowflake_id_router_self', format(
                    $q$UPDATE snowflake_id_router.schema_change_node SET state = 'failed', at = now(), error = %L WHERE change = %s AND node = %L;
                       UPDATE snowflake_id_router.schema_change SET state = 'incomplete', finished = now(), error = %L WHERE id = %s$q$,
                    msg, cid, n, format('failed on node %s: %s', n, msg), cid));
                RAISE EXCEPTION 'schema change % failed on node %: %', cid, quote_literal(n), msg
                    USING ERRCODE = st,
                          DETAIL = format('Each node has all of the change or none. With it: %s. Without it: %s.',
                              coalesce((SELECT string_agg(quote_literal(x), ', ' ORDER BY x) FROM unnest(had || rows_node) x), 'none'),
                              (SELECT string_agg(quote_literal(x), ', ' ORDER BY x) FROM unnest(todo || skipped) x WHERE x <> ALL (rows_node))),
                          HINT = coalesce(nullif(hnt, '') || ' ', '') || 'Fix the cause and call alter_shards with the same statement again: it resumes there.';
            END;
        END LOOP;
        took := round(extract(epoch FROM clock_timestamp() - t0)::numeric, 3);
        PERFORM snowflake_id_router.exec('snowflake_id_router_self', format(
            $q$UPDATE snowflake_id_router.schema_change_node SET state = 'done', schemas = %s, seconds = %s, at = now(), error = NULL
                WHERE change = %s AND node = %L$q$,
            done_count, took, cid, n));
        rows_node := rows_node || n;
        rows_state := rows_state || 'done'::text;
        rows_schemas := rows_schemas || done_count;
        rows_seconds := rows_seconds || took;
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_ddl_' || n);
    END LOOP;
    PERFORM snowflake_id_router.exec('snowflake_id_router_self', format(
        $q$UPDATE snowflake_id_router.schema_change SET finished = now(),
               state = CASE WHEN EXISTS (SELECT FROM snowflake_id_router.schema_change_node WHERE change = %s AND state <> 'done')
                            THEN 'incomplete' ELSE 'done' END
            WHERE id = %s$q$, cid, cid));
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_self');
    IF cardinality(skipped) > 0 THEN
        RAISE WARNING 'schema change %: node(s) % skipped: they are behind', cid, array_to_string(skipped, ', ')
            USING HINT = 'Once they are back, call alter_shards with the same statement again.';
    END IF;
    RETURN QUERY SELECT x.node, x.state, x.schemas, x.seconds
                   FROM unnest(rows_node || skipped, rows_state || array_fill('skipped'::text, ARRAY[cardinality(skipped)]),
                               rows_schemas, rows_seconds) x(node, state, schemas, seconds)
                  ORDER BY x.node;
END
$$;
COMMENT ON FUNCTION alter_shards(text, text, boolean) IS
  'Runs one DDL statement (%I for the schema) on the template and every shard of every node, each node in one transaction; resumes an unfinished run of the same statement. Superusers only.';

CREATE OR REPLACE FUNCTION abandon_schema_change(change bigint) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_router.require_primary('abandon_schema_change');
    PERFORM snowflake_id_router.lock_schema_changes(true);
    UPDATE snowflake_id_router.schema_change c SET state = 'abandoned', finished = now()
     WHERE c.id = change AND c.state IN ('running', 'incomplete');
    IF NOT FOUND THEN
        RAISE EXCEPTION 'schema change % is not unfinished', change USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
END
$$;
COMMENT ON FUNCTION abandon_schema_change(bigint) IS
  'Gives up an unfinished schema change: the nodes keep what they have (see schema_change_status), and later changes may run.';

CREATE OR REPLACE VIEW schema_change_status AS
    SELECT c.id AS change, c.ddl, c.template,
           CASE WHEN c.state = 'running' AND NOT EXISTS (
                    SELECT FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                       AND l.classid::integer = hashtext('snowflake_id_router.schema_change') AND l.objid = 0 AND l.mode = 'ExclusiveLock')
                THEN 'interrupted' ELSE c.state END AS state,
           cn.node, cn.state AS node_state, cn.schemas, cn.seconds, cn.error,
           c.started, c.finished, c.started_by
      FROM snowflake_id_router.schema_change c JOIN snowflake_id_router.schema_change_node cn ON cn.change = c.id
     ORDER BY c.id, cn.node;
COMMENT ON VIEW schema_change_status IS
  'Each alter_shards change on each node: running, interrupted (call alter_shards again), done, incomplete (nodes failed or skipped: behind) or abandoned.';

-- ==== router/sql/56_template_status.sql ====
-- == template_status: the template on every node ==

-- Per node: the fingerprint of the template (snowflake_id_node.fingerprint: tables,
-- columns and types, defaults, constraints, indexes) as a short hash, whether it is the
-- one most nodes have, and if not its first difference from it; the schema changes the
-- node has not got (schema_change_status); with shards => true, how many of its shards
-- differ from its template, and the first difference (one fingerprint per shard: seconds
-- for thousands of shards). A node that cannot be reached is listed with the error.
CREATE OR REPLACE FUNCTION template_status(template text DEFAULT 'tpl', shards boolean DEFAULT false)
RETURNS TABLE (node text, fingerprint text, matches boolean, difference text, changes_behind integer,
               shards_checked integer, shards_differing integer, shard_difference text, error text)
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n text;
    fp text[];
    got text[] := '{}';
    fps text[] := '{}';          -- each node's fingerprint, as text (an array of arrays would need equal lengths)
    errs text[] := '{}';
    checked integer[] := '{}';
    differing integer[] := '{}';
    firsts text[] := '{}';
    reference text;              -- the fingerprint most nodes have
    reference_node text;
    u text[];
BEGIN
    IF template IS NULL OR shards IS NULL THEN
        RAISE EXCEPTION 'template_status: template and shards must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    FOR n IN SELECT x.name FROM snowflake_id_router.node x ORDER BY x.name LOOP
        got := got || n;
        BEGIN
            PERFORM snowflake_id_router.connect_node('snowflake_id_router_status', n);
            fps := fps || snowflake_id_router.fetch('snowflake_id_router_status', format(
                'SELECT snowflake_id_node.fingerprint(%L)::text', template));
            errs := errs || NULL::text;
            IF shards THEN
                u := snowflake_id_router.fetch('snowflake_id_router_status', format(
                    'SELECT ARRAY[checked::text, differing::text, first]::text FROM snowflake_id_node.shards_unlike(%L)', template));
                checked := checked || u[1]::integer;
                differing := differing || u[2]::integer;
                firsts := firsts || u[3];
            ELSE
                checked := checked || NULL::integer;
                differing := differing || NULL::integer;
                firsts := firsts || NULL::text;
            END IF;
            PERFORM snowflake_id_router.disconnect('snowflake_id_router_status');
        EXCEPTION WHEN OTHERS THEN
            PERFORM snowflake_id_router.disconnect('snowflake_id_router_status');
            fps := fps || NULL::text;
            errs := errs || SQLERRM;
            checked := checked || NULL::integer;
            differing := differing || NULL::integer;
            firsts := firsts || NULL::text;
        END;
    END LOOP;
    -- (A tie goes to the fingerprint of the first node by name.)
    SELECT x.f INTO reference FROM unnest(fps) WITH ORDINALITY x(f, i) WHERE x.f IS NOT NULL
     GROUP BY x.f ORDER BY count(*) DESC, min(x.i) LIMIT 1;
    reference_node := got[array_position(fps, reference)];
    RETURN QUERY
        SELECT g.n, left(encode(sha256(convert_to(array_to_string(g.fp::text[], E'\n'), 'UTF8')), 'hex'), 16),
               g.fp = reference,
               CASE WHEN g.fp <> reference THEN snowflake_id_node.fingerprint_difference(g.fp::text[], reference::text[],
                   format('node %s', quote_literal(g.n)), format('node %s', quote_literal(reference_node))) END,
               (SELECT count(*)::integer FROM snowflake_id_router.schema_change c JOIN snowflake_id_router.schema_change_node cn ON cn.change = c.id
                 WHERE cn.node = g.n AND cn.state <> 'done' AND c.state IN ('running', 'incomplete') AND c.template = template_status.template),
               g.checked, g.differing, g.first, g.err
          FROM unnest(got, fps, errs, checked, differing, firsts) g(n, fp, err, checked, differing, first)
         ORDER BY g.n;
END
$$;
COMMENT ON FUNCTION template_status(text, boolean) IS
  'Per node: the template''s fingerprint, whether it is the one most nodes have and its first difference, schema changes not yet got; with shards, the shards that differ from it.';

-- ==== router/sql/90_grants.sql ====
REVOKE ALL ON FUNCTION add_node(text, text), assign_shards(integer, integer, text),
    move_shard(integer, text, text) FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_router FROM PUBLIC;
REVOKE ALL ON shard_map FROM PUBLIC;
REVOKE ALL ON FUNCTION alter_shards(text, text, boolean), abandon_schema_change(bigint),
    template_status(text, boolean), add_router(text, text), remove_router(text) FROM PUBLIC;
REVOKE ALL ON schema_change_status, router_status FROM PUBLIC;
