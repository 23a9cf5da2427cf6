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
SET search_path = pg_catalog, pg_temp SET lock_timeout = 0   -- (the wait's own, below, ends with the call)
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
    -- (The wait's lock_timeout ends with this call; the lock stays until unlock_schema_changes.)
END
$$;
COMMENT ON FUNCTION snowflake_id_router.lock_schema_changes(boolean) IS
  'The router-wide schema-change lock, to the end of the transaction: exclusive (alter_shards) or shared (moves); 55P03 after schema_change_timeout.';

-- Gives back one hold of the schema-change lock, before the SECURITY DEFINER function that
-- took it returns (unlock_router says why).
CREATE OR REPLACE FUNCTION snowflake_id_router.unlock_schema_changes(exclusive boolean) RETURNS void
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT snowflake_id_node.own_unlock(snowflake_id_node.lock_class(), -1, false, NOT exclusive);
END;
COMMENT ON FUNCTION snowflake_id_router.unlock_schema_changes(boolean) IS
  'Gives back one hold of the schema-change lock (exclusive or shared) before the function that took it returns.';

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
    cid bigint;            -- the change: its id in snowflake_id_router.schema_change (NULL: a new one)
    todo text[];           -- nodes this call applies the change to, in name order
    had text[];            -- nodes that had the change before this call
    skipped text[];
    n text;
    t0 timestamptz;
    done_count integer;
    rows_node text[] := '{}';
    rows_schemas integer[] := '{}';
    rows_seconds numeric[] := '{}';
BEGIN
    PERFORM snowflake_id_router.schema_change_begin(ddl, template, skip_unreachable);
    SELECT w.cid, w.todo, w.had INTO cid, todo, had FROM snowflake_id_router.schema_change_work(ddl, template) w;
    skipped := snowflake_id_router.schema_change_connect(todo, skip_unreachable);
    todo := ARRAY(SELECT x FROM unnest(todo) x WHERE x <> ALL (skipped) ORDER BY x);
    cid := snowflake_id_router.schema_change_record(cid, ddl, template, todo, skipped);
    -- Node by node, each in one transaction, each recorded as it ends.
    FOREACH n IN ARRAY todo LOOP
        t0 := clock_timestamp();
        done_count := snowflake_id_router.schema_change_apply(cid, n, ddl, template, had || rows_node,
                                                              ARRAY(SELECT x FROM unnest(todo || skipped) x WHERE x <> ALL (rows_node)));
        rows_node := rows_node || n;
        rows_schemas := rows_schemas || done_count;
        rows_seconds := rows_seconds || round(extract(epoch FROM clock_timestamp() - t0)::numeric, 3);
        PERFORM snowflake_id_router.exec('snowflake_id_router_self', format(
            $q$UPDATE snowflake_id_router.schema_change_node SET state = 'done', schemas = %s, seconds = %s, at = now(), error = NULL
                WHERE change = %s AND node = %L$q$,
            done_count, rows_seconds[cardinality(rows_seconds)], cid, n));
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_ddl_' || n);
    END LOOP;
    PERFORM snowflake_id_router.exec('snowflake_id_router_self', format(
        $q$UPDATE snowflake_id_router.schema_change SET finished = now(),
               state = CASE WHEN EXISTS (SELECT FROM snowflake_id_router.schema_change_node WHERE change = %s AND state <> 'done')
                            THEN 'incomplete' ELSE 'done' END
            WHERE id = %s$q$, cid, cid));
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_self');
    PERFORM snowflake_id_router.unlock_schema_changes(true);   -- (not held in the caller's transaction)
    IF cardinality(skipped) > 0 THEN
        RAISE WARNING 'schema change %: node(s) % skipped: they are behind', cid, array_to_string(skipped, ', ')
            USING HINT = 'Once they are back, call alter_shards with the same statement again.';
    END IF;
    RETURN QUERY SELECT x.node, x.state, x.schemas, x.seconds
                   FROM unnest(rows_node || skipped, array_fill('done'::text, ARRAY[cardinality(rows_node)])
                                                     || array_fill('skipped'::text, ARRAY[cardinality(skipped)]),
                               rows_schemas, rows_seconds) x(node, state, schemas, seconds)
                  ORDER BY x.node;
END
$$;
COMMENT ON FUNCTION alter_shards(text, text, boolean) IS
  'Runs one DDL statement (%I for the schema) on the template and every shard of every node, each node in one transaction; resumes an unfinished run of the same statement. Superusers only.';

-- alter_shards' refusals before any node is reached (its arguments, its caller, the
-- statement: placeholders, one statement, its kind), then the schema-change lock (exclusive)
-- and no unfinished move, and the loopback connection it records the change through.
CREATE OR REPLACE FUNCTION snowflake_id_router.schema_change_begin(ddl text, template text, skip_unreachable boolean) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
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
    PERFORM snowflake_id_node.ddl_statement(snowflake_id_node.ddl_for(ddl, template));
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
END
$$;
COMMENT ON FUNCTION snowflake_id_router.schema_change_begin(text, text, boolean) IS
  'alter_shards'' refusals before any node is reached, its exclusive schema-change lock, no unfinished move; opens its loopback connection.';

-- The change to run: an unfinished one of the same statement (resumed: cid, its nodes
-- without it as todo, those with it as had), or a new one (cid NULL) for every node.
CREATE OR REPLACE FUNCTION snowflake_id_router.schema_change_work(ddl text, template text, OUT cid bigint, OUT todo text[], OUT had text[])
LANGUAGE plpgsql STABLE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    SELECT c.id INTO cid FROM snowflake_id_router.schema_change c
     WHERE c.state IN ('running', 'incomplete') AND c.ddl = ddl AND c.template = template
     ORDER BY c.id DESC LIMIT 1;
    IF cid IS NULL THEN
        SELECT array_agg(x.name ORDER BY x.name) INTO todo FROM snowflake_id_router.node x;
    ELSE
        SELECT array_agg(cn.node ORDER BY cn.node) INTO todo FROM snowflake_id_router.schema_change_node cn
         WHERE cn.change = cid AND cn.state <> 'done'
           AND cn.node IN (SELECT x.name FROM snowflake_id_router.node x);
    END IF;
    SELECT coalesce(array_agg(cn.node ORDER BY cn.node), '{}') INTO had FROM snowflake_id_router.schema_change_node cn
     WHERE cn.change = cid AND cn.state = 'done';
    todo := coalesce(todo, '{}');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.schema_change_work(text, text) IS
  'The schema change alter_shards runs: the unfinished one of the same statement (its id, nodes without and with it) or a new one.';

-- Every node of todo reached first (connection snowflake_id_router_ddl_<node>): one that
-- cannot be is refused before anything changes, unless skipped. Returns those skipped.
CREATE OR REPLACE FUNCTION snowflake_id_router.schema_change_connect(todo text[], skip_unreachable boolean) RETURNS text[]
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n text;
    conn text;
    skipped text[] := '{}';
BEGIN
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
    RETURN skipped;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.schema_change_connect(text[], boolean) IS
  'Connects alter_shards to each node; those that cannot be reached are refused (55000) or, with skip_unreachable, returned as skipped.';

-- sql (a schema-change step) on a node's connection, again a few times if a lock was not
-- had in time or a deadlock met (the node rolled back; the node session of an interrupted
-- call may still be rolling back); then its error as it is.
CREATE OR REPLACE FUNCTION snowflake_id_router.schema_change_step(conn text, sql text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    FOR attempt IN 1 .. 5 LOOP
        BEGIN
            RETURN snowflake_id_router.fetch(conn, sql);
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            IF attempt = 5 THEN
                RAISE;
            END IF;
            PERFORM snowflake_id_node.sleep(0.5 * (attempt + 1));
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.schema_change_step(text, text) IS
  'A schema-change step on a node''s connection, tried up to 5 times while it meets a lock timeout or a deadlock.';

-- Checked on every node before any changes: no earlier change missing there (changes run in
-- order on each node), the statement on each template (tried and undone), the room in each
-- lock table. Then the change is recorded (a new one only now, numbered through the
-- loopback: the caller's snapshot may be older), the skipped nodes marked. Returns its id.
CREATE OR REPLACE FUNCTION snowflake_id_router.schema_change_record(cid bigint, ddl text, template text, todo text[], skipped text[])
RETURNS bigint
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    resumed boolean := cid IS NOT NULL;
    earlier record;
    n text;
    msg text;
    hnt text;
BEGIN
    SELECT c.id, c.ddl, cn.node INTO earlier
      FROM snowflake_id_router.schema_change c JOIN snowflake_id_router.schema_change_node cn ON cn.change = c.id
     WHERE c.state IN ('running', 'incomplete') AND (cid IS NULL OR c.id < cid) AND cn.state <> 'done' AND cn.node = ANY (todo)
     ORDER BY c.id, cn.node LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'node % has not got schema change % yet: it comes first', quote_literal(earlier.node), earlier.id
            USING ERRCODE = 'object_not_in_prerequisite_state', DETAIL = format('Change %s: %s', earlier.id, earlier.ddl),
                  HINT = format('Finish it by calling alter_shards with that statement again, or give it up: SELECT abandon_schema_change(%s).', earlier.id);
    END IF;
    IF resumed THEN
        RAISE NOTICE 'alter_shards resumes schema change %', cid;
    ELSE
        cid := snowflake_id_router.fetch('snowflake_id_router_self',
            'SELECT (coalesce(max(id), 0) + 1)::text FROM snowflake_id_router.schema_change')::bigint;
    END IF;
    FOREACH n IN ARRAY todo LOOP
        BEGIN
            PERFORM snowflake_id_router.schema_change_step('snowflake_id_router_ddl_' || n, format(
                'SELECT snowflake_id_node.schema_change_check(%L, %L, %L, %L)', snowflake_id_router.schema_change_key(cid), ddl, template,
                snowflake_id_router.setting('lock_timeout')));
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, hnt = PG_EXCEPTION_HINT;
            IF resumed THEN
                PERFORM snowflake_id_router.exec('snowflake_id_router_self', format(
                    $q$UPDATE snowflake_id_router.schema_change SET error = %L WHERE id = %s$q$, format('refused on node %s: %s', n, msg), cid));
            END IF;
            RAISE EXCEPTION 'alter_shards: node % refuses the change: %; no node was changed by this call', quote_literal(n), msg
                USING ERRCODE = SQLSTATE, HINT = coalesce(nullif(hnt, ''), 'Each node tries it on its template, and undoes it, before any node applies it.');
        END;
    END LOOP;
    PERFORM snowflake_id_router.exec('snowflake_id_router_self', CASE WHEN resumed THEN format(
        $q$UPDATE snowflake_id_router.schema_change SET state = 'running', finished = NULL, error = NULL WHERE id = %s;
           UPDATE snowflake_id_router.schema_change_node SET state = 'skipped' WHERE change = %s AND node = ANY (%L::text[])$q$,
        cid, cid, skipped) ELSE format(
        $q$INSERT INTO snowflake_id_router.schema_change (id, ddl, template, state, started, started_by)
           VALUES (%s, %L, %L, 'running', now(), %L);
           INSERT INTO snowflake_id_router.schema_change_node (change, node, state)
           SELECT %s, x, CASE WHEN x = ANY (%L::text[]) THEN 'skipped' ELSE 'pending' END FROM unnest(%L::text[]) x$q$,
        cid, ddl, template, session_user, cid, skipped, todo || skipped) END);
    RETURN cid;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.schema_change_record(bigint, text, text, text[], text[]) IS
  'Checks a schema change on every node (earlier changes first, the statement on each template, lock room), then records it; its id.';

-- The change applied on node n in one transaction there; returns how many schemas it
-- changed. A failure is recorded (the node failed, the change incomplete) and raised,
-- saying which nodes have the change (with_it) and which not (without_it).
CREATE OR REPLACE FUNCTION snowflake_id_router.schema_change_apply(cid bigint, n text, ddl text, template text,
                                                                   with_it text[], without_it text[]) RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    st text;
    msg text;
    hnt text;
BEGIN
    RETURN snowflake_id_router.schema_change_step('snowflake_id_router_ddl_' || n, format(
        'SELECT snowflake_id_node.schema_change_apply(%L, %L, %L, %L)::text', snowflake_id_router.schema_change_key(cid), ddl, template,
        snowflake_id_router.setting('lock_timeout')))::integer;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hnt = PG_EXCEPTION_HINT;
    PERFORM snowflake_id_router.exec('snowflake_id_router_self', format(
        $q$UPDATE snowflake_id_router.schema_change_node SET state = 'failed', at = now(), error = %L WHERE change = %s AND node = %L;
           UPDATE snowflake_id_router.schema_change SET state = 'incomplete', finished = now(), error = %L WHERE id = %s$q$,
        msg, cid, n, format('failed on node %s: %s', n, msg), cid));
    RAISE EXCEPTION 'schema change % failed on node %: %', cid, quote_literal(n), msg
        USING ERRCODE = st,
              DETAIL = format('Each node has all of the change or none. With it: %s. Without it: %s.',
                  coalesce((SELECT string_agg(quote_literal(x), ', ' ORDER BY x) FROM unnest(with_it) x), 'none'),
                  (SELECT string_agg(quote_literal(x), ', ' ORDER BY x) FROM unnest(without_it) x)),
              HINT = coalesce(nullif(hnt, '') || ' ', '') || 'Fix the cause and call alter_shards with the same statement again: it resumes there.';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.schema_change_apply(bigint, text, text, text, text[], text[]) IS
  'Applies a schema change on one node (its one transaction); a failure recorded and raised, naming the nodes with and without it.';

CREATE OR REPLACE FUNCTION abandon_schema_change(change bigint) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_router.refuse_transaction_block('abandon_schema_change');
    PERFORM snowflake_id_router.require_primary('abandon_schema_change');
    PERFORM snowflake_id_router.commit_apart(format('SELECT snowflake_id_router.abandon_change(%s)', change));
END
$$;
COMMENT ON FUNCTION abandon_schema_change(bigint) IS
  'Gives up an unfinished schema change: the nodes keep what they have (see schema_change_status), and later changes may run.';

-- (Run apart by abandon_schema_change: commit_apart.)
CREATE OR REPLACE FUNCTION snowflake_id_router.abandon_change(change bigint) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_router.lock_schema_changes(true);
    UPDATE snowflake_id_router.schema_change c SET state = 'abandoned', finished = now()
     WHERE c.id = change AND c.state IN ('running', 'incomplete');
    IF NOT FOUND THEN
        RAISE EXCEPTION 'schema change % is not unfinished', change USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.abandon_change(bigint) IS
  'abandon_schema_change''s change, committed apart: marks an unfinished schema change abandoned (55000 if none).';

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
