-- A node split through its streaming standby (snowflake_id_router's split_node,
-- docs/cluster-design.md, "A split"): the node side. The shards that go are fenced and sealed
-- on the node by a move's own steps (set_fence, seal_check, seal), under a move record with
-- no publication; the standby replays all of it, is promoted, and there that record, sealed,
-- becomes the record of a move's target not yet serving (split_adopt): the router completes
-- it as any sealed move (activate, flip, drop_copy on the node). Each function is one call by
-- the router, one transaction.

-- Why a split cannot carry the shards of schemas, or NULL: an unlogged relation in them
-- (physical replication does not carry its rows: the standby has it empty); or something
-- depending across the cut: outside them on something in them (the node drops them after
-- the flip), or outside the shards the node keeps on something in those (the standby drops
-- them). A move refuses the same (refusal()); a split checks only what it would lose.
CREATE OR REPLACE FUNCTION snowflake_id_node.split_refusal(schemas text[]) RETURNS text
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(
        (SELECT format('unlogged %s %s cannot be split off: its rows do not reach the standby',
                       CASE c.relkind WHEN 'S' THEN 'sequence' WHEN 'm' THEN 'materialized view' ELSE 'table' END, c.oid::regclass)
           FROM unnest(schemas) s JOIN pg_namespace n ON n.nspname = s
           JOIN pg_depend d ON d.refclassid = 'pg_namespace'::regclass AND d.refobjid = n.oid AND d.classid = 'pg_class'::regclass
           JOIN pg_class c ON c.oid = d.objid AND c.relpersistence = 'u'
          ORDER BY 1 LIMIT 1),
        snowflake_id_node.dependent_refusal(schemas, schemas, NULL),
        (SELECT snowflake_id_node.dependent_refusal(k.kept, k.kept, NULL)
           FROM (SELECT array_agg(c.schema_name) AS kept FROM @extschema@.snowflake_id_shard c
                  WHERE c.schema_name <> ALL (schemas) AND to_regnamespace(quote_ident(c.schema_name)) IS NOT NULL) k
          WHERE k.kept IS NOT NULL));
END;
COMMENT ON FUNCTION snowflake_id_node.split_refusal(text[]) IS
  'Why a split cannot carry the schemas (an unlogged relation, a dependency across the cut), or NULL.';

-- On the node being split, holding the shard locks of shards: the move's record (copying,
-- with its marker table, no publication: the standby gets the rows by WAL) for the fence and
-- seal of a move. Refused (55000) while any other move's record is here: the standby carries
-- the whole node, and a move in flight there (its subscription, its fence) would start again
-- on the promoted standby. Returns the shards' schemas.
CREATE OR REPLACE FUNCTION snowflake_id_node.split_source(key text, router text, shards integer[]) RETURNS text[]
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    schemas text[];
    missing integer;
    other text;
    why text;
BEGIN
    SELECT array_agg(c.schema_name ORDER BY x.i), min(x.s) FILTER (WHERE c.schema_name IS NULL) INTO schemas, missing
      FROM unnest(shards) WITH ORDINALITY x(s, i) LEFT JOIN @extschema@.snowflake_id_shard c ON c.shard = x.s;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'this node has no schema for shard %', missing USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- Waits for a move's record being made (its transaction holds the table, no_split) and
    -- keeps the next one waiting until this record is committed: then no_split refuses it.
    LOCK TABLE snowflake_id_node.move IN SHARE ROW EXCLUSIVE MODE;
    SELECT r.key INTO other FROM snowflake_id_node.move r WHERE r.key <> split_source.key LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'this node takes part in move % : a node is split only when no move runs on it', other
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Let it end (or SELECT repair_moves()), then split again.';
    END IF;
    why := snowflake_id_node.split_refusal(schemas);
    IF why IS NOT NULL THEN
        RAISE EXCEPTION '%', why USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    PERFORM snowflake_id_node.prepare_source(key, router, snowflake_id_node.split_peer(), shards, schemas);
    UPDATE snowflake_id_node.move r SET state = 'copying' WHERE r.key = split_source.key;
    RETURN schemas;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.split_source(text, text, integer[]) IS
  'Split step on the node: records move key of shards (copying, no publication) for its fence and seal; 55000 while another move''s record is here; returns the schemas.';

-- The peer a split's record on its node names (split_source): the node itself, as its standby.
CREATE OR REPLACE FUNCTION snowflake_id_node.split_peer() RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN snowflake_id_node.identity() || ' (its standby)';
END
$$;
COMMENT ON FUNCTION snowflake_id_node.split_peer() IS 'The peer named by a split''s record on the node being split.';

-- 55000 while this node is being split (a split's record here, split_source, until the
-- split's move drops the sealed copies): the standby carries the whole node, and the record
-- of a move made meanwhile would be replayed onto the promoted standby, a move it cannot
-- finish. Called by a move's first step on either side (prepare_source, prepare_target)
-- before it records the move: it takes the move table (ROW EXCLUSIVE, to the end of the
-- transaction) first, which split_source's check waits for, so that a move and a split
-- starting together exclude each other.
CREATE OR REPLACE FUNCTION snowflake_id_node.no_split() RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
BEGIN
    LOCK TABLE snowflake_id_node.move IN ROW EXCLUSIVE MODE;
    SELECT r.key INTO k FROM snowflake_id_node.move r WHERE r.role = 'source' AND r.peer = snowflake_id_node.split_peer() LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'this node is being split (split %): no move starts on it until the split ends', k
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Move once split_node (or SELECT repair_moves()) has ended it.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.no_split() IS
  'A move''s first step: 55000 while a split of this node is under way (its record here); takes the move table against a split starting.';

-- The bounds of every sequence of move key's schemas (minimum, maximum, start), as JSON, read
-- before the fence: the seal caps each sequence at its newest value (stop_sequences), and the
-- promoted standby, which replays the cap, gets its bounds back from these (split_adopt).
CREATE OR REPLACE FUNCTION snowflake_id_node.split_bounds(key text) RETURNS text
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(json_agg(json_build_object('schema', n.nspname, 'name', c.relname, 'min', q.seqmin, 'max', q.seqmax,
                                               'start', q.seqstart) ORDER BY n.nspname, c.relname), '[]')::text
      FROM snowflake_id_node.move m, unnest(m.schemas) s JOIN pg_namespace n ON n.nspname = s
      JOIN pg_depend d ON d.refclassid = 'pg_namespace'::regclass AND d.refobjid = n.oid
           AND d.classid = 'pg_class'::regclass AND d.deptype = 'n'
      JOIN pg_class c ON c.oid = d.objid AND c.relkind = 'S'
      JOIN pg_sequence q ON q.seqrelid = c.oid
     WHERE m.key = split_bounds.key;
END;
COMMENT ON FUNCTION snowflake_id_node.split_bounds(text) IS
  'Split step on the node, before the fence: the bounds (min, max, start) of every sequence of move key''s schemas, as JSON.';

-- The key of the record that hides, on a split's promoted standby, its copies of the shards
-- the node keeps (split_hide) until they are dropped after the flip (split_drop_hidden).
CREATE OR REPLACE FUNCTION snowflake_id_node.hidden_key(key text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN key || '/kept';
COMMENT ON FUNCTION snowflake_id_node.hidden_key(text) IS 'The key of the record hiding a split''s copies of the shards its node keeps.';

-- On the promoted standby, after split_adopt, holding the shard locks of keep (the shards
-- that go to it): its copies of every other shard (the node's, which it keeps) leave
-- snowflake_id_shards at once, under one record as a move's sealed copies (the source's
-- role, no replication, no fingerprints: nothing sealed them; the DDL guard refuses changes
-- to them from now on), so that the standby is registered without dropping them inside the
-- moved shards' write pause. split_drop_hidden drops them after the flip. Nothing routes to
-- them: a router's map and use_shard (SF001) never name the new node for them; a write sent
-- straight to their tables there is not refused, and goes with them. Returns how many.
CREATE OR REPLACE FUNCTION snowflake_id_node.split_hide(key text, keep integer[]) RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{incoming}');
    hidden snowflake_id_node.move;
BEGIN
    PERFORM snowflake_id_node.split_promoted();
    IF EXISTS (SELECT FROM snowflake_id_node.move r WHERE r.key = snowflake_id_node.hidden_key(key)) THEN
        RETURN 0;   -- (hidden already: a repair)
    END IF;
    SELECT snowflake_id_node.hidden_key(key), m.router, 'source', m.peer,
           array_agg(c.shard ORDER BY c.shard), array_agg(c.schema_name ORDER BY c.shard), 'sealed',
           'sfid_' || replace(snowflake_id_node.hidden_key(key), '/', '_')
      INTO hidden.key, hidden.router, hidden.role, hidden.peer, hidden.shards, hidden.schemas, hidden.state, hidden.marker
      FROM @extschema@.snowflake_id_shard c WHERE c.shard <> ALL (keep);
    IF hidden.shards IS NULL THEN
        RETURN 0;
    END IF;
    INSERT INTO snowflake_id_node.move (key, router, role, peer, shards, schemas, state, marker)
    VALUES (hidden.key, hidden.router, hidden.role, hidden.peer, hidden.shards, hidden.schemas, hidden.state, hidden.marker);
    RETURN cardinality(hidden.shards);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.split_hide(text, integer[]) IS
  'Split step on the promoted standby: hides its copies of the shards not in keep (the node''s) under one record, for split_drop_hidden after the flip.';

-- After the flip, on the split's new node: drops the hidden copies of the node's shards
-- (split_hide), as many as one transaction has room for (drop_copy, under their shard locks,
-- taken by the first call and given back by the last: thousands of them, taken and read
-- again at each call, cost more than the drops; the session's end gives them back too), the
-- last call the record too. Returns how many are left (0: none, or no such record).
CREATE OR REPLACE FUNCTION snowflake_id_node.split_drop_hidden(key text, lock_timeout text, wait_timeout interval) RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    shards integer[] := (SELECT r.shards FROM snowflake_id_node.move r WHERE r.key = snowflake_id_node.hidden_key(key));
    n integer;
BEGIN
    IF shards IS NULL THEN
        RETURN 0;
    END IF;
    IF NOT snowflake_id_node.holds(shards) THEN
        PERFORM snowflake_id_node.lock_shards(shards, wait_timeout);
    END IF;
    n := snowflake_id_node.drop_copy(snowflake_id_node.hidden_key(key), lock_timeout, wait_timeout);
    IF n = 0 THEN
        PERFORM snowflake_id_node.unlock_shards(shards);
    END IF;
    RETURN n;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.split_drop_hidden(text, text, interval) IS
  'Split step on the new node after the flip: drops the hidden copies of the node''s shards (some per call, then the record); returns how many are left.';

-- 55000 on a server still in recovery (a standby not yet promoted).
CREATE OR REPLACE FUNCTION snowflake_id_node.split_promoted() RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_is_in_recovery() THEN
        RAISE EXCEPTION 'this server is a standby still in recovery' USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.split_promoted() IS '55000 on a server in recovery.';

-- On the promoted standby: the record of move key, sealed as the node sealed it (replayed),
-- becomes that of a move's target not yet serving (incoming: its copies refuse every write,
-- fence()), with peer the node's identity; the sequences get back the bounds the seal capped
-- (bounds: split_bounds), at the values they have. activate then carries them above every
-- value either side gave, and serves the copies. Refused (55000) while another move's record
-- is here.
CREATE OR REPLACE FUNCTION snowflake_id_node.split_adopt(key text, peer text, bounds text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move;
    q record;
    seq regclass;
BEGIN
    PERFORM snowflake_id_node.split_promoted();
    m := snowflake_id_node.record(key, '{sealed,incoming}');
    IF m.state = 'incoming' THEN
        RETURN;   -- (adopted already: a repair)
    END IF;
    IF EXISTS (SELECT FROM snowflake_id_node.move r WHERE r.key <> m.key) THEN
        RAISE EXCEPTION 'the promoted standby carries another move''s record besides split %', key
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    FOR q IN SELECT * FROM json_to_recordset(bounds::json) AS x(schema text, name text, min bigint, max bigint, start bigint) LOOP
        seq := to_regclass(format('%I.%I', q.schema, q.name));
        CONTINUE WHEN seq IS NULL;
        EXECUTE format('ALTER SEQUENCE %s MINVALUE %s MAXVALUE %s START %s', seq, q.min, q.max, q.start);
    END LOOP;
    UPDATE snowflake_id_node.move r SET role = 'target', state = 'incoming', peer = split_adopt.peer, publication = NULL,
                                        slot = NULL, fingerprints = NULL, guarded = NULL, fence_until = NULL
     WHERE r.key = m.key;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.split_adopt(text, text, text) IS
  'Split step on the promoted standby: makes the replayed sealed record of move key that of a target not yet serving, its sequences'' bounds restored.';

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_node FROM PUBLIC;
