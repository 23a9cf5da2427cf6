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

-- A SECURITY DEFINER function shares its caller's transaction: what it locks or writes
-- there (a table lock, a row, an owner-only lock) is held until that transaction ends, by
-- a session the caller controls. So none of them locks or writes there: a function gives
-- back what it took before it returns (the moves, repair_moves, alter_shards:
-- unlock_router, unlock_schema_changes), or commits its writes and table locks apart, in a
-- transaction of a connection of its own (commit_apart, and the loopback of the moves'
-- records). No check can do instead: the first Execute of an extended-protocol pipeline
-- runs as a lone statement would, and the client may then never send its Sync (the
-- backend stays active: no idle timeout ends it). The functions that commit apart refuse
-- to run where the caller's transaction is seen to outlive the statement, as VACUUM does,
-- since a ROLLBACK there would not undo them: 25001 inside a transaction block, a pipeline
-- after its first Execute, or a subtransaction that no procedure's COMMIT began
-- (snowflake_id_node.in_transaction_block; CALL rebalance() runs its steps in transactions
-- of its own). Called first thing, at the function's top level.
CREATE OR REPLACE FUNCTION snowflake_id_router.refuse_transaction_block(what text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF snowflake_id_node.in_transaction_block() THEN
        RAISE EXCEPTION '% cannot run inside a transaction block', what USING ERRCODE = 'active_sql_transaction',
            DETAIL = 'It commits what it changes itself: a ROLLBACK of the transaction would not undo it.',
            HINT = 'Run it on its own, outside BEGIN ... COMMIT and outside a function''s EXCEPTION block.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.refuse_transaction_block(text) IS
  '25001 when the caller''s transaction is seen to stay open after the statement running now (a transaction block): for the SECURITY DEFINER functions that commit what they change apart.';

-- Runs sql in a transaction of its own on this router database, committed before it
-- returns, through a connection opened for it and closed after it (also on error: with the
-- subtransaction that opened it): the writes and table locks of the router's SECURITY
-- DEFINER functions, which the caller's transaction then never holds. Waits under the
-- caller's lock_timeout, interruptibly; remote errors keep their SQLSTATE and message.
-- The first column of its first row.
CREATE OR REPLACE FUNCTION snowflake_id_router.commit_apart(sql text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result text;
BEGIN
    PERFORM snowflake_id_router.connect_self('snowflake_id_router_apart');
    PERFORM snowflake_id_router.fetch('snowflake_id_router_apart',
        format('SELECT pg_catalog.set_config(%L, %L, false)', 'lock_timeout', current_setting('lock_timeout')));
    result := snowflake_id_router.fetch('snowflake_id_router_apart', sql);
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_apart');
    RETURN result;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.commit_apart(text) IS
  'Runs sql in a transaction of its own on this router database, committed before it returns (the writes of the router''s SECURITY DEFINER functions); the first column of its first row.';

-- The one function that opens a connection: conn (reopened if open) by connstr; peer names
-- it in messages. Waits at most the connect string's connect_timeout (10 s without one).
-- connect_node and connect_self open one to a registered node or to this router and check
-- what it reaches; reuse_conn (31_remote.sql) reuses this session's connection of a name,
-- opening it through them if absent.
CREATE OR REPLACE FUNCTION snowflake_id_router.connect(conn text, connstr text, peer text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
AS $$
DECLARE
    options text;
    timeout text;
BEGIN
    PERFORM snowflake_id_node.remote_close(conn);
    SELECT max(c.value) FILTER (WHERE c.keyword = 'options'), max(c.value) FILTER (WHERE c.keyword = 'connect_timeout')
      INTO options, timeout FROM snowflake_id_node.conninfo(connstr) c;
    PERFORM snowflake_id_node.remote_open(conn, connstr, options, peer,
        -- (No regular expression here: a move's flip reconnects with cancels held off, and a
        -- cancel held pending makes PostgreSQL's regular expressions fail.)
        CASE WHEN length(btrim(timeout)) BETWEEN 1 AND 6 AND translate(btrim(timeout), '0123456789', '') = ''
                  AND timeout::integer > 0 THEN greatest(timeout::integer, 2) ELSE 10 END);
    -- remote_open has checked, in pg_catalog alone, that the extension's schemas there can
    -- be changed by superusers only (55000 otherwise): src/pg/node/home.rs.
END
$$;
COMMENT ON FUNCTION snowflake_id_router.connect(text, text, text) IS
  'Opens (or reopens) the router''s connection conn by connstr (its session set up with the router''s settings), refused (55000) unless the extension snowflake_id made the schema snowflake_id_node there and only superusers can change its schemas; peer names it in messages.';

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

-- The options a node's connect string may hold (normalize_connstr): where the server is and
-- who connects, timeouts and keepalives, TLS and GSS encryption as the server user's own
-- files and defaults give them. Not listed, so refused: anything that writes a file
-- (sslkeylogfile), hands on credentials (gssdelegation, oauth_*), changes the protocol
-- (replication), or names settings of its own (service, passfile, options); secrets are
-- refused apart.
CREATE OR REPLACE FUNCTION snowflake_id_router.connstr_keywords() RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ARRAY['host', 'hostaddr', 'port', 'dbname', 'user', 'connect_timeout', 'client_encoding', 'application_name',
             'fallback_application_name', 'keepalives', 'keepalives_idle', 'keepalives_interval', 'keepalives_count',
             'tcp_user_timeout', 'sslmode', 'sslnegotiation', 'sslcompression', 'sslcert', 'sslkey', 'sslrootcert',
             'sslcrl', 'sslcrldir', 'sslsni', 'ssl_min_protocol_version', 'ssl_max_protocol_version',
             'min_protocol_version', 'max_protocol_version', 'requirepeer', 'gssencmode', 'krbsrvname', 'gsslib',
             'channel_binding', 'require_auth', 'target_session_attrs', 'load_balance_hosts'];
COMMENT ON FUNCTION snowflake_id_router.connstr_keywords() IS
  'The libpq options a node''s connect string may hold; any other is refused (22023).';

-- A connect string as libpq reads it (PQconninfoParse, through snowflake_id), each value
-- quoted: whatever PL/Proxy, the router or a subscription appends to it stays an option of its
-- own. Secrets are refused: connect strings are readable by every role. So is a service
-- (service, servicefile: an entry of a connection service file, which libpq reads only when
-- it connects): it can hold a user and a password, which would pass the checks here and
-- the callers' (a user's warning) unseen. So is a password file of the caller's choosing
-- (passfile: libpq would send the router's server user's passwords from any file it can read
-- to the server the string names). And so is more than one server (a host, hostaddr or port
-- list): a node is known by its identity, checked when the router connects, but PL/Proxy's
-- routed calls are not, and would land on the next host when the first is down. Nor a
-- hostaddr beside a host: libpq connects to the address but looks the password up (in
-- ~/.pgpass of the router's server user) by the host, so a real node's password would go to
-- whatever server listens at the address. Nor server options (options): every role's routed
-- calls through PL/Proxy would start with them (default_transaction_read_only refusing every
-- write; with a superuser in the string, session_replication_role = replica, under which
-- a move's fence triggers do not fire).
CREATE OR REPLACE FUNCTION snowflake_id_router.normalize_connstr(connstr text) RETURNS text
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    secret text;
    service text;
    unknown text;
    several text;
    split text;
    normal text;
BEGIN
    SELECT string_agg(c.keyword, ', ') FILTER (WHERE c.secret),
           string_agg(c.keyword, ', ') FILTER (WHERE c.keyword IN ('service', 'servicefile', 'passfile', 'options')),
           string_agg(c.keyword, ', ') FILTER (WHERE NOT c.secret
                      AND c.keyword NOT IN ('service', 'servicefile', 'passfile', 'options')
                      AND c.keyword <> ALL (snowflake_id_router.connstr_keywords())),
           string_agg(c.keyword, ', ') FILTER (WHERE c.keyword IN ('host', 'hostaddr', 'port') AND strpos(c.value, ',') > 0),
           CASE WHEN count(*) FILTER (WHERE c.keyword IN ('host', 'hostaddr') AND c.value <> '') = 2 THEN 'host, hostaddr' END,
           string_agg(c.keyword || '=' || snowflake_id_router.conn_value(c.value), ' ')
      INTO secret, service, unknown, several, split, normal FROM snowflake_id_node.conninfo(connstr) c;
    IF secret IS NOT NULL THEN
        RAISE EXCEPTION 'the connect string holds a secret (%)', secret
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Connect strings are readable by every role (pg_foreign_server.srvoptions).',
                  HINT = 'Put the password in ~/.pgpass of the router''s server user (see docs/security.md).';
    END IF;
    IF service IS NOT NULL THEN
        RAISE EXCEPTION 'the connect string names settings or passwords of its own (%)', service
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A service file entry can hold a user and a password, which the router would not see; a password file of the caller''s choosing would give its passwords to the server named; server options would steer every routed call.',
                  HINT = 'Give the options directly (host, port, dbname ...), the password in ~/.pgpass of the router''s server user.';
    END IF;
    IF unknown IS NOT NULL THEN
        RAISE EXCEPTION 'the connect string names options a node''s connect string may not hold (%)', unknown
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'The router''s server user connects with them: an option that writes a file (sslkeylogfile), hands on credentials (gssdelegation, oauth_*) or changes the protocol (replication) would do so with its rights.',
                  HINT = 'Allowed: ' || array_to_string(snowflake_id_router.connstr_keywords(), ', ') || '.';
    END IF;
    IF several IS NOT NULL THEN
        RAISE EXCEPTION 'the connect string names more than one server (%)', several
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Routed calls would go to the next server listed when the first is down, whatever database it holds.',
                  HINT = 'Name one server; after a failover, alter_node repoints the node.';
    END IF;
    IF split IS NOT NULL THEN
        RAISE EXCEPTION 'the connect string names a server by both host and hostaddr'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'libpq connects to hostaddr but sends the password it keeps for host: a node''s password would go to another server.',
                  HINT = 'Give host alone (a name or an address).';
    END IF;
    IF normal IS NULL THEN
        RAISE EXCEPTION 'the connect string is empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN normal;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.normalize_connstr(text) IS
  'A connect string as libpq reads it, as key=''value'' pairs; 22023 for a secret, a service or password file, more than one server, host with hostaddr, or what libpq refuses.';

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
                    -- Whether a move compares its copies' content before the seal (34_verify.sql).
                    WHEN 'verify_moves' THEN 'on'
                    -- How far behind the source a move's target may be when it fences
                    -- (32_move.sql, near_fence): what the fence then waits to catch up.
                    WHEN 'switch_lag' THEN '16MB'
                    -- How often a move fences before it gives up on its target catching
                    -- up within cutover_timeout (32_move.sql, fence_lifted).
                    WHEN 'fence_attempts' THEN '3'
                    -- How long a move keeps its old copy current, to be reverted (35_keep.sql).
                    WHEN 'revert_window' THEN '0'
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
    found_identity := snowflake_id_router.remote_node_identity(conn);
    IF n.identity IS NULL THEN
        PERFORM snowflake_id_router.check_new_identity(node, found_identity);
        UPDATE snowflake_id_router.node r SET identity = found_identity WHERE r.name = connect_node.node;
    ELSIF NOT snowflake_id_router.same_node(n.identity, found_identity) THEN
        PERFORM snowflake_id_router.disconnect(conn);
        RAISE EXCEPTION 'node % now reaches another database (identity %, registered as %)',
            quote_literal(node), found_identity, n.identity
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A node is identified by its system identifier, database OID and the mark the router wrote into it. Repoint it with alter_node(name, connstr) only to the same database (or its promoted standby).';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.connect_node(text, text) IS
  'Opens connection conn to a node and checks that it reaches the database the node is registered as; 55000 otherwise.';

-- The identity of what connection conn reaches, read with pg_catalog alone (as every
-- connection's first query: connect()).
CREATE OR REPLACE FUNCTION snowflake_id_router.remote_identity(conn text, node text) RETURNS text
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_router.fetch(conn, $q$
    SELECT pg_catalog.concat(c.system_identifier, '/', db.oid)
      FROM pg_catalog.pg_control_system() c, pg_catalog.pg_database db
     WHERE db.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()$q$);
COMMENT ON FUNCTION snowflake_id_router.remote_identity(text, text) IS
  'The identity (system identifier/database OID) of what a connection reaches, read with pg_catalog alone.';

-- What connection conn reaches as a node: its identity (remote_identity), then '/' and the
-- mark the router wrote into it when it registered it (snowflake_id_node.node_mark), if it
-- has one. A physical standby carries its primary's mark; copies of one initdb, which share
-- the rest, get different ones. A node whose snowflake_id predates 0.4.0 has no mark.
CREATE OR REPLACE FUNCTION snowflake_id_router.remote_node_identity(conn text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    seen text := snowflake_id_router.remote_identity(conn, '');
BEGIN
    -- Read from the table, as the rest from pg_catalog, never through a function of the node's.
    IF snowflake_id_router.fetch(conn, $q$
           SELECT (pg_catalog.to_regclass('snowflake_id_node.node_mark') IS NOT NULL)::text$q$)::boolean THEN
        seen := seen || coalesce('/' || nullif(snowflake_id_router.fetch(conn,
                    'SELECT m.mark::pg_catalog.text FROM snowflake_id_node.node_mark m'), ''), '');
    END IF;
    RETURN seen;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.remote_node_identity(text) IS
  'The identity of the node a connection reaches: system identifier/database OID/the mark the router gave it (if any).';

-- The system identifier/database OID part of a node identity (what remote_identity reads).
CREATE OR REPLACE FUNCTION snowflake_id_router.database_of(identity text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN split_part(identity, '/', 1) || '/' || split_part(identity, '/', 2);
COMMENT ON FUNCTION snowflake_id_router.database_of(text) IS
  'The system identifier/database OID part of a node identity, without its mark.';

-- The mark part of a node identity (NULL for one without).
CREATE OR REPLACE FUNCTION snowflake_id_router.node_mark_of(identity text) RETURNS uuid
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN nullif(split_part(identity, '/', 3), '')::uuid;
COMMENT ON FUNCTION snowflake_id_router.node_mark_of(text) IS
  'The mark part of a node identity (system identifier/database OID/mark), NULL if it has none.';

-- Whether found (remote_node_identity) is the node registered as registered. A node
-- registered by 0.3.0 (or whose snowflake_id is older) has no mark: its system identifier
-- and database OID decide, as they did then. The rule of every identity check on nodes.
CREATE OR REPLACE FUNCTION snowflake_id_router.same_node(registered text, found text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN registered = found
    OR (snowflake_id_router.node_mark_of(registered) IS NULL
        AND registered = snowflake_id_router.database_of(found));
COMMENT ON FUNCTION snowflake_id_router.same_node(text, text) IS
  'Whether a node found (its identity) is the node registered: the same mark, or for a node without one the same system identifier and database OID.';

-- Gives the node connection conn reaches (identity seen) a mark, if it has none, and returns
-- its identity with it. A mark already there is kept: another router registered the node,
-- or an add_node here did not commit; rewritten, the node would become another one for
-- every router that knows it. Compare and set: of two calls at once, one marks it, the other
-- fails (40001). seen itself from a node whose snowflake_id predates marks.
CREATE OR REPLACE FUNCTION snowflake_id_router.mark_node(conn text, seen text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    mark uuid := gen_random_uuid();
BEGIN
    IF snowflake_id_router.node_mark_of(seen) IS NOT NULL OR NOT snowflake_id_router.fetch(conn, $q$
           SELECT (pg_catalog.to_regprocedure('snowflake_id_node.set_node_mark(uuid,uuid)') IS NOT NULL)::text$q$)::boolean THEN
        RETURN seen;
    END IF;
    PERFORM snowflake_id_router.fetch(conn, format('SELECT snowflake_id_node.set_node_mark(%L, NULL)::text', mark));
    RETURN snowflake_id_router.database_of(seen) || '/' || mark;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.mark_node(text, text) IS
  'Writes an identity mark into the node a connection reaches if it has none (40001 if another call did meanwhile); returns its identity with its mark, seen if its snowflake_id has no marks.';

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
    SELECT n.name INTO other FROM snowflake_id_router.node n
     WHERE snowflake_id_router.same_node(n.identity, new_identity) AND n.name <> node;
    IF FOUND THEN
        RAISE EXCEPTION 'node % is the same database as node % (identity %)', quote_literal(node), quote_literal(other), new_identity
            USING ERRCODE = 'duplicate_object',
                  HINT = 'A node is identified by the mark the router wrote into it (with its system identifier and database OID), whatever connect string reaches it; a physical standby carries its primary''s.';
    END IF;
    IF snowflake_id_router.database_of(new_identity) = snowflake_id_node.identity() THEN
        RAISE EXCEPTION 'node % is this router database itself (identity %)', quote_literal(node), new_identity
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A router routes to data nodes; a shard placed here would route every call back to the router.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.check_new_identity(text, text) IS
  'Refuses an identity already registered under another node name (42710) or this router''s own (55000).';
