-- == Background operations ==
--
-- rebalance_start() runs a rebalance or drain without its caller's session, in a dynamic
-- background worker of snowflake_id's library (src/pg/node/background.rs: no
-- shared_preload_libraries, and every PostgreSQL version the extension supports; pg_cron is
-- packaged for some only). The worker connects as the starter's current role, so it has the
-- starter's rights and no more, and calls background_step() in a transaction of its own
-- until it returns NULL. The rebalance it drives is the one CALL rebalance() runs: the same
-- record (rebalance_status), the same steps, the same resumption. maintenance_start() runs
-- repair_moves() (which pushes the map to followers behind) every interval in another.
--
-- Handing a rebalance over: the starter's session begins it (rebalance_begin: the refusal
-- of a second one, the repair, the plan, every error raised to the caller), starts the
-- worker and hands the record to it (its pid and session start become the worker's), all in
-- one transaction: the worker takes its first step once that commits, and the rebalance
-- has a live holder throughout. A worker is gone with its server: after a restart,
-- rebalance_status shows the rebalance interrupted, and its column resume the one call
-- that goes on with it.

-- A background worker running job (with arg) as the current role, in this database
-- (src/pg/node/background.rs, in snowflake_id's library); its pid. Declared here, not in
-- schema snowflake_id_node, whose USAGE would open that schema's functions to the role.
CREATE OR REPLACE FUNCTION snowflake_id_router.background_start(job integer, arg integer)
RETURNS integer LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS '$libdir/snowflake_id', 'background_start_wrapper';
COMMENT ON FUNCTION snowflake_id_router.background_start(integer, integer) IS
  'Starts a background worker that calls snowflake_id_router.background_step(job, arg) as the current role until it returns NULL; its pid (53400: no worker slot free).';

-- Hands rebalance rid, which this session runs (rebalance_begin made it so), to background
-- worker worker (a session of the router's background type, started by rebalance_start):
-- its record's pid, session start and call start become the worker's (its one statement,
-- call_alive), in this transaction, so that the
-- rebalance has a live holder at every moment (rebalance_holder: a second start is refused;
-- rebalance_status says running). Waits, at most 10 s, for the worker's session to show
-- (pg_stat_activity), 55000 if it does not.
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_hand_over(rid integer, worker integer) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := snowflake_id_node.monotonic() + interval '10 s';
    worker_start timestamptz;
    worker_call timestamptz;      -- the start of the worker's one statement, which lasts as long as it
BEGIN
    PERFORM snowflake_id_router.refuse_transaction_block('rebalance_hand_over');
    PERFORM snowflake_id_router.own_rebalance(rid);
    LOOP
        PERFORM pg_stat_clear_snapshot();   -- (pg_stat_activity is read once a transaction otherwise)
        -- (The worker started for this rebalance: its one statement names it, and only the
        -- router's background workers have that type. Not any other worker, such as the
        -- maintenance of another role, which would hold the rebalance and never step it.)
        SELECT a.backend_start, a.query_start INTO worker_start, worker_call FROM pg_stat_activity a
         WHERE a.pid = worker AND a.backend_type = 'snowflake_id_router background' AND a.state = 'active'
           AND a.query = format('SELECT snowflake_id_router.background_step(1, %s)', rid);
        EXIT WHEN worker_call IS NOT NULL;
        IF snowflake_id_node.monotonic() > deadline THEN
            RAISE EXCEPTION 'background worker % ended, or did not start within 10 s', worker
                USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'The server log says why.';
        END IF;
        PERFORM snowflake_id_node.sleep(0.01);
    END LOOP;
    UPDATE snowflake_id_router.rebalance x SET pid = worker, session_start = worker_start, call_start = worker_call WHERE x.id = rid;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_hand_over(integer, integer) IS
  'Hands the rebalance this session runs to a background worker of the router (its record''s pid and session start).';

-- One step of the background rebalance rid: move the batch it marked moving, or mark the
-- next one moving (committed between, so that rebalance_status shows it), as run_rebalance
-- does with parallel_moves 1. Its first waits for the transaction that handed the rebalance
-- over to it (rebalance_begin's lock, held to the end of that transaction). NULL once it is
-- done or stopped, or not this worker's (that transaction rolled back). An error is left to
-- the worker, which rolls the step back and reports it to background_failed.
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_step(rid integer) RETURNS double precision
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    batch integer;
BEGIN
    IF NOT snowflake_id_router.rebalance_mine(rid, true) THEN
        RAISE WARNING 'background rebalance %: not handed to this worker (its start rolled back?)', rid;
        RETURN NULL;
    END IF;
    batch := snowflake_id_router.rebalance_moving(rid);
    IF batch IS NULL THEN
        RETURN CASE WHEN snowflake_id_router.rebalance_next(rid, false) IS NOT NULL THEN 0 END;
    END IF;
    PERFORM snowflake_id_router.rebalance_move(rid, batch);
    RETURN 0;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_step(integer) IS
  'One step of a background rebalance: mark the next batch moving, or move it; NULL when it is over.';

-- Whether rebalance rid is running in this session (its record's pid and session start).
-- With wait, if not, once more after the transactions that began or hand over a rebalance
-- have ended (rebalance_begin's lock: the worker's first step, which starts before the
-- transaction handing the rebalance to it commits).
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_mine(rid integer, wait boolean) RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    FOR attempt IN 1 .. CASE WHEN wait THEN 2 ELSE 1 END LOOP
        IF attempt = 2 THEN
            -- (The lock is held to the end of the step: never in a transaction that can outlive it.)
            PERFORM snowflake_id_router.refuse_transaction_block('rebalance_mine');
            LOCK TABLE snowflake_id_router.rebalance IN SHARE ROW EXCLUSIVE MODE;
        END IF;
        IF EXISTS (SELECT FROM snowflake_id_router.rebalance x, pg_stat_activity a
                    WHERE x.id = rid AND x.state = 'running' AND x.pid = pg_backend_pid()
                      AND a.pid = pg_backend_pid() AND x.session_start = a.backend_start) THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_mine(integer, boolean) IS
  'Whether rebalance rid is running in this session (with wait: once more after the transaction handing it over ends).';

-- The batch of rebalance rid marked moving (NULL: none), for the session that runs it
-- (own_rebalance: 42501 for another's).
CREATE OR REPLACE FUNCTION snowflake_id_router.rebalance_moving(rid integer) RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_router.own_rebalance(rid);
    RETURN (SELECT min(x.batch) FROM snowflake_id_router.rebalance_batch x WHERE x.rebalance = rid AND x.state = 'moving');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.rebalance_moving(integer) IS
  'The batch of the rebalance this session runs that is marked moving, or NULL.';

-- A step of a background worker failed (rolled back; code and message its error): a
-- rebalance this worker runs records the failure as run_rebalance does (stopped, for a
-- cancel: pg_cancel_backend) and ends; the maintenance logs it and goes on after its interval.
CREATE OR REPLACE FUNCTION snowflake_id_router.background_failed(job integer, arg integer, code text, message text)
RETURNS double precision
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    failure record;
BEGIN
    IF job = 2 THEN
        -- (A role that may not run repair_moves() has no maintenance to retry: it ends.)
        IF code = '42501' THEN
            RAISE WARNING 'router maintenance: % (%); it ends', message, code;
            RETURN NULL;
        END IF;
        RAISE WARNING 'router maintenance: repair_moves failed: % (%)', message, code;
        RETURN least(greatest(arg, 1), 86400);   -- (as maintenance_step's)
    END IF;
    IF snowflake_id_router.rebalance_mine(arg, false) THEN
        failure := snowflake_id_router.rebalance_failed(arg, snowflake_id_router.rebalance_moving(arg), code, message);
        RAISE WARNING '%', failure.message USING HINT = failure.hint;
    ELSE
        RAISE WARNING 'background rebalance %: % (%)', arg, message, code;
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.background_failed(integer, integer, text, text) IS
  'Records the failed step of a background worker (a rebalance: failed or stopped, and it ends; the maintenance: logged, and it goes on).';

-- One step of the maintenance worker (every seconds): repair_moves() (dead moves completed
-- or undone, leftovers removed, the map pushed to the followers behind). NULL (the worker
-- ends) if another maintenance worker of this database has a lower pid: of two started at
-- once, both see the other and one goes on.
CREATE OR REPLACE FUNCTION snowflake_id_router.maintenance_step(seconds integer) RETURNS double precision
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
BEGIN
    IF EXISTS (SELECT FROM snowflake_id_router.maintenance_workers() w WHERE w.pid < pg_backend_pid()) THEN
        RAISE WARNING 'router maintenance: another maintenance worker runs; this one ends';
        RETURN NULL;
    END IF;
    FOR r IN SELECT * FROM @extschema@.repair_moves() LOOP
        RAISE LOG 'router maintenance: move %: %', r.move, r.outcome;
    END LOOP;
    -- Within maintenance_start's bounds (1 s to a day) whatever the worker was started
    -- with: background_start takes its arguments from its caller, and a worker that never
    -- waits would flood the server and its log. (Inline: the worker's role may run only
    -- the functions docs/cluster.md grants it.)
    RETURN least(greatest(seconds, 1), 86400);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.maintenance_step(integer) IS
  'One run of the maintenance worker: repair_moves(); the seconds to the next, or NULL if another maintenance worker runs.';

-- The step a background worker calls (src/pg/node/background.rs), as its starter's role:
-- job 1 drives rebalance arg, job 2 is the maintenance every arg seconds. Seconds to wait
-- before the next step, NULL to end.
CREATE OR REPLACE FUNCTION snowflake_id_router.background_step(job integer, arg integer) RETURNS double precision
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (Each job's function in a statement of its own: a role granted one job's need not be
    -- granted the other's.)
    IF job = 1 THEN
        RETURN snowflake_id_router.rebalance_step(arg);
    ELSIF job = 2 THEN
        RETURN snowflake_id_router.maintenance_step(arg);
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.background_step(integer, integer) IS
  'A background worker''s step: job 1 a rebalance, job 2 the maintenance; seconds to the next, NULL to end.';

-- The maintenance workers running in this database: pid and role (the application name the
-- worker sets, src/pg/node/background.rs, in a session of its backend type; columns every
-- role sees in pg_stat_activity).
CREATE OR REPLACE FUNCTION snowflake_id_router.maintenance_workers()
RETURNS TABLE (pid integer, role name)
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT a.pid, a.usename FROM pg_stat_activity a
     WHERE a.backend_type = 'snowflake_id_router background' AND a.datname = current_database()
       AND a.application_name = 'snowflake_id_router job 2';
END;
COMMENT ON FUNCTION snowflake_id_router.maintenance_workers() IS
  'The router''s maintenance workers running in this database (pid, role).';

-- rebalance_start's first step, in the transaction it began: the rebalance begun, a worker
-- started and the rebalance handed to it. (A step's caller must be run_rebalance or this,
-- in the router's own schema, as PL/pgSQL's call stack names them: refuse_outside_rebalance.)
CREATE OR REPLACE FUNCTION snowflake_id_router.begin_background(drain text, strategy text, batch_size integer, template text,
                                                               OUT id integer, OUT worker integer)
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    id := snowflake_id_router.rebalance_begin(drain, strategy, batch_size, template, 1);
    worker := snowflake_id_router.background_start(1, id);
    PERFORM snowflake_id_router.rebalance_hand_over(id, worker);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.begin_background(text, text, integer, text) IS
  'rebalance_start''s first step: the rebalance begun, a worker started, the rebalance handed to it.';

-- A procedure, as rebalance() is: the steps run only in a transaction a procedure began
-- (refuse_outside_rebalance), and the worker takes its first step once the CALL ends.
CREATE OR REPLACE PROCEDURE rebalance_start(strategy text DEFAULT 'by_shard_count', batch_size integer DEFAULT 32,
                                            template text DEFAULT 'tpl', drain text DEFAULT NULL, INOUT id integer DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    worker integer;
BEGIN
    PERFORM snowflake_id_router.require_primary('rebalance_start');
    COMMIT;   -- (inside a transaction block: 2D000, before anything is taken)
    SELECT b.id, b.worker INTO id, worker FROM snowflake_id_router.begin_background(drain, strategy, batch_size, template) b;
    RAISE NOTICE '% % runs in background worker %', CASE WHEN drain IS NULL THEN 'rebalance' ELSE 'drain' END, id, worker
        USING HINT = 'rebalance_status shows its progress, rebalance_wait() waits for its end, rebalance_stop() stops it after its current batch.';
END
$$;
COMMENT ON PROCEDURE rebalance_start(text, integer, text, text, integer) IS
  'Starts (or resumes) a rebalance, or with drain a drain of that node, in a background worker running as the caller; its id. 55P03 while one runs.';

-- Waits until the newest rebalance or drain is no longer running (at most timeout; NULL:
-- no limit) and returns its state; 55000 if it failed or was interrupted, naming the call
-- that resumes it. SECURITY DEFINER, as rebalance_stop: a role granted it needs no right on
-- what it reads (rebalance_status, pg_stat_activity's backend types) nor on the monotonic
-- clock and sleep of schema snowflake_id_node, which are closed to every role; it opens,
-- takes and leaves nothing in the caller's session, and tells only the newest rebalance's
-- state, error and resuming call.
CREATE OR REPLACE FUNCTION rebalance_wait(timeout interval DEFAULT NULL) RETURNS text
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := snowflake_id_node.monotonic() + coalesce(timeout, interval '100 years');
    s record;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'rebalance_wait sees the rebalance''s progress only in a READ COMMITTED transaction'
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    LOOP
        PERFORM pg_stat_clear_snapshot();   -- (pg_stat_activity is read once a transaction otherwise)
        SELECT x.id, x.kind, x.state, x.error, x.resume, x.pid INTO s FROM @extschema@.rebalance_status x ORDER BY x.id DESC LIMIT 1;
        -- A background worker that has left its call (a cancelled step) is about to record
        -- how it ended: not interrupted while it lives. It records that before it ends, so
        -- once it is seen gone, the record is read again: the first read may predate it.
        IF s.state = 'interrupted' AND snowflake_id_node.monotonic() < deadline THEN
            IF EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = s.pid AND a.backend_type = 'snowflake_id_router background') THEN
                s.state := 'running';
            ELSE
                PERFORM pg_stat_clear_snapshot();
                SELECT x.id, x.kind, x.state, x.error, x.resume, x.pid INTO s FROM @extschema@.rebalance_status x ORDER BY x.id DESC LIMIT 1;
            END IF;
        END IF;
        EXIT WHEN NOT FOUND OR s.state NOT IN ('running', 'stopping') OR snowflake_id_node.monotonic() >= deadline;
        PERFORM snowflake_id_node.sleep(0.2);
    END LOOP;
    IF s.state IN ('failed', 'interrupted') THEN
        RAISE EXCEPTION '% % %', s.kind, s.id, CASE s.state WHEN 'failed' THEN 'failed: ' || s.error ELSE 'was interrupted (its session is gone)' END
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = s.resume || ' resumes it.';
    END IF;
    RETURN s.state;
END
$$;
COMMENT ON FUNCTION rebalance_wait(interval) IS
  'Waits (at most timeout) until the newest rebalance or drain is no longer running; its state (55000 if it failed or was interrupted).';

CREATE OR REPLACE FUNCTION maintenance_start(every interval DEFAULT '1 min') RETURNS integer
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    worker integer;
BEGIN
    PERFORM snowflake_id_router.require_primary('maintenance_start');
    IF every IS NULL OR every < interval '1 s' OR every > interval '1 day' THEN
        RAISE EXCEPTION 'every % is out of range: give 1 s to 1 day', coalesce(every::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    worker := (SELECT w.pid FROM snowflake_id_router.maintenance_workers() w LIMIT 1);
    IF worker IS NOT NULL THEN
        RAISE EXCEPTION 'the router''s maintenance runs already, in background worker %', worker
            USING ERRCODE = 'lock_not_available', HINT = 'maintenance_stop() stops it.';
    END IF;
    RETURN snowflake_id_router.background_start(2, ceil(extract(epoch FROM every))::integer);
END
$$;
COMMENT ON FUNCTION maintenance_start(interval) IS
  'Starts the router''s maintenance in a background worker running as the caller: repair_moves() (and the map pushed to followers behind) every interval; its pid. 55P03 if it runs already.';

CREATE OR REPLACE FUNCTION maintenance_stop() RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    w record;
    stopped boolean := false;
BEGIN
    FOR w IN SELECT * FROM snowflake_id_router.maintenance_workers() LOOP
        -- As the caller: a role stops only what it may signal (its own role's, or with
        -- pg_signal_backend).
        stopped := pg_terminate_backend(w.pid) OR stopped;
    END LOOP;
    RETURN stopped;
END
$$;
COMMENT ON FUNCTION maintenance_stop() IS
  'Stops the router''s maintenance worker (as the caller: its own role''s, or with pg_signal_backend); false if none ran.';
