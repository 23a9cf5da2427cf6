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

-- Whether the session of pid, started at started, still runs the statement that began at
-- call_start (pg_stat_activity; a pid is reused only by a session started later): a
-- rebalance is held by the call that runs it, not by its session, which may idle or keep a
-- pipeline open (waiting for its client: ClientRead) once that call has returned.
-- SECURITY DEFINER: a role reading rebalance_status sees only its own sessions' start times
-- in pg_stat_activity.
CREATE OR REPLACE FUNCTION snowflake_id_router.call_alive(pid integer, started timestamptz, call_start timestamptz)
RETURNS boolean
LANGUAGE sql VOLATILE CALLED ON NULL INPUT PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN EXISTS (SELECT FROM pg_stat_activity a
                WHERE a.pid = call_alive.pid AND a.backend_start = started       -- (NULL: not alive)
                  AND a.state = 'active' AND a.query_start = call_start AND a.wait_event IS DISTINCT FROM 'ClientRead');
COMMENT ON FUNCTION snowflake_id_router.call_alive(integer, timestamptz, timestamptz) IS
  'Whether the session of pid, started at started, still runs the statement begun at call_start (and is not waiting for its client).';

-- A rebalance's steps run only in the transactions of the procedure that runs it
-- (run_rebalance: CALL rebalance(), drain_node()), which commits after each, or in a
-- superuser's session (its workers): called directly, what a step writes would stay in a
-- transaction the caller keeps open (a pipeline's, which no check tells from a lone
-- statement's), and the rebalance with it. Both must hold: the step's caller is
-- run_rebalance (or rebalance_start's begin_background), as PL/pgSQL's call stack
-- (PG_CONTEXT, which the server writes) names it with the router's schema, where no other
-- role can make a function,
-- and the transaction started after the statement (one a procedure began: otherwise
-- StartTransaction takes the statement's start time). A DO block that commits first passes
-- the second, not the first.
CREATE OR REPLACE FUNCTION snowflake_id_router.refuse_outside_rebalance(what text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    stack text;
BEGIN
    GET DIAGNOSTICS stack = PG_CONTEXT;
    -- (its PL/pgSQL frames: this function, the step, the step's caller)
    IF (now() <= statement_timestamp()
        OR NOT coalesce((SELECT starts_with(c, 'PL/pgSQL function snowflake_id_router.run_rebalance(')
                                OR starts_with(c, 'PL/pgSQL function snowflake_id_router.begin_background(')
                           FROM (SELECT (ARRAY(SELECT l FROM string_to_table(stack, chr(10)) l
                                                WHERE starts_with(l, 'PL/pgSQL function ')))[3]) x(c)), false))
       AND NOT (SELECT u.rolsuper FROM pg_roles u WHERE u.rolname = session_user)
       -- A background worker of the router (42_background.sql) commits after each step too;
       -- its backend type is one no client session can take.
       AND NOT EXISTS (SELECT FROM pg_stat_activity a
                        WHERE a.pid = pg_backend_pid() AND a.backend_type = 'snowflake_id_router background') THEN
        RAISE EXCEPTION '% runs only as a step of CALL rebalance() or drain_node()', what
            USING ERRCODE = 'invalid_transaction_state',
                  DETAIL = 'A step commits with the procedure that runs it: called on its own, its writes would last as long as the caller''s transaction.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.refuse_outside_rebalance(text) IS
  '25000 unless called in a transaction a procedure began (run_rebalance''s) or in a superuser''s session: for the steps of a rebalance.';

-- The session running a rebalance or drain on this router, if any (its record running, its
-- session alive).
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_holder() RETURNS integer
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN (SELECT r.pid FROM snowflake_id_router.rebalance r
         WHERE r.state = 'running' AND snowflake_id_router.call_alive(r.pid, r.session_start, r.call_start)
         LIMIT 1);
COMMENT ON FUNCTION snowflake_id_router.rebalance_holder() IS
  'PID of the session running a rebalance or drain on this router, or NULL.';

-- The record of rebalance rid, for one of its steps (rebalance_next, rebalance_move,
-- rebalance_failed), which act only on the rebalance their caller's session runs: the
-- steps are granted with the procedures (which run as their caller, and a procedure that
-- commits cannot be SECURITY DEFINER), and an id is a name any such role can give (it
-- marked a live drain stopped, then ran a rebalance beside it). Its record running, with
-- this session's pid and start time (rebalance_begin wrote them), or a superuser's session:
-- the workers of parallel_moves, loopback sessions of the extension's owner. 42501 for
-- another session's rebalance, 55000 for one not running.
CREATE OR REPLACE FUNCTION snowflake_id_router.own_rebalance(rid integer) RETURNS snowflake_id_router.rebalance
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r snowflake_id_router.rebalance;
BEGIN
    SELECT * INTO r FROM snowflake_id_router.rebalance x WHERE x.id = rid;
    IF NOT FOUND OR NOT ((r.pid = pg_backend_pid() AND r.call_start = statement_timestamp()
                          AND r.session_start = (SELECT a.backend_start FROM pg_stat_activity a WHERE a.pid = pg_backend_pid()))
                         OR (SELECT u.rolsuper FROM pg_roles u WHERE u.rolname = session_user)) THEN
        RAISE EXCEPTION 'rebalance % is not run by this session', coalesce(rid::text, 'NULL')
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'A rebalance''s steps act only on the rebalance or drain their session runs: CALL rebalance() or drain_node() runs one.';
    END IF;
    IF r.state <> 'running' THEN
        RAISE EXCEPTION '% % is %, not running', r.kind, rid, r.state USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN r;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.own_rebalance(integer) IS
  'The record of rebalance rid if this session runs it (its pid and start time) or is a superuser''s; 42501 for another session''s, 55000 if not running.';

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
     WHERE NOT snowflake_id_router.move_finished(m.state);
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
    IF batch_size NOT BETWEEN 1 AND @SHARDS@ THEN
        RAISE EXCEPTION 'batch_size % is out of range: give 1 to @SHARDS@ shards per move', batch_size
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF drain IS NOT NULL AND NOT EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = drain) THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(drain) USING ERRCODE = 'undefined_object';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.check_plan_args(text, integer, text) IS
  'Refuses NULL (22004), an unknown strategy or a batch size out of 1..@SHARDS@ (22023), an unknown node (42704).';

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
                       WHERE NOT snowflake_id_router.move_finished(m.state) AND l.locktype = 'advisory' AND l.granted AND l.objsubid = 3
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
    PERFORM snowflake_id_router.refuse_outside_rebalance('rebalance_begin');
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
        -- now, before the map is read. The workers of a run whose session just ended finish
        -- their batches (rebalance_worker): moves still running are waited for first (at
        -- most cleanup_timeout); one still running after that is left to its worker.
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
                   call_start = statement_timestamp(),
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
                                                       session_start, call_start, started)
            VALUES (rid, kind, drain, strategy, batch_size, parallel_moves, template, 'running', pg_backend_pid(),
                    (SELECT a.backend_start FROM pg_stat_activity a WHERE a.pid = pg_backend_pid()), statement_timestamp(),
                    clock_timestamp());
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
    r := snowflake_id_router.own_rebalance(rid);
    PERFORM snowflake_id_router.refuse_outside_rebalance('rebalance_next');
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
                -- nodes and the other routers, as a move's flip is.
                remapped := snowflake_id_router.call(snowflake_id_router.loopback(),
                    format('SELECT snowflake_id_router.remap_empty(%L, %L)::text', r.node,
                           (SELECT coalesce(jsonb_agg(jsonb_build_object('shard', m.shard, 'move', m.move)), '[]')
                              FROM snowflake_id_router.moving_shards(true) m)),
                    snowflake_id_router.timeout('lock_timeout') + interval '5 s',
                    'mapping the drained node''s shards without data')::integer;
                RAISE NOTICE 'drain %: % shard(s) of node % without data mapped to the other nodes', rid, remapped, quote_literal(r.node);
                IF remapped > 0 THEN
                    PERFORM snowflake_id_router.push_nodes();
                END IF;
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

-- Moves one batch: one move_shards() of its shards for each template they were made from
-- (recorded on their node; the rebalance's template for a shard that records none), each
-- copy being made from its own. Lock conflicts (another move of one of the shards, the
-- fence's lock_timeout under a long transaction) are tried again, twice, after a pause: one
-- such moment should not stop a rebalance of thousands of shards.
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_move(rid integer, batch integer) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    b snowflake_id_router.rebalance_batch;
    tpl text;
    recorded jsonb;
    part record;
    left_behind integer;
BEGIN
    tpl := (snowflake_id_router.own_rebalance(rid)).template;
    PERFORM snowflake_id_router.refuse_outside_rebalance('rebalance_move');
    -- Only a batch rebalance_next marked moving (a planned or done one is not its to move).
    SELECT * INTO b FROM snowflake_id_router.rebalance_batch x
     WHERE x.rebalance = rid AND x.batch = rebalance_move.batch AND x.state = 'moving';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'batch % of rebalance % is not moving', batch, rid USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    recorded := snowflake_id_router.recorded_templates(snowflake_id_router.node_conn(b.source), b.shards);
    FOR part IN SELECT coalesce(recorded->>s::text, tpl) AS template, array_agg(s ORDER BY s) AS shards
                  FROM unnest(b.shards) s GROUP BY 1 ORDER BY 1 LOOP
        FOR attempt IN 1 .. 3 LOOP
            BEGIN
                b.move := @extschema@.move_shards(part.shards, b.target, part.template);
                EXIT;
            EXCEPTION WHEN lock_not_available OR serialization_failure THEN
                IF attempt = 3 THEN
                    RAISE;
                END IF;
                RAISE NOTICE 'batch % of rebalance %: %; trying again', batch, rid, SQLERRM;
                PERFORM snowflake_id_node.sleep(attempt);
            END;
        END LOOP;
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
-- rebalance_move. A worker does not watch this session (client_connection_check_interval
-- 0): if this session ends mid-batch (a cancel landing between its handlers, at a COMMIT;
-- a terminate; the client gone), the worker finishes its batch, moved or undone, and ends
-- when it finds no one to answer. Were it to end with this session, a batch past its seal
-- would refuse its shards' writes until the next call repaired it.

-- The connection of worker n, opened (and checked to reach this router) if not yet open.
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_worker(n integer) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    conn text := snowflake_id_router.reuse_conn('sfid-rebalance:' || n, NULL, format(
        $q$SELECT concat_ws(' ', set_config('application_name', %L, false), set_config('client_connection_check_interval', '0', false),
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
    r := snowflake_id_router.own_rebalance(rid);
    PERFORM snowflake_id_router.refuse_outside_rebalance('rebalance_failed');
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
    st pg_catalog.text;         -- the first failure: its SQLSTATE, message, detail
    msg pg_catalog.text;
    det pg_catalog.text;
    failure record;
    keep pg_catalog.text;       -- keep_connections as it was, when this session keeps them meanwhile
    super boolean := (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user);
BEGIN
    -- A worker is a loopback session of the extension's owner (setting self_connstr), kept
    -- open in this session across commits, which only a superuser's session may do.
    IF parallel_moves OPERATOR(pg_catalog.>=) 2 AND parallel_moves OPERATOR(pg_catalog.<=) 8 AND NOT super THEN
        RAISE EXCEPTION 'parallel_moves % needs a superuser: batches moving at once run in loopback sessions of the extension''s owner',
            parallel_moves USING ERRCODE = 'insufficient_privilege',
                                 HINT = 'Call it with parallel_moves => 1 (the default), or as a superuser.';
    END IF;
    COMMIT;
    IF super THEN
        PERFORM snowflake_id_router.disconnect_matching('sfid-rebalance:%');   -- workers of an earlier call cut short
    END IF;
    rid := snowflake_id_router.rebalance_begin(drain, strategy, batch_size, template, parallel_moves);
    -- A superuser's session moving the batches itself keeps its node connections from batch
    -- to batch, as the workers do (release_connections), and closes them at the end.
    IF parallel_moves OPERATOR(pg_catalog.=) 1 AND super THEN
        keep := coalesce(pg_catalog.current_setting('snowflake_id_router.keep_connections', true), '');
        PERFORM pg_catalog.set_config('snowflake_id_router.keep_connections', 'on', false);
    END IF;
    COMMIT;
    LOOP
        -- While nothing failed and a worker is idle, the next batch: moved here, or sent to
        -- an idle worker.
        WHILE st IS NULL AND busy OPERATOR(pg_catalog.<) parallel_moves LOOP
            BEGIN
                batch := snowflake_id_router.rebalance_next(rid, busy OPERATOR(pg_catalog.>) 0);
            EXCEPTION WHEN query_canceled OR OTHERS THEN
                GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
                EXIT;
            END;
            COMMIT;
            EXIT WHEN batch IS NULL;
            BEGIN
                IF parallel_moves OPERATOR(pg_catalog.=) 1 THEN
                    PERFORM snowflake_id_router.rebalance_move(rid, batch);
                ELSE
                    n := coalesce(pg_catalog.array_position(moving, NULL), pg_catalog.cardinality(moving) OPERATOR(pg_catalog.+) 1);
                    PERFORM snowflake_id_router.send(snowflake_id_router.rebalance_worker(n),
                        pg_catalog.format('SELECT snowflake_id_router.rebalance_move(%s, %s)', rid, batch));
                    moving[n] := batch;
                    busy := busy OPERATOR(pg_catalog.+) 1;
                END IF;
            EXCEPTION WHEN query_canceled OR OTHERS THEN
                GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
                failed := batch;
            END;
            COMMIT;
        END LOOP;
        EXIT WHEN busy OPERATOR(pg_catalog.=) 0;
        -- Has one of the moving batches ended? Looked at between commits, so that this
        -- session never keeps a transaction open across a worker's flip: a move's clean-up
        -- waits (up to lock_timeout) for the router transactions begun before its flip.
        SELECT x.moving, x.busy, x.failed, x.st, x.msg, x.det INTO moving, busy, failed, st, msg, det
          FROM snowflake_id_router.rebalance_reap(rid, moving, busy, failed, st, msg, det) x;
        COMMIT;
    END LOOP;
    IF parallel_moves OPERATOR(pg_catalog.>) 1 THEN
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
                              DETAIL = CASE WHEN det OPERATOR(pg_catalog.<>) '' THEN det ELSE 'The step raised no further detail.' END;
    END IF;
END
$$;
COMMENT ON PROCEDURE snowflake_id_router.run_rebalance(text, text, integer, text, integer) IS
  'The loop of rebalance and drain_node: plan, then each batch moved (up to parallel_moves at once) and committed.';

-- One look at a rebalance's moving batches (run_rebalance, between its commits): a batch
-- that ended frees its worker, its error kept as the first failure (st, msg, det; failed:
-- its batch) or, once there is one, recorded on its batch. A cancel of this session cancels
-- the workers' batches (and is kept as the first failure).
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_reap(rid integer, INOUT moving integer[], INOUT busy integer,
                                                             INOUT failed integer, INOUT st text, INOUT msg text, INOUT det text)
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
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
        RETURN;
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
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_reap(integer, integer[], integer, integer, text, text, text) IS
  'Looks once at a rebalance''s moving batches: one that ended frees its worker, its error kept or recorded; a cancel cancels the workers.';

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
    stopped boolean;
BEGIN
    PERFORM snowflake_id_router.refuse_transaction_block('rebalance_stop');
    SELECT * INTO r FROM snowflake_id_router.rebalance x WHERE x.state = 'running';
    IF NOT FOUND THEN
        RAISE NOTICE 'no rebalance or drain is running';
        RETURN false;
    END IF;
    stopped := snowflake_id_router.commit_apart(format('SELECT snowflake_id_router.stop_rebalance(%s)', r.id))::boolean;
    IF stopped IS NULL THEN
        RAISE NOTICE 'no rebalance or drain is running';
        RETURN false;
    ELSIF stopped THEN
        RAISE NOTICE '% % was interrupted (its session % is gone): now stopped', r.kind, r.id, r.pid;
    ELSE
        RAISE NOTICE '% % (session %) stops after its current batch', r.kind, r.id, r.pid
            USING HINT = 'rebalance_status shows when it has stopped.';
    END IF;
    RETURN true;
END
$$;
COMMENT ON FUNCTION rebalance_stop() IS
  'Asks the running rebalance or drain to stop after its current batch; false if none is running.';

-- (Run apart by rebalance_stop: commit_apart.) Rebalance rid, if still running: marked
-- stopped if its session is gone (true), asked to stop otherwise (false); NULL if not running.
CREATE OR REPLACE FUNCTION snowflake_id_router.stop_rebalance(rid integer) RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r snowflake_id_router.rebalance;
BEGIN
    SELECT * INTO r FROM snowflake_id_router.rebalance x WHERE x.id = rid AND x.state = 'running' FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF snowflake_id_router.rebalance_holder() IS DISTINCT FROM r.pid THEN
        UPDATE snowflake_id_router.rebalance x SET state = 'stopped', ended = clock_timestamp(), stop_requested = clock_timestamp()
         WHERE x.id = r.id;
        RETURN true;
    END IF;
    UPDATE snowflake_id_router.rebalance x SET stop_requested = clock_timestamp() WHERE x.id = r.id;
    RETURN false;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.stop_rebalance(integer) IS
  'rebalance_stop''s change, committed apart: rebalance rid marked stopped if its session is gone (true), asked to stop (false); NULL if not running.';

CREATE OR REPLACE VIEW rebalance_status AS
SELECT r.id, r.kind, r.node, r.strategy, s.state,
       r.pid, r.started, r.ended, b.batches, b.batches_done, b.shards, b.shards_done, b.shards - b.shards_done AS shards_left,
       c.batch AS current_batch, c.source AS current_source, c.target AS current_target, c.shards AS current_shards,
       c.started AS current_since,
       CASE WHEN r.state = 'running' AND b.shards_done > 0
            THEN b.moving_time / b.shards_done * (b.shards - b.shards_done) / r.parallel_moves END AS time_left,
       r.error, r.parallel_moves, b.batches_moving,
       -- The one call that goes on with it (42_background.sql), with its arguments.
       CASE WHEN s.state IN ('interrupted', 'stopped', 'failed')
            THEN format('CALL rebalance_start(%L, %s, %L%s)', r.strategy, r.batch_size, r.template,
                        CASE WHEN r.kind = 'drain' THEN format(', drain => %L', r.node) ELSE '' END) END AS resume
  FROM snowflake_id_router.rebalance r
  CROSS JOIN LATERAL (
       SELECT CASE WHEN r.state <> 'running' THEN r.state
                   WHEN NOT snowflake_id_router.call_alive(r.pid, r.session_start, r.call_start) THEN 'interrupted'
                   WHEN r.stop_requested IS NOT NULL THEN 'stopping'
                   ELSE 'running' END AS state) s
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
  'Each rebalance and drain, newest first: state (running, stopping, interrupted, stopped, failed, done, abandoned), batches and shards planned and done, the (first) batch moving now, estimated time left, error, batches moving at once (allowed, now), and the call that resumes one interrupted, stopped or failed (rebalance_start).';
