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
-- passwords in them: put passwords in ~/.pgpass of the router's (and nodes') server user.
-- Not in a user mapping: whoever may use the server (every routing role) could then log in
-- with them through dblink (docs/security.md, "The router").

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
    map_version bigint,         -- the map's version with the flip (snowflake_id_router.map_version())
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
        CHECK (name IN ('lock_timeout', 'copy_timeout', 'cutover_timeout', 'cleanup_timeout', 'status_timeout',
                        'schema_change_timeout', 'self_connstr')),
    value text NOT NULL,
    -- A timeout of 0 would mean no timeout at all.
    CHECK (name = 'self_connstr' OR (value::interval > interval '0' AND value::interval <= interval '1 day'))
);
COMMENT ON TABLE snowflake_id_router.setting IS
  'Overrides of the router''s settings (timeouts, the loopback connect string); writable by the extension''s owner only.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.setting', '');

-- ==== router/sql/02_operations.sql ====
-- Rebalances and drains (rebalance(), drain_node()): one row each, and the batches of its
-- plan. Each runs in its caller's session as a procedure that commits after every batch
-- (with parallel_moves > 1, its batches move in loopback sessions it opens, one each), so
-- these rows show its progress to every session, and outlive the session: a call after an
-- interruption (the session terminated, the router restarted, rebalance_stop(), a failed
-- batch) resumes the unfinished one. A row in state running whose session (pid and
-- session_start, as pg_stat_activity shows them) is gone was interrupted: nothing of the
-- rebalance's stays in its caller's session between its steps, no lock or connection, and
-- no other role can fake a running one.
CREATE TABLE snowflake_id_router.rebalance (
    id integer PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('rebalance', 'drain')),
    node text,                                   -- the node drained (not a reference: history outlives it)
    strategy text NOT NULL CHECK (strategy IN ('by_shard_count', 'by_disk_size')),
    batch_size integer NOT NULL CHECK (batch_size BETWEEN 1 AND 8192),
    parallel_moves integer NOT NULL DEFAULT 1 CHECK (parallel_moves BETWEEN 1 AND 8),  -- batches moving at once
    template text NOT NULL,
    state text NOT NULL CHECK (state IN ('running', 'stopped', 'failed', 'done', 'abandoned')),
    pid integer,                                 -- the session that runs (or last ran) it
    session_start timestamptz,                   -- that session's backend_start (pids are reused)
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
    bytes bigint,                                -- at planning time (by_disk_size only)
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

-- ==== router/sql/10_connections.sql ====
-- == Connections: the router's own, in snowflake_id's private registry ==
--
-- Every connection the router makes (to its nodes, to other routers, to itself) lives in
-- snowflake_id's registry (snowflake_id_node.remote_*, src/pg/remote.rs), not in dblink's
-- session-wide names: a connection belongs to the role that opened it (the extension's
-- owner, inside the router's SECURITY DEFINER functions) and no other role or code can use
-- it; it is closed with the subtransaction that opened it if that aborts, and at the end of
-- the transaction unless kept (superuser sessions only: release_connections); its session
-- starts with the router's settings, given at connection time. Every wait is interruptible
-- and bounded by the monotonic clock (snowflake_id_node.monotonic()).

-- Opens (or reopens) connection conn by connstr; peer names it in messages. Waits at most
-- the connect string's connect_timeout (10 s without one).
CREATE OR REPLACE FUNCTION snowflake_id_router.connect(conn text, connstr text, peer text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    options text;
    timeout text;
BEGIN
    PERFORM snowflake_id_node.remote_close(conn);
    SELECT max(c.value) FILTER (WHERE c.keyword = 'options'), max(c.value) FILTER (WHERE c.keyword = 'connect_timeout')
      INTO options, timeout FROM snowflake_id_node.conninfo(connstr) c;
    PERFORM snowflake_id_node.remote_open(conn, connstr, options, peer,
        CASE WHEN timeout ~ '^\s*[0-9]{1,6}\s*$' AND timeout::integer > 0 THEN greatest(timeout::integer, 2) ELSE 10 END);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.connect(text, text, text) IS
  'Opens (or reopens) the router''s connection conn by connstr (its session set up with the router''s settings); peer names it in messages.';

-- (PL/pgSQL: conn_place is defined further on.)
CREATE OR REPLACE FUNCTION snowflake_id_router.connect(conn text, connstr text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_router.connect(conn, connstr, snowflake_id_router.conn_place(conn));
END
$$;
COMMENT ON FUNCTION snowflake_id_router.connect(text, text) IS
  'Opens (or reopens) the router''s connection conn by connstr, named in messages by conn_place(conn).';

CREATE OR REPLACE FUNCTION snowflake_id_router.disconnect(conn text) RETURNS void
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT snowflake_id_node.remote_close(conn);
END;
COMMENT ON FUNCTION snowflake_id_router.disconnect(text) IS 'Closes the router''s connection conn if open.';

CREATE OR REPLACE FUNCTION snowflake_id_router.fetch(conn text, sql text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_node.remote_send(conn, sql);
    RETURN snowflake_id_node.remote_receive(conn, 86400, NULL);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.fetch(text, text) IS
  'First column of the first row of sql (one text column) run on the router''s connection conn; NULL if no row.';

-- sql on conn, waited for without a bound of its own (interruptibly): for the steps whose
-- length is the statement's (a schema change); remote errors keep their SQLSTATE.
CREATE OR REPLACE FUNCTION snowflake_id_router.exec(conn text, sql text) RETURNS text
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_router.fetch(conn, sql);
COMMENT ON FUNCTION snowflake_id_router.exec(text, text) IS
  'Runs sql on the router''s connection conn (remote errors keep their SQLSTATE); the first column of its first row.';

-- Polls sql (returning one boolean) on conn until it is true; 57014 after timeout.
CREATE OR REPLACE FUNCTION snowflake_id_router.wait_until(conn text, sql text, timeout interval, what text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := snowflake_id_node.monotonic() + timeout;
BEGIN
    WHILE snowflake_id_node.monotonic() < deadline LOOP
        IF coalesce(snowflake_id_router.fetch(conn, sql)::boolean, false) THEN
            RETURN;
        END IF;
        PERFORM snowflake_id_node.sleep(0.002);
    END LOOP;
    RAISE EXCEPTION '% did not happen within %', what, timeout USING ERRCODE = 'query_canceled';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.wait_until(text, text, interval, text) IS
  'Polls a boolean query on the router''s connection conn until true; 57014 after the timeout.';

-- A libpq connect string value, quoted.
CREATE OR REPLACE FUNCTION snowflake_id_router.conn_value(v text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN '''' || replace(replace(v, '\', '\\'), '''', '\''') || '''';
COMMENT ON FUNCTION snowflake_id_router.conn_value(text) IS 'A libpq connect string value, quoted.';

-- A connect string as libpq reads it (PQconninfoParse, through snowflake_id), each value
-- quoted: whatever PL/Proxy, the router or a subscription appends to it stays an option of its
-- own. Secrets are refused: connect strings are readable by every role. So is a service
-- (service, servicefile: an entry of a connection service file, which libpq reads only when
-- it connects): it can hold a user and a password, which would pass the checks here and
-- the callers' (a user's warning) unseen.
CREATE OR REPLACE FUNCTION snowflake_id_router.normalize_connstr(connstr text) RETURNS text
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    secret text;
    service text;
    normal text;
BEGIN
    SELECT string_agg(c.keyword, ', ') FILTER (WHERE c.secret),
           string_agg(c.keyword, ', ') FILTER (WHERE c.keyword IN ('service', 'servicefile')),
           string_agg(c.keyword || '=' || snowflake_id_router.conn_value(c.value), ' ')
      INTO secret, service, normal FROM snowflake_id_node.conninfo(connstr) c;
    IF secret IS NOT NULL THEN
        RAISE EXCEPTION 'the connect string holds a secret (%)', secret
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Connect strings are readable by every role (pg_foreign_server.srvoptions).',
                  HINT = 'Put the password in ~/.pgpass of the router''s server user (see docs/security.md).';
    END IF;
    IF service IS NOT NULL THEN
        RAISE EXCEPTION 'the connect string names a connection service (%)', service
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A service file entry can hold a user and a password, which the router would not see.',
                  HINT = 'Give the options directly (host, port, dbname ...), the password in ~/.pgpass of the router''s server user.';
    END IF;
    IF normal IS NULL THEN
        RAISE EXCEPTION 'the connect string is empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN normal;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.normalize_connstr(text) IS
  'A connect string as libpq reads it, as key=''value'' pairs; 22023 for a secret, a service or what libpq refuses.';

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
-- win where they repeat one; the registry adds the session's settings and, unless the node's
-- names one, the application name 'snowflake_id_router <pid>'): TCP keepalives, so that a
-- node whose network to the router is cut ends the session, and with it the node locks it
-- holds (docs/cluster-design.md: proof of life).
CREATE OR REPLACE FUNCTION snowflake_id_router.connect_options() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN 'keepalives=1 keepalives_idle=5 keepalives_interval=2 keepalives_count=3 connect_timeout=10';
COMMENT ON FUNCTION snowflake_id_router.connect_options() IS
  'Options of every router connection to a node: TCP keepalives, connect timeout.';

-- Opens connection conn to a node and checks that it reaches the database the node
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
    PERFORM snowflake_id_router.connect(conn, snowflake_id_router.connect_options() || ' ' || n.connstr,
                                        format('node %L', node));
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
  'Opens connection conn to a node and checks that it reaches the database the node is registered as; 55000 otherwise.';

-- The identity of what connection conn reaches (a node with snowflake_id 0.3.0).
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
  'The identity (system identifier/database OID) of what a connection reaches; 55000 if snowflake_id is older than 0.3.0 there.';

-- Opens the loopback connection conn to this router database (setting self_connstr) and
-- checks that it reaches this very database: map flips and move records go through it.
CREATE OR REPLACE FUNCTION snowflake_id_router.connect_self(conn text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    found_identity text;
BEGIN
    PERFORM snowflake_id_router.connect(conn, snowflake_id_router.setting('self_connstr'), 'the router');
    found_identity := snowflake_id_router.remote_identity(conn, 'self');
    PERFORM snowflake_id_router.mark_router_session(conn);
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
  'Opens the loopback connection to this router database and checks that it reaches this very database.';

-- The router's own sessions in a router database (its loopback connections, a rebalance's
-- workers, the primary's sessions on a follower) hold this owner-only lock, shared: the
-- waits for older transactions (wait_for_older_transactions, await_map) pass them over.
-- An application_name proves nothing (any session sets its own); this lock, only the
-- extension owner's code can take (snowflake_id_node.own_lock).
CREATE OR REPLACE FUNCTION snowflake_id_router.session_lock() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN hashtext('snowflake_id_router.session');
COMMENT ON FUNCTION snowflake_id_router.session_lock() IS
  'Class of the owner-only lock (class, 0) that the router''s own sessions in a router database hold, shared.';

CREATE OR REPLACE FUNCTION snowflake_id_router.mark_router_session(conn text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_router.fetch(conn, format('SELECT snowflake_id_node.own_lock(%s, 0, true, true, false)::text',
                                                   snowflake_id_router.session_lock()));
END
$$;
COMMENT ON FUNCTION snowflake_id_router.mark_router_session(text) IS
  'Marks the session behind connection conn (in a router database) as one of the router''s own.';

-- The sessions of this database that are the router's own (mark_router_session).
CREATE OR REPLACE FUNCTION snowflake_id_router.router_sessions() RETURNS integer[]
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN ARRAY(SELECT l.pid FROM pg_locks l
              WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 3
                AND l.classid = snowflake_id_router.session_lock()::oid AND l.objid = 0
                AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()));
COMMENT ON FUNCTION snowflake_id_router.router_sessions() IS
  'The pids of the router''s own sessions in this database (holding the session lock).';

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
    PERFORM snowflake_id_router.connect('snowflake_id_router_add', snowflake_id_router.connect_options() || ' ' || normal,
                                        format('node %L', name));
    found_identity := snowflake_id_router.remote_identity('snowflake_id_router_add', name);
    router := snowflake_id_router.fetch('snowflake_id_router_add',
        $q$SELECT EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname = 'snowflake_id_router')::text$q$)::boolean;
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_add');
    PERFORM snowflake_id_router.check_new_identity(name, found_identity);
    -- Not a router database (a follower, or any other): shards mapped there would make it
    -- route their calls to itself, or to its own map's nodes.
    IF router THEN
        RAISE EXCEPTION 'node % is a router database (it has the extension snowflake_id_router)', quote_literal(name)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A node is a database of data (snowflake_id and the shards); another router database follows this one with add_router(name, connstr).';
    END IF;
    IF EXISTS (SELECT FROM snowflake_id_node.conninfo(normal) c WHERE c.keyword = 'user') THEN
        RAISE WARNING 'the connect string of node % names a user: every role''s routed calls will connect as %',
            quote_literal(name), (SELECT c.value FROM snowflake_id_node.conninfo(normal) c WHERE c.keyword = 'user')
            USING DETAIL = 'PL/Proxy connects as the calling role only when the connect string names no user.';
    END IF;
    INSERT INTO snowflake_id_router.node (name, connstr, identity) VALUES (name, normal, found_identity);
END
$$;
COMMENT ON FUNCTION add_node(text, text) IS
  'Registers a data node by name and libpq connect string (no password: use ~/.pgpass); it must be reachable, not a router database, and is known by its identity.';

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


-- ==== router/sql/31_remote.sql ====
-- == Calls on nodes and on the router itself, every one bounded ==
--
-- A move talks to its nodes through connections named by node_conn_name (one per node per
-- call, reused by the repairs the move runs) and to its own database through 'sfid:self',
-- the loopback connection that commits each step's record and the flip. Every call is
-- sent, then waited for against a deadline of the monotonic clock, then cancelled; the wait
-- is interruptible, so a mover waiting on a node can always be cancelled or terminated, and
-- its node sessions, which hold its shard locks, end with it (10_connections.sql says whose
-- connections these are and when they close).

-- A named connection of this call (or kept by this superuser's session): the one open under
-- that name, or a new one (to node, identity checked; to this router database when node is
-- NULL) set up by settings, a query run once.
CREATE OR REPLACE FUNCTION snowflake_id_router.open_conn(conn text, node text, settings text, what text) RETURNS text
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    IF conn = ANY (snowflake_id_node.remote_names()) THEN
        RETURN conn;
    END IF;
    IF node IS NULL THEN
        PERFORM snowflake_id_router.connect_self(conn);
    ELSE
        PERFORM snowflake_id_router.connect_node(conn, node);
    END IF;
    PERFORM snowflake_id_router.call(conn, settings, interval '10 s', what);
    RETURN conn;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.open_conn(text, text, text, text) IS
  'The connection conn of this session, opened (to node, or to this router when NULL) and set up by settings if not yet open.';

-- The connection to node. Its session watches the router: if the mover dies, it ends (and
-- its locks go) within seconds, even while it runs a statement or the network is cut.
-- The name of this session's connection to a node: never the loopback's ('sfid:self', and a
-- node may be named 'self'), and of one length whatever the node's name.
CREATE OR REPLACE FUNCTION snowflake_id_router.node_conn_name(node text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN 'sfid:node:' || md5(node);
COMMENT ON FUNCTION snowflake_id_router.node_conn_name(text) IS
  'The name of this session''s connection to a node: sfid:node:<md5 of its name>.';

-- Where a connection leads, for messages: node '<name>', or the router.
CREATE OR REPLACE FUNCTION snowflake_id_router.conn_place(conn text) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN coalesce((SELECT format('node %L', n.name) FROM snowflake_id_router.node n
                  WHERE snowflake_id_router.node_conn_name(n.name) = conn), 'the router');
COMMENT ON FUNCTION snowflake_id_router.conn_place(text) IS
  'What a connection of this session leads to, for messages: node ''<name>'' or the router.';

CREATE OR REPLACE FUNCTION snowflake_id_router.node_conn(node text) RETURNS text
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_router.open_conn(snowflake_id_router.node_conn_name(node), node, format(
    $q$SELECT concat_ws(' ', set_config('application_name', %L, false), set_config('client_connection_check_interval', '1s', false),
              set_config('tcp_keepalives_idle', '5', false), set_config('tcp_keepalives_interval', '2', false),
              set_config('tcp_keepalives_count', '3', false), set_config('statement_timeout', '0', false),
              set_config('lock_timeout', '0', false), set_config('idle_in_transaction_session_timeout', '0', false))$q$,
    'snowflake_id_router mover ' || pg_backend_pid()), format('setting up the session on node %L', node));
COMMENT ON FUNCTION snowflake_id_router.node_conn(text) IS
  'The connection of this session to node (node_conn_name; opened, identity checked, if not yet open).';

-- The loopback connection to this router database (connect_self checks it reaches it).
-- (PL/pgSQL: the settings it reads are defined further on.)
CREATE OR REPLACE FUNCTION snowflake_id_router.loopback() RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN snowflake_id_router.open_conn('sfid:self', NULL, format(
        $q$SELECT concat_ws(' ', set_config('application_name', %L, false), set_config('lock_timeout', %L, false),
                            set_config('statement_timeout', '0', false))$q$,
        'snowflake_id_router loopback ' || pg_backend_pid(), snowflake_id_router.ms(snowflake_id_router.timeout('lock_timeout'))),
        'setting up the loopback connection');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.loopback() IS
  'The loopback connection sfid:self of this session to this router database (opened and checked if not yet open).';

-- Closes every connection of this session whose name is LIKE pattern, which is a prefix
-- followed by %. Never fails.
CREATE OR REPLACE FUNCTION snowflake_id_router.disconnect_matching(pattern text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_node.remote_close_prefixed(rtrim(pattern, '%'));
END
$$;
COMMENT ON FUNCTION snowflake_id_router.disconnect_matching(text) IS
  'Closes this session''s connections whose names are LIKE pattern (a prefix, then %).';

-- Closes every connection of this session named sfid:*, releasing the node locks held
-- through them. Never fails.
CREATE OR REPLACE FUNCTION snowflake_id_router.disconnect_all() RETURNS void
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_router.disconnect_matching('sfid:%');
COMMENT ON FUNCTION snowflake_id_router.disconnect_all() IS
  'Closes this session''s sfid:* connections (node locks held through them go with them).';

-- Connections kept from one move to the next. A new node connection costs a move more than
-- its connecting: a fresh node session reads the catalogs and compiles and plans every
-- step's function again (batches of 12 with no other load: 401 ms a move with new
-- connections, 285 ms with kept ones). A session whose snowflake_id_router.keep_connections
-- is on and whose session user is a superuser (a rebalance's or drain's: its own and its
-- workers') keeps them after a move that succeeded, with the node locks taken through them
-- released; any other session closes them. Kept or not, only the extension owner's code
-- can use them (the registry binds a connection to the role that opened it), and only a
-- superuser's session keeps one past its transaction. Before a move reuses one, the
-- registry's record of the connect string it was opened with is compared with the node's
-- (check_connections): one whose node was repointed (alter_node) or removed is closed.
CREATE OR REPLACE FUNCTION snowflake_id_router.release_connections() RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    c text;
BEGIN
    IF current_setting('snowflake_id_router.keep_connections', true) IS DISTINCT FROM 'on'
       OR NOT (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user) THEN
        PERFORM snowflake_id_router.disconnect_all();
        RETURN;
    END IF;
    PERFORM snowflake_id_router.disconnect('sfid:self');
    FOR c IN SELECT x FROM unnest(snowflake_id_node.remote_names()) x WHERE x LIKE 'sfid:node:%' LOOP
        BEGIN
            PERFORM snowflake_id_router.call(c, 'SELECT pg_catalog.pg_advisory_unlock_all()', interval '10 s',
                                             'releasing the shard locks');
            PERFORM snowflake_id_node.remote_keep(c, true);
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            PERFORM snowflake_id_router.disconnect(c);
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.release_connections() IS
  'After a move that succeeded: closes this session''s sfid:* connections, or, with keep_connections on in a superuser''s session, releases the node locks held through them and keeps them.';

CREATE OR REPLACE FUNCTION snowflake_id_router.check_connections() RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    c text;
BEGIN
    FOR c IN SELECT x FROM unnest(snowflake_id_node.remote_names()) x WHERE x LIKE 'sfid:node:%' LOOP
        BEGIN
            IF snowflake_id_node.remote_connstr(c)
               IS DISTINCT FROM (SELECT snowflake_id_router.connect_options() || ' ' || n.connstr FROM snowflake_id_router.node n
                                  WHERE snowflake_id_router.node_conn_name(n.name) = c)
               OR snowflake_id_router.call(c, 'SELECT 1', interval '10 s', 'checking a kept connection') IS DISTINCT FROM '1' THEN
                PERFORM snowflake_id_router.disconnect(c);
            END IF;
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            PERFORM snowflake_id_router.disconnect(c);
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.check_connections() IS
  'Before a move: closes this session''s node connections whose node was repointed or removed since they were opened, or that do not answer.';

-- After an interruption (a cancel, a timeout) a call may still run on a node: cancels every
-- call in flight on this session's sfid:* connections (each cancel waited for 1 s at most;
-- what is left of their results is consumed before the connection's next query), so the
-- undo that follows can use them.
CREATE OR REPLACE FUNCTION snowflake_id_router.settle_all() RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    c text;
BEGIN
    FOR c IN SELECT x FROM unnest(snowflake_id_node.remote_names()) x WHERE x LIKE 'sfid:%' LOOP
        BEGIN
            IF snowflake_id_node.remote_busy(c) THEN
                PERFORM snowflake_id_node.remote_cancel(c);
            END IF;
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            PERFORM snowflake_id_router.disconnect(c);
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.settle_all() IS
  'Cancels the calls in flight on this session''s sfid:* connections (closing a connection that fails).';

-- Rolls back the transaction a multi-call step opened on conn (settle_all first); a
-- connection on which that fails is closed, which ends the transaction there as well.
CREATE OR REPLACE FUNCTION snowflake_id_router.end_transaction(conn text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM snowflake_id_router.call(conn, 'ROLLBACK', interval '5 s', 'rolling back');
EXCEPTION WHEN query_canceled OR OTHERS THEN
    PERFORM snowflake_id_router.disconnect(conn);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.end_transaction(text) IS
  'Rolls back the transaction open on connection conn, closing the connection if that fails.';

-- How long a wait that began at began sleeps before its next look: a tenth of the time
-- waited so far, between low and high seconds, so an answer is taken at most about 10% late
-- and a long wait costs few looks. (receive and poll.)
CREATE OR REPLACE FUNCTION snowflake_id_router.nap(began timestamptz, low double precision, high double precision)
RETURNS double precision
LANGUAGE sql VOLATILE STRICT PARALLEL SAFE
RETURN least(greatest(pg_catalog.date_part('epoch', snowflake_id_node.monotonic() - began) / 10, low), high);
COMMENT ON FUNCTION snowflake_id_router.nap(timestamptz, double precision, double precision) IS
  'The sleep before a wait''s next look: a tenth of the time waited since began, between low and high seconds.';

-- Sends sql on conn without waiting.
CREATE OR REPLACE FUNCTION snowflake_id_router.send(conn text, sql text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_node.remote_send(conn, sql);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.send(text, text) IS 'Sends sql on connection conn without waiting for it.';

-- The result (first column of the first row, as text) of what was sent on conn, waited for
-- until deadline (of snowflake_id_node.monotonic()); then the query is cancelled and 57014
-- raised. A remote error is raised again with its SQLSTATE, detail and hint, its message
-- prefixed by what and where (unless what is NULL).
CREATE OR REPLACE FUNCTION snowflake_id_router.receive(conn text, deadline timestamptz, what text) RETURNS text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    RETURN snowflake_id_node.remote_receive(conn,
        greatest(date_part('epoch', deadline - snowflake_id_node.monotonic()), 0),
        CASE WHEN what IS NOT NULL THEN format('%s on %s', what, snowflake_id_router.conn_place(conn)) END);
EXCEPTION WHEN connection_exception THEN
    IF conn = 'sfid:self' THEN
        -- A broken loopback connection goes (it holds no lock): the next loopback()
        -- opens another, so what follows (recording the error) still reaches the router.
        PERFORM snowflake_id_router.disconnect(conn);
    END IF;
    RAISE;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.receive(text, timestamptz, text) IS
  'Waits (until deadline of the monotonic clock, then cancels: 57014) for what was sent on connection conn; returns the first column of its first row.';

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

-- send, then receive within timeout.
CREATE OR REPLACE FUNCTION snowflake_id_router.call(conn text, sql text, timeout interval, what text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM snowflake_id_router.send(conn, sql);
    RETURN snowflake_id_router.receive(conn, snowflake_id_node.monotonic() + timeout, what);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.call(text, text, interval, text) IS
  'Runs sql on connection conn, bounded by timeout (then cancelled: 57014); the first column of its first row.';

-- Polls sql (a boolean) on conn until true; 57014 at the deadline (of the monotonic clock),
-- also one passed before the first look (a wait's bound holds however quickly the answer
-- would have come).
CREATE OR REPLACE FUNCTION snowflake_id_router.poll(conn text, sql text, deadline timestamptz, what text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    began timestamptz := snowflake_id_node.monotonic();
BEGIN
    LOOP
        IF snowflake_id_node.monotonic() < deadline THEN
            EXIT WHEN snowflake_id_router.call(conn, sql, greatest(deadline - snowflake_id_node.monotonic(), interval '0'), what)::boolean;
        END IF;
        IF snowflake_id_node.monotonic() >= deadline THEN
            RAISE EXCEPTION '% on % did not finish in time', what, snowflake_id_router.conn_place(conn)
                USING ERRCODE = 'query_canceled';
        END IF;
        PERFORM snowflake_id_node.sleep(snowflake_id_router.nap(began, 0.001, 0.02));   -- (each look is a round trip)
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.poll(text, text, timestamptz, text) IS
  'Polls a boolean query on connection conn until it is true; 57014 at the deadline.';

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
            PERFORM snowflake_id_node.sleep(0.01);
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
-- moves or repairs one of the shards; a schema change running is waited for.
CREATE OR REPLACE FUNCTION snowflake_id_router.lock_router(shards integer[]) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    s integer;
BEGIN
    -- Not while alter_shards is half-way across the nodes: waits for it (bounded).
    PERFORM snowflake_id_router.lock_schema_changes(false);
    FOREACH s IN ARRAY shards LOOP
        IF NOT snowflake_id_node.own_lock(snowflake_id_node.lock_class(), s, false, false, false) THEN
            RAISE EXCEPTION 'shard % is being moved or repaired by another session (pid %)', s,
                (SELECT l.pid FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
                    AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                    AND l.classid = snowflake_id_node.lock_class()::oid AND l.objid::bigint = s AND l.objsubid = 3 LIMIT 1)
                USING ERRCODE = 'lock_not_available';
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.lock_router(integer[]) IS
  'Takes the router''s locks for moving shards (to the end of the transaction); 55P03 when another session holds one.';

-- The fence gate. A batch's fence lasts longest when other batches do heavy work beside it
-- (making their copies, copying, subscribing, dropping old copies): on a busy machine that,
-- more than the other fences, is what a write to the fenced shards waits for. So a move
-- closes the gate (an owner-only lock, exclusive) right before its fence and opens it after
-- its flip or on any failure; a move passes it (shared, at once given back) before each
-- heavy step. PostgreSQL queues a lock behind the requests waiting before it: while a batch
-- is fenced or waits to be, no other starts a heavy step; steps already running go on, and
-- a batch waiting to fence keeps catching up. The lock is taken by the move's loopback
-- session, not the caller's: it goes with that connection, which goes with the caller's
-- transaction whatever ends it (10_connections.sql). No other role can take it
-- (snowflake_id_node.own_lock).
CREATE OR REPLACE FUNCTION snowflake_id_router.gate_lock() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN hashtext('snowflake_id_router.fence_gate');
COMMENT ON FUNCTION snowflake_id_router.gate_lock() IS
  'Class of the owner-only lock (class, 0): exclusive from a move''s fence to its flip, passed (shared) before heavy steps.';

-- Whether this session's move holds the gate closed (through its loopback session).
CREATE OR REPLACE FUNCTION snowflake_id_router.gate_closed_here() RETURNS boolean
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN 'sfid:self' = ANY (snowflake_id_node.remote_names())
   AND EXISTS (SELECT FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 3
                  AND l.pid = snowflake_id_node.remote_pid('sfid:self')
                  AND l.classid = snowflake_id_router.gate_lock()::oid AND l.objid = 0 AND l.mode = 'ExclusiveLock');
COMMENT ON FUNCTION snowflake_id_router.gate_closed_here() IS 'Whether this session''s move holds the fence gate closed.';

-- Waits (up to wait) to pass the gate (shared: close false) or to close it (close true);
-- 55P03 when the batches in their fence do not end within it.
CREATE OR REPLACE FUNCTION snowflake_id_router.gate(close boolean, wait interval) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    take text := format('snowflake_id_node.own_lock(%s, 0, true, %L, pg_catalog.set_config(''lock_timeout'', %L, true) IS NOT NULL)',
                        snowflake_id_router.gate_lock(), NOT close, snowflake_id_router.ms(wait));
BEGIN
    IF snowflake_id_router.gate_closed_here() THEN
        RETURN;   -- (a session lock is counted: never taken twice)
    END IF;
    PERFORM snowflake_id_router.call(snowflake_id_router.loopback(),
        CASE WHEN close THEN format('SELECT %s::text', take)
             ELSE format('SELECT (%s AND snowflake_id_node.own_unlock(%s, 0, true, true))::text', take, snowflake_id_router.gate_lock()) END,
        wait + interval '10 s', 'waiting for the fence gate');
EXCEPTION WHEN lock_not_available THEN
    RAISE EXCEPTION 'the moves in their fence (sessions %) did not end within %',
        (SELECT string_agg(l.pid::text, ', ' ORDER BY l.pid) FROM pg_locks l
          WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 3 AND l.mode = 'ExclusiveLock'
            AND l.classid = snowflake_id_router.gate_lock()::oid AND l.objid = 0), wait
        USING ERRCODE = 'lock_not_available',
              HINT = 'While a batch is fenced, other moves wait before their heavy steps (docs/cluster.md, "Batches moving at once").';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.gate(boolean, interval) IS
  'Passes (close false) or closes (close true) the fence gate, waiting up to wait; 55P03 naming the fenced sessions if that is not enough.';

-- Opens the fence gate if this session's move holds it closed.
CREATE OR REPLACE FUNCTION snowflake_id_router.gate_open() RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF snowflake_id_router.gate_closed_here() THEN
        PERFORM snowflake_id_router.call('sfid:self', format('SELECT snowflake_id_node.own_unlock(%s, 0, true, false)::text',
                                                             snowflake_id_router.gate_lock()), interval '10 s', 'opening the fence gate');
    END IF;
EXCEPTION WHEN query_canceled OR OTHERS THEN
    PERFORM snowflake_id_router.disconnect('sfid:self');   -- (which opens it)
END
$$;
COMMENT ON FUNCTION snowflake_id_router.gate_open() IS 'Opens the fence gate if this session''s move holds it closed.';

CREATE OR REPLACE FUNCTION move_shards(shards integer[], node text, template text DEFAULT 'tpl') RETURNS bigint
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
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
    PERFORM snowflake_id_router.require_primary('move_shards');
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
        PERFORM snowflake_id_router.check_connections();   -- (kept from an earlier move: release_connections)
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
        PERFORM snowflake_id_router.gate_open();
        PERFORM snowflake_id_router.disconnect_all();
        RAISE;
    END;
END
$$;
COMMENT ON FUNCTION move_shards(integer[], text, text) IS
  'Moves shards (all on one node) to node online, in one copy, fence and flip; returns the move''s id (move_history), NULL if all are there already.';

CREATE OR REPLACE FUNCTION move_shard(shard integer, node text, template text DEFAULT 'tpl') RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
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

-- A move from its record to the seal, then complete_move (which commits the seal). Before
-- the seal, any failure (or cancel) undoes both sides (fail_move); the error says what step
-- failed and what is left.
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
    src_connstr text;
    sequences text;
    step text := 'connecting to the nodes';
    seal_open boolean := false;  -- the seal's transaction open on the source
    checked json;
    grants text;
    made boolean := false;       -- something made on a node (its records say what)
    copy_deadline timestamptz;
    fence_deadline timestamptz;
    t_fence timestamptz;
    st text;
    msg text;
    det text;
    hnt text;
    lock_ms text := snowflake_id_router.ms(snowflake_id_router.timeout('lock_timeout'));
    lock_wait interval := snowflake_id_router.timeout('lock_timeout');
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
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.lock_shards(%L, %L)', shards, lock_wait),
                                         lock_wait + interval '10 s', step);
        PERFORM snowflake_id_router.call(dst, format('SELECT snowflake_id_node.lock_shards(%L, %L)', shards, lock_wait),
                                         lock_wait + interval '10 s', step);

        PERFORM snowflake_id_router.enter(move_id, 'checking');
        step := 'checking';
        schemas := snowflake_id_router.call(src, format('SELECT snowflake_id_node.source_check(%L, %L, %L)', router, dst_id, shards),
                                            long_step, 'checking the source');
        roles := snowflake_id_router.call(src, format('SELECT snowflake_id_node.roles(%L)', schemas), long_step, 'checking the source');
        PERFORM snowflake_id_router.call(dst, format('SELECT snowflake_id_node.target_check(%L, %L, %L, %L, %L, %L)',
                                                     router, src_id, shards, schemas, roles, template), long_step, 'checking the target');
        -- The fence and the seal lock every table of the batch in one transaction: a batch
        -- too large for the source's lock table is refused now (53400), not once fenced.
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.fence_room(%L)', schemas), long_step,
                                         'checking the source''s lock table');
        PERFORM snowflake_id_router.note(move_id, format('schemas = %L', schemas));

        PERFORM snowflake_id_router.enter(move_id, 'preparing');
        step := 'preparing';
        made := true;
        PERFORM snowflake_id_router.gate(false, long_step);
        PERFORM snowflake_id_router.call(dst, format('SELECT snowflake_id_node.prepare_target(%L, %L, %L, %L, %L, %L)',
                                                     k, router, src_id, shards, schemas, template), long_step, 'making the copies');
        -- The copies must be what the shards are, before any row moves. The copies' prints
        -- are kept for the seal, which compares the source's with them under its locks
        -- (DDL on the source since): nothing the move does to the copies changes them (rows,
        -- owners and privileges are not in them), and reading them again under the fence
        -- would lengthen the write pause by as much.
        PERFORM snowflake_id_router.gate(false, long_step);
        dst_prints := snowflake_id_router.compare_fingerprints(src, dst, schemas, shards,
            format('node %L', source), format('the copy made from template %L on node %L', template, target),
            snowflake_id_node.monotonic() + long_step);
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.prepare_source(%L, %L, %L, %L, %L)',
                                                     k, router, dst_id, shards, schemas), long_step, 'preparing the source');

        PERFORM snowflake_id_router.enter(move_id, 'copying');
        copy_deadline := snowflake_id_node.monotonic() + snowflake_id_router.timeout('copy_timeout');
        PERFORM snowflake_id_router.gate(false, long_step);
        step := 'publishing';
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.publish(%L)', k), long_step, step);
        -- The target makes the slot on the source and copies the rows at its snapshot
        -- (copy_rows: one connection, one transaction there), then subscribes to the slot
        -- with nothing left to copy: it applies what was committed after the snapshot.
        PERFORM snowflake_id_router.gate(false, long_step);
        step := 'copying the rows';
        src_connstr := (SELECT n.connstr FROM snowflake_id_router.node n WHERE n.name = source);
        BEGIN
            PERFORM snowflake_id_router.call(dst, format('SELECT snowflake_id_node.copy_rows(%L, %L)', k, src_connstr),
                                             greatest(copy_deadline - snowflake_id_node.monotonic(), interval '0'), step);
        EXCEPTION WHEN query_canceled THEN
            IF snowflake_id_node.monotonic() < copy_deadline THEN
                RAISE;  -- the mover was cancelled
            END IF;
            PERFORM snowflake_id_router.settle_all();
            -- Making the slot waits for every transaction running on the source: if that is
            -- where the time went (the slot is not made: it has no confirmed position yet, or
            -- it went with the copy's WAL sender), name the ones it waited for.
            IF NOT snowflake_id_router.call(src, format(
                   'SELECT EXISTS (SELECT FROM pg_catalog.pg_replication_slots WHERE slot_name = %L AND confirmed_flush_lsn IS NOT NULL)',
                   'sfid_' || replace(k, '/', '_')), interval '10 s', 'looking for the slot')::boolean THEN
                det := snowflake_id_router.call(src, 'SELECT snowflake_id_node.blockers()', interval '10 s', 'looking for long transactions');
                RAISE EXCEPTION 'the replication slot was not made within copy_timeout (%): it waits for every transaction running on node % to end',
                    snowflake_id_router.timeout('copy_timeout'), quote_literal(source)
                    USING ERRCODE = 'query_canceled', DETAIL = coalesce('Running there: ' || det || '.', 'None is running there now.');
            END IF;
            RAISE EXCEPTION 'the rows were not copied within copy_timeout (%)', snowflake_id_router.timeout('copy_timeout')
                USING ERRCODE = 'query_canceled', HINT = 'Raise copy_timeout (router_settings) for shards this large.';
        END;
        PERFORM snowflake_id_router.gate(false, long_step);
        step := 'subscribing';
        suboid := snowflake_id_router.call(dst, format('SELECT snowflake_id_node.subscribe(%L, %L)', k, src_connstr),
                                           greatest(copy_deadline - snowflake_id_node.monotonic(), interval '0'), step)::oid;
        PERFORM snowflake_id_router.note(move_id, format('suboid = %s', suboid));
        PERFORM snowflake_id_router.pause_at('subscribed');
        -- The flip must not meet the map locked (by the caller's own transaction, say): find
        -- out now, and have the loopback session ready for it.
        step := 'rehearsing the flip';
        PERFORM snowflake_id_router.call(self, format('SELECT snowflake_id_router.rehearse_flip(%s)', move_id),
                                         snowflake_id_router.timeout('lock_timeout') + interval '10 s', step);

        step := 'waiting for the fence gate';
        PERFORM snowflake_id_router.gate(true, long_step);
        -- The fenced part: writes to the shards wait or get 40001 until the flip. The fence's
        -- lock is bounded by lock_timeout, what follows up to the seal by cutover_timeout;
        -- recorded once, before the seal (a repair reads the nodes' records for the rest).
        PERFORM snowflake_id_router.enter(move_id, 'fencing');
        step := 'fencing writes on the source';
        t_fence := clock_timestamp();
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.set_fence(%L, %L)', k, lock_ms),
                                         snowflake_id_router.timeout('lock_timeout') + interval '1 s', step);
        fence_deadline := snowflake_id_node.monotonic() + snowflake_id_router.timeout('cutover_timeout');
        PERFORM snowflake_id_router.pause_at('fenced');
        -- The marker, and the owners and privileges the copies get once the target has it:
        -- as they are at the fence.
        step := 'waiting for the target to catch up';
        grants := snowflake_id_router.call(src, format('SELECT snowflake_id_node.grants(%L) FROM (SELECT snowflake_id_node.mark(%L) OFFSET 0) m',
                                                       schemas, k),
                                           greatest(fence_deadline - snowflake_id_node.monotonic(), interval '0'), 'writing the marker');
        PERFORM snowflake_id_router.pause_at('catching up');
        -- The source checks its side while the target catches up and gets its owners:
        -- seal_check, in a transaction there that the seal commits, compares the schemas'
        -- definitions with the copies' under its locks and counts the rows.
        step := 'checking the source';
        seal_open := true;   -- (before BEGIN: were its reply lost, the undo must not run inside it)
        PERFORM snowflake_id_router.call(src, 'BEGIN', interval '10 s', step);
        PERFORM snowflake_id_router.send(src, format('SELECT snowflake_id_node.seal_check(%L, %L, %L)', k, dst_prints, lock_ms));
        step := 'waiting for the target to catch up';
        PERFORM snowflake_id_router.poll(dst, format('SELECT snowflake_id_node.marked(%L)', k), fence_deadline,
                                         'catching up after the fence');
        -- The copies get their owners and privileges only now, when no change is left to apply:
        -- since PostgreSQL 16 the subscription applies changes as each table's owner, who may
        -- lack rights the copy needs (USAGE on a schema the superuser owns), and an owner must
        -- not get a table the superuser's apply still writes to (a trigger of theirs would run
        -- with its rights). Then the copies' rows are counted (the counts do not depend on the
        -- owners: one round trip for both).
        step := 'giving the copies their owners and privileges';
        dst_rows := snowflake_id_router.call(dst, format(
            'SELECT snowflake_id_node.row_counts(%L) FROM (SELECT snowflake_id_node.set_grants(%L, %L) OFFSET 0) g', k, k, grants),
            greatest(fence_deadline - snowflake_id_node.monotonic(), interval '0'), step);
        step := 'checking the source';
        checked := snowflake_id_router.receive(src, fence_deadline + lock_wait, 'checking the source under its locks')::json;
        -- The same rows on both sides.
        step := 'comparing the copies';
        src_rows := checked->>'rows';
        IF src_rows IS DISTINCT FROM dst_rows THEN
            RAISE EXCEPTION 'the copy on node % does not hold the rows of node %: %', quote_literal(target), quote_literal(source),
                snowflake_id_node.fingerprint_difference(string_to_array(src_rows, E'\n'), string_to_array(dst_rows, E'\n'),
                                                         format('node %L', source), format('node %L', target))
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;

        PERFORM snowflake_id_router.note(move_id, format('state = %L, fenced = to_timestamp(%s), rows = %s', 'sealing',
            extract(epoch FROM t_fence),
            (SELECT coalesce(sum(substring(l FROM ': (\d+) rows$')::bigint), 0) FROM unnest(string_to_array(src_rows, E'\n')) l)));
        PERFORM snowflake_id_router.pause_at('sealing');
        step := 'sealing the source';
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.seal(%L)', k), interval '10 s', step);
        sequences := checked->>'sequences';
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        PERFORM snowflake_id_router.fail_move(move_id, step, made, CASE WHEN seal_open THEN src END, st, msg, det, hnt);
        -- (Returned: the source is sealed after all. The nodes' records say what is left.)
        seal_open := false;
        sequences := NULL;
    END;
    -- The seal's commit on, the move is completed, whoever cancels what.
    PERFORM snowflake_id_router.complete_move(move_id, sequences, CASE WHEN seal_open THEN src END);
    PERFORM snowflake_id_router.release_connections();
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

-- A move's shards for messages: 'shard 5' or 'shards 5, 6'.
CREATE OR REPLACE FUNCTION snowflake_id_router.shard_list(shards integer[]) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN CASE WHEN cardinality(shards) = 1 THEN 'shard ' || shards[1] ELSE 'shards ' || array_to_string(shards, ', ') END;
COMMENT ON FUNCTION snowflake_id_router.shard_list(integer[]) IS 'Shards for messages: ''shard 5'' or ''shards 5, 6''.';

-- Whether an error a handler caught is a cancel of this session (a cancel request,
-- statement_timeout, a rebalance cancelling its worker), not the timeout of one of the
-- router's own waits on a node or on itself, which says what did not finish in time
-- (snowflake_id_node.remote_receive, poll). A handler that goes on past a step that failed
-- raises a cancel on instead: the caller asked to stop.
CREATE OR REPLACE FUNCTION snowflake_id_router.cancelled(code text, message text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN code = '57014' AND message NOT LIKE '% did not finish in time';
COMMENT ON FUNCTION snowflake_id_router.cancelled(text, text) IS
  'Whether an error caught (SQLSTATE, message) is a cancel of this session rather than the timeout of a router''s wait.';

-- The state of a move's record on a node (NULL: none), through this session's connection,
-- after taking the move's shard locks there.
CREATE OR REPLACE FUNCTION snowflake_id_router.node_state(node text, move_id bigint, shards integer[]) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    conn text;
    wait interval := snowflake_id_router.timeout('lock_timeout');
    q text := format('SELECT concat(snowflake_id_node.lock_shards(%L, %L), (SELECT state FROM snowflake_id_node.move WHERE key = %L))',
                     shards, wait, snowflake_id_router.move_key(move_id));
BEGIN
    -- This session's connection may be broken (the node restarted) or stuck: then once more
    -- afresh (not after a cancel of this session, nor when a new one could not connect).
    BEGIN
        RETURN nullif(snowflake_id_router.call(snowflake_id_router.node_conn(node), q, wait + interval '10 s', 'reading the move''s record'), '');
    EXCEPTION WHEN connection_exception OR query_canceled THEN
        IF SQLSTATE = '08001' OR snowflake_id_router.cancelled(SQLSTATE, SQLERRM) THEN
            RAISE;
        END IF;
        PERFORM snowflake_id_router.disconnect(snowflake_id_router.node_conn_name(node));
    END;
    RETURN nullif(snowflake_id_router.call(snowflake_id_router.node_conn(node), q, wait + interval '10 s', 'reading the move''s record'), '');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.node_state(text, bigint, integer[]) IS
  'The state of a move''s record on node (NULL: none), read under the move''s shard locks there.';

-- A move that failed before its seal (or whose seal's commit went unanswered): the calls in
-- flight cancelled, the seal's transaction rolled back (seal_conn, if open), the gate
-- opened, what the move made undone (made: something was; the records say what), and the
-- error raised, saying where the shards are and what is left. Returns instead, having
-- undone nothing, when the source turns out to be sealed (a commit whose reply was lost):
-- the caller completes the move.
CREATE OR REPLACE FUNCTION snowflake_id_router.fail_move(move_id bigint, step text, made boolean, seal_conn text,
                                                         st text, msg text, det text, hnt text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    what_left text;
    reason text := format('%s while %s: %s', st, step, msg);
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    PERFORM snowflake_id_router.settle_all();
    IF seal_conn IS NOT NULL THEN
        PERFORM snowflake_id_router.end_transaction(seal_conn);
    END IF;
    PERFORM snowflake_id_router.gate_open();
    IF made THEN
        what_left := snowflake_id_router.undo_move(move_id, reason);
        IF what_left = 'sealed' THEN
            RETURN;
        END IF;
    ELSE
        -- Nothing was made on a node yet: nothing to undo.
        PERFORM snowflake_id_router.note(move_id, format('state = %L, ended = clock_timestamp(), error = %L', 'undone', reason));
    END IF;
    PERFORM snowflake_id_router.disconnect_all();
    msg := format('moving %s from node %L to node %L failed while %s: %s', snowflake_id_router.shard_list(m.shards),
                  m.source, m.target, step, msg);
    det := concat_ws(' ', nullif(det, ''), nullif(hnt, ''));
    hnt := CASE WHEN what_left IS NULL
                THEN format('The shards stay on node %L, which takes their writes again; everything the move made is removed (move %s in move_history). Re-run the move once the cause is fixed.',
                            m.source, move_id)
                ELSE format('The shards stay on node %L, which takes their writes again. Left for SELECT repair_moves() to remove: %s (move %s).',
                            m.source, what_left, move_id) END;
    PERFORM snowflake_id_router.raise_error(st, msg, det, hnt);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.fail_move(bigint, text, boolean, text, text, text, text, text) IS
  'A move failed before its seal: undoes it and raises the error, saying what is left where; returns if the source is sealed after all.';

-- Undoes a move that has not been sealed, each node on its own: the source first, whose
-- fence goes with its undo whatever becomes of the target (a frozen or unreachable target
-- holds the source's writes no longer than the step that found it so), then the target,
-- its copies dropped in as many transactions as its lock table needs. Returns NULL when
-- everything is removed (state undone), 'sealed' when the source turns out to be sealed
-- (complete it instead), or what is left where (state undoing, for repair_moves()).
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
    undo text;
    bound interval := snowflake_id_router.timeout('cleanup_timeout') + interval '5 s';
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    undo := format('SELECT snowflake_id_node.undo(r.key, %L, %s) FROM snowflake_id_node.move r WHERE r.key = %L',
                   snowflake_id_router.timeout('cleanup_timeout'), coalesce(m.suboid, 0), k);
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
    IF src_ok THEN
        BEGIN
            PERFORM snowflake_id_router.call(snowflake_id_router.node_conn(m.source), undo, bound, 'undoing the move on the source');
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            left_over := left_over || format('on node %L (the source): %s', m.source, SQLERRM);
        END;
    END IF;
    BEGIN
        PERFORM snowflake_id_router.node_state(m.target, move_id, m.shards);
        FOR i IN 0 .. cardinality(m.shards) LOOP   -- (each call drops some copies, the last the record)
            EXIT WHEN coalesce(snowflake_id_router.call(snowflake_id_router.node_conn(m.target), undo, bound,
                                                        'undoing the move on the target')::integer, 0) = 0;
        END LOOP;
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        left_over := left_over || format('on node %L (the target): %s', m.target, SQLERRM);
    END;
    IF cardinality(left_over) = 0 THEN
        PERFORM snowflake_id_router.note(move_id, format('state = %L, ended = clock_timestamp()', 'undone'));
        RETURN NULL;
    END IF;
    RETURN array_to_string(left_over, '; ');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.undo_move(bigint, text) IS
  'Undoes a move not yet sealed on both nodes, the source first; NULL when all is removed, ''sealed'' if it was sealed after all, else what is left where.';

-- Completes a sealed move: its flip (flip_sealed, which first commits the seal's transaction
-- when seal_conn has it open), then its clean-up (clean_up). The flip runs with query
-- cancels held off (snowflake_id_node.hold_cancel): a cancel of the caller (Ctrl-C,
-- pg_cancel_backend, statement_timeout, a rebalance cancelling its workers) waits until the
-- map is flipped, then ends the call (57014) once what replicated the move is removed (unless
-- cancelled again): its old copy stays, sealed, for repair_moves(). What the flip waits for
-- is bounded by deadlines of its own: a node or the router that does not answer in time
-- fails it ("sealed but failed", left for repair_moves()), as does a terminate
-- (pg_terminate_backend, which nothing holds off).
CREATE OR REPLACE FUNCTION snowflake_id_router.complete_move(move_id bigint, sequences text DEFAULT NULL, seal_conn text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
BEGIN
    BEGIN
        IF (SELECT r.state FROM snowflake_id_router.move r WHERE r.id = move_id) NOT IN ('flipped', 'cleaning') THEN
            PERFORM snowflake_id_node.hold_cancel(format('SELECT snowflake_id_router.flip_sealed(%s, %L, %L)',
                                                         move_id, sequences, seal_conn));
        END IF;
        PERFORM snowflake_id_router.pause_at('flipped');
        PERFORM snowflake_id_router.clean_up(move_id);
    EXCEPTION WHEN query_canceled THEN
        SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
        IF m.state NOT IN ('flipped', 'cleaning') THEN
            RAISE;   -- (the flip failed: flip_sealed said so)
        END IF;
        -- What replicated it goes all the same (the slot holds the source's WAL), unless
        -- cancelled again; the old copy is left, sealed.
        PERFORM snowflake_id_router.settle_all();
        PERFORM snowflake_id_router.note(move_id, format('error = %L', concat_ws('; ', 'clean-up cancelled: ' || SQLERRM,
                                                 nullif(array_to_string(snowflake_id_router.end_replication(move_id), '; '), ''))));
        RAISE EXCEPTION 'move % of % to node % is done, but its clean-up was cancelled: %', move_id,
            snowflake_id_router.shard_list(m.shards), quote_literal(m.target), SQLERRM
            USING ERRCODE = 'query_canceled',
                  HINT = format('The map sends the shards to node %s. Their old copy on node %s stays, sealed (it refuses writes), until SELECT repair_moves() removes it.',
                                quote_literal(m.target), quote_literal(m.source));
    END;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.complete_move(bigint, text, text) IS
  'Completes a sealed move: commits the seal (seal_conn), activates the copies and flips the map with cancels held off, then cleans up.';

-- From a move's seal to its flip, run with query cancels held off (complete_move): the
-- seal's transaction committed (seal_conn; NULL: committed already), the target activated
-- (activate_target), the map flipped through the loopback connection, the gate opened. A
-- commit that fails may have committed: the source's record says (fail_move undoes the move
-- if it did not). A step that fails quickly (a node's or the loopback's session cancelled
-- or ended by someone) is tried again, from the nodes' records, within cleanup_timeout; a
-- failure that stays raises "sealed but failed": the source refuses the shards' writes
-- until repair_moves() completes the move.
CREATE OR REPLACE FUNCTION snowflake_id_router.flip_sealed(move_id bigint, sequences text, seal_conn text) RETURNS text
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    step text := 'sealing the source';
    deadline timestamptz := snowflake_id_node.monotonic() + snowflake_id_router.timeout('cleanup_timeout');
    st text;
    msg text;
    det text;
    hnt text;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    IF seal_conn IS NOT NULL THEN
        BEGIN
            PERFORM snowflake_id_router.call(seal_conn, 'COMMIT', interval '10 s', step);
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            PERFORM snowflake_id_router.fail_move(move_id, step, true, seal_conn, st, msg, det, hnt);
            sequences := NULL;   -- (sealed after all: read again)
        END;
        PERFORM snowflake_id_router.pause_at('sealed');
    END IF;
    FOR attempt IN 1 .. 3 LOOP
        BEGIN
            step := 'activating the copies';
            PERFORM snowflake_id_router.activate_target(move_id, sequences);
            PERFORM snowflake_id_router.pause_at('flipping');
            step := 'flipping the map';
            PERFORM snowflake_id_router.call(snowflake_id_router.loopback(), format('SELECT snowflake_id_router.flip(%s)', move_id),
                                             snowflake_id_router.timeout('lock_timeout') + snowflake_id_router.timeout('cleanup_timeout'), step);
            EXIT;
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
            PERFORM snowflake_id_router.settle_all();
            -- A flip whose reply was lost is a flip.
            EXIT WHEN (SELECT r.state FROM snowflake_id_router.move r WHERE r.id = move_id) = 'flipped';
            BEGIN
                PERFORM snowflake_id_router.note(move_id, format('error = %L', st || ' while ' || step || ': ' || msg));
            EXCEPTION WHEN OTHERS THEN
                NULL;   -- (the loopback connection failed too: the next attempt opens another)
            END;
            IF attempt = 3 OR snowflake_id_node.monotonic() >= deadline THEN
                PERFORM snowflake_id_router.gate_open();
                PERFORM snowflake_id_router.disconnect_all();
                RAISE EXCEPTION 'move % of % from node % to node % is sealed but failed while %: %', move_id,
                    snowflake_id_router.shard_list(m.shards), quote_literal(m.source), quote_literal(m.target), step, msg
                    USING ERRCODE = st,
                          HINT = format('The copy on node %s is complete and node %s refuses the shards'' writes (40001) until the move is completed: SELECT repair_moves() completes it once the cause is fixed.',
                                        quote_literal(m.target), quote_literal(m.source));
            END IF;
            sequences := NULL;   -- (again, as the nodes' records say)
        END;
    END LOOP;
    PERFORM snowflake_id_router.gate_open();
    RETURN 'flipped';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.flip_sealed(bigint, text, text) IS
  'A sealed move''s commit, activation and flip, each bounded, tried again within cleanup_timeout; raises "sealed but failed" if they fail (run with cancels held off).';

-- The target's activation, once the source is sealed: with the sequences the seal read, or
-- (sequences NULL: a repair, a second attempt) as the nodes' records say: nothing to do if
-- the target serves already, else the sequences read again from the source. 55000 if the
-- records are not those of a sealed move.
CREATE OR REPLACE FUNCTION snowflake_id_router.activate_target(move_id bigint, sequences text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    k text := snowflake_id_router.move_key(move_id);
    bound interval := snowflake_id_router.timeout('cleanup_timeout');
    src_state text;
    dst_state text;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    IF sequences IS NULL THEN
        src_state := snowflake_id_router.node_state(m.source, move_id, m.shards);
        dst_state := snowflake_id_router.node_state(m.target, move_id, m.shards);
        IF src_state IS DISTINCT FROM 'sealed' OR coalesce(dst_state, 'absent') NOT IN ('incoming', 'serving') THEN
            RAISE EXCEPTION 'move % cannot be completed: its record is % on node % and % on node %', move_id,
                coalesce(src_state, 'absent'), quote_literal(m.source), coalesce(dst_state, 'absent'), quote_literal(m.target)
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        PERFORM snowflake_id_router.note(move_id, format('state = %L', 'sealed'));
        IF dst_state = 'serving' THEN
            RETURN;
        END IF;
        sequences := snowflake_id_router.call(snowflake_id_router.node_conn(m.source),
            format('SELECT snowflake_id_node.sequences(%L)', k), bound, 'reading the sequences');
    END IF;
    PERFORM snowflake_id_router.call(snowflake_id_router.node_conn(m.target),
        format('SELECT snowflake_id_node.activate(%L, %L)', k, sequences), bound, 'carrying the sequences');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.activate_target(bigint, text) IS
  'Activates a sealed move''s target (sequences carried: those given, or read from the source as the nodes'' records say).';

-- One clean-up step of a move on node: sql through this session's connection there, after
-- the move's record is read under its shard locks (nothing to do without one). Returns its
-- value, or what failed (the caller goes on, and leaves the step for a repair); a cancel of
-- this session is raised, not returned.
CREATE OR REPLACE FUNCTION snowflake_id_router.cleanup_step(node text, move_id bigint, shards integer[], sql text,
                                                            bound interval, what text, OUT value text, OUT failed text)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    IF snowflake_id_router.node_state(node, move_id, shards) IS NOT NULL THEN
        value := snowflake_id_router.call(snowflake_id_router.node_conn(node), sql, bound, what);
    END IF;
EXCEPTION WHEN query_canceled OR OTHERS THEN
    IF snowflake_id_router.cancelled(SQLSTATE, SQLERRM) THEN
        RAISE;
    END IF;
    failed := format('on node %L: %s', node, SQLERRM);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.cleanup_step(text, bigint, integer[], text, interval, text) IS
  'A clean-up step of a move on a node (skipped without its record there): its value, or what failed; a cancel is raised.';

-- What replicated a flipped move, useless once flipped, and removed at once whatever the
-- other routers do: on the target the subscription (its worker), the marker and the record;
-- on the source the publication, the slot (and the WAL it holds) and the marker. Returns
-- what failed, where.
CREATE OR REPLACE FUNCTION snowflake_id_router.end_replication(move_id bigint) RETURNS text[]
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    k text := snowflake_id_router.move_key(move_id);
    bound interval := snowflake_id_router.timeout('cleanup_timeout');
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    RETURN array_remove(ARRAY[
        (snowflake_id_router.cleanup_step(m.target, move_id, m.shards, format('SELECT snowflake_id_node.finish(%L)', k),
                                          bound, 'removing the subscription and marker')).failed,
        (snowflake_id_router.cleanup_step(m.source, move_id, m.shards, format('SELECT snowflake_id_node.end_replication(%L, %L)', k, bound),
                                          bound + interval '5 s', 'removing the publication and slot')).failed], NULL);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.end_replication(bigint) IS
  'Removes what replicated a flipped move (the target''s subscription, the source''s publication and slot); what failed, where.';

-- The clean-up of a flipped move. What replicated it goes at once, whatever the other
-- routers do: on the target the subscription (its worker), the marker and the record; on
-- the source the publication, the slot (and the WAL it holds) and the marker. The old copy
-- stays, sealed (its writes refused with 40001), until every router routes by the flip
-- (routed_everywhere): a follower behind would still send the shards' calls there. Then the
-- router transactions older than the flip are let end, and the old copy goes, as many of its
-- schemas at a time as the source's lock table has room for (drop_copy). A step that fails
-- is a WARNING, left for a repair (the move is done); a cancel of the caller is raised.
CREATE OR REPLACE FUNCTION snowflake_id_router.clean_up(move_id bigint) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    k text := snowflake_id_router.move_key(move_id);
    bound interval := snowflake_id_router.timeout('cleanup_timeout');
    left_over text[] := '{}';
    done record;   -- (a step's value and failure)
    behind text;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    BEGIN
        PERFORM snowflake_id_router.gate_open();   -- (a repair's completion, which closed none, passes)
        PERFORM snowflake_id_router.gate(false, snowflake_id_router.timeout('copy_timeout'));
    EXCEPTION WHEN lock_not_available THEN
        NULL;   -- (the gate orders heavy steps; it guards nothing)
    END;
    left_over := snowflake_id_router.end_replication(move_id);
    IF NOT snowflake_id_router.routed_everywhere(m.map_version) THEN
        behind := (SELECT string_agg(quote_literal(x.name), ', ' ORDER BY x.name) FROM snowflake_id_router.router x
                    WHERE x.map_version < coalesce(m.map_version, 0));
        PERFORM snowflake_id_router.note(move_id, format('error = %L', concat_ws('; ', 'waiting for router(s) ' || behind || ' to route by the flip',
                                                                                 nullif(array_to_string(left_over, '; '), ''))));
        RAISE WARNING 'move % of % to node % is flipped, but router(s) % do not route by it yet: the old copy on node % stays, sealed, until they do',
            move_id, snowflake_id_router.shard_list(m.shards), quote_literal(m.target), behind, quote_literal(m.source)
            USING HINT = 'repair_moves() pushes the map again and finishes the move once they route by it (router_status).';
        RETURN;
    END IF;
    PERFORM snowflake_id_router.enter(move_id, 'cleaning');
    PERFORM snowflake_id_router.wait_for_older_transactions(m.flipped);
    PERFORM snowflake_id_router.pause_at('cleaning the source');
    FOR i IN 0 .. cardinality(m.shards) LOOP   -- (each call drops some schemas, the last the record)
        done := snowflake_id_router.cleanup_step(m.source, move_id, m.shards,
                 format('SELECT snowflake_id_node.drop_copy(%L, %L, %L)', k, snowflake_id_router.ms(snowflake_id_router.timeout('lock_timeout')), bound),
                 bound + snowflake_id_router.timeout('lock_timeout') + interval '5 s', 'dropping the old copy');
        left_over := array_remove(left_over || done.failed, NULL);
        EXIT WHEN coalesce(done.value, '0') = '0';
    END LOOP;
    PERFORM snowflake_id_router.finished(move_id, left_over);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.clean_up(bigint) IS
  'Removes what a flipped move made: its replication at once, its old copy once every router routes by the flip.';

-- A move's clean-up ended: done (NOTICE with its figures), or a WARNING naming what is left.
CREATE OR REPLACE FUNCTION snowflake_id_router.finished(move_id bigint, left_over text[]) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    IF cardinality(left_over) > 0 THEN
        PERFORM snowflake_id_router.note(move_id, format('error = %L', 'clean-up: ' || array_to_string(left_over, '; ')));
        RAISE WARNING 'move % of % to node % is done, but its clean-up is not: %', move_id,
            snowflake_id_router.shard_list(m.shards), quote_literal(m.target), array_to_string(left_over, '; ')
            USING HINT = 'SELECT repair_moves() finishes it once the cause is fixed.';
        RETURN;
    END IF;
    PERFORM snowflake_id_router.note(move_id, format('state = %L, ended = clock_timestamp()', 'done'));
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    RAISE NOTICE '% moved from node % to node %: % rows, % ms in all, writes fenced for % ms',
        snowflake_id_router.shard_list(m.shards), quote_literal(m.source), quote_literal(m.target), m.rows,
        round(extract(epoch FROM m.ended - m.started) * 1000),
        round(extract(epoch FROM m.flipped - m.fenced) * 1000, 1);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.finished(bigint, text[]) IS
  'Records a move''s clean-up as done (NOTICE) or says what is left (WARNING).';

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
    UPDATE snowflake_id_router.move r SET state = 'flipped', flipped = clock_timestamp(), map_version = snowflake_id_router.map_version()
     WHERE r.id = move_id;
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
    deadline timestamptz := snowflake_id_node.monotonic() + snowflake_id_router.timeout('lock_timeout');
BEGIN
    WHILE snowflake_id_node.monotonic() < deadline LOOP
        PERFORM pg_stat_clear_snapshot();
        EXIT WHEN NOT EXISTS (SELECT FROM pg_stat_activity a
                               WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
                                 AND a.backend_type = 'client backend' AND a.xact_start < since
                                 -- (movers and the router's own sessions send no routed writes)
                                 AND a.pid <> ALL (snowflake_id_router.router_sessions())
                                 AND a.pid NOT IN (SELECT l.pid FROM pg_locks l
                                                    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 3
                                                      AND l.classid = snowflake_id_node.lock_class()::oid));
        PERFORM snowflake_id_node.sleep(0.01);
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
SET search_path = pg_catalog, pg_temp SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
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
    PERFORM snowflake_id_router.require_primary('repair_moves');
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'repair_moves runs only in a READ COMMITTED transaction, not %', current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    PERFORM snowflake_id_router.disconnect_all();   -- (a session's kept ones: release_connections)
    -- Routers that are behind get the map first (the moves waiting for them then finish).
    PERFORM snowflake_id_router.routed_everywhere(snowflake_id_router.map_version());
    FOR m IN SELECT * FROM snowflake_id_router.move x WHERE x.state NOT IN ('done', 'undone') ORDER BY x.id LOOP
        move := m.id;
        shards := m.shards;
        BEGIN
            PERFORM snowflake_id_router.lock_router(m.shards);
            BEGIN
                outcome := snowflake_id_router.repair_move(m.id);
            EXCEPTION WHEN query_canceled OR OTHERS THEN
                IF snowflake_id_router.cancelled(SQLSTATE, SQLERRM) THEN
                    RAISE;   -- (the caller asked to stop, not a node)
                END IF;
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
                        PERFORM snowflake_id_router.call(conn, format('SELECT snowflake_id_node.lock_shards(%L, %L)', r.shards,
                                                                      snowflake_id_router.timeout('lock_timeout')),
                                                         bound, 'locking the shards');
                        FOR i IN 0 .. cardinality(r.shards) LOOP   -- (each call drops some copies, the last the record)
                            EXIT WHEN snowflake_id_router.call(conn, format('SELECT snowflake_id_node.undo(%L, %L, 0)', r.key, wait),
                                                               bound, 'undoing a move without a record')::integer = 0;
                        END LOOP;
                        PERFORM snowflake_id_router.call(conn, format('SELECT snowflake_id_node.unlock_shards(%L)', r.shards),
                                                         bound, 'unlocking the shards');
                        outcome := format('undone on node %L (a record without a move on this router)', n.name);
                    EXCEPTION WHEN query_canceled OR OTHERS THEN
                        IF snowflake_id_router.cancelled(SQLSTATE, SQLERRM) THEN
                            RAISE;
                        END IF;
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
            IF snowflake_id_router.cancelled(SQLSTATE, SQLERRM) THEN
                RAISE;
            END IF;
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
                              WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 3
                                AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
                                AND l.classid = snowflake_id_node.lock_class()::oid AND l.objid::bigint = m.shards[1])
                THEN 'running: ' || m.state
                ELSE 'interrupted: ' || m.state END AS outcome,
           m.error
      FROM snowflake_id_router.move m
     ORDER BY m.id;
COMMENT ON VIEW move_history IS
  'Each move: shards, nodes, start, end, rows, write pause (fence to flip), outcome (done, undone, running or interrupted at a step) and error.';

-- ==== router/sql/40_nodes.sql ====
-- == Seeing the nodes: one query per node, sent to all at once ==

-- Runs sql (a query returning one jsonb value) on every node, in parallel: each node is
-- reached, sent its query, and only then are the answers collected, so the nodes work at
-- the same time and the total is about the slowest node's time, not the sum. A node that
-- cannot be reached, refuses, times out (setting status_timeout) or turns out to be another
-- database (identity) gives a row with its error and no result, never an error of the whole
-- call: a status view must work best when a node is down.
-- With chunk, sql is a format() string asking for the next chunk of rows: %1$s is the shard
-- after which to start (-1 at first), %2$s the chunk; it returns a jsonb array of objects
-- with a "shard" key, and is sent again from the last shard while a full chunk came back.
-- The result is then the whole array. (Each chunk is its own transaction on the node: see
-- sql/node_status.sql on locks.)
CREATE OR REPLACE FUNCTION snowflake_id_router.on_nodes(sql text, chunk integer DEFAULT NULL)
RETURNS TABLE (node text, error text, result jsonb)
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    nodes snowflake_id_router.node[];
    conns text[] := '{}';
    errors text[] := '{}';
    results jsonb[] := '{}';
    after integer[] := '{}';
    waiting boolean[] := '{}';          -- a query was sent and is not collected yet
    pending boolean := true;
    found_identity text;
    answer jsonb;
    got text[];
    deadline timestamptz := snowflake_id_node.monotonic() + snowflake_id_router.timeout('status_timeout');
BEGIN
    SELECT coalesce(array_agg(n ORDER BY n.name), '{}') INTO nodes FROM snowflake_id_router.node n;
    FOR i IN 1 .. cardinality(nodes) LOOP
        conns[i] := 'snowflake_id_router_node_' || i;
        after[i] := -1;
        results[i] := CASE WHEN chunk IS NULL THEN NULL ELSE '[]'::jsonb END;
        BEGIN
            PERFORM snowflake_id_router.connect(conns[i], snowflake_id_router.connect_options() || ' ' || nodes[i].connstr,
                                                format('node %L', nodes[i].name));
            PERFORM snowflake_id_router.call(conns[i], format('SET statement_timeout = %L',
                extract(epoch FROM snowflake_id_router.setting('status_timeout')::interval) * 1000),
                snowflake_id_router.timeout('status_timeout'), 'setting up the session');
        EXCEPTION WHEN OTHERS THEN
            errors[i] := SQLERRM;
        END;
    END LOOP;
    WHILE pending LOOP
        pending := false;
        FOR i IN 1 .. cardinality(nodes) LOOP
            waiting[i] := errors[i] IS NULL AND (chunk IS NULL OR after[i] IS NOT NULL);
            CONTINUE WHEN NOT waiting[i];
            BEGIN
                PERFORM snowflake_id_node.remote_send(conns[i],
                    format('SELECT jsonb_build_array(snowflake_id_node.identity(), (%s))::text',
                           CASE WHEN chunk IS NULL THEN sql ELSE format(sql, after[i], chunk) END));
            EXCEPTION WHEN OTHERS THEN
                errors[i] := SQLERRM;
                waiting[i] := false;
            END;
        END LOOP;
        FOR i IN 1 .. cardinality(nodes) LOOP
            CONTINUE WHEN NOT waiting[i];
            -- A remote error comes back as a value, not raised; a timeout (status_timeout
            -- for all the nodes together) or a broken connection is this node's error.
            BEGIN
                got := snowflake_id_node.remote_result(conns[i],
                    greatest(date_part('epoch', deadline - snowflake_id_node.monotonic()), 0), 'asking the node');
                found_identity := (got[1]::jsonb)->>0;
                answer := (got[1]::jsonb)->1;
            EXCEPTION WHEN query_canceled OR OTHERS THEN
                got := ARRAY[NULL, SQLSTATE, SQLERRM];
            END;
            IF got[2] IS NOT NULL THEN
                errors[i] := CASE WHEN got[3] LIKE '%snowflake_id_node.%does not exist%'
                                  THEN 'the node runs snowflake_id older than 0.3.0 (there: ALTER EXTENSION snowflake_id UPDATE)'
                                  ELSE coalesce(got[3], 'no answer') END;
            ELSIF found_identity IS DISTINCT FROM coalesce(nodes[i].identity, found_identity) THEN
                errors[i] := format('the connect string reaches another database (identity %s, registered as %s)',
                                    found_identity, nodes[i].identity);
            ELSIF chunk IS NULL THEN
                results[i] := answer;
            ELSE
                results[i] := results[i] || answer;
                after[i] := CASE WHEN jsonb_array_length(answer) = chunk THEN (answer->(chunk - 1)->>'shard')::integer END;
                pending := pending OR after[i] IS NOT NULL;
            END IF;
        END LOOP;
    END LOOP;
    FOR i IN 1 .. cardinality(nodes) LOOP
        PERFORM snowflake_id_router.disconnect(conns[i]);
        node := nodes[i].name;
        error := errors[i];
        result := CASE WHEN errors[i] IS NULL THEN results[i] END;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.on_nodes(text, integer) IS
  'Runs a query returning one jsonb on every node at once (identities checked), or chunk by chunk: per node the answer, or the error that kept it.';

-- Shards a node is asked about per query (sql/node_status.sql: each takes about six
-- relation locks a shard on the node until its transaction ends).
CREATE OR REPLACE FUNCTION snowflake_id_router.status_chunk() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN 128;
COMMENT ON FUNCTION snowflake_id_router.status_chunk() IS
  'Shards a node answers for per query of shard_status and the rebalancer.';

CREATE OR REPLACE FUNCTION snowflake_id_router.node_status()
RETURNS TABLE (node text, reachable boolean, error text, wal_level text, in_recovery boolean,
               shards_mapped integer, shards_served integer, rows bigint, bytes bigint,
               moves_running integer, leftovers text[],
               slot_wal_bytes bigint, free_slots integer, free_wal_senders integer,
               standbys integer, sync_standbys integer, standby_lag_bytes bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT o.node, o.error IS NULL, o.error, s.wal_level, s.in_recovery,
           (SELECT count(*) FROM snowflake_id_router.shard m WHERE m.node = o.node)::integer,
           s.shards, s.rows, s.bytes, s.moves_running, s.leftovers,
           s.slot_wal_bytes, s.free_slots, s.free_wal_senders, s.standbys, s.sync_standbys, s.standby_lag_bytes
      FROM snowflake_id_router.on_nodes('SELECT to_jsonb(s) FROM snowflake_id_node.node_stats() s') o
      LEFT JOIN LATERAL jsonb_to_record(o.result) AS s(
           wal_level text, in_recovery boolean, shards integer, rows bigint, bytes bigint,
           moves_running integer, leftovers text[], slot_wal_bytes bigint,
           free_slots integer, free_wal_senders integer, standbys integer, sync_standbys integer,
           standby_lag_bytes bigint) ON true
     ORDER BY o.node;
END;
COMMENT ON FUNCTION snowflake_id_router.node_status() IS 'The rows of the view node_status.';

CREATE OR REPLACE VIEW node_status AS SELECT * FROM snowflake_id_router.node_status();
COMMENT ON VIEW node_status IS
  'Each node, asked now (one query per node, all at once): reachable, wal_level, shards mapped and served, rows (estimated), the database''s bytes, moves running and what moves left, WAL held by slots, free slots and WAL senders, standbys and their lag.';

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
                 $q$SELECT coalesce(jsonb_agg(to_jsonb(s)), '[]') FROM snowflake_id_node.shard_stats(true, %s, %s) s$q$,
                 snowflake_id_router.status_chunk()) LOOP
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
    PERFORM snowflake_id_router.require_primary('alter_node');
    normal := snowflake_id_router.normalize_connstr(connstr);
    SELECT * INTO n FROM snowflake_id_router.node x WHERE x.name = alter_node.node;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object',
            HINT = 'Register it with add_node(name, connstr).';
    END IF;
    BEGIN
        PERFORM snowflake_id_router.connect('snowflake_id_router_alter', snowflake_id_router.connect_options() || ' ' || normal,
                                            format('node %L', node));
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
            PERFORM snowflake_id_router.connect('snowflake_id_router_alter', snowflake_id_router.connect_options() || ' ' || n.connstr,
                                                format('node %L', node));
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
    -- Committed at once, for every router session here, then pushed to the other routers.
    IF NOT snowflake_id_router.repoint_node(node, n.connstr, normal, found_identity) THEN
        RAISE WARNING 'node % is repointed on this router, but not yet on every other router', quote_literal(node)
            USING HINT = 'See router_status; repair_moves() or snowflake_id_router.push_map() brings them up to date once they can be reached.';
    END IF;
    -- The loopback connection repoint_node committed through is this call's: it must not
    -- stay open in the caller's session (and transaction) once the call returns.
    PERFORM snowflake_id_router.disconnect('sfid:self');
END
$$;
COMMENT ON FUNCTION alter_node(text, text) IS
  'Repoints a node to a new connect string reaching the same database (another address, its promoted standby), for every router session at once.';

-- Removes a node that holds no shard: none mapped to it (drain_node moves them off first),
-- none it still serves whatever the map says (a shard made there by hand, a copy left
-- behind: its rows would vanish from every view and from the router's reach), and none in an
-- unfinished move from or to it. A node that cannot be reached (or no longer reaches its
-- database) and to which no shard is mapped is removed with a WARNING: what it may still
-- serve is not checked, and is no longer the router's.
CREATE OR REPLACE FUNCTION remove_node(node text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    held integer;
    first_held integer;
    unfinished text;
    served integer[];
    unreachable text;
BEGIN
    IF node IS NULL THEN
        RAISE EXCEPTION 'remove_node: node must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM snowflake_id_router.require_primary('remove_node');
    IF NOT EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = remove_node.node) THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object';
    END IF;
    -- What it serves, asked before the map is locked (reaching it may take connect_timeout).
    BEGIN
        PERFORM snowflake_id_router.connect_node('snowflake_id_router_remove', node);
        served := snowflake_id_router.call('snowflake_id_router_remove', 'SELECT snowflake_id_node.served_shards()::text',
                                           snowflake_id_router.timeout('status_timeout'), 'asking for its shards');
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_remove');
    EXCEPTION WHEN OTHERS THEN
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_remove');
        unreachable := SQLERRM;
    END;
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
    -- An unfinished move from or to it still has something to complete or undo there.
    SELECT format('move %s of shard(s) %s from node %L to node %L (%s)', m.id, array_to_string(m.shards, ', '),
                  m.source, m.target, m.state)
      INTO unfinished FROM snowflake_id_router.move m
     WHERE m.state NOT IN ('done', 'undone') AND remove_node.node IN (m.source, m.target)
     ORDER BY m.id LIMIT 1;
    IF unfinished IS NOT NULL THEN
        RAISE EXCEPTION 'node % is part of an unfinished move: %', quote_literal(node), unfinished
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'SELECT * FROM repair_moves() completes or undoes it once its mover is gone.';
    END IF;
    IF cardinality(served) > 0 THEN
        RAISE EXCEPTION 'node % still serves % shard schema(s), which the map sends elsewhere: %', quote_literal(node),
            cardinality(served),
            (SELECT string_agg(format('shard %s (mapped to %s)', s, coalesce(quote_literal(m.node), 'no node')), ', ' ORDER BY s)
               FROM unnest(served[1:5]) s LEFT JOIN snowflake_id_router.shard m ON m.shard = s)
            || CASE WHEN cardinality(served) > 5 THEN ', ...' ELSE '' END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Removed, the node''s schemas and their rows would vanish from every view of the router.',
                  HINT = 'shard_status lists them (mapped false): carry what they hold to the node the map names, or drop them there (drop_shard), then remove the node.';
    END IF;
    IF unreachable IS NOT NULL THEN
        RAISE WARNING 'node % cannot be reached: whether it still serves shard schemas was not checked (%)', quote_literal(node), unreachable
            USING DETAIL = 'No shard is mapped to it: it is removed. What it may still hold is no longer the router''s.';
    END IF;
    DELETE FROM snowflake_id_router.node n WHERE n.name = remove_node.node;
END
$$;
COMMENT ON FUNCTION remove_node(text) IS
  'Removes a node to which no shard is mapped, that serves no shard schema and takes part in no unfinished move (55000 otherwise); one that cannot be reached, with a WARNING.';

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

-- Whether the session of pid, started at started, still lives (pg_stat_activity; a pid is
-- reused only by a session started later). SECURITY DEFINER: a role reading
-- rebalance_status sees only its own sessions' start times in pg_stat_activity.
CREATE OR REPLACE FUNCTION snowflake_id_router.session_alive(pid integer, started timestamptz) RETURNS boolean
LANGUAGE sql VOLATILE CALLED ON NULL INPUT PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = session_alive.pid AND a.backend_start = started);  -- (NULL: not alive)
COMMENT ON FUNCTION snowflake_id_router.session_alive(integer, timestamptz) IS
  'Whether the session of pid, started at started, still lives.';

-- The session running a rebalance or drain on this router, if any (its record running, its
-- session alive).
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_holder() RETURNS integer
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN (SELECT r.pid FROM snowflake_id_router.rebalance r
         WHERE r.state = 'running' AND snowflake_id_router.session_alive(r.pid, r.session_start)
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

-- The shards in a move that is not finished, which no plan, remap or schema change may
-- touch, and the move that holds each: a sealed copy is served by no node and an incoming
-- one not yet, so by what the nodes serve such a shard looks like one without data, and a
-- remap by the map alone would send it where its rows are not (its flip then fails for
-- good). Those of every move of this router whose record is neither done nor undone, its
-- mover alive or gone; with on_nodes, also those of every move record on a node (another
-- router's move, a record this router does not know), every node asked at once (55000
-- naming the first that does not answer: a plan must not miss one).
CREATE OR REPLACE FUNCTION snowflake_id_router.moving_shards(on_nodes boolean)
RETURNS TABLE (shard integer, move text)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o record;
BEGIN
    RETURN QUERY
    SELECT s, format('move %s (%s) of shard(s) %s from node %L to node %L', m.id, m.state,
                     array_to_string(m.shards, ', '), m.source, m.target)
      FROM snowflake_id_router.move m, unnest(m.shards) s
     WHERE m.state NOT IN ('done', 'undone');
    IF NOT on_nodes THEN
        RETURN;
    END IF;
    FOR o IN SELECT * FROM snowflake_id_router.on_nodes('SELECT snowflake_id_node.moves()::jsonb') LOOP
        IF o.error IS NOT NULL THEN
            RAISE EXCEPTION 'node % cannot be asked for its moves: %', quote_literal(o.node), o.error
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Planning needs every node: bring it back, repoint it (alter_node), or drain it and remove it (remove_node).';
        END IF;
        RETURN QUERY
        SELECT s, format('move %s (%s, %s on node %L)', x->>'key', x->>'role', x->>'state', o.node)
          FROM jsonb_array_elements(o.result) x, jsonb_array_elements_text(x->'shards') t, CAST(t AS integer) s;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.moving_shards(boolean) IS
  'The shards of unfinished moves (this router''s records; with on_nodes, every node''s move records too) and the move holding each.';

-- The shards that hold data, where the map sends them: (shard, node, bytes), with bytes only
-- when sizes are asked for (by_disk_size: a query per node per status_chunk() shards, as
-- sizes lock the relations; without, one query per node and no lock). Every node must
-- answer (55000 naming the first that does not): a plan that missed one node's shards would
-- pile shards onto it.
CREATE OR REPLACE FUNCTION snowflake_id_router.data_shards(sizes boolean)
RETURNS TABLE (shard integer, node text, bytes bigint)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o record;
BEGIN
    FOR o IN SELECT * FROM snowflake_id_router.on_nodes(
                 CASE WHEN sizes
                      THEN $q$SELECT coalesce(jsonb_agg(jsonb_build_object('shard', s.shard, 'bytes', s.bytes)), '[]')
                                FROM snowflake_id_node.shard_stats(false, %s, %s) s$q$
                      ELSE $q$SELECT coalesce(jsonb_agg(jsonb_build_object('shard', s)), '[]')
                                FROM unnest(snowflake_id_node.served_shards()) s$q$ END,
                 CASE WHEN sizes THEN snowflake_id_router.status_chunk() END) LOOP
        IF o.error IS NOT NULL THEN
            RAISE EXCEPTION 'node % cannot be asked for its shards: %', quote_literal(o.node), o.error
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Planning needs every node: bring it back, repoint it (alter_node), or drain it and remove it (remove_node).';
        END IF;
        RETURN QUERY
        SELECT (x->>'shard')::integer, o.node, (x->>'bytes')::bigint
          FROM jsonb_array_elements(o.result) x
          JOIN snowflake_id_router.shard m ON m.shard = (x->>'shard')::integer AND m.node = o.node;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.data_shards(boolean) IS
  'Each shard a node serves where the map names that node, with its bytes if asked (55000 if a node does not answer).';

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
-- so that a rebalance stopped half-way has taken about as much from each node. A shard in
-- an unfinished move (moving_shards) is left out.
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
    moving integer[];
    held_by text;
BEGIN
    PERFORM snowflake_id_router.check_plan_args(strategy, batch_size, drain);
    SELECT coalesce(array_agg(n.name ORDER BY n.name), '{}') INTO nodes FROM snowflake_id_router.node n;
    -- A shard in an unfinished move is its move's to finish: left out, said so.
    SELECT coalesce(array_agg(DISTINCT m.shard), '{}'), min(m.move) INTO moving, held_by
      FROM snowflake_id_router.moving_shards(true) m;
    IF cardinality(moving) > 0 THEN
        RAISE NOTICE 'shard(s) % not planned: in unfinished moves (%)',
            array_to_string(moving[1:5], ', ') || CASE WHEN cardinality(moving) > 5 THEN ', ...' ELSE '' END, held_by
            USING HINT = 'A move whose mover is gone is completed or undone by SELECT * FROM repair_moves().';
    END IF;
    SELECT coalesce(array_agg(d.shard), '{}'), coalesce(array_agg(d.node), '{}'), coalesce(array_agg(d.bytes), '{}')
      INTO data_shards, owners, sizes FROM snowflake_id_router.data_shards(strategy = 'by_disk_size') d
     WHERE d.shard NOT IN (SELECT unnest(moving));
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

-- Waits (at most timeout) until no unfinished move has a live mover (its router locks held).
CREATE OR REPLACE FUNCTION snowflake_id_router.await_running_moves(timeout interval) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := snowflake_id_node.monotonic() + timeout;
BEGIN
    WHILE snowflake_id_node.monotonic() < deadline
          AND EXISTS (SELECT FROM snowflake_id_router.move m, pg_locks l
                       WHERE m.state NOT IN ('done', 'undone') AND l.locktype = 'advisory' AND l.granted AND l.objsubid = 3
                         AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                         AND l.classid = snowflake_id_node.lock_class()::oid AND l.objid::bigint = m.shards[1]) LOOP
        PERFORM snowflake_id_node.sleep(0.05);
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.await_running_moves(interval) IS
  'Waits, at most timeout, until no unfinished move''s mover is alive.';

-- The first step of rebalance() and drain_node(): the lock, dead moves repaired, then the
-- unfinished rebalance resumed (same kind, and same node for a drain) or abandoned, and a
-- plan of what is left to do. Returns the rebalance's id.
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_begin(drain text, strategy text, batch_size integer, template text,
                                                               parallel_moves integer)
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
    IF template IS NULL OR parallel_moves IS NULL THEN
        RAISE EXCEPTION 'template and parallel_moves must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF parallel_moves NOT BETWEEN 1 AND 8 THEN
        RAISE EXCEPTION 'parallel_moves % is out of range: give 1 to 8 batches moving at once', parallel_moves
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Each batch moving at once takes a replication slot and a WAL sender on its source and a logical replication worker on its target.';
    END IF;
    -- One begins at a time (to the end of this transaction, committed by the procedure).
    LOCK TABLE snowflake_id_router.rebalance IN SHARE ROW EXCLUSIVE MODE;
    holder := snowflake_id_router.rebalance_holder();
    IF holder IS DISTINCT FROM pg_backend_pid() AND holder IS NOT NULL THEN
        SELECT * INTO r FROM snowflake_id_router.rebalance x WHERE x.state = 'running';
        RAISE EXCEPTION '% % is running in session %', coalesce(r.kind, 'a rebalance'), r.id,
            coalesce(snowflake_id_router.rebalance_holder(), r.pid)
            USING ERRCODE = 'lock_not_available',
                  HINT = 'rebalance_status shows its progress; rebalance_stop() stops it after its current batch.';
    END IF;
    BEGIN
        -- A move cut short with a session of an earlier run is completed (sealed) or undone
        -- now, before the map is read. The workers of a run whose session just ended notice
        -- it within a second or two (client_connection_check_interval) and end their moves
        -- then: moves still running are waited for first (at most cleanup_timeout).
        PERFORM snowflake_id_router.await_running_moves(snowflake_id_router.timeout('cleanup_timeout'));
        PERFORM @extschema@.repair_moves();
        SELECT * INTO r FROM snowflake_id_router.rebalance x WHERE x.state IN ('running', 'stopped', 'failed') FOR UPDATE;
        IF FOUND AND r.kind = kind AND r.node IS NOT DISTINCT FROM drain THEN
            rid := r.id;
            UPDATE snowflake_id_router.rebalance x
               SET strategy = rebalance_begin.strategy, batch_size = rebalance_begin.batch_size,
                   parallel_moves = rebalance_begin.parallel_moves,
                   template = rebalance_begin.template, state = 'running', pid = pg_backend_pid(),
                   session_start = (SELECT a.backend_start FROM pg_stat_activity a WHERE a.pid = pg_backend_pid()),
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
            INSERT INTO snowflake_id_router.rebalance (id, kind, node, strategy, batch_size, parallel_moves, template, state, pid,
                                                       session_start, started)
            VALUES (rid, kind, drain, strategy, batch_size, parallel_moves, template, 'running', pg_backend_pid(),
                    (SELECT a.backend_start FROM pg_stat_activity a WHERE a.pid = pg_backend_pid()), clock_timestamp());
        END IF;
        first_batch := coalesce((SELECT max(b.batch) FROM snowflake_id_router.rebalance_batch b WHERE b.rebalance = rid), 0);
        INSERT INTO snowflake_id_router.rebalance_batch (rebalance, batch, source, target, shards, bytes, state)
        SELECT rid, first_batch + p.batch, p.source, p.target, p.shards, p.bytes, 'planned'
          FROM snowflake_id_router.plan(strategy, batch_size, drain) p;
        SELECT count(*) AS batches, coalesce(sum(cardinality(b.shards)), 0) AS shards,
               sum(b.bytes) AS bytes INTO planned
          FROM snowflake_id_router.rebalance_batch b WHERE b.rebalance = rid AND b.state = 'planned';
        RAISE NOTICE '% %: % shard(s)% to move in % batch(es)', kind, rid, planned.shards,
            CASE WHEN planned.bytes IS NOT NULL THEN format(' (%s)', pg_size_pretty(planned.bytes)) ELSE '' END, planned.batches;
    END;
    RETURN rid;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_begin(text, text, integer, text, integer) IS
  'First step of rebalance and drain_node: refuses while another session runs one, resumes or starts a rebalance record (this session''s), plans its batches.';

-- Gives the shards of a drained node that hold no data (no schema there) to the other
-- nodes, by the map alone: contiguous runs, one per node. Run through the loopback
-- connection (committed at once). Not while one of them is in an unfinished move (55000
-- naming it): its sealed copy is on the drained node or its incoming one elsewhere, and the
-- map must name the node its flip expects. held: the shards in move records on the nodes
-- (moving_shards(true), asked by the caller), as jsonb [{shard, move}]. This router's moves
-- are read here, with the move table held against new records (SHARE) until the remap
-- commits: a move recorded before is seen; one recorded after read the map before the
-- remap and finds it changed when it rehearses its flip, before its fence (32_move.sql).
CREATE OR REPLACE FUNCTION snowflake_id_router.remap_empty(drained text, held jsonb) RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    moving text;
    moved integer;
BEGIN
    LOCK TABLE snowflake_id_router.move IN SHARE MODE;
    SELECT string_agg(format('shard %s is in %s', b.shard, b.move), '; ' ORDER BY b.shard) INTO moving
      FROM (SELECT m.shard, min(m.move) AS move
              FROM (SELECT * FROM snowflake_id_router.moving_shards(false)
                    UNION ALL SELECT (x->>'shard')::integer, x->>'move' FROM jsonb_array_elements(held) x) m
              JOIN snowflake_id_router.shard s ON s.shard = m.shard AND s.node = drained
             GROUP BY m.shard ORDER BY m.shard LIMIT 3) b;
    IF moving IS NOT NULL THEN
        RAISE EXCEPTION 'the shards of node % cannot be mapped elsewhere while a move of theirs is unfinished: %', quote_literal(drained), moving
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'A move whose mover is gone is completed or undone by SELECT * FROM repair_moves(); a live one ends by itself. Then call the drain again.';
    END IF;
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
COMMENT ON FUNCTION snowflake_id_router.remap_empty(text, jsonb) IS
  'Maps the shards of a drained node that hold no data to the other nodes (map only); 55000 while one is in an unfinished move.';

-- The next batch to move (its shards still where the plan found them), marked moving; NULL
-- when the rebalance is over: stopped (rebalance_stop) or done. A drain with nothing left to
-- move looks at its node again (a shard made there meanwhile is planned too), then hands the
-- node's shards without data to the other nodes. With others_moving (other batches of it
-- still moving), NULL instead of any of that: it ends, or looks again, once they are done.
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_next(rid integer, others_moving boolean) RETURNS integer
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
    IF others_moving AND (r.stop_requested IS NOT NULL
                          OR NOT EXISTS (SELECT FROM snowflake_id_router.rebalance_batch x
                                          WHERE x.rebalance = rid AND x.state = 'planned')) THEN
        RETURN NULL;
    END IF;
    IF r.stop_requested IS NOT NULL THEN
        UPDATE snowflake_id_router.rebalance x SET state = 'stopped', ended = clock_timestamp() WHERE x.id = rid;
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
        IF NOT FOUND AND others_moving THEN
            RETURN NULL;
        END IF;
        IF NOT FOUND THEN
            IF r.kind = 'drain' AND looked_again < 3 THEN
                looked_again := looked_again + 1;
                INSERT INTO snowflake_id_router.rebalance_batch (rebalance, batch, source, target, shards, bytes, state)
                SELECT rid, (SELECT max(x.batch) FROM snowflake_id_router.rebalance_batch x WHERE x.rebalance = rid) + p.batch,
                       p.source, p.target, p.shards, p.bytes, 'planned'
                  FROM snowflake_id_router.plan(r.strategy, r.batch_size, r.node) p;
                CONTINUE WHEN FOUND;
                -- Committed at once through the loopback connection, then pushed to the
                -- other routers, as a move's flip is.
                remapped := snowflake_id_router.call(snowflake_id_router.loopback(),
                    format('SELECT snowflake_id_router.remap_empty(%L, %L)::text', r.node,
                           (SELECT coalesce(jsonb_agg(jsonb_build_object('shard', m.shard, 'move', m.move)), '[]')
                              FROM snowflake_id_router.moving_shards(true) m)),
                    snowflake_id_router.timeout('lock_timeout') + interval '5 s',
                    'mapping the drained node''s shards without data')::integer;
                RAISE NOTICE 'drain %: % shard(s) of node % without data mapped to the other nodes', rid, remapped, quote_literal(r.node);
                IF remapped > 0 AND NOT snowflake_id_router.routed_everywhere(NULL) THEN
                    RAISE WARNING 'drain %: not every other router routes by the new map yet', rid
                        USING HINT = 'See router_status; repair_moves() or snowflake_id_router.push_map() brings them up to date once they can be reached.';
                END IF;
                -- This call's loopback: not left open in the caller's transaction.
                PERFORM snowflake_id_router.disconnect('sfid:self');
            END IF;
            UPDATE snowflake_id_router.rebalance x SET state = 'done', ended = clock_timestamp() WHERE x.id = rid;
            RAISE NOTICE '% % done: % shard(s) moved in % batch(es)', r.kind, rid,
                (SELECT coalesce(sum(cardinality(x.shards)), 0) FROM snowflake_id_router.rebalance_batch x WHERE x.rebalance = rid),
                (SELECT count(*) FROM snowflake_id_router.rebalance_batch x WHERE x.rebalance = rid);
            RETURN NULL;
        END IF;
        -- A shard moved meanwhile by someone else, or in a move of someone else's now, is no
        -- longer this batch's to move.
        still := ARRAY(SELECT s FROM unnest(b.shards) s
                        WHERE EXISTS (SELECT FROM snowflake_id_router.shard m WHERE m.shard = s AND m.node = b.source)
                          AND s NOT IN (SELECT m.shard FROM snowflake_id_router.moving_shards(false) m)
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
COMMENT ON FUNCTION snowflake_id_router.rebalance_next(integer, boolean) IS
  'Next batch of a rebalance or drain to move (marked moving), or NULL when it is stopped or done, or, with others_moving, has nothing to start now.';

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
            PERFORM snowflake_id_node.sleep(attempt);
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

-- == Batches moving at once (parallel_moves > 1) ==
-- Each in a loopback session of its own that this session opens (worker n: connection
-- 'sfid-rebalance:<n>', not 'sfid:*', which a move closes when it ends), running
-- rebalance_move. A worker watches this session: if it dies, the worker ends within a second
-- or two, and its move with it, as a move whose mover dies (repaired by the next call).

-- The connection of worker n, opened (and checked to reach this router) if not yet open.
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_worker(n integer) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    conn text := snowflake_id_router.open_conn('sfid-rebalance:' || n, NULL, format(
        $q$SELECT concat_ws(' ', set_config('application_name', %L, false), set_config('client_connection_check_interval', '1s', false),
                  set_config('statement_timeout', '0', false), set_config('lock_timeout', '0', false),
                  set_config('idle_in_transaction_session_timeout', '0', false),
                  set_config('default_transaction_isolation', 'read committed', false),
                  set_config('snowflake_id_router.keep_connections', 'on', false))$q$,
        format('snowflake_id_router rebalance %s worker %s', pg_backend_pid(), n)), 'setting up a rebalance worker');
BEGIN
    -- Across the rebalance's commits (a superuser's session: parallel_moves > 1 needs one).
    PERFORM snowflake_id_node.remote_keep(conn, true);
    RETURN conn;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_worker(integer) IS
  'The loopback connection of rebalance worker n of this session (opened and checked if not yet open).';

-- A worker (index into moving, whose elements are the batches moving, NULL for an idle
-- worker) whose batch has ended, its result left to read (receive); NULL if none has.
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_ended(moving integer[]) RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
BEGIN
    FOR n IN 1 .. coalesce(cardinality(moving), 0) LOOP
        CONTINUE WHEN moving[n] IS NULL;
        IF NOT snowflake_id_node.remote_busy('sfid-rebalance:' || n) THEN
            RETURN n;
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_ended(integer[]) IS
  'A rebalance worker whose batch has ended (its number), or NULL.';

-- Cancels the batches moving (each move then undoes itself, or completes if it had sealed).
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_cancel(moving integer[]) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    FOR n IN 1 .. coalesce(cardinality(moving), 0) LOOP
        CONTINUE WHEN moving[n] IS NULL;
        BEGIN
            PERFORM snowflake_id_node.remote_cancel('sfid-rebalance:' || n);
        EXCEPTION WHEN OTHERS THEN
            NULL;   -- a broken connection: its worker has ended already
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_cancel(integer[]) IS
  'Cancels the batches this session''s rebalance workers are moving.';

-- A step failed (or was cancelled: then the rebalance counts as stopped): recorded.
-- Returns the message and hint to raise.
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
    message := CASE WHEN b.batch IS NULL THEN format('%s %s: %s', r.kind, rid, why)
                    ELSE format('%s %s, batch %s (shard(s) %s from node %L to node %L): %s', r.kind, rid, b.batch,
                                array_to_string(b.shards, ', '), b.source, b.target, why) END;
    hint := CASE r.kind WHEN 'drain' THEN format('CALL drain_node(%L)', r.node) ELSE 'CALL rebalance()' END
         || ' resumes it where it stopped, once the cause is fixed; rebalance_status shows what is done.';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_failed(integer, integer, text, text) IS
  'Records a failed step of a rebalance or drain; the message and hint to raise.';

-- The loop of rebalance() and drain_node(), in the caller's session: a commit before the
-- first step (so that a call inside a transaction block, where a procedure cannot commit,
-- fails with 2D000 before it takes anything), after the plan, after marking each batch
-- moving (seen by rebalance_status) and after each batch. Each step is a SECURITY DEFINER
-- function: a procedure that commits cannot be one. Up to parallel_moves batches move at
-- once: one in this session, more each in a worker of its own. Once one fails (or this
-- session is cancelled: the others are cancelled too), no other starts; those moving end
-- first, then the first failure is recorded and raised.
CREATE OR REPLACE PROCEDURE snowflake_id_router.run_rebalance(drain text, strategy text, batch_size integer, template text,
                                                             parallel_moves integer)
LANGUAGE plpgsql
AS $$
DECLARE
    rid integer;
    batch integer;
    moving integer[] := '{}';   -- the batch each worker moves; NULL: the worker is idle
    busy integer := 0;          -- workers moving a batch
    n integer;
    failed integer;             -- the batch that failed first (NULL: a step of the rebalance)
    st text;
    msg text;
    det text;
    failure record;
    keep text;                  -- keep_connections as it was, when this session keeps them meanwhile
BEGIN
    -- A worker is a loopback session of the extension's owner (setting self_connstr), kept
    -- open in this session across commits, which only a superuser's session may do.
    IF parallel_moves BETWEEN 2 AND 8 AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
        RAISE EXCEPTION 'parallel_moves % needs a superuser: batches moving at once run in loopback sessions of the extension''s owner',
            parallel_moves USING ERRCODE = 'insufficient_privilege',
                                 HINT = 'Call it with parallel_moves => 1 (the default), or as a superuser.';
    END IF;
    COMMIT;
    IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
        PERFORM snowflake_id_router.disconnect_matching('sfid-rebalance:%');   -- workers of an earlier call cut short
    END IF;
    rid := snowflake_id_router.rebalance_begin(drain, strategy, batch_size, template, parallel_moves);
    -- A superuser's session moving the batches itself keeps its node connections from batch
    -- to batch, as the workers do (release_connections), and closes them at the end.
    IF parallel_moves = 1 AND (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
        keep := coalesce(pg_catalog.current_setting('snowflake_id_router.keep_connections', true), '');
        PERFORM pg_catalog.set_config('snowflake_id_router.keep_connections', 'on', false);
    END IF;
    COMMIT;
    LOOP
        WHILE st IS NULL AND busy < parallel_moves LOOP
            BEGIN
                batch := snowflake_id_router.rebalance_next(rid, busy > 0);
            EXCEPTION WHEN query_canceled OR OTHERS THEN
                GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
                EXIT;
            END;
            COMMIT;
            EXIT WHEN batch IS NULL;
            BEGIN
                IF parallel_moves = 1 THEN
                    PERFORM snowflake_id_router.rebalance_move(rid, batch);
                ELSE
                    n := coalesce(pg_catalog.array_position(moving, NULL), pg_catalog.cardinality(moving) + 1);
                    PERFORM snowflake_id_router.send(snowflake_id_router.rebalance_worker(n),
                        pg_catalog.format('SELECT snowflake_id_router.rebalance_move(%s, %s)', rid, batch));
                    moving[n] := batch;
                    busy := busy + 1;
                END IF;
            EXCEPTION WHEN query_canceled OR OTHERS THEN
                GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
                failed := batch;
            END;
            COMMIT;
        END LOOP;
        EXIT WHEN busy = 0;
        -- Has one of the moving batches ended? Polled between commits, so that this session
        -- never keeps a transaction open across a worker's flip: a move's clean-up waits (up
        -- to lock_timeout) for the router transactions begun before its flip.
        BEGIN
            n := snowflake_id_router.rebalance_ended(moving);
            IF n IS NULL THEN
                PERFORM snowflake_id_node.sleep(0.01);
            END IF;
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            IF st IS NULL THEN
                GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
            END IF;
            PERFORM snowflake_id_router.rebalance_cancel(moving);
            n := NULL;
        END;
        IF n IS NULL THEN
            COMMIT;
            CONTINUE;
        END IF;
        BEGIN
            -- How its batch ended: nothing, or its error raised again here.
            PERFORM snowflake_id_router.receive('sfid-rebalance:' || n, snowflake_id_node.monotonic(), NULL);
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            IF st IS NULL THEN
                GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
                failed := moving[n];
            ELSE
                UPDATE snowflake_id_router.rebalance_batch x SET state = 'failed', ended = pg_catalog.clock_timestamp(), error = SQLERRM
                 WHERE x.rebalance = rid AND x.batch = moving[n];
            END IF;
        END;
        moving[n] := NULL;
        busy := busy - 1;
        COMMIT;
    END LOOP;
    IF parallel_moves > 1 THEN
        PERFORM snowflake_id_router.disconnect_matching('sfid-rebalance:%');
    END IF;
    IF keep IS NOT NULL THEN
        PERFORM pg_catalog.set_config('snowflake_id_router.keep_connections', keep, false);
        PERFORM snowflake_id_router.disconnect_all();
    END IF;
    IF st IS NOT NULL THEN
        failure := snowflake_id_router.rebalance_failed(rid, failed, st, msg);
        COMMIT;
        RAISE EXCEPTION USING ERRCODE = st, MESSAGE = failure.message, HINT = failure.hint,
                              DETAIL = coalesce(nullif(det, ''), 'The step raised no further detail.');
    END IF;
END
$$;
COMMENT ON PROCEDURE snowflake_id_router.run_rebalance(text, text, integer, text, integer) IS
  'The loop of rebalance and drain_node: plan, then each batch moved (up to parallel_moves at once) and committed.';

CREATE OR REPLACE PROCEDURE rebalance(strategy text DEFAULT 'by_shard_count', batch_size integer DEFAULT 32,
                                      template text DEFAULT 'tpl', parallel_moves integer DEFAULT 1)
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM snowflake_id_router.require_primary('rebalance');
    CALL snowflake_id_router.run_rebalance(NULL, strategy, batch_size, template, parallel_moves);
END
$$;
COMMENT ON PROCEDURE rebalance(text, integer, text, integer) IS
  'Spreads the shards that hold data evenly over the nodes (by_shard_count or by_disk_size), batch_size shards per move, parallel_moves batches moving at once, committing after each batch; resumes an interrupted one; rebalance_stop() stops it.';

CREATE OR REPLACE PROCEDURE drain_node(node text, strategy text DEFAULT 'by_shard_count', batch_size integer DEFAULT 32,
                                       template text DEFAULT 'tpl', parallel_moves integer DEFAULT 1)
LANGUAGE plpgsql
AS $$
BEGIN
    IF node IS NULL THEN
        RAISE EXCEPTION 'drain_node: node must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM snowflake_id_router.require_primary('drain_node');
    CALL snowflake_id_router.run_rebalance(node, strategy, batch_size, template, parallel_moves);
END
$$;
COMMENT ON PROCEDURE drain_node(text, text, integer, text, integer) IS
  'Moves every shard off a node (those with data by move_shards, batch_size per move, parallel_moves batches at once, committing after each batch; the others by the map); resumes an interrupted drain.';

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
            WHEN NOT snowflake_id_router.session_alive(r.pid, r.session_start) THEN 'interrupted'
            WHEN r.stop_requested IS NOT NULL THEN 'stopping'
            ELSE 'running' END AS state,
       r.pid, r.started, r.ended, b.batches, b.batches_done, b.shards, b.shards_done, b.shards - b.shards_done AS shards_left,
       c.batch AS current_batch, c.source AS current_source, c.target AS current_target, c.shards AS current_shards,
       c.started AS current_since,
       CASE WHEN r.state = 'running' AND b.shards_done > 0
            THEN b.moving_time / b.shards_done * (b.shards - b.shards_done) / r.parallel_moves END AS time_left,
       r.error, r.parallel_moves, b.batches_moving
  FROM snowflake_id_router.rebalance r
  CROSS JOIN LATERAL (
       SELECT count(*)::integer AS batches, (count(*) FILTER (WHERE x.state = 'done'))::integer AS batches_done,
              coalesce(sum(cardinality(x.shards)), 0)::integer AS shards,
              coalesce(sum(cardinality(x.shards)) FILTER (WHERE x.state = 'done'), 0)::integer AS shards_done,
              sum(x.ended - x.started) FILTER (WHERE x.state = 'done') AS moving_time,
              (count(*) FILTER (WHERE x.state = 'moving'))::integer AS batches_moving
         FROM snowflake_id_router.rebalance_batch x WHERE x.rebalance = r.id) b
  -- (The first of the batches moving: with parallel_moves > 1 there may be several.)
  LEFT JOIN LATERAL (SELECT * FROM snowflake_id_router.rebalance_batch x
                      WHERE x.rebalance = r.id AND x.state = 'moving' ORDER BY x.batch LIMIT 1) c ON true
 ORDER BY r.id DESC;
COMMENT ON VIEW rebalance_status IS
  'Each rebalance and drain, newest first: state (running, stopping, interrupted, stopped, failed, done, abandoned), batches and shards planned and done, the (first) batch moving now, estimated time left, error, batches moving at once (allowed, now).';

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
-- node is still as read (40001 otherwise), then pushed to the followers. Returns whether
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
-- is incomplete, a node skipped) is refused by the move's own template check. No change
-- runs while a move is unfinished (its mover gone): its hidden copies would change too; the
-- nodes refuse one while they hold a move's record, whoever's (node_ddl.sql).

-- Takes the router-wide schema-change lock, (snowflake_id_node.lock_class(), -1) beside the
-- moves' shard locks, to the end of the transaction: exclusive for alter_shards, shared
-- for every move (snowflake_id_router.lock_router). Waits at most schema_change_timeout
-- for the holders (55P03 after it).
CREATE OR REPLACE FUNCTION snowflake_id_router.lock_schema_changes(exclusive boolean) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    timeout interval := snowflake_id_router.setting('schema_change_timeout')::interval;
BEGIN
    IF exclusive THEN
        IF snowflake_id_node.own_lock(snowflake_id_node.lock_class(), -1, false, false, false) THEN
            RETURN;
        END IF;
    ELSIF snowflake_id_node.own_lock(snowflake_id_node.lock_class(), -1, false, true, false) THEN
        RETURN;
    END IF;
    -- Queued behind the holders (a waiting alter_shards keeps new moves out meanwhile).
    BEGIN
        PERFORM set_config('lock_timeout', (extract(epoch FROM timeout) * 1000)::bigint::text, true);
        IF exclusive THEN
            PERFORM snowflake_id_node.own_lock(snowflake_id_node.lock_class(), -1, false, false, true);
        ELSE
            PERFORM snowflake_id_node.own_lock(snowflake_id_node.lock_class(), -1, false, true, true);
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
    unfinished text;
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
    -- A move not finished has copies no change may reach: its sealed copy on its source,
    -- its incoming one on its target, both hidden from the shard catalog's readers; changed,
    -- the old copy is kept for good and the new one may lack the change. A live move holds
    -- the lock just taken (shared), so these are moves whose mover is gone.
    SELECT string_agg(x.move, '; ') INTO unfinished
      FROM (SELECT m.move FROM snowflake_id_router.moving_shards(false) m GROUP BY m.move ORDER BY min(m.shard) LIMIT 3) x;
    IF unfinished IS NOT NULL THEN
        RAISE EXCEPTION 'alter_shards: % is not finished: a schema change must not reach its copies', unfinished
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'SELECT * FROM repair_moves() completes or undoes it (its mover is gone); then call alter_shards again.';
    END IF;
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
                    PERFORM snowflake_id_node.sleep(0.5 * attempt);
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
                    PERFORM snowflake_id_node.sleep(0.5 * attempt);
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
                       AND l.classid = snowflake_id_node.lock_class()::oid AND l.objid = (-1)::oid AND l.objsubid = 3
                       AND l.mode = 'ExclusiveLock')
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
-- Superuser only, unless granted: these run as the extension's owner (SECURITY DEFINER).
REVOKE ALL ON FUNCTION add_node(text, text), assign_shards(integer, integer, text),
    move_shard(integer, text, text), move_shards(integer[], text, text), repair_moves() FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_router FROM PUBLIC;
REVOKE ALL ON shard_map, move_history FROM PUBLIC;
REVOKE ALL ON FUNCTION rebalance_plan(text, integer, text), rebalance_stop(), alter_node(text, text),
    remove_node(text) FROM PUBLIC;
REVOKE ALL ON PROCEDURE rebalance(text, integer, text, integer), drain_node(text, text, integer, text, integer) FROM PUBLIC;
REVOKE ALL ON ALL PROCEDURES IN SCHEMA snowflake_id_router FROM PUBLIC;
REVOKE ALL ON node_status, shard_status, rebalance_status FROM PUBLIC;
REVOKE ALL ON FUNCTION alter_shards(text, text, boolean), abandon_schema_change(bigint),
    template_status(text, boolean), add_router(text, text), remove_router(text) FROM PUBLIC;
REVOKE ALL ON schema_change_status, router_status FROM PUBLIC;
