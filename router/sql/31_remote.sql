-- == Calls on nodes and on the router itself, every one bounded ==
--
-- A move talks to its nodes through connections named by node_conn_name (one per node per
-- call, reused by the repairs the move runs) and to its own database through 'sfid:self',
-- the loopback connection that commits each step's record and the flip. Every call is
-- sent, then waited for against a deadline of the monotonic clock, then cancelled; the wait
-- is interruptible, so a mover waiting on a node can always be cancelled or terminated, and
-- its node sessions, which hold its shard locks, end with it (10_connections.sql says whose
-- connections these are and when they close).

-- The one function that reuses a connection: conn of this call (or kept by this superuser's
-- session), the one open under that name, or a new one (to node, identity checked:
-- connect_node; to this router database when node is NULL: connect_self) set up by
-- settings, a query run once. node_conn, loopback and rebalance_worker name theirs.
CREATE OR REPLACE FUNCTION snowflake_id_router.reuse_conn(conn text, node text, settings text, what text) RETURNS text
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
COMMENT ON FUNCTION snowflake_id_router.reuse_conn(text, text, text, text) IS
  'The connection conn of this session, opened (to node, or to this router when NULL) and set up by settings if not yet open.';

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

-- The one function that gives this session's connection to a node (node_conn_name), opened
-- if absent. Its session watches the router: if the mover dies, it ends (and its locks go)
-- within seconds, even while it runs a statement or the network is cut.
CREATE OR REPLACE FUNCTION snowflake_id_router.node_conn(node text) RETURNS text
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_router.reuse_conn(snowflake_id_router.node_conn_name(node), node, format(
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
    RETURN snowflake_id_router.reuse_conn('sfid:self', NULL, format(
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

-- A change to a move's record (record_move: a transition, and what the step learnt),
-- committed through the loopback connection, so that it stands whatever becomes of this
-- session's transaction. NULL: unchanged.
CREATE OR REPLACE FUNCTION snowflake_id_router.note(move_id bigint, state snowflake_id_router.move_state DEFAULT NULL,
                                                    schemas text[] DEFAULT NULL, suboid oid DEFAULT NULL,
                                                    fenced timestamptz DEFAULT NULL, rows bigint DEFAULT NULL,
                                                    error text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM snowflake_id_router.call(snowflake_id_router.loopback(),
        format('SELECT snowflake_id_router.record_move(%s, %L, %L, %L, %L, %L, %L, %L)', move_id, state, schemas, suboid, fenced,
               rows, error, snowflake_id_router.session_token()),
        snowflake_id_router.timeout('lock_timeout') + interval '1 s', 'recording the move');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.note(bigint, snowflake_id_router.move_state, text[], oid, timestamptz, bigint, text) IS
  'Commits a change to a move''s record (record_move) through the loopback connection; NULL arguments leave their fields as they are.';

-- Enters a step: recorded, then the test hook.
CREATE OR REPLACE FUNCTION snowflake_id_router.enter(move_id bigint, state snowflake_id_router.move_state) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM snowflake_id_router.note(move_id, state);
    PERFORM snowflake_id_router.pause_at(state::text);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.enter(bigint, snowflake_id_router.move_state) IS
  'Records that a move enters a step, then pauses there if a test asks.';

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
