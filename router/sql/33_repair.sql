-- == Repair: moves whose mover is gone ==
--
-- A move's mover holds the router's locks of its shards for its transaction and its shard
-- locks on both nodes through its node sessions. A move record that is neither done nor
-- undone and whose router locks can be taken belongs to a mover that is gone: a move
-- sealed on its source is completed, any other undone. repair_moves() does this for every
-- such move, and removes what this router's moves left on the nodes without a record on the
-- router (a restored dump, say); every move does it first for the moves of its own shards.
-- A sealed move whose mover lives but stalled past its complete_by is taken over (take_over).

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
    -- This session drives it from now on: its record changes compare the owner.
    PERFORM snowflake_id_router.call(snowflake_id_router.loopback(),
        format('SELECT snowflake_id_router.take_move(%s, %L, false)', move_id, snowflake_id_router.session_token()),
        snowflake_id_router.timeout('lock_timeout') + interval '1 s', 'taking the move over');
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    IF snowflake_id_router.move_before_seal(m.state) THEN
        left_over := snowflake_id_router.undo_move(move_id, coalesce(m.error, format('interrupted while %s', m.state)));
        IF left_over IS NULL THEN
            RETURN 'undone';
        ELSIF left_over <> 'sealed' THEN
            RETURN 'not undone yet: left ' || left_over;
        END IF;
    END IF;
    PERFORM snowflake_id_router.complete_move(move_id);
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    RETURN CASE WHEN m.state = 'done' THEN 'completed'
                WHEN m.state = 'kept' THEN format('kept: its old copy until %s', m.revert_until)
                ELSE 'completed, clean-up not done: ' || coalesce(m.error, m.state::text) END;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.repair_move(bigint) IS
  'Completes (if sealed) or undoes a move whose mover is gone; the caller holds its router locks.';

-- A move whose mover lives (its router locks held) but has not flipped it by its
-- complete_by (stalled after its seal: kill -STOP, a paused VM, a network that holds):
-- taken over (take_move, which orders it with the mover's own record changes: exactly one
-- goes on), the mover's sessions on both nodes ended (snowflake_id_node.take_over: those
-- holding the move's owner-only shard locks, which nothing but a move takes), then
-- completed from the seal (or undone, were the seal not committed). The mover, thawed,
-- fails with 55000 (check_owner). 'running: <state>' for a move not yet past its time.
CREATE OR REPLACE FUNCTION snowflake_id_router.take_over(move_id bigint) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    wait interval := snowflake_id_router.timeout('lock_timeout');
    n text;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    IF NOT snowflake_id_router.call(snowflake_id_router.loopback(),
            format('SELECT snowflake_id_router.take_move(%s, %L, true)', move_id, snowflake_id_router.session_token()),
            wait + interval '1 s', 'taking the move over')::boolean THEN
        RETURN 'running: ' || m.state;
    END IF;
    BEGIN
        FOREACH n IN ARRAY ARRAY[m.source, m.target] LOOP
            PERFORM snowflake_id_router.call(snowflake_id_router.node_conn(n),
                format('SELECT snowflake_id_node.take_over(%L, %L)', snowflake_id_router.move_key(move_id), wait),
                wait + interval '10 s', 'ending the stalled mover''s sessions');
        END LOOP;
        RETURN 'taken over from its stalled mover: ' || snowflake_id_router.repair_move(move_id);
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        IF snowflake_id_router.cancelled(SQLSTATE, SQLERRM) THEN
            RAISE;
        END IF;
        RETURN format('taken over from its stalled mover, not repaired: %s (%s)', SQLERRM, SQLSTATE);
    END;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.take_over(bigint) IS
  'Completes a sealed move whose living mover did not flip it by its complete_by: taken over, the mover''s node sessions ended; else ''running: <state>''.';

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
              WHERE r.shards && repair_shards.shards AND NOT snowflake_id_router.move_finished(r.state) ORDER BY r.id LOOP
        PERFORM snowflake_id_router.lock_router(m.shards);
        PERFORM snowflake_id_router.end_window(m.id);   -- (a move that keeps its old copy: 35_keep.sql)
        outcome := snowflake_id_router.repair_move(m.id);
        PERFORM snowflake_id_router.unlock_router(m.shards);
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

-- What this router's moves left on node without a record on the router to follow (a
-- restored dump, say): a record not sealed is undone there, a sealed one reported; what
-- has no record at all is removed (drop_orphans). One row for each; a node that cannot be
-- read is one row (and a WARNING), after the rows of what was done there.
CREATE OR REPLACE FUNCTION snowflake_id_router.repair_node(node text) RETURNS TABLE (move bigint, shards integer[], outcome text)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    r record;
    router text := snowflake_id_node.identity();
    wait text := snowflake_id_router.timeout('cleanup_timeout')::text;
    bound interval := snowflake_id_router.timeout('cleanup_timeout') + interval '5 s';
    conn text;
BEGIN
    conn := snowflake_id_router.node_conn(node);
    FOR r IN SELECT * FROM json_to_recordset(snowflake_id_router.call(conn, 'SELECT snowflake_id_node.moves()',
                                                                        bound, 'reading the move records')::json)
                 AS x(key text, router text, role text, state text, shards integer[], alive boolean)
              WHERE x.router = router AND NOT x.alive
                AND NOT EXISTS (SELECT FROM snowflake_id_router.move y
                                 WHERE y.id::text = split_part(x.key, '/', 2) AND NOT snowflake_id_router.move_finished(y.state))
                -- (nor an unfinished split's, whose move is not recorded yet: repair_splits' own)
                AND NOT EXISTS (SELECT FROM snowflake_id_router.split z
                                 WHERE z.move::text = split_part(x.key, '/', 2) AND z.state NOT IN ('done', 'undone'))
    LOOP
        move := NULLIF(split_part(r.key, '/', 2), '')::bigint;
        shards := r.shards;
        IF r.state IN ('sealed', 'serving') THEN
            outcome := format('left on node %L: a record of move %s, %s, which this router does not know', node, r.key, r.state);
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
                PERFORM snowflake_id_router.unlock_router(r.shards);
                outcome := format('undone on node %L (a record without a move on this router)', node);
            EXCEPTION WHEN query_canceled OR OTHERS THEN
                IF snowflake_id_router.cancelled(SQLSTATE, SQLERRM) THEN
                    RAISE;
                END IF;
                outcome := format('not undone on node %L: %s (%s)', node, SQLERRM, SQLSTATE);
            END;
        END IF;
        RETURN NEXT;
    END LOOP;
    FOR r IN SELECT x FROM unnest(snowflake_id_router.call(conn,
                 format('SELECT snowflake_id_node.drop_orphans(%L, %L)', left(md5(router), 8), wait), bound,
                 'removing what moves left without a record')::text[]) x LOOP
        move := NULL;
        shards := NULL;
        outcome := format('removed on node %L: %s', node, r.x);
        RETURN NEXT;
    END LOOP;
EXCEPTION WHEN query_canceled OR OTHERS THEN
    IF snowflake_id_router.cancelled(SQLSTATE, SQLERRM) THEN
        RAISE;
    END IF;
    move := NULL;
    shards := NULL;
    outcome := format('node %L not checked: %s (%s)', node, SQLERRM, SQLSTATE);
    RAISE WARNING '%', outcome;
    RETURN NEXT;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.repair_node(text) IS
  'Undoes (or reports, if sealed) what this router''s moves left on a node without a record on the router, and removes what has no record at all.';

CREATE OR REPLACE FUNCTION repair_moves() RETURNS TABLE (move bigint, shards integer[], outcome text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    n record;
BEGIN
    PERFORM snowflake_id_router.require_primary('repair_moves');
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'repair_moves runs only in a READ COMMITTED transaction, not %', current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    PERFORM snowflake_id_router.disconnect_all();   -- (a session's kept ones: release_connections)
    -- Routers that are behind get the map first (the moves waiting for them then finish).
    PERFORM snowflake_id_router.routed_everywhere(snowflake_id_router.map_version());
    -- And the nodes (app_map() there): a push a node missed, or one a router stopped before.
    PERFORM snowflake_id_router.push_nodes();
    -- Unfinished splits first (44_split.sql): a split not yet registered has no move record
    -- here, and its record on the node would otherwise be undone below as one without.
    RETURN QUERY SELECT * FROM snowflake_id_router.repair_splits();
    FOR m IN SELECT * FROM snowflake_id_router.move x WHERE NOT snowflake_id_router.move_finished(x.state) ORDER BY x.id LOOP
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
            PERFORM snowflake_id_router.unlock_router(m.shards);
        EXCEPTION WHEN lock_not_available THEN
            outcome := snowflake_id_router.take_over(m.id);   -- (past its complete_by; else running)
        END;
        PERFORM snowflake_id_router.disconnect_all();
        RETURN NEXT;
    END LOOP;
    -- What this router's moves left on the nodes without a record to follow.
    FOR n IN SELECT x.name FROM snowflake_id_router.node x ORDER BY x.name LOOP
        RETURN QUERY SELECT * FROM snowflake_id_router.repair_node(n.name);
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
           CASE WHEN snowflake_id_router.move_finished(m.state) THEN m.state::text
                WHEN m.state = 'kept' THEN 'kept: its old copy until ' || m.revert_until
                WHEN EXISTS (SELECT FROM pg_catalog.pg_locks l
                              WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 3
                                AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
                                AND l.classid = snowflake_id_node.lock_class()::oid AND l.objid::bigint = m.shards[1])
                THEN 'running: ' || m.state
                ELSE 'interrupted: ' || m.state END AS outcome,
           m.error, m.fence_lag, m.fence_retries
      FROM snowflake_id_router.move m
     ORDER BY m.id;
COMMENT ON VIEW move_history IS
  'Each move: shards, nodes, start, end, rows, write pause (fence to flip), outcome (done, undone, running or interrupted at a step), error, the target''s lag at the fence (bytes) and the fence gate''s retries.';
