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
    -- What it was opened with, kept in the node's session: a session that keeps its node
    -- connections from move to move (keep_connections) opens it again once the node is
    -- repointed (a promoted standby keeps the identity: the old primary could still answer).
    PERFORM snowflake_id_router.fetch(conn, format('SELECT set_config(%L, %L, false)', 'snowflake_id_router.connstr', md5(n.connstr)));
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
