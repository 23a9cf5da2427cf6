-- == Keeping a move's old copy (docs/cluster.md, "Keeping a move's old copy") ==
--
-- With revert_window above 0 a move keeps its source's copy after the flip, current, for the
-- window: replication in the other direction, a publication of the target's copies and a
-- logical slot, both made on the target once the source is sealed and the target caught
-- up (nothing more comes forward: no loop, no origin to filter) and before the flip (no
-- write the target serves is missed), then after the flip a subscription on the source to
-- them, with nothing to copy. The old copy stays sealed: the apply's writes are a
-- replica's, which its fence trigger does not see; every other write is refused (40001).
-- The window's end (move.revert_until, recorded before anything is made) is found by
-- repair_moves(), which the maintenance worker runs; finish_move() and the next move of the
-- shards end it at once. Then the subscription, the publication, the slot and the old copy
-- go, as they do with no window (clean_up). revert_window 0 makes nothing of this.

-- Records the end of a move's window (epoch seconds; NULL: no window), if owner still drives
-- the move. Run through the loopback connection (note_window): committed at once.
CREATE OR REPLACE FUNCTION snowflake_id_router.record_window(move_id bigint, until double precision, owner text) RETURNS text
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM FROM snowflake_id_router.move r WHERE r.id = move_id FOR UPDATE;
    PERFORM snowflake_id_router.check_owner(move_id, owner);
    UPDATE snowflake_id_router.move r SET revert_until = to_timestamp(until) WHERE r.id = move_id;
    RETURN 'recorded';
END
$$;
COMMENT ON FUNCTION snowflake_id_router.record_window(bigint, double precision, text) IS
  'Records the end of a move''s revert window (epoch; NULL: none) if owner still drives the move (run through the loopback connection).';

CREATE OR REPLACE FUNCTION snowflake_id_router.note_window(move_id bigint, until timestamptz) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM snowflake_id_router.call(snowflake_id_router.loopback(),
        format('SELECT snowflake_id_router.record_window(%s, %s, %L)', move_id, coalesce(extract(epoch FROM until)::text, 'NULL'),
               snowflake_id_router.session_token()),
        snowflake_id_router.timeout('lock_timeout') + interval '1 s', 'recording the revert window');
END
$$;
COMMENT ON FUNCTION snowflake_id_router.note_window(bigint, timestamptz) IS
  'Commits the end of a move''s revert window (record_window) through the loopback connection.';

-- Before the flip of a sealed move (flip_sealed, after activate_target): with a window, its
-- end recorded, then the reverse publication and slot made on the target. The flip waits
-- for this (the slot waits for the target's running transactions), at most lock_timeout
-- for each call; a failure keeps nothing (what was made is dropped, the window cleared or,
-- if something stays, ended; a WARNING) and the flip goes on: keeping the old copy never
-- stops a flip that would go on without it (the source unreachable, say). PostgreSQL 15
-- applies as the subscription's owner, a superuser, not as each table's (docs/security.md):
-- a source of 15 keeps nothing.
CREATE OR REPLACE FUNCTION snowflake_id_router.publish_back(move_id bigint) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    k text := snowflake_id_router.move_key(move_id);
    bound interval := snowflake_id_router.timeout('lock_timeout');
    failed text[];
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    IF m.revert_until IS NULL AND snowflake_id_router.setting('revert_window')::interval <= interval '0' THEN
        RETURN;
    END IF;
    BEGIN
        IF m.revert_until IS NULL THEN
            IF snowflake_id_router.call(snowflake_id_router.node_conn(m.source), 'SELECT current_setting(''server_version_num'')',
                                        bound, 'reading the source''s version')::integer < 160000 THEN
                RAISE WARNING 'move % keeps no old copy: node % runs PostgreSQL 15, whose apply would write as a superuser',
                    move_id, quote_literal(m.source);
                RETURN;
            END IF;
            PERFORM snowflake_id_router.note_window(move_id, clock_timestamp() + snowflake_id_router.setting('revert_window')::interval);
        END IF;
        PERFORM snowflake_id_router.node_state(m.target, move_id, m.shards);   -- (its shard locks, for a repair)
        PERFORM snowflake_id_router.call(snowflake_id_router.node_conn(m.target), format('SELECT snowflake_id_node.publish_back(%L)', k),
                                         bound, 'publishing the copies back');
        PERFORM snowflake_id_router.pause_at('published back');
        PERFORM snowflake_id_router.call(snowflake_id_router.node_conn(m.target), format('SELECT snowflake_id_node.slot_back(%L)', k),
                                         bound, 'making the reverse slot');
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        IF snowflake_id_router.cancelled(SQLSTATE, SQLERRM) THEN
            RAISE;
        END IF;
        PERFORM snowflake_id_router.settle_all();
        failed := snowflake_id_router.end_back(move_id);
        -- Nothing left: no window. Else the window ends now: the clean-up removes the rest
        -- (keep_old_copy), and never subscribes the old copy to a slot that may not be whole.
        PERFORM snowflake_id_router.note_window(move_id, CASE WHEN cardinality(failed) > 0 THEN clock_timestamp() END);
        RAISE WARNING 'move % keeps no old copy: %', move_id, SQLERRM
            USING DETAIL = CASE WHEN cardinality(failed) > 0 THEN 'Left for the clean-up: ' || array_to_string(failed, '; ')
                                ELSE 'What it made for that is removed.' END,
                  HINT = 'Its old copy goes as with revert_window 0.';
    END;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.publish_back(bigint) IS
  'Before a sealed move''s flip, with a revert window: records its end and makes the reverse publication and slot on the target (a failure keeps nothing).';

-- After the flip, within the window (clean_up): the source subscribed to the reverse slot,
-- the move kept. Returns what failed (the move is left flipped, for repair_moves()).
CREATE OR REPLACE FUNCTION snowflake_id_router.subscribe_back(move_id bigint) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    bound interval := snowflake_id_router.timeout('cleanup_timeout');
    failed text;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    failed := (snowflake_id_router.cleanup_step(m.source, move_id, m.shards,
                   format('SELECT snowflake_id_node.subscribe_back(%L, %L)', snowflake_id_router.move_key(move_id),
                          (SELECT n.connstr FROM snowflake_id_router.node n WHERE n.name = m.target)),
                   bound, 'subscribing the old copy')).failed;
    IF failed IS NULL THEN
        PERFORM snowflake_id_router.enter(move_id, 'kept');
    END IF;
    RETURN failed;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.subscribe_back(bigint) IS
  'Subscribes a flipped move''s old copy to the target''s reverse slot and records the move kept; what failed, where.';

-- The reverse replication removed: the source's subscription first (its apply would use the
-- slot again), then the target's publication and slot, then its record. Returns what
-- failed, where; each step that has nothing to remove passes.
CREATE OR REPLACE FUNCTION snowflake_id_router.end_back(move_id bigint) RETURNS text[]
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    k text := snowflake_id_router.move_key(move_id);
    bound interval := snowflake_id_router.timeout('cleanup_timeout');
    source_failed text;
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    -- (Before the flip the source has no subscription, and the target's record stays.)
    IF snowflake_id_router.move_flipped(m.state) THEN
        source_failed := (snowflake_id_router.cleanup_step(m.source, move_id, m.shards,
                             format('SELECT snowflake_id_node.unsubscribe_back(%L)', k), bound, 'removing the reverse subscription')).failed;
    END IF;
    RETURN array_remove(ARRAY[source_failed,
        (snowflake_id_router.cleanup_step(m.target, move_id, m.shards, format('SELECT snowflake_id_node.end_back(%L, %L)', k, bound),
                                          bound + interval '5 s', 'removing the reverse publication and slot')).failed,
        CASE WHEN snowflake_id_router.move_flipped(m.state) THEN
        (snowflake_id_router.cleanup_step(m.target, move_id, m.shards, format('SELECT snowflake_id_node.finish(%L)', k),
                                          bound, 'removing the record')).failed END], NULL);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.end_back(bigint) IS
  'Removes a move''s reverse replication (the source''s subscription, the target''s publication, slot and, once flipped, record); what failed, where.';

-- Ends a move's window now (finish_move, and a move of its shards: repair_shards), before its
-- repair: this session takes the move over (the caller holds its router locks), then
-- records the window's end; repair_move then removes what it kept.
CREATE OR REPLACE FUNCTION snowflake_id_router.end_window(move_id bigint) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    IF (SELECT r.revert_until > clock_timestamp() FROM snowflake_id_router.move r WHERE r.id = move_id) THEN
        PERFORM snowflake_id_router.call(snowflake_id_router.loopback(),
            format('SELECT snowflake_id_router.take_move(%s, %L, false)', move_id, snowflake_id_router.session_token()),
            snowflake_id_router.timeout('lock_timeout') + interval '1 s', 'taking the move over');
        PERFORM snowflake_id_router.note_window(move_id, clock_timestamp());
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.end_window(bigint) IS
  'Ends a move''s revert window now (the caller holds its router locks; repair_move then removes what it kept).';

-- Ends the window of a move that keeps its old copy: the reverse replication and the old
-- copy removed now, as at the window's end.
CREATE OR REPLACE FUNCTION finish_move(move bigint) RETURNS text
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    outcome text;
BEGIN
    IF move IS NULL THEN
        RAISE EXCEPTION 'finish_move: move must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM snowflake_id_router.require_primary('finish_move');
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'finish_move runs only in a READ COMMITTED transaction, not %', current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = finish_move.move;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'move % does not exist', move USING ERRCODE = 'undefined_object';
    END IF;
    IF m.revert_until IS NULL OR NOT snowflake_id_router.move_flipped(m.state) OR snowflake_id_router.move_finished(m.state) THEN
        RAISE EXCEPTION 'move % keeps no old copy: it is %', move, m.state
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Only a move flipped with a revert window (revert_window) keeps one, until it is finished.';
    END IF;
    PERFORM snowflake_id_router.disconnect_all();
    PERFORM snowflake_id_router.lock_router(m.shards);   -- (55P03 while its mover or a repair runs)
    PERFORM snowflake_id_router.end_window(move);
    outcome := snowflake_id_router.repair_move(move);
    PERFORM snowflake_id_router.unlock_router(m.shards);
    PERFORM snowflake_id_router.disconnect_all();
    RETURN outcome;
END
$$;
COMMENT ON FUNCTION finish_move(bigint) IS
  'Ends a move''s revert window now: its reverse replication and old copy removed; returns the outcome.';

-- In clean_up, once the forward replication is removed, for a move with a window: within
-- it the old copy is kept (subscribe_back; a NOTICE says until when); past it, the reverse
-- replication is removed first, and the clean-up goes on as with no window. True when the
-- clean-up stops here: kept, or what failed left for repair_moves() (a WARNING).
CREATE OR REPLACE FUNCTION snowflake_id_router.keep_old_copy(move_id bigint, left_over text[]) RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    failed text[];
BEGIN
    SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
    IF clock_timestamp() >= m.revert_until THEN
        failed := snowflake_id_router.end_back(move_id);
        IF cardinality(failed) = 0 THEN
            RETURN false;
        END IF;
    ELSE
        failed := array_remove(left_over || snowflake_id_router.subscribe_back(move_id), NULL);
        IF cardinality(failed) = 0 THEN
            IF m.state <> 'kept' THEN
                RAISE NOTICE '% moved from node % to node %: the old copy on node % is kept current until % (finish_move(%) ends this)',
                    snowflake_id_router.shard_list(m.shards), quote_literal(m.source), quote_literal(m.target),
                    quote_literal(m.source), m.revert_until, move_id;
            END IF;
            RETURN true;
        END IF;
    END IF;
    PERFORM snowflake_id_router.note(move_id, error => 'clean-up: ' || array_to_string(failed, '; '));
    RAISE WARNING 'move % of % to node % is flipped, but its old copy is not %: %', move_id,
        snowflake_id_router.shard_list(m.shards), quote_literal(m.target),
        CASE WHEN clock_timestamp() >= m.revert_until THEN 'removed' ELSE 'kept current' END, array_to_string(failed, '; ')
        USING HINT = 'SELECT repair_moves() finishes it once the cause is fixed.';
    RETURN true;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.keep_old_copy(bigint, text[]) IS
  'In a move''s clean-up, with a revert window: keeps the old copy current within it, removes the reverse replication past it; true when the clean-up stops there.';
