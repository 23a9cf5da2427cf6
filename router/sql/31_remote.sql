-- == Calls on nodes and on the router itself, every one bounded ==
--
-- A move talks to its nodes through dblink connections named by node_conn_name (one per node
-- per session, reused by the repairs the move runs) and to its own database through
-- 'sfid:self', the loopback connection that commits each step's record and the flip.
-- Every call is sent asynchronously and polled against a deadline, then cancelled: a
-- blocking dblink call cannot be interrupted, while a poll (pg_sleep) can, so a mover
-- waiting on a node can always be cancelled or terminated, and its node sessions, which
-- hold its shard locks, end with it.

-- A named dblink connection of this session: the one open under that name, or a new one
-- (to node, identity checked; to this router database when node is NULL) set up by
-- settings, a query run once.
CREATE OR REPLACE FUNCTION snowflake_id_router.open_conn(conn text, node text, settings text, what text) RETURNS text
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    open text[];
BEGIN
    EXECUTE format('SELECT %s.dblink_get_connections()', snowflake_id_router.dblink_schema()) INTO open;
    IF conn = ANY (open) THEN
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
  'The dblink connection conn of this session, opened (to node, or to this router when NULL) and set up by settings if not yet open.';

-- The connection to node. Its session watches the router: if the mover dies, it ends (and
-- its locks go) within seconds, even while it runs a statement or the network is cut.
-- The name of this session's connection to a node: never the loopback's ('sfid:self', and a
-- node may be named 'self'), and bounded (dblink cuts a name at 63 bytes, which a node's
-- name may have: two nodes' connections would share one).
CREATE OR REPLACE FUNCTION snowflake_id_router.node_conn_name(node text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN 'sfid:node:' || md5(node);
COMMENT ON FUNCTION snowflake_id_router.node_conn_name(text) IS
  'The name of this session''s dblink connection to a node: sfid:node:<md5 of its name>.';

-- Where a connection leads, for messages: node '<name>', or the router.
CREATE OR REPLACE FUNCTION snowflake_id_router.conn_place(conn text) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN coalesce((SELECT format('node %L', n.name) FROM snowflake_id_router.node n
                  WHERE snowflake_id_router.node_conn_name(n.name) = conn), 'the router');
COMMENT ON FUNCTION snowflake_id_router.conn_place(text) IS
  'What a dblink connection of this session leads to, for messages: node ''<name>'' or the router.';

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
  'The dblink connection of this session to node (node_conn_name; opened, identity checked, if not yet open).';

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

-- Closes every connection of this session whose name is LIKE pattern. Never fails.
CREATE OR REPLACE FUNCTION snowflake_id_router.disconnect_matching(pattern text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    d text := snowflake_id_router.dblink_schema();
    open text[];
    c text;
BEGIN
    EXECUTE format('SELECT %s.dblink_get_connections()', d) INTO open;
    FOR c IN SELECT x FROM unnest(open) x WHERE x LIKE pattern LOOP
        BEGIN
            EXECUTE format('SELECT %s.dblink_disconnect($1::text)', d) USING c;
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            NULL;  -- a broken connection is gone already
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.disconnect_matching(text) IS
  'Closes this session''s dblink connections whose names are LIKE pattern.';

-- Closes every connection of this session named sfid:*, releasing the node locks held
-- through them. Never fails.
CREATE OR REPLACE FUNCTION snowflake_id_router.disconnect_all() RETURNS void
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_router.disconnect_matching('sfid:%');
COMMENT ON FUNCTION snowflake_id_router.disconnect_all() IS
  'Closes this session''s sfid:* dblink connections (node locks held through them go with them).';

-- Connections kept from one move to the next. A new node connection costs a move more than
-- its connecting: a fresh node session reads the catalogs and compiles and plans every
-- step's function again (batches of 12 with no other load: 401 ms a move with new
-- connections, 285 ms with kept ones). A session whose snowflake_id_router.keep_connections
-- is on (a rebalance's or drain's: its own and its workers') keeps them after a move that
-- succeeded, with the node locks taken through them released; any other session closes
-- them, and so does a session whose user is not a superuser: the connections are the
-- extension owner's, and a role holding one after the move's SECURITY DEFINER function
-- returned could use it through dblink. Before a move reuses one it asks the node session
-- what it was opened with (connect_node): one whose node was repointed since (alter_node)
-- or removed is closed.
CREATE OR REPLACE FUNCTION snowflake_id_router.release_connections() RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    open text[];
    c text;
BEGIN
    IF current_setting('snowflake_id_router.keep_connections', true) IS DISTINCT FROM 'on'
       OR NOT (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user) THEN
        PERFORM snowflake_id_router.disconnect_all();
        RETURN;
    END IF;
    EXECUTE format('SELECT %s.dblink_get_connections()', snowflake_id_router.dblink_schema()) INTO open;
    FOR c IN SELECT x FROM unnest(open) x WHERE x LIKE 'sfid:node:%' LOOP
        BEGIN
            PERFORM snowflake_id_router.call(c, 'SELECT pg_catalog.pg_advisory_unlock_all()', interval '10 s',
                                             'releasing the shard locks');
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            PERFORM snowflake_id_router.disconnect(c);
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.release_connections() IS
  'After a move that succeeded: closes this session''s sfid:* connections, or, with keep_connections on, releases the node locks held through them.';

CREATE OR REPLACE FUNCTION snowflake_id_router.check_connections() RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    open text[];
    c text;
BEGIN
    EXECUTE format('SELECT %s.dblink_get_connections()', snowflake_id_router.dblink_schema()) INTO open;
    FOR c IN SELECT x FROM unnest(open) x WHERE x LIKE 'sfid:node:%' LOOP
        BEGIN
            IF snowflake_id_router.call(c, $q$SELECT pg_catalog.current_setting('snowflake_id_router.connstr', true)$q$,
                                        interval '10 s', 'checking a kept connection')
               IS DISTINCT FROM (SELECT md5(n.connstr) FROM snowflake_id_router.node n WHERE snowflake_id_router.node_conn_name(n.name) = c) THEN
                PERFORM snowflake_id_router.disconnect(c);
            END IF;
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            PERFORM snowflake_id_router.disconnect(c);
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.check_connections() IS
  'Before a move: closes this session''s node connections whose node was repointed or removed since they were opened.';

-- After an interruption (a cancel, a timeout) a call may still run on a node: cancels every
-- call in flight on this session's sfid:* connections and consumes what is left (a
-- connection that will not settle is closed), so the undo that follows can use them.
CREATE OR REPLACE FUNCTION snowflake_id_router.settle_all() RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    d text := snowflake_id_router.dblink_schema();
    open text[];
    c text;
    busy integer;
BEGIN
    EXECUTE format('SELECT %s.dblink_get_connections()', d) INTO open;
    FOR c IN SELECT x FROM unnest(open) x WHERE x LIKE 'sfid:%' LOOP
        BEGIN
            EXECUTE format('SELECT %s.dblink_is_busy($1::text)', d) INTO busy USING c;
            IF busy = 1 THEN
                EXECUTE format('SELECT %s.dblink_cancel_query($1::text)', d) USING c;
            END IF;
            PERFORM snowflake_id_router.drain(c, clock_timestamp() + interval '2 s');
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            PERFORM snowflake_id_router.disconnect(c);
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.settle_all() IS
  'Cancels the calls in flight on this session''s sfid:* connections and consumes their results (closing a connection that will not settle).';

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
  'Rolls back the transaction open on dblink connection conn, closing the connection if that fails.';

-- How long a wait that began at began sleeps before its next look: a tenth of the time
-- waited so far, between low and high seconds, so an answer is taken at most about 10% late
-- and a long wait costs few looks. (receive and poll.)
CREATE OR REPLACE FUNCTION snowflake_id_router.nap(began timestamptz, low double precision, high double precision)
RETURNS double precision
LANGUAGE sql VOLATILE STRICT PARALLEL SAFE
RETURN least(greatest(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() - began) / 10, low), high);
COMMENT ON FUNCTION snowflake_id_router.nap(timestamptz, double precision, double precision) IS
  'The sleep before a wait''s next look: a tenth of the time waited since began, between low and high seconds.';

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
-- again with its SQLSTATE, detail and hint, its message prefixed by what and where (unless
-- what is NULL).
CREATE OR REPLACE FUNCTION snowflake_id_router.receive(conn text, deadline timestamptz, what text) RETURNS text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    d text := snowflake_id_router.dblink_schema();
    busy integer;
    began timestamptz := clock_timestamp();
    result text;
    st text;
    msg text;
    det text;
    hnt text;
BEGIN
    LOOP
        EXECUTE format('SELECT %s.dblink_is_busy($1::text)', d) INTO busy USING conn;
        EXIT WHEN busy = 0;
        IF clock_timestamp() >= deadline THEN
            EXECUTE format('SELECT %s.dblink_cancel_query($1::text)', d) USING conn;
            PERFORM snowflake_id_router.drain(conn, clock_timestamp() + interval '2 s');
            RAISE EXCEPTION '% on % did not finish in time', what, snowflake_id_router.conn_place(conn) USING ERRCODE = 'query_canceled';
        END IF;
        PERFORM pg_sleep(snowflake_id_router.nap(began, 0.0002, 0.01));
    END LOOP;
    BEGIN
        EXECUTE format('SELECT v FROM %s.dblink_get_result($1::text) AS r(v text)', d) INTO result USING conn;
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        IF st LIKE '08%' AND conn = 'sfid:self' THEN
            -- A broken loopback connection goes (it holds no lock): the next loopback()
            -- opens another, so what follows (recording the error) still reaches the router.
            PERFORM snowflake_id_router.disconnect(conn);
        ELSE
            PERFORM snowflake_id_router.drain(conn, clock_timestamp() + interval '2 s');
        END IF;
        IF what IS NOT NULL THEN
            msg := format('%s on %s: %s', what, snowflake_id_router.conn_place(conn), msg);
        END IF;
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

-- Consumes what is left of the results on conn, up to the empty one that ends them; a
-- connection that stays busy past deadline (a cancel that does not take), or is broken, is
-- closed.
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
    LOOP
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
            -- An empty result is the end: the queries sent here return one row or fail.
            EXECUTE format('SELECT count(*) FROM %s.dblink_get_result($1::text) AS r(v text)', d) INTO n USING conn;
            EXIT WHEN n = 0;
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            -- An error result (a cancelled query's) is consumed too; a broken connection goes.
            IF SQLSTATE LIKE '08%' OR clock_timestamp() >= deadline THEN
                PERFORM snowflake_id_router.disconnect(conn);
                RETURN;
            END IF;
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.drain(text, timestamptz) IS
  'Consumes the remaining results on dblink connection conn; closes it if it stays busy past deadline or is broken.';

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

-- Polls sql (a boolean) on conn until true; 57014 at the deadline, also one passed before
-- the first look (a wait's bound holds however quickly the answer would have come).
CREATE OR REPLACE FUNCTION snowflake_id_router.poll(conn text, sql text, deadline timestamptz, what text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    began timestamptz := clock_timestamp();
BEGIN
    LOOP
        IF clock_timestamp() < deadline THEN
            EXIT WHEN snowflake_id_router.call(conn, sql, greatest(deadline - clock_timestamp(), interval '0'), what)::boolean;
        END IF;
        IF clock_timestamp() >= deadline THEN
            RAISE EXCEPTION '% on % did not finish in time', what, snowflake_id_router.conn_place(conn)
                USING ERRCODE = 'query_canceled';
        END IF;
        PERFORM pg_sleep(snowflake_id_router.nap(began, 0.001, 0.02));   -- (each look is a round trip)
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
