-- == A node split through its streaming standby (docs/cluster-design.md, "A split") ==
--
-- split_node(node, new_node, standby_connstr) halves a node without copying a row: the
-- standby (pg_basebackup -R of the node) has them already. The shards that go (split_plan)
-- are fenced and sealed on the node by the move's own node steps, the standby replays past
-- the seal, is promoted, gets a mark of its own, drops its copies of the shards the node
-- keeps (before anything can route to it), and is registered as new_node together with a
-- move record of the shards, sealed: the move's completion (complete_move) activates them
-- there (sequences above every value either side gave), flips the map and drops the sealed
-- copies on the node once every router routes by the flip. Every step is recorded in
-- snowflake_id_router.split before it runs; split_node run again or repair_moves() takes an
-- unfinished split up from its record: before the seal it is undone on the node, from the
-- seal on it is completed.

-- The shards node serves with data (mapped to it and served there: a schema made by
-- create_shard), each with its bytes when by_size (rebalance_plan's by_disk_size measure,
-- shard_stats, asked status_chunk() shards at a time as data_shards does), else NULL.
CREATE OR REPLACE FUNCTION snowflake_id_router.split_weights(node text, by_size boolean)
RETURNS TABLE (shard integer, bytes bigint)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    conn text := 'snowflake_id_router_split_plan';
    chunk integer := snowflake_id_router.status_chunk();
    got jsonb := '[]';
    part jsonb;
BEGIN
    PERFORM snowflake_id_router.connect_node(conn, node);
    LOOP
        part := snowflake_id_router.call(conn, CASE WHEN by_size
            THEN format($q$SELECT coalesce(jsonb_agg(jsonb_build_object('shard', s.shard, 'bytes', s.bytes) ORDER BY s.shard), '[]')::text
                            FROM snowflake_id_node.shard_stats(false, %s, %s) s$q$,
                        coalesce((got->-1->>'shard')::integer, -1), chunk)
            ELSE $q$SELECT coalesce(jsonb_agg(jsonb_build_object('shard', s)), '[]')::text
                      FROM unnest(snowflake_id_node.served_shards()) s$q$ END,
            snowflake_id_router.timeout('status_timeout'), 'asking for its shards')::jsonb;
        got := got || part;
        EXIT WHEN NOT by_size OR jsonb_array_length(part) < chunk;
    END LOOP;
    PERFORM snowflake_id_router.disconnect(conn);
    RETURN QUERY SELECT (x->>'shard')::integer, (x->>'bytes')::bigint FROM jsonb_array_elements(got) x
                   JOIN snowflake_id_router.shard m ON m.shard = (x->>'shard')::integer AND m.node = split_weights.node;
EXCEPTION WHEN query_canceled OR OTHERS THEN
    PERFORM snowflake_id_router.disconnect(conn);
    RAISE;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.split_weights(text, boolean) IS
  'The shards a node serves with data where the map names it, with their bytes (shard_stats) if asked.';

-- The shards split_node(node, new_node, ..., shards, by) moves to the standby, of those the
-- node serves with data (split_weights): by 'count', the given number (by default half,
-- rounded down), its highest-numbered; by 'size' (shards NULL), about half its bytes: the
-- heaviest first, each to the half that weighs less so far (the standby's on a tie), as
-- rebalance_plan's by_disk_size weighs them. A shard mapped to it with no schema there stays
-- where it is mapped.
CREATE OR REPLACE FUNCTION split_plan(node text, shards integer DEFAULT NULL, by text DEFAULT 'count') RETURNS integer[]
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    w record;
    held integer := 0;
    go integer[] := '{}';
    gone numeric := 0;
    kept numeric := 0;
BEGIN
    IF node IS NULL OR by IS NULL THEN
        RAISE EXCEPTION 'split_plan: node and by must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF by NOT IN ('count', 'size') OR by = 'size' AND shards IS NOT NULL THEN
        RAISE EXCEPTION 'split_plan: by is ''count'' (with shards or not) or ''size'' (without), not % with shards %',
            quote_literal(by), coalesce(shards::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = split_plan.node) THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object';
    END IF;
    IF by = 'count' THEN
        go := ARRAY(SELECT x.shard FROM snowflake_id_router.split_weights(node, false) x ORDER BY x.shard DESC);
        held := cardinality(go);
        IF coalesce(shards, held / 2) NOT BETWEEN 1 AND held - 1 THEN
            RAISE EXCEPTION 'node % serves % shard(s) with data: a split moves 1 to % of them, not %', quote_literal(node), held,
                greatest(held - 1, 0), coalesce(shards, held / 2) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        go := go[1:coalesce(shards, held / 2)];
    ELSE
        FOR w IN SELECT x.shard, greatest(x.bytes, 1) AS bytes FROM snowflake_id_router.split_weights(node, true) x
                  ORDER BY x.bytes DESC NULLS LAST, x.shard DESC LOOP
            held := held + 1;
            IF gone <= kept THEN
                go := go || w.shard; gone := gone + w.bytes;
            ELSE
                kept := kept + w.bytes;
            END IF;
        END LOOP;
        IF held < 2 THEN
            RAISE EXCEPTION 'node % serves % shard(s) with data: a split needs 2 or more', quote_literal(node), held
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    RETURN ARRAY(SELECT s FROM unnest(go) s ORDER BY 1);
END
$$;
COMMENT ON FUNCTION split_plan(text, integer, text) IS
  'The shards split_node would move from node to its standby: by count (default half, the highest-numbered) or by size (about half the bytes).';

-- Splits node: the shards of split_plan(node, shards, by) go to its streaming standby, reached by
-- standby_connstr, which becomes node new_node. The standby must be a standby of that very
-- node (its system identifier and the node's mark, replayed), streaming, and within max_lag
-- of the node's WAL, or nothing is fenced (55000). The shards' writes are refused (40001,
-- retried by clients) from the fence until the flip; the node's other shards are never
-- fenced. An unfinished split of node (its caller gone) is taken up instead, whatever shards
-- says. Returns the split's id (snowflake_id_router.split; move_history shows its move).
CREATE OR REPLACE FUNCTION split_node(node text, new_node text, standby_connstr text, shards integer DEFAULT NULL,
                                      max_lag text DEFAULT '16MB', by text DEFAULT 'count') RETURNS bigint
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
AS $$
#variable_conflict use_variable
DECLARE
    sp snowflake_id_router.split;
    todo integer[];
BEGIN
    PERFORM snowflake_id_router.refuse_transaction_block('split_node');
    IF node IS NULL OR new_node IS NULL OR standby_connstr IS NULL OR max_lag IS NULL THEN
        RAISE EXCEPTION 'split_node: node, new_node, standby_connstr and max_lag must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'split_node runs only in a READ COMMITTED transaction, not %', current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    PERFORM snowflake_id_router.require_primary('split_node');
    SELECT * INTO sp FROM snowflake_id_router.split x WHERE x.node = split_node.node AND x.state NOT IN ('done', 'undone')
     ORDER BY x.id DESC LIMIT 1;
    IF FOUND THEN
        IF sp.new_node <> new_node THEN
            RAISE EXCEPTION 'node % is in split % to node %, not finished', quote_literal(node), sp.id, quote_literal(sp.new_node)
                USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Run split_node with that new node, or SELECT repair_moves().';
        END IF;
        todo := sp.shards;
        PERFORM snowflake_id_router.lock_router(todo);
    ELSE
        IF EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = new_node) THEN
            RAISE EXCEPTION 'node % already exists', quote_literal(new_node) USING ERRCODE = 'duplicate_object';
        END IF;
        IF new_node = '' OR octet_length(new_node) > 63 THEN
            RAISE EXCEPTION 'node name % is invalid: give 1 to 63 bytes', quote_literal(new_node) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        todo := @extschema@.split_plan(node, shards, by);
        PERFORM snowflake_id_router.lock_router(todo);
        BEGIN
            PERFORM snowflake_id_router.check_connections();
            PERFORM snowflake_id_router.repair_shards(todo);   -- (an interrupted move of them first)
            IF EXISTS (SELECT FROM unnest(todo) s WHERE NOT EXISTS (SELECT FROM snowflake_id_router.shard m
                                                                     WHERE m.shard = s AND m.node = split_node.node)) THEN
                RAISE EXCEPTION 'the shards of node % changed meanwhile', quote_literal(node) USING ERRCODE = 'serialization_failure';
            END IF;
            sp := snowflake_id_router.open_split(node, new_node, snowflake_id_router.normalize_connstr(standby_connstr), todo,
                                                 pg_size_bytes(max_lag));
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            PERFORM snowflake_id_router.disconnect_all();
            RAISE;
        END;
    END IF;
    BEGIN
        PERFORM snowflake_id_router.run_split(sp.id);
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        PERFORM snowflake_id_router.gate_open();
        PERFORM snowflake_id_router.disconnect_all();
        RAISE;
    END;
    PERFORM snowflake_id_router.release_connections();
    PERFORM snowflake_id_router.unlock_router(todo);
    RETURN sp.id;
END
$$;
COMMENT ON FUNCTION split_node(text, text, text, integer, text, text) IS
  'Splits a node onto its streaming standby, which becomes new_node serving split_plan(node, shards, by); takes up an unfinished split of node. Returns the split''s id.';

-- The standby standby (a normalised connect string) of a node whose identity is identity,
-- checked (55000 naming what fails): in recovery, streaming from its primary, carrying the
-- node's system identifier, database and mark (so a standby of this very node, as of its
-- registration), the node showing a streaming standby, and at most max_lag bytes of the
-- node's WAL behind (replayed), its replay neither paused nor delayed. Through connection
-- conn to the standby and src to the node.
CREATE OR REPLACE FUNCTION snowflake_id_router.check_standby(conn text, src text, identity text, max_lag bigint) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    seen text := snowflake_id_router.remote_node_identity(conn);
    lag numeric;
BEGIN
    IF snowflake_id_router.node_mark_of(identity) IS NULL THEN
        RAISE EXCEPTION 'the node has no identity mark (registered by 0.3.0): its standby cannot be told from it'
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'alter_node(node, its connect string) gives it one.';
    END IF;
    IF seen IS DISTINCT FROM identity THEN
        RAISE EXCEPTION 'the standby is not a standby of the node: its identity is %, the node''s %', seen, identity
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF snowflake_id_router.call(conn, $q$SELECT (pg_catalog.pg_is_in_recovery()
              AND EXISTS (SELECT FROM pg_catalog.pg_stat_wal_receiver w WHERE w.status = 'streaming'))::text$q$,
            interval '10 s', 'checking the standby') <> 'true' THEN
        RAISE EXCEPTION 'the standby is not a streaming standby (in recovery, receiving WAL from its primary)'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    lag := snowflake_id_router.call(src, 'SELECT pg_catalog.pg_current_wal_insert_lsn()::text', interval '10 s', 'reading the node''s WAL position')::pg_lsn
           - snowflake_id_router.call(conn, 'SELECT pg_catalog.pg_last_wal_replay_lsn()::text', interval '10 s', 'reading the standby''s position')::pg_lsn;
    IF lag > max_lag THEN
        RAISE EXCEPTION 'the standby is % behind the node (at most % allowed)', pg_size_pretty(lag), pg_size_pretty(max_lag)
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Wait for it to catch up, then split again.';
    END IF;
    -- (Its replay must follow the node: the shards stay fenced until it has replayed the seal.)
    IF snowflake_id_router.call(conn, $q$SELECT (pg_catalog.pg_is_wal_replay_paused()
              OR pg_catalog.current_setting('recovery_min_apply_delay') <> '0')::text$q$,
            interval '10 s', 'checking the standby') <> 'false' THEN
        RAISE EXCEPTION 'the standby''s replay is paused or delayed (recovery_min_apply_delay): the shards would stay fenced until it replays the seal'
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Resume its replay (pg_wal_replay_resume()) and set recovery_min_apply_delay to 0.';
    END IF;
    IF snowflake_id_router.call(src, $q$SELECT EXISTS (SELECT FROM pg_catalog.pg_stat_replication r WHERE r.state = 'streaming')::text$q$,
            interval '10 s', 'checking the node''s standbys') <> 'true' THEN
        RAISE EXCEPTION 'the node shows no streaming standby' USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.check_standby(text, text, text, bigint) IS
  'Checks (55000) that a connection reaches a streaming standby of the node with that identity, at most max_lag bytes behind.';

-- The standby's connection for this session (not a node's: nothing is registered there yet).
CREATE OR REPLACE FUNCTION snowflake_id_router.standby_conn(standby text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_router.disconnect('sfid:standby');
    PERFORM snowflake_id_router.connect('sfid:standby', snowflake_id_router.connect_options() || ' ' || standby, 'the standby');
    RETURN 'sfid:standby';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.standby_conn(text) IS 'This session''s connection to a split''s standby, opened afresh.';

-- Checks the standby and records the split (planned), with the move id it will become and
-- the standby's identity to be; returns the record.
CREATE OR REPLACE FUNCTION snowflake_id_router.open_split(node text, new_node text, standby text, shards integer[], max_lag bigint)
RETURNS snowflake_id_router.split
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    identity text := (SELECT n.identity FROM snowflake_id_router.node n WHERE n.name = node);
    new_identity text;
    split_id bigint;
    sp snowflake_id_router.split;
BEGIN
    PERFORM snowflake_id_router.check_standby(snowflake_id_router.standby_conn(standby), snowflake_id_router.node_conn(node),
                                              identity, max_lag);
    PERFORM snowflake_id_router.disconnect('sfid:standby');
    new_identity := snowflake_id_router.database_of(identity) || '/' || gen_random_uuid();
    split_id := snowflake_id_router.call(snowflake_id_router.loopback(), format(
        'INSERT INTO snowflake_id_router.split (node, new_node, standby, shards, move, node_identity, new_identity, max_lag)
         VALUES (%L, %L, %L, %L, pg_catalog.nextval(pg_catalog.pg_get_serial_sequence(''snowflake_id_router.move'', ''id'')), %L, %L, %s)
         RETURNING id', node, new_node, standby, shards, identity, new_identity, max_lag),
        interval '10 s', 'recording the split')::bigint;
    SELECT * INTO sp FROM snowflake_id_router.split x WHERE x.id = split_id;
    RETURN sp;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.open_split(text, text, text, integer[], bigint) IS
  'Checks a split''s standby and records the split (planned); returns its record.';

-- A change to a split's record, committed through the loopback connection before the step
-- it names runs (NULL: unchanged). The one place a split's record changes.
CREATE OR REPLACE FUNCTION snowflake_id_router.note_split(split_id bigint, state text, schemas text[] DEFAULT NULL,
                                                          bounds text DEFAULT NULL, seal_lsn pg_lsn DEFAULT NULL,
                                                          error text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM snowflake_id_router.call(snowflake_id_router.loopback(), format(
        'UPDATE snowflake_id_router.split x SET state = coalesce(%1$L, x.state), schemas = coalesce(%2$L, x.schemas),
                bounds = coalesce(%3$L, x.bounds), seal_lsn = coalesce(%4$L, x.seal_lsn), error = coalesce(%5$L, x.error),
                fenced = CASE WHEN %1$L = ''sealed'' THEN coalesce(x.fenced, clock_timestamp()) ELSE x.fenced END,
                promoted = CASE WHEN %1$L = ''promoted'' THEN clock_timestamp() ELSE x.promoted END,
                ended = CASE WHEN %1$L IN (''done'', ''undone'') THEN clock_timestamp() ELSE x.ended END
          WHERE x.id = %6$s RETURNING x.state', state, schemas, bounds, seal_lsn, error, split_id),
        snowflake_id_router.timeout('lock_timeout') + interval '1 s', 'recording the split');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.note_split(bigint, text, text[], text, pg_lsn, text) IS
  'Commits a change to a split''s record through the loopback connection; NULL arguments leave their fields as they are.';

-- Drives a split from its recorded state to done (or undone, raising the error): the caller
-- holds the router locks of its shards. From the seal's commit on (sealed) a cancel of the
-- caller (Ctrl-C, statement_timeout) does not stop it: the split goes on to its end, then
-- the cancel ends the call (57014), as a move's does between its seal and its flip. Only a
-- second cancel, a terminate or its own bounds (a standby that does not replay in time, a
-- node that does not answer) leave it sealed, for repair_moves(). (Not by holding cancels
-- off around it, as a move's flip does: a cancel held pending makes PostgreSQL's regular
-- expressions fail, "operation cancelled", and connecting to the standby uses one.)
CREATE OR REPLACE FUNCTION snowflake_id_router.run_split(split_id bigint) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    msg text;
BEGIN
    IF (SELECT x.state FROM snowflake_id_router.split x WHERE x.id = split_id) = 'planned' THEN
        PERFORM snowflake_id_router.pause_at('split planned');
        PERFORM snowflake_id_router.split_seal(split_id);
    END IF;
    IF (SELECT x.state FROM snowflake_id_router.split x WHERE x.id = split_id) IN ('done', 'undone') THEN
        RETURN;
    END IF;
    BEGIN
        PERFORM snowflake_id_router.split_sealed(split_id);
    EXCEPTION WHEN query_canceled THEN
        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
        IF NOT snowflake_id_router.cancelled('57014', msg) THEN
            RAISE;
        END IF;
        PERFORM snowflake_id_router.settle_all();
        PERFORM snowflake_id_router.split_sealed(split_id);
        RAISE EXCEPTION 'split % of node % is done, but its call was cancelled: %', split_id,
            quote_literal((SELECT x.node FROM snowflake_id_router.split x WHERE x.id = split_id)), msg
            USING ERRCODE = 'query_canceled';
    END;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.run_split(bigint) IS
  'Drives a split from its recorded state to its end; a cancel from its seal on ends the call once the split is done.';

-- A sealed split driven to its end (promoted, registered, completed); returns its state.
CREATE OR REPLACE FUNCTION snowflake_id_router.split_sealed(split_id bigint) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    st text;
BEGIN
    LOOP
        st := (SELECT x.state FROM snowflake_id_router.split x WHERE x.id = split_id);
        PERFORM snowflake_id_router.pause_at('split ' || st);
        CASE st
            WHEN 'sealed', 'promoting' THEN PERFORM snowflake_id_router.split_promote(split_id);
            WHEN 'promoted' THEN PERFORM snowflake_id_router.split_register(split_id);
            WHEN 'registered' THEN PERFORM snowflake_id_router.split_complete(split_id);
            ELSE RETURN st;
        END CASE;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.split_sealed(bigint) IS 'Drives a sealed split to its end; returns its state.';

-- A split's steps on the node do DDL for each table of each shard they fence (the fence's
-- triggers, the sequences' seal, their undo), and the standby replays it: their bounds are
-- a move's timeout (name) and this much per shard on top, so that a split of thousands of
-- shards does not fail at its default timeouts. (bench/split.sh, bench/split.json, 2,048
-- shards: 8.1 s from the start to the seal, about 4 ms a shard; 10 ms keeps more than a
-- twofold margin for a loaded node.)
CREATE OR REPLACE FUNCTION snowflake_id_router.split_allowance(shards integer[]) RETURNS interval
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN cardinality(shards) * interval '10 ms';
COMMENT ON FUNCTION snowflake_id_router.split_allowance(integer[]) IS
  'What a split''s bounds allow on top of a move''s for the shards it fences: 10 ms each.';
CREATE OR REPLACE FUNCTION snowflake_id_router.split_timeout(name text, shards integer[]) RETURNS interval
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_router.timeout(name) + snowflake_id_router.split_allowance(shards);
COMMENT ON FUNCTION snowflake_id_router.split_timeout(text, integer[]) IS
  'A split''s bound for a step on the node: the timeout name and split_allowance(shards).';

-- The node's WAL position once its seal is committed, which the standby must replay past
-- (split_promote): read in a transaction of its own that takes a transaction ID first (the
-- query's one-time filter), so that its commit record, written after that position and
-- flushed, carries every record before it to the standby. (The insert position alone can
-- lie past a record not yet flushed, say a checkpointer's, which nothing flushes while the
-- node is idle: the moved shards' writers wait on their fence meanwhile, and the standby
-- never got there.)
CREATE OR REPLACE FUNCTION snowflake_id_router.seal_position(src text) RETURNS pg_lsn
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_router.call(src, 'SELECT pg_catalog.pg_current_wal_insert_lsn()::text WHERE pg_catalog.pg_current_xact_id() IS NOT NULL',
                                interval '10 s', 'reading the WAL position')::pg_lsn;
COMMENT ON FUNCTION snowflake_id_router.seal_position(text) IS
  'A node''s WAL position after its seal, read in a transaction whose flushed commit record follows it (what a split''s standby replays past).';

-- Whether the standby follows the node itself, not only carries its identity (a copy of the
-- node, pg_basebackup made into a server of its own, or that copy's standby, carries it too,
-- with WAL and positions of its own): it replays the record the split has just made on the
-- node (move key k), within the split's lock_timeout bound; 55000 otherwise, before anything
-- is fenced.
CREATE OR REPLACE FUNCTION snowflake_id_router.standby_follows(sp snowflake_id_router.split, k text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    standby text := snowflake_id_router.standby_conn(sp.standby);
    bound interval := snowflake_id_router.split_timeout('lock_timeout', sp.shards);
    deadline timestamptz := snowflake_id_node.monotonic() + bound;
BEGIN
    WHILE NOT snowflake_id_router.call(standby, format(
            'SELECT EXISTS (SELECT FROM snowflake_id_node.move m WHERE m.key OPERATOR(pg_catalog.=) %L)::text', k),
            interval '10 s', 'checking the standby')::boolean LOOP
        IF snowflake_id_node.monotonic() > deadline THEN
            RAISE EXCEPTION 'the standby does not follow node %: it did not replay the split''s record from the node within %',
                quote_literal(sp.node), bound USING ERRCODE = 'object_not_in_prerequisite_state',
                DETAIL = 'A copy of the node (or the standby of one) carries its identity, but not its WAL.',
                HINT = 'Give the connect string of a streaming standby of this node (pg_basebackup -R from it), then split again.';
        END IF;
        PERFORM snowflake_id_node.sleep(0.01);
    END LOOP;
    PERFORM snowflake_id_router.disconnect('sfid:standby');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.standby_follows(snowflake_id_router.split, text) IS
  'Waits until a split''s standby replays the split''s record from its node (55000 if it does not in time: not that node''s standby).';

-- Planned: on the node, the standby checked again (and seen to replay the split's record
-- made on the node: it follows that node), then the shards fenced and sealed by the
-- move's own steps (set_fence, seal_check, seal, in one transaction there; a split too large
-- for the node's lock table refused first), and the node's
-- WAL position after the seal recorded (sealed). A record on the node from an attempt that
-- did not seal is undone first; one that sealed is taken as sealed. On a failure before the
-- seal's commit the node's record is undone and the split too (undone), and the error raised.
CREATE OR REPLACE FUNCTION snowflake_id_router.split_seal(split_id bigint) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    sp snowflake_id_router.split := (SELECT x FROM snowflake_id_router.split x WHERE x.id = split_id);
    k text := snowflake_id_router.move_key(sp.move);
    lock_ms text := snowflake_id_router.ms(snowflake_id_router.timeout('lock_timeout'));
    wait interval := snowflake_id_router.split_timeout('cleanup_timeout', sp.shards);
    src text;
    schemas text[];
    msg text;
BEGIN
    IF snowflake_id_router.split_undo_node(sp) = 'sealed' THEN
        RETURN;
    END IF;
    src := snowflake_id_router.node_conn(sp.node);
    BEGIN
        PERFORM snowflake_id_router.check_standby(snowflake_id_router.standby_conn(sp.standby), src, sp.node_identity, sp.max_lag);
        PERFORM snowflake_id_router.disconnect('sfid:standby');
        schemas := snowflake_id_router.call(src, format('SELECT snowflake_id_node.split_source(%L, %L, %L)', k,
                                                        snowflake_id_node.identity(), sp.shards), wait, 'recording the split on the node');
        PERFORM snowflake_id_router.note_split(split_id, NULL, schemas => schemas,
            bounds => snowflake_id_router.call(src, format('SELECT snowflake_id_node.split_bounds(%L)', k), wait, 'reading the sequences'));
        -- The standby follows this very node: it replays the record just made there. Its
        -- identity proves less: a copy of the node (pg_basebackup made into a server of its
        -- own), or that copy's standby, carries it too, and its WAL and positions are its own.
        PERFORM snowflake_id_router.standby_follows(sp, k);
        -- (The fence and the seal lock every table of the shards in one transaction: a split too
        -- large for the node's lock table is refused here, 53400, before anything is fenced.)
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.fence_room(%L)', schemas), wait,
                                         'checking the node''s lock table');
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.set_fence(%L, %L, %L)', k, lock_ms,
                                                     snowflake_id_router.fence_bound() + snowflake_id_router.split_allowance(sp.shards)),
                                         snowflake_id_router.split_timeout('lock_timeout', sp.shards) + interval '1 s', 'fencing writes on the node');
        PERFORM snowflake_id_router.pause_at('split fenced');
        PERFORM snowflake_id_router.call(src, 'BEGIN', interval '10 s', 'sealing');
        -- (No fingerprints to compare: the standby replays the node's DDL with its rows.)
        PERFORM snowflake_id_router.call(src, format(
            'SELECT snowflake_id_node.seal_check(%1$L, NULL, %2$L), snowflake_id_node.seal(%1$L)', k, lock_ms),
            snowflake_id_router.split_timeout('cutover_timeout', sp.shards), 'sealing the node');
        PERFORM snowflake_id_router.call(src, 'COMMIT', interval '10 s', 'sealing the node');
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        msg := SQLERRM;
        PERFORM snowflake_id_router.disconnect_all();   -- (the seal's transaction, if open, rolls back)
        IF snowflake_id_router.split_undo_node(sp) = 'sealed' THEN
            RETURN;   -- (the commit's answer was lost: sealed)
        END IF;
        PERFORM snowflake_id_router.note_split(split_id, 'undone', error => msg);
        RAISE;
    END;
    PERFORM snowflake_id_router.note_split(split_id, 'sealed', seal_lsn =>
        snowflake_id_router.seal_position(src));
END
$$;
COMMENT ON FUNCTION snowflake_id_router.split_seal(bigint) IS
  'A split''s fence and seal on the node (sealed); undone there and raised on a failure before the seal''s commit.';

-- The node's record of a split not yet known as sealed: sealed (then the split is recorded
-- sealed, with the node's WAL position now) or undone there (fence, marker, record). Returns
-- 'sealed', or NULL once nothing of it is left on the node.
CREATE OR REPLACE FUNCTION snowflake_id_router.split_undo_node(sp snowflake_id_router.split) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    st text := snowflake_id_router.node_state(sp.node, sp.move, sp.shards);
    src text := snowflake_id_router.node_conn(sp.node);
BEGIN
    IF st = 'sealed' THEN
        PERFORM snowflake_id_router.note_split(sp.id, 'sealed', seal_lsn =>
            snowflake_id_router.seal_position(src));
        RETURN 'sealed';
    ELSIF st IS NOT NULL THEN
        PERFORM snowflake_id_router.call(src, format('SELECT snowflake_id_node.undo(%L, %L, 0)', snowflake_id_router.move_key(sp.move),
                                                     snowflake_id_router.split_timeout('cleanup_timeout', sp.shards)),
                                         snowflake_id_router.split_timeout('cleanup_timeout', sp.shards) + interval '5 s',
                                         'undoing the split on the node');
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.split_undo_node(snowflake_id_router.split) IS
  'A split''s record on its node: recorded sealed if it is (''sealed''), else undone there (NULL).';

-- Sealed: waits (cutover_timeout) until the standby has replayed past the seal, records
-- promoting, promotes it (pg_promote, waiting for it), records promoted. A standby already
-- promoted (a repair) is only recorded so, if it is the node's standby still.
CREATE OR REPLACE FUNCTION snowflake_id_router.split_promote(split_id bigint) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    sp snowflake_id_router.split := (SELECT x FROM snowflake_id_router.split x WHERE x.id = split_id);
    conn text := snowflake_id_router.standby_conn(sp.standby);
    seen text := snowflake_id_router.remote_node_identity(conn);
BEGIN
    IF snowflake_id_router.database_of(seen) <> snowflake_id_router.database_of(sp.node_identity)
       OR seen NOT IN (sp.node_identity, sp.new_identity) THEN
        RAISE EXCEPTION 'split %: the standby''s connect string reaches another database (identity %)', split_id, seen
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF snowflake_id_router.call(conn, 'SELECT pg_catalog.pg_is_in_recovery()::text', interval '10 s', 'checking the standby')::boolean THEN
        PERFORM snowflake_id_router.poll(conn, format('SELECT (pg_catalog.pg_last_wal_replay_lsn() >= %L)::text', sp.seal_lsn),
                                         snowflake_id_node.monotonic() + snowflake_id_router.split_timeout('cutover_timeout', sp.shards),
                                         'waiting for the standby to replay the seal');
        PERFORM snowflake_id_router.note_split(split_id, 'promoting');
        PERFORM snowflake_id_router.pause_at('split promote');
        IF NOT snowflake_id_router.call(conn, 'SELECT pg_catalog.pg_promote(true, 60)::text', interval '70 s', 'promoting the standby')::boolean THEN
            RAISE EXCEPTION 'split %: the standby did not finish its promotion within 60 s', split_id
                USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'split_node or repair_moves() goes on once it has.';
        END IF;
    END IF;
    PERFORM snowflake_id_router.disconnect(conn);
    PERFORM snowflake_id_router.note_split(split_id, 'promoted');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.split_promote(bigint) IS
  'A split''s standby, once it replayed past the seal, promoted (promoting, then promoted).';

-- Promoted: the standby gets its own mark (new_identity), makes the node's sealed record of
-- the shards its own (split_adopt) and hides its copies of the shards the node keeps
-- (split_hide; dropped after the flip), all before it is registered; then, in one transaction
-- on the router, new_node is registered with it and the move record made, sealed (registered).
CREATE OR REPLACE FUNCTION snowflake_id_router.split_register(split_id bigint) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    sp snowflake_id_router.split := (SELECT x FROM snowflake_id_router.split x WHERE x.id = split_id);
    conn text := snowflake_id_router.standby_conn(sp.standby);
    seen text := snowflake_id_router.remote_node_identity(conn);
    wait interval := snowflake_id_router.split_timeout('cleanup_timeout', sp.shards);
BEGIN
    IF seen = sp.node_identity THEN
        PERFORM snowflake_id_router.call(conn, format('SELECT snowflake_id_node.set_node_mark(%L, %L)::text',
                                                      snowflake_id_router.node_mark_of(sp.new_identity),
                                                      snowflake_id_router.node_mark_of(sp.node_identity)), wait, 'marking the standby');
    ELSIF seen IS DISTINCT FROM sp.new_identity THEN
        RAISE EXCEPTION 'split %: the standby''s connect string reaches another database (identity %)', split_id, seen
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    PERFORM snowflake_id_router.call(conn, format('SELECT snowflake_id_node.lock_shards(%L, %L)', sp.shards,
                                                  snowflake_id_router.timeout('lock_timeout')), wait, 'locking the shards');
    PERFORM snowflake_id_router.call(conn, format('SELECT snowflake_id_node.split_adopt(%L, %L, %L)', snowflake_id_router.move_key(sp.move),
                                                  sp.node_identity, sp.bounds), wait, 'taking the shards on the standby');
    -- (Its copies of the node's shards hidden, not dropped: that is done after the flip.)
    PERFORM snowflake_id_router.call(conn, format('SELECT snowflake_id_node.split_hide(%L, %L)', snowflake_id_router.move_key(sp.move),
                                                  sp.shards), wait, 'hiding the node''s shards on the standby');
    PERFORM snowflake_id_router.disconnect(conn);   -- (its shard locks with it)
    PERFORM snowflake_id_router.call(snowflake_id_router.loopback(),
        format('SELECT snowflake_id_router.register_split(%s, %L)', split_id, snowflake_id_router.session_token()),
        snowflake_id_router.timeout('lock_timeout') + interval '1 s', 'registering the new node');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.split_register(bigint) IS
  'A split''s promoted standby marked, given the sealed record, its copies of the node''s shards hidden, then registered with the move (registered).';

-- (Run through the loopback connection, committed at once.) Registers a split's new node and
-- makes its move record, sealed and owned by owner, and records the split registered.
CREATE OR REPLACE FUNCTION snowflake_id_router.register_split(split_id bigint, owner text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    sp snowflake_id_router.split;
BEGIN
    SELECT * INTO sp FROM snowflake_id_router.split x WHERE x.id = split_id FOR UPDATE;
    IF sp.state <> 'promoted' THEN
        RETURN sp.state;
    END IF;
    PERFORM snowflake_id_router.check_new_identity(sp.new_node, sp.new_identity);
    INSERT INTO snowflake_id_router.node (name, connstr, identity) VALUES (sp.new_node, sp.standby, sp.new_identity);
    INSERT INTO snowflake_id_router.move (id, shards, source, target, source_identity, target_identity, template, schemas,
                                          state, fenced, owner, complete_by)
    OVERRIDING SYSTEM VALUE
    VALUES (sp.move, sp.shards, sp.node, sp.new_node, sp.node_identity, sp.new_identity, '(split)', sp.schemas,
            'sealed', sp.fenced, owner,
            snowflake_id_node.monotonic() + snowflake_id_router.completion_bound() + 2 * snowflake_id_router.split_allowance(sp.shards));
    UPDATE snowflake_id_router.split x SET state = 'registered' WHERE x.id = split_id;
    RETURN 'registered';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.register_split(bigint, text) IS
  'Registers a promoted split''s new node and its sealed move record (registered), in one transaction.';

-- Registered: the move completed as any sealed move (complete_move: the standby's copies
-- activated with the sequences carried, the map flipped, the node's sealed copies dropped
-- once every router routes by the flip), taken over first if another session drove it; then
-- the new node's hidden copies of the node's shards dropped (split_drop_hidden), then done.
CREATE OR REPLACE FUNCTION snowflake_id_router.split_complete(split_id bigint) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    sp snowflake_id_router.split := (SELECT x FROM snowflake_id_router.split x WHERE x.id = split_id);
    wait interval := snowflake_id_router.split_timeout('cleanup_timeout', sp.shards);
BEGIN
    IF NOT snowflake_id_router.move_finished((SELECT m.state FROM snowflake_id_router.move m WHERE m.id = sp.move)) THEN
        PERFORM snowflake_id_router.call(snowflake_id_router.loopback(),
            format('SELECT snowflake_id_router.take_move(%s, %L, false)', sp.move, snowflake_id_router.session_token()),
            snowflake_id_router.timeout('lock_timeout') + interval '1 s', 'taking the move over');
        PERFORM snowflake_id_router.complete_move(sp.move);
    END IF;
    IF NOT snowflake_id_router.move_flipped((SELECT m.state FROM snowflake_id_router.move m WHERE m.id = sp.move)) THEN
        RAISE EXCEPTION 'split %: the move of its shards (move %) is not flipped', split_id, sp.move
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    PERFORM snowflake_id_router.pause_at('split flipped');
    FOR i IN 0 .. @SHARDS@ LOOP   -- (each call drops some, until none is left)
        EXIT WHEN snowflake_id_router.call(snowflake_id_router.node_conn(sp.new_node),
                      format('SELECT snowflake_id_node.split_drop_hidden(%L, %L, %L)', snowflake_id_router.move_key(sp.move),
                             snowflake_id_router.ms(snowflake_id_router.timeout('lock_timeout')), wait),
                      wait + interval '5 s', 'dropping the node''s shards on the new node')::integer = 0;
    END LOOP;
    PERFORM snowflake_id_router.note_split(split_id, 'done');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.split_complete(bigint) IS
  'A registered split''s move completed (complete_move), the new node''s hidden copies of the node''s shards dropped, then the split recorded done.';

-- (repair_moves) Takes up every unfinished split whose caller is gone (its router locks free):
-- undone if it was not sealed, else completed; one row each, with what became of it.
CREATE OR REPLACE FUNCTION snowflake_id_router.repair_splits() RETURNS TABLE (move bigint, shards integer[], outcome text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    sp snowflake_id_router.split;
BEGIN
    FOR sp IN SELECT * FROM snowflake_id_router.split x WHERE x.state NOT IN ('done', 'undone') ORDER BY x.id LOOP
        move := sp.move;
        shards := sp.shards;
        BEGIN
            PERFORM snowflake_id_router.lock_router(sp.shards);
            BEGIN
                -- Before the seal a split cut short is undone (split_node again starts it
                -- anew); from the seal on, completed.
                IF sp.state = 'planned' AND snowflake_id_router.split_undo_node(sp) IS NULL THEN
                    PERFORM snowflake_id_router.note_split(sp.id, 'undone', error => 'interrupted before the seal: undone by repair_moves()');
                ELSE
                    PERFORM snowflake_id_router.run_split(sp.id);
                END IF;
                outcome := format('split %s of node %L: %s', sp.id, sp.node,
                                  (SELECT x.state FROM snowflake_id_router.split x WHERE x.id = sp.id));
            EXCEPTION WHEN query_canceled OR OTHERS THEN
                IF snowflake_id_router.cancelled(SQLSTATE, SQLERRM) THEN
                    RAISE;
                END IF;
                outcome := format('split %s of node %L not repaired: %s (%s)', sp.id, sp.node, SQLERRM, SQLSTATE);
            END;
            PERFORM snowflake_id_router.unlock_router(sp.shards);
        EXCEPTION WHEN lock_not_available THEN
            outcome := format('split %s of node %L: running (%s)', sp.id, sp.node, sp.state);
        END;
        PERFORM snowflake_id_router.gate_open();
        PERFORM snowflake_id_router.disconnect_all();
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.repair_splits() IS
  'Completes or undoes the unfinished splits whose caller is gone (repair_moves); one row each.';
