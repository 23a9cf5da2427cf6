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

-- This session, as a move's owner (move.owner): its pid and start (a pid alone is reused).
CREATE OR REPLACE FUNCTION snowflake_id_router.session_token() RETURNS text
LANGUAGE sql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
RETURN pg_catalog.pg_backend_pid() || '/' || (SELECT pg_catalog.date_part('epoch', a.backend_start) FROM pg_catalog.pg_stat_activity a
                                                WHERE a.pid = pg_catalog.pg_backend_pid());
COMMENT ON FUNCTION snowflake_id_router.session_token() IS 'This session as a move''s owner: its pid and its start.';

-- How long a source fences its shards for a mover (set_fence): lock_timeout + cutover_timeout + 1 s.
CREATE OR REPLACE FUNCTION snowflake_id_router.fence_bound() RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_router.timeout('lock_timeout') + snowflake_id_router.timeout('cutover_timeout') + interval '1 s';
COMMENT ON FUNCTION snowflake_id_router.fence_bound() IS
  'How long a source fences its shards for a mover, by itself: lock_timeout + cutover_timeout + 1 s.';

-- How long after its seal is sent a move must be flipped (move.complete_by): the seal
-- commits within the fence's bound (the source refuses it later), then cleanup_timeout.
CREATE OR REPLACE FUNCTION snowflake_id_router.completion_bound() RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_router.fence_bound() + snowflake_id_router.timeout('cleanup_timeout');
COMMENT ON FUNCTION snowflake_id_router.completion_bound() IS
  'How long after its seal is sent a move must be flipped: the fence''s bound, then cleanup_timeout.';

-- The move is no longer this owner's: a repair took it over (past its complete_by) and
-- completes it. 55000; the caller leaves everything to the repair.
CREATE OR REPLACE FUNCTION snowflake_id_router.check_owner(move_id bigint, owner text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    IF m.owner IS DISTINCT FROM owner THEN
        RAISE EXCEPTION 'move % of % is not this session''s: a repair (repair_moves()) took it over past its complete_by and completes it',
            move_id, snowflake_id_router.shard_list(m.shards)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'This session stalled after the move''s seal and did not flip it in time; it changes nothing more. See move_history.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.check_owner(bigint, text) IS
  'Raises 55000 unless owner (a session_token()) still drives the move: a repair took it over.';

-- The one place a move's state changes (run in the loopback session, through note, or by
-- flip in its own transaction): the owner compared (check_owner: 55000 once a repair took
-- the move over), the transition checked (move_may_go: 55000 otherwise), the times it
-- implies set (ended when finished, flipped and the map's version at the flip, complete_by
-- with the seal), and what the step learnt recorded (NULL: unchanged).
CREATE OR REPLACE FUNCTION snowflake_id_router.record_move(move_id bigint, state snowflake_id_router.move_state, schemas text[],
                                                           suboid oid, fenced timestamptz, rows bigint, error text,
                                                           owner text) RETURNS text
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    was snowflake_id_router.move_state;
    moved boolean;
BEGIN
    SELECT r.state INTO was FROM snowflake_id_router.move r WHERE r.id = move_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'move % does not exist', move_id USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM snowflake_id_router.check_owner(move_id, owner);
    IF state IS NOT NULL AND NOT snowflake_id_router.move_may_go(was, state) THEN
        RAISE EXCEPTION 'move % is %: it cannot go to %', move_id, was, state USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    moved := state IS DISTINCT FROM was AND state IS NOT NULL;
    UPDATE snowflake_id_router.move r
       SET state = coalesce(state, r.state), schemas = coalesce(schemas, r.schemas), suboid = coalesce(suboid, r.suboid),
           fenced = coalesce(fenced, r.fenced), rows = coalesce(rows, r.rows), error = coalesce(error, r.error),
           ended = CASE WHEN moved AND snowflake_id_router.move_finished(state) THEN clock_timestamp() ELSE r.ended END,
           flipped = CASE WHEN moved AND state = 'flipped' THEN clock_timestamp() ELSE r.flipped END,
           map_version = CASE WHEN moved AND state = 'flipped' THEN snowflake_id_router.map_version() ELSE r.map_version END,
           complete_by = CASE WHEN moved AND state = 'sealing'
                              THEN snowflake_id_node.monotonic() + snowflake_id_router.completion_bound() ELSE r.complete_by END
     WHERE r.id = move_id;
    RETURN coalesce(state, was)::text;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.record_move(bigint, snowflake_id_router.move_state, text[], oid, timestamptz, bigint, text, text) IS
  'Records a move''s transition (55000 for one move_may_go does not allow, or once owner no longer drives it) and what its step learnt; NULL: unchanged.';

-- Makes owner the move's owner (run through the loopback connection, committed at once): a
-- repair holding the move's router locks (its mover gone), or (overdue) one past the
-- complete_by of a move sealing or sealed whose mover still lives (complete_by then starts
-- again, for the taker). The row lock orders it with the mover's record_move and flip:
-- exactly one of them goes on. True if taken.
CREATE OR REPLACE FUNCTION snowflake_id_router.take_move(move_id bigint, owner text, overdue boolean) RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    UPDATE snowflake_id_router.move r
       SET owner = take_move.owner, taken_over = CASE WHEN overdue THEN clock_timestamp() ELSE r.taken_over END,
           -- (the taker gets the same time to complete it: a second repair waits for it)
           complete_by = CASE WHEN overdue THEN snowflake_id_node.monotonic() + snowflake_id_router.completion_bound()
                              ELSE r.complete_by END
     WHERE r.id = move_id AND NOT snowflake_id_router.move_finished(r.state)
       AND (NOT overdue OR (snowflake_id_router.move_may_be_sealed(r.state) AND r.complete_by <= snowflake_id_node.monotonic()));
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.take_move(bigint, text, boolean) IS
  'Takes a move over for owner (overdue: only a sealing or sealed one past its complete_by); true if taken.';

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

-- Gives back the locks lock_router(shards) took, once the work they guard is over: the
-- function that took them is SECURITY DEFINER and its caller's transaction may stay open
-- after it returns (BEGIN; SELECT move_shard(...); with no COMMIT), stopping every other
-- move of the shards, every repair and alter_shards meanwhile. An error needs no call:
-- the (sub)transaction it aborts gives the locks back.
CREATE OR REPLACE FUNCTION snowflake_id_router.unlock_router(shards integer[]) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    s integer;
BEGIN
    FOREACH s IN ARRAY shards LOOP
        PERFORM snowflake_id_node.own_unlock(snowflake_id_node.lock_class(), s, false, false);
    END LOOP;
    PERFORM snowflake_id_router.unlock_schema_changes(false);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.unlock_router(integer[]) IS
  'Gives back the locks lock_router(shards) took, before the function that took them returns.';

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
    locked integer[];   -- the shards whose router locks this call holds (unlock_router)
    moved bigint;
BEGIN
    IF shards IS NULL OR node IS NULL OR template IS NULL OR array_position(shards, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'move_shards: shards, node and template must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF cardinality(shards) = 0 THEN
        RAISE EXCEPTION 'move_shards: no shard given' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT min(s)::text INTO bad FROM unnest(shards) s WHERE s NOT BETWEEN 0 AND @MAX_SHARD@;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'shard % is out of range: valid shards are 0 to @MAX_SHARD@', bad USING ERRCODE = 'numeric_value_out_of_range';
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
    locked := todo;
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
    IF cardinality(todo) > 0 THEN
        SELECT m.node INTO src FROM snowflake_id_router.shard m WHERE m.shard = todo[1];
        BEGIN
            moved := snowflake_id_router.run_move(todo, src, node, template);
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            PERFORM snowflake_id_router.gate_open();
            PERFORM snowflake_id_router.disconnect_all();
            RAISE;
        END;
    END IF;
    -- Not held in the caller's transaction past the call (an error gave them back already).
    PERFORM snowflake_id_router.unlock_router(locked);
    RETURN moved;
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

-- A move: its record (open_move), then, before the seal, its copy (copy_move) and its
-- cutover (cut_over), each undoing both sides on a failure or cancel (fail_move, whose
-- error says what step failed and what is left); from the seal on, complete_move (which
-- commits the seal). An error or cancel that lands where neither step's handler runs (as
-- open_move's record commits, between the steps) finds the move by its record and undoes
-- it the same way: no failure leaves a live session's move unfinished.
CREATE OR REPLACE FUNCTION snowflake_id_router.run_move(shards integer[], source text, target text, template text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    move_id bigint;
    prints text;
    sequences text;
    seal_conn text;
    st text;
    msg text;
    det text;
    hnt text;
    state text;
BEGIN
    BEGIN
        move_id := snowflake_id_router.open_move(shards, source, target, template);
        PERFORM snowflake_id_router.pause_at('planned');
        prints := snowflake_id_router.copy_move(move_id);
        PERFORM snowflake_id_router.pause_at('copied');
        IF prints IS NOT NULL THEN
            SELECT c.sequences, c.seal_conn INTO sequences, seal_conn FROM snowflake_id_router.cut_over(move_id, prints) c;
        END IF;
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        SELECT r.id, r.state INTO move_id, state FROM snowflake_id_router.move r
         WHERE (r.id = move_id OR (move_id IS NULL AND r.owner = snowflake_id_router.session_token() AND r.shards = run_move.shards))
           AND r.error IS NULL AND snowflake_id_router.move_before_seal(r.state)
         ORDER BY r.id DESC LIMIT 1;
        IF NOT FOUND THEN
            RAISE;   -- (a step's handler dealt with it, or nothing was recorded)
        END IF;
        PERFORM snowflake_id_router.fail_move(move_id, CASE state WHEN 'planned' THEN 'starting' ELSE state END, NULL, st, msg, det, hnt);
        -- (Returned: the source is sealed after all; completed below.)
        sequences := NULL;
        seal_conn := NULL;
    END;
    -- The seal's commit on, the move is completed, whoever cancels what.
    PERFORM snowflake_id_router.complete_move(move_id, sequences, seal_conn);
    PERFORM snowflake_id_router.release_connections();
    RETURN move_id;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.run_move(integer[], text, text, text) IS
  'A move of shards from source to target, recorded step by step; undone on a failure before the seal, completed after it.';

-- The template each of shards was made from, as its node (connection conn) records it
-- ({"shard": template or null}); {} from a node whose snowflake_id predates the record.
CREATE OR REPLACE FUNCTION snowflake_id_router.recorded_templates(conn text, shards integer[]) RETURNS jsonb
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT snowflake_id_router.call(conn, $q$SELECT (pg_catalog.to_regprocedure('snowflake_id_node.shard_templates(integer[])') IS NOT NULL)::text$q$,
                                    interval '10 s', 'reading the shards'' templates')::boolean THEN
        RETURN '{}';
    END IF;
    RETURN snowflake_id_router.call(conn, format('SELECT snowflake_id_node.shard_templates(%L)', shards),
                                    interval '10 s', 'reading the shards'' templates')::jsonb;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.recorded_templates(text, integer[]) IS
  'The template each of the shards was made from, as their node records it (JSON by shard; {} from a node before 0.4.0).';

-- A move's record (state planned), made through the loopback connection once both nodes are
-- reached and found to be two databases; returns its id.
CREATE OR REPLACE FUNCTION snowflake_id_router.open_move(shards integer[], source text, target text, template text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    self text := snowflake_id_router.loopback();
    src text := snowflake_id_router.node_conn(source);
    dst text := snowflake_id_router.node_conn(target);
    -- (As registered, with their marks: node_conn has checked that each connection reaches
    -- that node. The two halves of a split share the rest.)
    src_id text := (SELECT n.identity FROM snowflake_id_router.node n WHERE n.name = source);
    dst_id text := (SELECT n.identity FROM snowflake_id_router.node n WHERE n.name = target);
    recorded jsonb := snowflake_id_router.recorded_templates(src, shards);
    other text;
    move_id bigint;
BEGIN
    IF snowflake_id_router.same_node(src_id, dst_id) OR snowflake_id_router.same_node(dst_id, src_id) THEN
        RAISE EXCEPTION 'nodes % and % are the same database (%): a shard cannot move onto the node it is on',
            quote_literal(source), quote_literal(target), src_id USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- A copy is made from the template its shard was made from (recorded on its node), never
    -- from another schema a caller names: a shard recorded as made from one another role
    -- made would leave every later alter_shards of its own.
    SELECT format('shard %s was made from template %s, not %s', s, quote_ident(recorded->>s::text), quote_ident(template))
      INTO other FROM unnest(shards) s WHERE recorded->>s::text <> template ORDER BY s LIMIT 1;
    IF other IS NOT NULL THEN
        RAISE EXCEPTION 'move_shards: %', other USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Give the template the shard was made from (rebalance and drain_node do, shard by shard).';
    END IF;
    move_id := snowflake_id_router.call(self, format(
        'INSERT INTO snowflake_id_router.move (shards, source, target, source_identity, target_identity, template, owner)
         VALUES (%L, %L, %L, %L, %L, %L, %L) RETURNING id', shards, source, target, src_id, dst_id, template,
        snowflake_id_router.session_token()),
        interval '10 s', 'recording the move')::bigint;
    RETURN move_id;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.open_move(integer[], text, text, text) IS
  'Reaches a move''s two nodes (55000 if they are one database) and records the move (planned); returns its id.';

-- The part of a move before its fence: the nodes' shard locks, checking, preparing (the
-- copies made, their definitions compared), copying (published, rows copied, subscribed).
-- Returns the copies' fingerprints, for the seal; on a failure the move is undone and the
-- error raised (fail_move), or, if its source turns out sealed, NULL (the caller completes it).
CREATE OR REPLACE FUNCTION snowflake_id_router.copy_move(move_id bigint) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    step text := 'locking the shards on the nodes';
    lock_wait interval := snowflake_id_router.timeout('lock_timeout');
    long_step interval := snowflake_id_router.timeout('copy_timeout');
    copy_deadline timestamptz;
    prints text;
    st text;
    msg text;
    det text;
    hnt text;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    BEGIN
        PERFORM snowflake_id_router.call(snowflake_id_router.node_conn(m.source), format('SELECT snowflake_id_node.lock_shards(%L, %L)', m.shards, lock_wait),
                                         lock_wait + interval '10 s', step);
        PERFORM snowflake_id_router.call(snowflake_id_router.node_conn(m.target), format('SELECT snowflake_id_node.lock_shards(%L, %L)', m.shards, lock_wait),
                                         lock_wait + interval '10 s', step);
        PERFORM snowflake_id_router.enter(move_id, 'checking');
        step := 'checking';
        PERFORM snowflake_id_router.check_move(move_id);
        PERFORM snowflake_id_router.enter(move_id, 'preparing');
        step := 'preparing';
        prints := snowflake_id_router.prepare_move(move_id);
        PERFORM snowflake_id_router.enter(move_id, 'copying');
        copy_deadline := snowflake_id_node.monotonic() + snowflake_id_router.timeout('copy_timeout');
        PERFORM snowflake_id_router.gate(false, long_step);
        step := 'publishing';
        PERFORM snowflake_id_router.call(snowflake_id_router.node_conn(m.source),
            format('SELECT snowflake_id_node.publish(%L)', snowflake_id_router.move_key(move_id)), long_step, step);
        PERFORM snowflake_id_router.gate(false, long_step);
        step := 'copying the rows';
        PERFORM snowflake_id_router.copy_rows(move_id, copy_deadline);
        PERFORM snowflake_id_router.gate(false, long_step);
        step := 'subscribing';
        PERFORM snowflake_id_router.subscribe(move_id, copy_deadline);
        -- The flip must not meet the map locked (by the caller's own transaction, say): find
        -- out now, and have the loopback session ready for it.
        step := 'rehearsing the flip';
        PERFORM snowflake_id_router.call(snowflake_id_router.loopback(), format('SELECT snowflake_id_router.rehearse_flip(%s)', move_id),
                                         snowflake_id_router.timeout('lock_timeout') + interval '10 s', step);
        RETURN prints;
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        PERFORM snowflake_id_router.fail_move(move_id, step, NULL, st, msg, det, hnt);
        RETURN NULL;   -- (the source is sealed after all: the nodes' records say what is left)
    END;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.copy_move(bigint) IS
  'A move up to its fence (locks, checks, copies, rows, subscription); the copies'' fingerprints, or the move undone and the error raised.';

-- Checking: the source and the target can take the move (each refusal names its cause);
-- the schemas are recorded.
CREATE OR REPLACE FUNCTION snowflake_id_router.check_move(move_id bigint) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    router text := snowflake_id_node.identity();
    long_step interval := snowflake_id_router.timeout('copy_timeout');
    src text;
    dst text;
    schemas text[];
    roles text[];
    partman text;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    src := snowflake_id_router.node_conn(m.source);
    dst := snowflake_id_router.node_conn(m.target);
    schemas := snowflake_id_router.call(src, format('SELECT snowflake_id_node.source_check(%L, %L, %L)', router, m.target_identity, m.shards),
                                        long_step, 'checking the source');
    roles := snowflake_id_router.call(src, format('SELECT snowflake_id_node.roles(%L)', schemas), long_step, 'checking the source');
    partman := nullif(snowflake_id_router.call(src, format('SELECT snowflake_id_node.partman_version(%L)', schemas), long_step,
                                               'checking the source'), '');
    PERFORM snowflake_id_router.call(dst, format('SELECT snowflake_id_node.target_check(%L, %L, %L, %L, %L, %L)',
                                                 router, m.source_identity, m.shards, schemas, roles, m.template), long_step, 'checking the target');
    -- (pg_partman keeping the shards' tables there: the target takes its configuration)
    IF partman IS NOT NULL THEN
        PERFORM snowflake_id_router.call(dst, format('SELECT snowflake_id_node.partman_ready(%L)', partman), long_step, 'checking the target');
    END IF;
    -- The fence and the seal lock every table of the batch in one transaction: a batch
    -- too large for the source's lock table is refused now (53400), not once fenced.
    PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.fence_room(%L)', schemas), long_step,
                                     'checking the source''s lock table');
    PERFORM snowflake_id_router.note(move_id, schemas => schemas);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.check_move(bigint) IS
  'A move''s checks on its source and target (refusals name their cause); records the schemas.';

-- Preparing: the copies made on the target from its template, their definitions compared
-- with the shards', the source prepared. Returns the copies' fingerprints.
CREATE OR REPLACE FUNCTION snowflake_id_router.prepare_move(move_id bigint) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    router text := snowflake_id_node.identity();
    k text := snowflake_id_router.move_key(move_id);
    long_step interval := snowflake_id_router.timeout('copy_timeout');
    src text;
    dst text;
    prints text;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    src := snowflake_id_router.node_conn(m.source);
    dst := snowflake_id_router.node_conn(m.target);
    PERFORM snowflake_id_router.gate(false, long_step);
    PERFORM snowflake_id_router.call(dst, format('SELECT snowflake_id_node.prepare_target(%L, %L, %L, %L, %L, %L)',
                                                 k, router, m.source_identity, m.shards, m.schemas, m.template), long_step, 'making the copies');
    -- The copies must be what the shards are, before any row moves. The copies' prints
    -- are kept for the seal, which compares the source's with them under its locks
    -- (DDL on the source since): nothing the move does to the copies changes them (rows,
    -- owners and privileges are not in them), and reading them again under the fence
    -- would lengthen the write pause by as much.
    PERFORM snowflake_id_router.gate(false, long_step);
    prints := snowflake_id_router.compare_fingerprints(src, dst, m.schemas, m.shards,
        format('node %L', m.source), format('the copy made from template %L on node %L', m.template, m.target),
        snowflake_id_node.monotonic() + long_step);
    -- Every row the target writes into a copy runs the copy's code as the copy's owner,
    -- which it gets now, before any row (own_copies; on PostgreSQL 15, a refusal instead).
    PERFORM snowflake_id_router.call(dst, format('SELECT snowflake_id_node.own_copies(%L, %L)', k,
        snowflake_id_router.call(src, format('SELECT snowflake_id_node.grants(%L)', m.schemas), long_step, 'reading the owners')),
        long_step, 'giving the copies their owners');
    PERFORM snowflake_id_router.pause_at('owned');
    PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.prepare_source(%L, %L, %L, %L, %L)',
                                                 k, router, m.target_identity, m.shards, m.schemas), long_step, 'preparing the source');
    RETURN prints;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.prepare_move(bigint) IS
  'Makes a move''s copies on its target, compares their definitions with the shards'', prepares the source; the copies'' fingerprints.';

-- The rows copied by the target itself: it makes the slot on the source and copies the
-- rows at its snapshot (copy_rows: one connection, one transaction there), within
-- copy_deadline. A copy cut short by it says why: making the slot waits for every
-- transaction running on the source, so if the slot is not made, the ones it waited for
-- are named.
CREATE OR REPLACE FUNCTION snowflake_id_router.copy_rows(move_id bigint, copy_deadline timestamptz) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    k text := snowflake_id_router.move_key(move_id);
    src text;
    det text;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    src := snowflake_id_router.node_conn(m.source);
    PERFORM snowflake_id_router.call(snowflake_id_router.node_conn(m.target),
        format('SELECT snowflake_id_node.copy_rows(%L, %L)', k, (SELECT n.connstr FROM snowflake_id_router.node n WHERE n.name = m.source)),
        greatest(copy_deadline - snowflake_id_node.monotonic(), interval '0'), 'copying the rows');
EXCEPTION WHEN query_canceled THEN
    IF snowflake_id_node.monotonic() < copy_deadline THEN
        RAISE;  -- the mover was cancelled
    END IF;
    PERFORM snowflake_id_router.settle_all();
    -- (The slot is not made: it has no confirmed position yet, or it went with the copy's
    -- WAL sender.)
    IF NOT snowflake_id_router.call(src, format(
           'SELECT EXISTS (SELECT FROM pg_catalog.pg_replication_slots WHERE slot_name = %L AND confirmed_flush_lsn IS NOT NULL)',
           'sfid_' || replace(k, '/', '_')), interval '10 s', 'looking for the slot')::boolean THEN
        det := snowflake_id_router.call(src, 'SELECT snowflake_id_node.blockers()', interval '10 s', 'looking for long transactions');
        RAISE EXCEPTION 'the replication slot was not made within copy_timeout (%): it waits for every transaction running on node % to end',
            snowflake_id_router.timeout('copy_timeout'), quote_literal(m.source)
            USING ERRCODE = 'query_canceled', DETAIL = coalesce('Running there: ' || det || '.', 'None is running there now.');
    END IF;
    RAISE EXCEPTION 'the rows were not copied within copy_timeout (%)', snowflake_id_router.timeout('copy_timeout')
        USING ERRCODE = 'query_canceled', HINT = 'Raise copy_timeout (router_settings) for shards this large.';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.copy_rows(bigint, timestamptz) IS
  'Has a move''s target copy the rows from its source within copy_deadline; 57014 saying why (a slot waiting for transactions, naming them) if not.';

-- The subscription, with nothing left to copy: it applies what was committed on the source
-- after the copy's snapshot. Its OID is recorded.
CREATE OR REPLACE FUNCTION snowflake_id_router.subscribe(move_id bigint, copy_deadline timestamptz) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    suboid oid;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    suboid := snowflake_id_router.call(snowflake_id_router.node_conn(m.target),
        format('SELECT snowflake_id_node.subscribe(%L, %L)', snowflake_id_router.move_key(move_id),
               (SELECT n.connstr FROM snowflake_id_router.node n WHERE n.name = m.source)),
        greatest(copy_deadline - snowflake_id_node.monotonic(), interval '0'), 'subscribing')::oid;
    PERFORM snowflake_id_router.note(move_id, suboid => suboid);
    PERFORM snowflake_id_router.pause_at('subscribed');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.subscribe(bigint, timestamptz) IS
  'Subscribes a move''s target to its source''s slot (nothing left to copy) and records the subscription''s OID.';

-- Closes the fence gate for move move_id once its target is within switch_lag of the source
-- (snowflake_id_node.move_lag), so that the fence waits only for that much to be applied.
-- The lag is read before the gate and again behind it (another batch's fence may have held
-- it while the source ran ahead): too far then, the gate is given back and the wait starts
-- again. Both waits together are bounded by copy_timeout: 57014, and the move is undone.
-- Records the lag at the fence and the retries (move_history): the gate's, and lifted, a
-- fence lifted just before (fence_lifted).
CREATE OR REPLACE FUNCTION snowflake_id_router.near_fence(move_id bigint, src text, lifted integer DEFAULT 0) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    bound bigint := pg_size_bytes(snowflake_id_router.setting('switch_lag'));
    lag_sql text := format('SELECT snowflake_id_node.move_lag(%L)', snowflake_id_router.move_key(move_id));
    began timestamptz := snowflake_id_node.monotonic();
    deadline timestamptz := began + snowflake_id_router.timeout('copy_timeout');
    lag bigint;
    retries integer := lifted;   -- (a fence lifted just before: fence_lifted)
BEGIN
    LOOP
        LOOP
            lag := snowflake_id_router.call(src, lag_sql, snowflake_id_router.timeout('lock_timeout'), 'reading the target''s lag')::bigint;
            EXIT WHEN lag IS NULL OR lag <= bound;   -- (no slot: the catch-up under the fence says why)
            IF snowflake_id_node.monotonic() >= deadline THEN
                RAISE EXCEPTION 'the target stayed % behind the source (switch_lag %) for %', pg_size_pretty(lag),
                                snowflake_id_router.setting('switch_lag'), snowflake_id_router.timeout('copy_timeout')
                    USING ERRCODE = 'query_canceled',
                          HINT = 'The source''s writes outpace the target''s apply: move when there are fewer, or raise switch_lag or copy_timeout.';
            END IF;
            PERFORM snowflake_id_node.sleep(snowflake_id_router.nap(began, 0.001, 0.05));
        END LOOP;
        PERFORM snowflake_id_router.gate(true, greatest(deadline - snowflake_id_node.monotonic(), interval '0'));
        lag := snowflake_id_router.call(src, lag_sql, snowflake_id_router.timeout('lock_timeout'), 'reading the target''s lag')::bigint;
        EXIT WHEN lag IS NULL OR lag <= bound;
        retries := retries + 1;
        PERFORM snowflake_id_router.gate_open();
    END LOOP;
    PERFORM snowflake_id_router.call(snowflake_id_router.loopback(),
        format('UPDATE snowflake_id_router.move SET fence_lag = %L, fence_retries = coalesce(fence_retries, 0) + %s WHERE id = %s RETURNING true',
               lag, retries, move_id),
        snowflake_id_router.timeout('lock_timeout') + interval '1 s', 'recording the move');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.near_fence(bigint, text, integer) IS
  'Closes the fence gate for a move once its target is within switch_lag of the source (57014 past copy_timeout); records the lag and retries.';

-- Waits (up to deadline) for move move_id's target to have its marker (caught up after the
-- fence): false once it has. Past the deadline, unless this was the fence_attempts'th
-- attempt, lifts the fence instead and returns true, for cut_over to try again: the seal
-- check's transaction on the source rolled back, the fence and marker row removed there
-- (lift_fence), the move copying again and the gate open; then waits (copy_timeout) for the
-- target to confirm the marker's delete, so that only the next marker can say it caught up.
-- A cancel, or the last attempt's timeout, is raised (the move is undone).
CREATE OR REPLACE FUNCTION snowflake_id_router.fence_lifted(move_id bigint, src text, dst text, deadline timestamptz, attempt integer)
RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    k text := snowflake_id_router.move_key(move_id);
    lock_wait interval := snowflake_id_router.timeout('lock_timeout');
    lsn text;
BEGIN
    BEGIN
        PERFORM snowflake_id_router.poll(dst, format('SELECT snowflake_id_node.marked(%L)', k), deadline, 'catching up after the fence');
        RETURN false;
    EXCEPTION WHEN query_canceled THEN
        IF attempt >= snowflake_id_router.setting('fence_attempts')::integer OR snowflake_id_node.monotonic() < deadline THEN
            RAISE;
        END IF;
    END;
    PERFORM snowflake_id_router.receive(src, snowflake_id_node.monotonic() + lock_wait, 'checking the source under its locks');
    PERFORM snowflake_id_router.call(src, 'ROLLBACK', interval '10 s', 'lifting the fence');
    PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.lift_fence(%L, %L)', k, snowflake_id_router.ms(lock_wait)),
                                     lock_wait + interval '1 s', 'lifting the fence');
    PERFORM snowflake_id_router.note(move_id, 'copying');
    PERFORM snowflake_id_router.gate_open();
    RAISE NOTICE 'move %: the target did not catch up within cutover_timeout; the fence is lifted and will be tried again', move_id;
    lsn := snowflake_id_router.call(src, 'SELECT pg_catalog.pg_current_wal_lsn()', interval '10 s', 'lifting the fence');
    PERFORM snowflake_id_router.poll(src, format('SELECT snowflake_id_node.move_confirmed(%L, %L)', k, lsn),
                                     snowflake_id_node.monotonic() + snowflake_id_router.timeout('copy_timeout'),
                                     'the target''s catching up with the fence lifted');
    RETURN true;   -- (cut_over's next near_fence records the lift)
END
$$;
COMMENT ON FUNCTION snowflake_id_router.fence_lifted(bigint, text, text, timestamptz, integer) IS
  'Waits for a move''s target to catch up after the fence (false); past the deadline, before the last attempt, lifts the fence for cut_over to retry (true).';

-- The cutover, up to the seal: the gate closed, writes fenced on the source (the fence's
-- lock bounded by lock_timeout, what follows up to the seal by cutover_timeout), the
-- target caught up and given its owners, both sides' rows compared, the seal sent in the
-- transaction that checked the source. Returns the sequences the check read and the
-- connection whose transaction holds the seal (complete_move commits it); on a failure the
-- move is undone and the error raised (fail_move), or, if the source turns out sealed,
-- both NULL.
CREATE OR REPLACE FUNCTION snowflake_id_router.cut_over(move_id bigint, prints text, OUT sequences text, OUT seal_conn text)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    k text := snowflake_id_router.move_key(move_id);
    src text;
    dst text;
    step text;
    lock_ms text := snowflake_id_router.ms(snowflake_id_router.timeout('lock_timeout'));
    fenced_at timestamptz;
    deadline timestamptz;
    grants text;
    dst_rows text;
    checked json;
    content json;   -- the copies' content read before the fence (content_base), NULL: not verified
    dst_now json;
    attempt integer := 0;
    st text;
    msg text;
    det text;
    hnt text;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    src := snowflake_id_router.node_conn(m.source);
    dst := snowflake_id_router.node_conn(m.target);
    step := 'verifying the copies';
    content := snowflake_id_router.verify_base(src, dst, m.schemas);
    step := 'waiting for the target to come near';
    PERFORM snowflake_id_router.near_fence(move_id, src);
    LOOP   -- (fence_attempts times at most: fence_lifted)
        -- The fenced part: writes to the shards wait or get 40001 until the flip.
        PERFORM snowflake_id_router.enter(move_id, 'fencing');
        attempt := attempt + 1;
        step := 'fencing writes on the source';
        fenced_at := clock_timestamp();
        -- The source lifts the fence by itself once past the cutover's bound (the seal then
        -- refused), were this session to stall: lock_timeout + cutover_timeout + 1 s.
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.set_fence(%L, %L, %L)', k, lock_ms,
                                                     snowflake_id_router.fence_bound()),
                                         snowflake_id_router.timeout('lock_timeout') + interval '1 s', step);
        deadline := snowflake_id_node.monotonic() + snowflake_id_router.timeout('cutover_timeout');
        PERFORM snowflake_id_router.pause_at('fenced');
        -- The marker, and the copies' owners and privileges as they are at the fence.
        step := 'waiting for the target to catch up';
        grants := snowflake_id_router.call(src, format('SELECT snowflake_id_node.grants(%L) FROM (SELECT snowflake_id_node.mark(%L) OFFSET 0) m',
                                                       m.schemas, k),
                                           greatest(deadline - snowflake_id_node.monotonic(), interval '0'), 'writing the marker');
        PERFORM snowflake_id_router.pause_at('catching up');
        -- The source checks its side while the target catches up and gets its owners:
        -- seal_check, in a transaction there that the seal commits, compares the schemas'
        -- definitions with the copies' under its locks and counts the rows.
        step := 'checking the source';
        seal_conn := src;   -- (before BEGIN: were its reply lost, the undo must not run inside it)
        PERFORM snowflake_id_router.call(src, 'BEGIN', interval '10 s', step);
        PERFORM snowflake_id_router.send(src, format(
            'SELECT pg_catalog.json_build_object(''check'', c::json, ''content'', snowflake_id_node.content_fence(%L, %L, %L)::json)
               FROM (SELECT snowflake_id_node.seal_check(%L, %L, %L) c OFFSET 0) s',
            m.schemas, content->'a', content->'recheck', k, prints, lock_ms));
        step := 'waiting for the target to catch up';
        EXIT WHEN NOT snowflake_id_router.fence_lifted(move_id, src, dst, deadline, attempt);
        step := 'waiting for the target to come near';
        PERFORM snowflake_id_router.near_fence(move_id, src, 1);
    END LOOP;
    step := 'giving the copies their owners and privileges';
    dst_rows := snowflake_id_router.give_owners(move_id, grants, deadline);
    IF content IS NOT NULL THEN
        step := 'verifying the copies';
        PERFORM snowflake_id_router.send(dst, format('SELECT snowflake_id_node.content_fence(%L, %L, %L)',
                                                     m.schemas, content->'b', content->'recheck'));
    END IF;
    step := 'checking the source';
    checked := snowflake_id_router.receive(src, deadline + snowflake_id_router.timeout('lock_timeout'),
                                           'checking the source under its locks')::json;
    IF content IS NOT NULL THEN
        step := 'verifying the copies';
        dst_now := snowflake_id_router.receive(dst, deadline, 'reading the content of the copies')::json;
    END IF;
    step := 'comparing the copies';
    PERFORM snowflake_id_router.compare_content(move_id, content, checked->'content', dst_now, deadline);
    checked := checked->'check';
    PERFORM snowflake_id_router.compare_rows(move_id, checked->>'rows', dst_rows);
    PERFORM snowflake_id_router.note(move_id, 'sealing', fenced => fenced_at,
        rows => (SELECT coalesce(sum(substring(l FROM ': (\d+) rows$')::bigint), 0)::bigint FROM unnest(string_to_array(checked->>'rows', E'\n')) l));
    PERFORM snowflake_id_router.pause_at('sealing');
    step := 'sealing the source';
    PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.seal(%L)', k), interval '10 s', step);
    sequences := checked->>'sequences';
EXCEPTION WHEN query_canceled OR OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
    PERFORM snowflake_id_router.fail_move(move_id, step, seal_conn, st, msg, det, hnt);
    -- (Returned: the source is sealed after all. The nodes' records say what is left.)
    sequences := NULL;
    seal_conn := NULL;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.cut_over(bigint, text) IS
  'A move''s cutover up to its seal (fence, catch-up, owners, row counts, seal sent); the sequences read and the connection holding the seal.';

-- The copies' owners and privileges as they are on the source at the fence, now that no
-- change is left to apply (they got those of the preparing step already, from PostgreSQL 16
-- on: own_copies), their materialized views refreshed as those owners (refresh_copies:
-- before the seal, so that one that fails undoes the move). Then the copies' rows are
-- counted (one round trip for the three), and returned.
CREATE OR REPLACE FUNCTION snowflake_id_router.give_owners(move_id bigint, grants text, deadline timestamptz) RETURNS text
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_router.call(snowflake_id_router.node_conn((SELECT r.target FROM snowflake_id_router.move r WHERE r.id = move_id)),
    format('SELECT snowflake_id_node.row_counts(%1$L) FROM (SELECT snowflake_id_node.refresh_copies(%1$L)
              FROM (SELECT snowflake_id_node.set_grants(%1$L, %2$L) OFFSET 0) g OFFSET 0) r',
           snowflake_id_router.move_key(move_id), grants),
    greatest(deadline - snowflake_id_node.monotonic(), interval '0'), 'giving the copies their owners and privileges, refreshing their materialized views');
COMMENT ON FUNCTION snowflake_id_router.give_owners(bigint, text, timestamptz) IS
  'Gives a move''s caught-up copies their owners and privileges, refreshes their materialized views; their row counts.';

-- The same rows on both sides (each side's row counts, one line a table), or 55000 naming
-- the first difference.
CREATE OR REPLACE FUNCTION snowflake_id_router.compare_rows(move_id bigint, src_rows text, dst_rows text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
BEGIN
    IF src_rows IS DISTINCT FROM dst_rows THEN
        SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
        RAISE EXCEPTION 'the copy on node % does not hold the rows of node %: %', quote_literal(m.target), quote_literal(m.source),
            snowflake_id_node.fingerprint_difference(string_to_array(src_rows, E'\n'), string_to_array(dst_rows, E'\n'),
                                                     format('node %L', m.source), format('node %L', m.target))
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.compare_rows(bigint, text, text) IS
  'Compares the row counts of a move''s source and copies; 55000 naming the first difference.';

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
-- opened, what the move made undone (if it may have made anything: move_made; the records
-- say what), and the
-- error raised, saying where the shards are and what is left. Returns instead, having
-- undone nothing, when the source turns out to be sealed (a commit whose reply was lost):
-- the caller completes the move.
CREATE OR REPLACE FUNCTION snowflake_id_router.fail_move(move_id bigint, step text, seal_conn text,
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
    IF snowflake_id_router.move_made(m.state) THEN
        what_left := snowflake_id_router.undo_move(move_id, reason);
        IF what_left = 'sealed' THEN
            RETURN;
        END IF;
    ELSE
        -- Nothing was made on a node yet: nothing to undo.
        PERFORM snowflake_id_router.note(move_id, 'undone', error => reason);
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
COMMENT ON FUNCTION snowflake_id_router.fail_move(bigint, text, text, text, text, text, text) IS
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
        PERFORM snowflake_id_router.note(move_id, 'sealed');
        RETURN 'sealed';
    END IF;
    IF NOT src_ok AND snowflake_id_router.move_may_be_sealed(m.state) THEN
        -- It may have been sealed: the target's copy may be the one to keep. Nothing undone.
        PERFORM snowflake_id_router.note(move_id, error => reason);
        RETURN left_over[1] || '; the move may have sealed the source, so its copy on node '
               || quote_literal(m.target) || ' is kept until the source can be reached';
    END IF;
    PERFORM snowflake_id_router.note(move_id, 'undoing', error => reason);
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
        PERFORM snowflake_id_router.note(move_id, 'undone');
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
        IF NOT snowflake_id_router.move_flipped((SELECT r.state FROM snowflake_id_router.move r WHERE r.id = move_id)) THEN
            PERFORM snowflake_id_node.hold_cancel(format('SELECT snowflake_id_router.flip_sealed(%s, %L, %L)',
                                                         move_id, sequences, seal_conn));
        END IF;
        PERFORM snowflake_id_router.pause_at('flipped');
        PERFORM snowflake_id_router.clean_up(move_id);
    EXCEPTION WHEN query_canceled THEN
        SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
        IF NOT snowflake_id_router.move_flipped(m.state) THEN
            RAISE;   -- (the flip failed: flip_sealed said so)
        END IF;
        -- What replicated it goes all the same (the slot holds the source's WAL), unless
        -- cancelled again; the old copy is left, sealed.
        PERFORM snowflake_id_router.settle_all();
        PERFORM snowflake_id_router.note(move_id, error => concat_ws('; ', 'clean-up cancelled: ' || SQLERRM,
                                                 nullif(array_to_string(snowflake_id_router.end_replication(move_id), '; '), '')));
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
            PERFORM snowflake_id_router.fail_move(move_id, step, seal_conn, st, msg, det, hnt);
            sequences := NULL;   -- (sealed after all: read again)
        END;
        PERFORM snowflake_id_router.pause_at('sealed');
    END IF;
    FOR attempt IN 1 .. 3 LOOP
        BEGIN
            step := 'activating the copies';
            PERFORM snowflake_id_router.activate_target(move_id, sequences);
            PERFORM snowflake_id_router.publish_back(move_id);   -- (with a revert window: 35_keep.sql)
            PERFORM snowflake_id_router.pause_at('flipping');
            step := 'flipping the map';
            PERFORM snowflake_id_router.call(snowflake_id_router.loopback(), format('SELECT snowflake_id_router.flip(%s, %L)', move_id,
                                                                                              snowflake_id_router.session_token()),
                                             snowflake_id_router.timeout('lock_timeout') + snowflake_id_router.timeout('cleanup_timeout'), step);
            EXIT;
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
            PERFORM snowflake_id_router.settle_all();
            -- A repair took the move over (this session stalled past its complete_by): it is the repair's.
            PERFORM snowflake_id_router.check_owner(move_id, snowflake_id_router.session_token());
            -- A flip whose reply was lost is a flip.
            EXIT WHEN snowflake_id_router.move_flipped((SELECT r.state FROM snowflake_id_router.move r WHERE r.id = move_id));
            BEGIN
                PERFORM snowflake_id_router.note(move_id, error => st || ' while ' || step || ': ' || msg);
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
        PERFORM snowflake_id_router.note(move_id, 'sealed');
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
    -- Not a move a repair took over from this session (stalled past its complete_by).
    PERFORM snowflake_id_router.check_owner(move_id, snowflake_id_router.session_token());
    -- First the nodes' copies of the map (app_map() there): clients that read the map from
    -- the nodes follow the flip at once, whatever the rest of the clean-up does.
    PERFORM snowflake_id_router.push_nodes();
    -- (A move taken over from its stalled mover: that mover's loopback session still holds
    -- the gate closed; not waited for.)
    BEGIN
        PERFORM snowflake_id_router.gate_open();   -- (a repair's completion, which closed none, passes)
        IF m.taken_over IS NULL THEN
            PERFORM snowflake_id_router.gate(false, snowflake_id_router.timeout('copy_timeout'));
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        NULL;   -- (the gate orders heavy steps; it guards nothing)
    END;
    left_over := snowflake_id_router.end_replication(move_id);
    -- A move with a revert window keeps its old copy while the window lasts (35_keep.sql).
    IF m.revert_until IS NOT NULL AND snowflake_id_router.keep_old_copy(move_id, left_over) THEN
        RETURN;
    END IF;
    IF NOT snowflake_id_router.routed_everywhere(m.map_version) THEN
        behind := (SELECT string_agg(quote_literal(x.name), ', ' ORDER BY x.name) FROM snowflake_id_router.router x
                    WHERE x.map_version < coalesce(m.map_version, 0));
        PERFORM snowflake_id_router.note(move_id, error => concat_ws('; ', 'waiting for router(s) ' || behind || ' to route by the flip',
                                                                                 nullif(array_to_string(left_over, '; '), '')));
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
        PERFORM snowflake_id_router.note(move_id, error => 'clean-up: ' || array_to_string(left_over, '; '));
        RAISE WARNING 'move % of % to node % is done, but its clean-up is not: %', move_id,
            snowflake_id_router.shard_list(m.shards), quote_literal(m.target), array_to_string(left_over, '; ')
            USING HINT = 'SELECT repair_moves() finishes it once the cause is fixed.';
        RETURN;
    END IF;
    PERFORM snowflake_id_router.note(move_id, 'done');
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
CREATE OR REPLACE FUNCTION snowflake_id_router.flip(move_id bigint, owner text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id FOR UPDATE;
    PERFORM snowflake_id_router.check_owner(move_id, owner);
    IF snowflake_id_router.move_flipped(m.state) THEN
        RETURN 'flipped already';
    END IF;
    IF NOT snowflake_id_router.move_may_be_sealed(m.state) THEN
        RAISE EXCEPTION 'move % is %: only a sealed move flips the map', move_id, m.state
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    UPDATE snowflake_id_router.shard s SET node = m.target WHERE s.shard = ANY (m.shards) AND s.node = m.source;
    IF (SELECT count(*) FROM snowflake_id_router.shard s WHERE s.shard = ANY (m.shards) AND s.node = m.target)
       <> cardinality(m.shards) THEN
        RAISE EXCEPTION 'the map of shards % changed during move %', m.shards, move_id USING ERRCODE = 'serialization_failure';
    END IF;
    PERFORM snowflake_id_router.record_move(move_id, 'flipped', NULL, NULL, NULL, NULL, NULL, owner);
    RETURN 'flipped';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.flip(bigint, text) IS
  'Flips the map of a sealed move''s shards to its target and records it, if owner still drives the move (run through the loopback connection).';

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
