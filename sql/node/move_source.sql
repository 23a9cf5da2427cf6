-- The steps of a move on its source node, and the fence its tables carry while it runs.
-- Each step is one call by the router, one transaction (sql/node/node.sql; the order of the
-- steps: docs/cluster-design.md).

-- The schemas of shards on this node (in the order of shards), refusing (55000, naming the
-- object) what cannot move; read-only. router: the router's identity; peer: the target's.
CREATE OR REPLACE FUNCTION snowflake_id_node.source_check(router text, peer text, shards integer[]) RETURNS text[]
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    schemas text[];
    missing integer;
    why text;
    free_slots integer;
    free_senders integer;
BEGIN
    IF snowflake_id_node.is_self(peer) THEN
        RAISE EXCEPTION 'the target is this database (%): a shard cannot move onto its own node', peer
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    SELECT array_agg(c.schema_name ORDER BY x.i), min(x.s) FILTER (WHERE c.schema_name IS NULL) INTO schemas, missing
      FROM unnest(shards) WITH ORDINALITY x(s, i) LEFT JOIN @extschema@.snowflake_id_shard c ON c.shard = x.s;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'this node has no schema for shard %', missing USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'create_shard(schema_name, shard, template => ...) makes it here.';
    END IF;
    PERFORM snowflake_id_node.no_other_move(router, shards, schemas);
    PERFORM snowflake_id_node.no_role_for_all();
    why := snowflake_id_node.refusal(schemas);
    IF why IS NOT NULL THEN
        RAISE EXCEPTION '%', why USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF current_setting('wal_level') <> 'logical' THEN
        RAISE EXCEPTION 'this node runs with wal_level = %: the source of a move publishes its rows', current_setting('wal_level')
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Set wal_level = logical and restart it.';
    END IF;
    -- The move's slot; a WAL sender for the target's copy, then one for its subscription
    -- (the first may not have ended when the second starts).
    free_slots := current_setting('max_replication_slots')::integer - (SELECT count(*) FROM pg_replication_slots);
    free_senders := current_setting('max_wal_senders')::integer
                    - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender');
    IF free_slots < 1 OR free_senders < 2 THEN
        RAISE EXCEPTION 'this node has % free replication slots and % free WAL senders: a move needs 1 slot and 2 WAL senders',
            free_slots, free_senders USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'Raise max_replication_slots and max_wal_senders (a restart), or drop unused slots.';
    END IF;
    RETURN schemas;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.source_check(text, text, integer[]) IS
  'The schemas of shards here, after the checks a move''s source must pass (55000 naming what fails).';

-- 55000 when this database makes every session run as a role (ALTER DATABASE ... SET role,
-- or ALTER ROLE <a superuser> IN DATABASE ... SET role): the move's replication (the
-- target's apply worker, the source's WAL sender) starts with this database's settings
-- and cannot say otherwise, so it would run as that role, not as the router's superuser.
CREATE OR REPLACE FUNCTION snowflake_id_node.no_role_for_all() RETURNS void
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    what text;
BEGIN
    SELECT format('%s sets role = %s', CASE WHEN s.setrole = 0 THEN 'this database' ELSE format('role %s in this database', s.setrole::regrole) END,
                  substr(c, 6)) INTO what
      FROM pg_db_role_setting s, unnest(s.setconfig) c
     WHERE s.setdatabase = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
       AND (s.setrole = 0 OR snowflake_id_node.made_by_superuser(s.setrole)) AND c LIKE 'role=%'
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '% for every session: a move''s replication would run as that role', what
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'ALTER DATABASE ... RESET role (as its owner or a superuser), then move again.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.no_role_for_all() IS
  '55000 when this database (or a superuser in it) sets role for every session: a move''s replication workers would run as that role.';

-- 55000 when another move's record names one of the shards or schemas here: another
-- router's (it must repair it), or this router's (repair it first).
CREATE OR REPLACE FUNCTION snowflake_id_node.no_other_move(router text, shards integer[], schemas text[]) RETURNS void
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move;
BEGIN
    SELECT * INTO m FROM snowflake_id_node.move r WHERE r.shards && shards OR r.schemas && schemas LIMIT 1;
    IF FOUND THEN
        IF m.router <> router THEN
            RAISE EXCEPTION 'shards % are in move % of another router (%) on this node, %', m.shards, m.key, m.router,
                CASE WHEN m.state IN ('sealed', 'serving') THEN 'sealed: that router must complete it'
                     ELSE 'which that router has not undone' END
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Run SELECT repair_moves() on that router.';
        END IF;
        RAISE EXCEPTION 'shards % are in move % on this node (%), not yet completed or undone', m.shards, m.key, m.state
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'SELECT repair_moves() on the router completes or undoes it.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.no_other_move(text, integer[], text[]) IS
  '55000 when a move record here names one of the shards or schemas.';

-- Records the move on the source and makes its marker table (preparing).
CREATE OR REPLACE FUNCTION snowflake_id_node.prepare_source(key text, router text, peer text, shards integer[], schemas text[])
RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    marker text := 'sfid_' || replace(key, '/', '_');
BEGIN
    IF NOT snowflake_id_node.holds(shards) THEN
        RAISE EXCEPTION 'this session does not hold the shard locks of shards %', shards
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    PERFORM snowflake_id_node.no_split();
    PERFORM snowflake_id_node.no_other_move(router, shards, schemas);
    INSERT INTO snowflake_id_node.move (key, router, role, peer, shards, schemas, state, marker)
    VALUES (key, router, 'source', peer, shards, schemas, 'preparing', marker);
    EXECUTE format('CREATE TABLE snowflake_id_node.%I (fenced boolean PRIMARY KEY)', marker);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.prepare_source(text, text, text, integer[], text[]) IS
  'Move step on the source: records move key (preparing) and makes its marker table.';

-- Publishes the shards' tables (copying); the target then makes the slot and copies the
-- rows at its snapshot (copy_rows), and subscribes to it.
CREATE OR REPLACE FUNCTION snowflake_id_node.publish(key text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{preparing}');
BEGIN
    -- The marker table and the shards' tables by name, not FOR TABLES IN SCHEMA:
    -- PostgreSQL finds a schema's tables by reading all of pg_class, at each look-up of the
    -- publication's tables (every table sync, the WAL sender's start). A table made here
    -- later is not published; the checks under the fence refuse the move then. Partitions
    -- are published each as itself, not through their root (publish_via_partition_root):
    -- a row then arrives in the target's partition of the same name, which has the same
    -- bounds (the fingerprint), as the initial copy puts it, with no routing on the target.
    PERFORM snowflake_id_node.clear_squatter('publication', m.marker);
    EXECUTE format('CREATE PUBLICATION %I FOR TABLE snowflake_id_node.%I%s', m.marker, m.marker,
                   (SELECT string_agg(format(', %I.%I', s, t.name), '' ORDER BY s, t.name)
                      FROM unnest(m.schemas) s, snowflake_id_node.tables(to_regnamespace(quote_ident(s))) t
                     WHERE t.kind = 'r'));
    UPDATE snowflake_id_node.move r SET state = 'copying', publication = m.marker, slot = m.marker WHERE r.key = m.key;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.publish(text) IS
  'Move step on the source: publishes the tables of move key and records the publication and slot names (copying).';

-- A publication or subscription of a move's name made by another role (any role with CREATE
-- on the database can make a publication, pg_create_subscription members a subscription):
-- it would stop the move, so it goes, with a WARNING naming its owner. One of the router's
-- superuser's is left alone (the move then fails on it: two moves never share a name).
CREATE OR REPLACE FUNCTION snowflake_id_node.clear_squatter(kind text, name text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    owner oid;
BEGIN
    IF kind = 'publication' THEN
        SELECT p.pubowner INTO owner FROM pg_publication p WHERE p.pubname = name;
    ELSE
        SELECT s.subowner INTO owner FROM pg_subscription s
         WHERE s.subname = name AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database());
    END IF;
    IF owner IS NULL OR snowflake_id_node.made_by_superuser(owner) THEN
        RETURN;
    END IF;
    RAISE WARNING '% % belongs to role %, not to the router: dropped', kind, quote_ident(name), owner::regrole
        USING DETAIL = 'A move makes a publication and a subscription of that name.';
    IF kind = 'publication' THEN
        EXECUTE format('DROP PUBLICATION %I', name);
    ELSE
        EXECUTE format('ALTER SUBSCRIPTION %I DISABLE', name);
        EXECUTE format('ALTER SUBSCRIPTION %I SET (slot_name = NONE)', name);
        EXECUTE format('DROP SUBSCRIPTION %I', name);
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.clear_squatter(text, text) IS
  'Drops a publication or subscription of a move''s name that a role other than a superuser made (WARNING naming it).';

-- The fence (fenced): in one transaction, every table of the schemas locked EXCLUSIVE
-- (writers in flight finish, new ones wait; readers pass) and given a statement trigger
-- calling fence(). The triggers commit before the locks go, so a writer that waited sees them.
-- The fence holds for hold at most (the mover's cutover bound), by this node's clock: past
-- fence_until, writes pass and the seal is refused, even if the mover's session lives on
-- (its router stalled: a paused VM, SIGSTOP), which the node cannot tell from a slow one.
CREATE OR REPLACE FUNCTION snowflake_id_node.set_fence(key text, lock_timeout text, hold interval) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{copying}');
    was text := current_setting('deadlock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', lock_timeout, true);
    -- A writer may take its tables' locks in another order than this (photos then likes in
    -- one transaction, a trigger writing a second table, a partition's root then the
    -- partition): a deadlock with it ends the session whose deadlock_timeout runs out first,
    -- by default the one that waited longer, often the writer (40P01, which few applications
    -- retry). The fence looks for one after 10 ms of waiting, the writers after their 1 s, so
    -- it is the fence that lets go (its subtransaction) and tries again, a few times, each
    -- bounded by lock_timeout; the writer goes on.
    PERFORM set_config('deadlock_timeout', '10ms', true);
    FOR attempt IN 1 .. 3 LOOP
        BEGIN
            EXECUTE 'LOCK TABLE ' || (SELECT string_agg(x.t::text, ', ') FROM snowflake_id_node.move_tables(m.schemas) x)
                    || ' IN EXCLUSIVE MODE';
            EXIT;
        EXCEPTION WHEN deadlock_detected THEN
            IF attempt = 3 THEN
                RAISE;
            END IF;
        END;
    END LOOP;
    PERFORM set_config('deadlock_timeout', was, true);
    PERFORM snowflake_id_node.fence_tables(m.marker, m.schemas, true);
    -- The owners and privileges the copies get (grants(), read after the marker): none may
    -- change from now on until the move ends (sql/node/guard.sql; seal_check compares again).
    UPDATE snowflake_id_node.move r SET state = 'fenced', guarded = md5(snowflake_id_node.grants(m.schemas)),
                                        fence_until = snowflake_id_node.monotonic() + hold
     WHERE r.key = m.key;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.set_fence(text, text, interval) IS
  'Move step on the source: fences every table of move key''s schemas (EXCLUSIVE lock, bounded by lock_timeout; statement triggers) for hold at most (fenced).';

-- Gives every table of the schemas move marker's fence (on: a statement trigger named as
-- the marker calling fence(), before every write path: INSERT, UPDATE, DELETE, TRUNCATE,
-- COPY, a rule's action), or takes it away (on false). The source's tables get it at the
-- fence; a target's copies as they are made (prepare_target), until they serve (activate):
-- a copy not serving yet takes rows only from its move (copy_rows, the subscription's apply
-- worker), which write as a replica (session_replication_role), where it does not fire.
CREATE OR REPLACE FUNCTION snowflake_id_node.fence_tables(marker text, schemas text[], "on" boolean) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT x.t FROM snowflake_id_node.move_tables(schemas) x LOOP
        IF "on" THEN
            EXECUTE format('CREATE TRIGGER %I BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s
                              FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_node.fence()', marker, t);
        ELSE
            EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', marker, t);
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.fence_tables(text, text[], boolean) IS
  'Gives every table of the schemas the fence trigger of a move (named marker), or takes it away (on false).';

-- 55000 once move m's fence is past its time (fence_until): its writes pass again, so it
-- can no longer seal. A session that waits on nothing outlives no fence either: the rest of
-- this transaction (the seal's) may stay idle only until then, or the session ends (its
-- locks, which hold writers off, with it).
CREATE OR REPLACE FUNCTION snowflake_id_node.within_fence(m snowflake_id_node.move) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    left_ms bigint := floor(extract(epoch FROM m.fence_until - snowflake_id_node.monotonic()) * 1000);
BEGIN
    IF left_ms IS NULL OR left_ms <= 0 THEN
        RAISE EXCEPTION 'move % is past its fence''s time on this node: its writes pass again, it cannot seal', m.key
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'The mover was stalled longer than its cutover bound; the move is undone, run it again.';
    END IF;
    PERFORM set_config('idle_in_transaction_session_timeout', left_ms::text, true);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.within_fence(snowflake_id_node.move) IS
  '55000 once move m''s fence is past its time; else bounds this transaction''s idle time by what is left of it.';

-- The tables of the schemas (regclass).
CREATE OR REPLACE FUNCTION snowflake_id_node.move_tables(schemas text[]) RETURNS TABLE (t regclass)
LANGUAGE sql STABLE STRICT PARALLEL SAFE ROWS 5
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT x.oid::regclass FROM unnest(schemas) s JOIN pg_namespace n ON n.nspname = s, snowflake_id_node.tables(n.oid) x
     WHERE x.kind IN ('r', 'p')
     ORDER BY n.nspname COLLATE "C", x.name COLLATE "C";   -- by name: OIDs differ from node to node
END;
COMMENT ON FUNCTION snowflake_id_node.move_tables(text[]) IS 'The tables of the schemas (not their views).';

-- How far move key's target is behind this node: the bytes of WAL between this node's
-- position and what the move's slot has confirmed (NULL before the slot is made). The
-- router fences only once it is within switch_lag, so that the fence waits for little.
CREATE OR REPLACE FUNCTION snowflake_id_node.move_lag(key text) RETURNS bigint
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
RETURN (SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint
          FROM snowflake_id_node.move m JOIN pg_replication_slots s ON s.slot_name = m.slot
         WHERE m.key = move_lag.key AND m.role = 'source');
COMMENT ON FUNCTION snowflake_id_node.move_lag(text) IS
  'Bytes of WAL here that move key''s target has not confirmed (its slot''s confirmed_flush_lsn); NULL without a slot.';

-- Lifts move key's fence here before its seal, for the router to try it again once the
-- target is near (it did not catch up within cutover_timeout): the tables' fence triggers
-- and the marker row go (the row's delete replicates, so that the next marker is the only
-- one the target can see), and the record is copying again. The tables are locked before
-- the record, as the undo does (a fenced writer holds its table and reads the record).
CREATE OR REPLACE FUNCTION snowflake_id_node.lift_fence(key text, lock_timeout text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move;
BEGIN
    PERFORM set_config('lock_timeout', lock_timeout, true);
    SELECT * INTO m FROM snowflake_id_node.move r WHERE r.key = lift_fence.key AND r.role = 'source';
    IF FOUND AND EXISTS (SELECT FROM snowflake_id_node.move_tables(m.schemas)) THEN
        EXECUTE 'LOCK TABLE ' || (SELECT string_agg(x.t::text, ', ') FROM snowflake_id_node.move_tables(m.schemas) x)
                || ' IN SHARE ROW EXCLUSIVE MODE';
    END IF;
    m := snowflake_id_node.record(key, '{fenced}');
    PERFORM snowflake_id_node.fence_tables(m.marker, m.schemas, false);
    EXECUTE format('DELETE FROM snowflake_id_node.%I', m.marker);
    UPDATE snowflake_id_node.move r SET state = 'copying', guarded = NULL, fence_until = NULL WHERE r.key = m.key;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.lift_fence(text, text) IS
  'Move step on the source: lifts move key''s fence before its seal (fence triggers, marker row), copying again.';

-- Whether move key's target has confirmed this node's WAL up to lsn (its slot's
-- confirmed_flush_lsn): after a lifted fence, the marker row's delete.
CREATE OR REPLACE FUNCTION snowflake_id_node.move_confirmed(key text, lsn pg_lsn) RETURNS boolean
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
RETURN coalesce((SELECT s.confirmed_flush_lsn >= lsn
                   FROM snowflake_id_node.move m JOIN pg_replication_slots s ON s.slot_name = m.slot
                  WHERE m.key = move_confirmed.key AND m.role = 'source'), false);
COMMENT ON FUNCTION snowflake_id_node.move_confirmed(text, pg_lsn) IS
  'Whether move key''s target has confirmed this node''s WAL up to lsn.';

-- The marker row, written after the fence: once the target has it, it has every write before.
CREATE OR REPLACE FUNCTION snowflake_id_node.mark(key text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{fenced}');
BEGIN
    EXECUTE format('INSERT INTO snowflake_id_node.%I VALUES (true) ON CONFLICT DO NOTHING', m.marker);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.mark(text) IS 'Move step on the source: writes the marker row of move key, after the fence.';

-- Row counts of every table of the move's schemas that holds rows (content_tables: each
-- partition, not its partitioned table), one line each (both nodes, under the fence), counted by snowflake_id_node.count_rows: a sequential scan with no planner, so
-- nothing the tables' owner defined (an index expression's function, which planning a
-- count(*) folds) runs as the router's superuser.
-- (PL/pgSQL: count_rows and content_tables are declared after this file, in
-- sql/node/remote.sql and sql/node/verify.sql.)
CREATE OR REPLACE FUNCTION snowflake_id_node.row_counts(key text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
AS $$
BEGIN
    RETURN (SELECT string_agg('table ' || x.t || ': ' || snowflake_id_node.count_rows(x.t) || ' rows', E'\n' ORDER BY x.o)
              FROM snowflake_id_node.move m, snowflake_id_node.content_tables(m.schemas) WITH ORDINALITY x(t, o)
             WHERE m.key = row_counts.key);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.row_counts(text) IS 'Rows of every table of move key''s schemas here, one line each.';

-- The decision point (sealed), in two halves in one transaction of the mover's on the source,
-- the first run while the target catches up with the marker. seal_check: under EXCLUSIVE
-- locks (held until that transaction ends), the schemas' fingerprints (each as the text of
-- its array) must still equal the target's (DDL since the copy began is refused here); it
-- returns, as JSON, the rows the copies must hold (row_counts) and the sequences to carry
-- (sequences), both final: the fence has refused every write since. seal: the fence refuses
-- every write whatever becomes of the mover, and the copy leaves snowflake_id_shards; only after
-- seal_check of the same move in the same transaction, so nothing can change in between. The
-- record keeps each schema's fingerprint as sealed (its md5), for the clean-up (drop_copy).
-- target_fingerprints NULL: there is no copy to compare with (a split's standby replays this
-- node's WAL, its DDL included), and no schema is fingerprinted (a second or so for a
-- thousand shards, inside the write pause): the sealed record keeps none, and its copies are
-- dropped after the flip without that comparison (the DDL guard refuses changes to them from
-- the fence on). Only a split's record (no publication, the split's peer) may pass NULL
-- (22004 otherwise).
CREATE OR REPLACE FUNCTION snowflake_id_node.seal_check(key text, target_fingerprints text[], lock_timeout text) RETURNS text
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{fenced}');
    i integer;
    mine text;
    prints text[] := '{}';
BEGIN
    PERFORM snowflake_id_node.within_fence(m);
    IF target_fingerprints IS NULL AND (m.publication IS NOT NULL OR m.peer <> snowflake_id_node.split_peer()) THEN
        RAISE EXCEPTION 'move % has a copy to compare: its target''s fingerprints are needed', key
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM set_config('lock_timeout', lock_timeout, true);
    -- The sequences' locks before the tables': a writer takes a value (next_id()) and then
    -- writes, so the other order would deadlock with it (it waits on the tables, this on
    -- its sequence). Past the fence, a write fails at its first statement trigger, before
    -- any default takes a value.
    PERFORM snowflake_id_node.stop_sequences(m.schemas, false);
    EXECUTE 'LOCK TABLE ' || (SELECT string_agg(x.t::text, ', ') FROM snowflake_id_node.move_tables(m.schemas) x)
            || ' IN EXCLUSIVE MODE';
    FOR i IN 1 .. cardinality(m.schemas) LOOP
        EXIT WHEN target_fingerprints IS NULL;
        mine := snowflake_id_node.fingerprint(m.schemas[i])::text;
        IF mine IS DISTINCT FROM target_fingerprints[i] THEN
            RAISE EXCEPTION 'schema % of shard % changed during the move: %', quote_ident(m.schemas[i]), m.shards[i],
                snowflake_id_node.fingerprint_difference(mine::text[], target_fingerprints[i]::text[], 'the source', 'the target''s copy')
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        prints := prints || mine;
    END LOOP;
    IF md5(snowflake_id_node.grants(m.schemas)) IS DISTINCT FROM m.guarded THEN
        RAISE EXCEPTION 'the owners or privileges of shard % (schema %) changed after the move''s fence', m.shards[1],
            quote_ident(m.schemas[1])
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'What the copies get was read at the fence; run the move again.';
    END IF;
    -- The sequences stop here: the values read below are the last this copy gives. A
    -- schema with a free sequence (one its fingerprint prints) is fingerprinted again, as
    -- sealed, for the clean-up's comparison.
    PERFORM snowflake_id_node.stop_sequences(m.schemas, true);
    FOR i IN 1 .. cardinality(prints) LOOP
        IF EXISTS (SELECT FROM unnest(prints[i]::text[]) l WHERE l LIKE 'sequence %') THEN
            prints[i] := snowflake_id_node.fingerprint(m.schemas[i])::text;
        END IF;
    END LOOP;
    PERFORM set_config('snowflake_id_node.seal_checked', key, true),
            set_config('snowflake_id_node.seal_fingerprints',
                       coalesce((SELECT array_agg(md5(p) ORDER BY o) FROM unnest(prints) WITH ORDINALITY x(p, o))::text, ''), true);
    -- pg_partman's configuration of the shards goes with them (sql/node/partman.sql): kept in
    -- the record, which the seal commits, for the target's activation.
    UPDATE snowflake_id_node.move r SET partman = snowflake_id_node.partman_take(m.schemas) WHERE r.key = m.key;
    RETURN json_build_object('rows', snowflake_id_node.row_counts(key), 'sequences', snowflake_id_node.sequences(key))::text;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.seal_check(text, text[], text) IS
  'Move step on the source: checks the schemas'' fingerprints against the target''s under EXCLUSIVE locks held to the end of the transaction, stops their sequences; returns the rows the copies must hold and the sequences to carry (JSON).';

-- Stops every sequence of the schemas, in the seal's transaction: from the seal on the copy
-- left here issues no value (next_id(), nextval()), whatever becomes of the mover, so the
-- values the seal carries to the new copies are the last this one gave (a target whose
-- clock is behind continues from them). Each is capped at its newest value: the range of
-- two values that ends there in its direction (MINVALUE must be below MAXVALUE), which
-- next_id() takes for a stopped sequence and refuses with 40001 (src/pg/sequence_state.rs);
-- nextval() refuses with 2200H, setval() outside it with 22003. The first ALTER SEQUENCE takes the sequence's lock,
-- which waits (lock_timeout) for the transactions that took a value and holds off new ones
-- until the seal commits; the newest is read under it. One never used gives its first
-- value now (a gap on the new node, which a sequence may have): a cap cannot be set below it.
-- With stop false, only the locks are taken (the first, no-op ALTER SEQUENCE of each).
CREATE OR REPLACE FUNCTION snowflake_id_node.stop_sequences(schemas text[], stop boolean) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    q record;
    newest bigint;
BEGIN
    FOR q IN SELECT c.oid::regclass AS seq, p.seqmax, p.seqincrement FROM unnest(schemas) s JOIN pg_namespace n ON n.nspname = s
               JOIN pg_depend d ON d.refclassid = 'pg_namespace'::regclass AND d.refobjid = n.oid
                    AND d.classid = 'pg_class'::regclass AND d.deptype = 'n'
               JOIN pg_class c ON c.oid = d.objid AND c.relkind = 'S'
               JOIN pg_sequence p ON p.seqrelid = c.oid
              ORDER BY c.oid LOOP
        EXECUTE format('ALTER SEQUENCE %s MAXVALUE %s', q.seq, q.seqmax);
        CONTINUE WHEN NOT stop;
        newest := coalesce(pg_sequence_last_value(q.seq), nextval(q.seq));
        EXECUTE format('ALTER SEQUENCE %s START %s MINVALUE %s MAXVALUE %s', q.seq, newest,   -- (START within them)
                       newest - (q.seqincrement > 0)::integer, newest + (q.seqincrement < 0)::integer);
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.stop_sequences(text[], boolean) IS
  'In a move''s seal: locks every sequence of the schemas and, with stop, caps each at its newest value (a range of two values ending there), so that the copy left behind issues no more.';

CREATE OR REPLACE FUNCTION snowflake_id_node.seal(key text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{fenced}');
BEGIN
    IF current_setting('snowflake_id_node.seal_checked', true) IS DISTINCT FROM key THEN
        RAISE EXCEPTION 'move % is sealed only after seal_check(%L, ...) in the same transaction', key, key
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- (A writer past the fence's time waits on seal_check's locks, then finds the move
    -- sealed, or passes if this transaction does not commit.)
    PERFORM snowflake_id_node.within_fence(m);
    UPDATE snowflake_id_node.move r SET state = 'sealed', fingerprints = nullif(current_setting('snowflake_id_node.seal_fingerprints'), '')::text[]
     WHERE r.key = m.key;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.seal(text) IS
  'Move step on the source: seals move key (sealed), only after seal_check in the same transaction.';

-- Every sequence of the move's schemas with the newest value it gave (NULL: none), as JSON,
-- and last, if the seal took any, pg_partman's configuration of their tables ({"partman": ...}).
CREATE OR REPLACE FUNCTION snowflake_id_node.sequences(key text) RETURNS text
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT (coalesce(jsonb_agg(jsonb_build_object('schema', n.nspname, 'name', c.relname,
                                                  'last', pg_sequence_last_value(c.oid), 'increment', q.seqincrement)
                               ORDER BY n.nspname, c.relname), '[]')
            || coalesce((SELECT jsonb_build_array(jsonb_build_object('partman', x.partman)) FROM snowflake_id_node.move x
                          WHERE x.key = sequences.key AND x.partman IS NOT NULL), '[]'))::text
      FROM snowflake_id_node.move m, unnest(m.schemas) s JOIN pg_namespace n ON n.nspname = s
      JOIN pg_depend d ON d.refclassid = 'pg_namespace'::regclass AND d.refobjid = n.oid
           AND d.classid = 'pg_class'::regclass AND d.deptype = 'n'
      JOIN pg_class c ON c.oid = d.objid AND c.relkind = 'S'
      JOIN pg_sequence q ON q.seqrelid = c.oid
     WHERE m.key = sequences.key;
END;
COMMENT ON FUNCTION snowflake_id_node.sequences(text) IS
  'Every sequence of move key''s schemas (identity ones too) with the newest value it gave, and pg_partman''s configuration taken at the seal, as JSON.';

-- Clean-up on the source right after the flip, whatever the other routers do: the
-- publication and the slot (its WAL sender ended first, within wait_timeout: the WAL it
-- holds goes with it) and the marker. The sealed copies stay, refusing writes (drop_copy
-- drops them once every router routes by the flip).
CREATE OR REPLACE FUNCTION snowflake_id_node.end_replication(key text, wait_timeout interval) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{sealed}');
BEGIN
    PERFORM snowflake_id_node.drop_replication(m, wait_timeout);
    EXECUTE format('DROP TABLE IF EXISTS snowflake_id_node.%I', m.marker);
    UPDATE snowflake_id_node.move r SET publication = NULL, slot = NULL WHERE r.key = m.key;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.end_replication(text, interval) IS
  'Move clean-up on the source after the flip: drops the publication, slot and marker of move key; the sealed copies stay.';

-- A move kept for revert (the router's revert_window; move_target.sql, publish_back): the
-- sealed copy here subscribes to the target's reverse publication and slot, made there
-- before the flip, with nothing to copy. Its apply's writes are a replica's, which the
-- fence trigger does not see: every other write stays refused (40001). Recorded on this
-- node's record in the transaction that makes it. Called again (each repair in the
-- window), 55000 if the apply has failed (check_subscription): the copy is not current.
CREATE OR REPLACE FUNCTION snowflake_id_node.subscribe_back(key text, target_connstr text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{sealed}');
    name text := m.marker || '_r';
BEGIN
    IF m.subscription IS NOT NULL THEN
        PERFORM snowflake_id_node.check_subscription(m);
        RETURN;
    END IF;
    PERFORM snowflake_id_node.clear_squatter('subscription', name);
    EXECUTE format('CREATE SUBSCRIPTION %I CONNECTION %L PUBLICATION %I
                      WITH (create_slot = false, slot_name = %L, copy_data = false, disable_on_error = true)',
                   name, snowflake_id_node.pinned_connstr(target_connstr), name, name);
    UPDATE snowflake_id_node.move r
       SET subscription = name,
           suboid = (SELECT s.oid FROM pg_subscription s
                      WHERE s.subname = name AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()))
     WHERE r.key = m.key;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.subscribe_back(text, text) IS
  'Reverse replication of move key on its sealed source: subscribes to the target''s reverse publication and slot (nothing to copy).';

-- The reverse subscription dropped (before the target's slot: end_back), the old copy kept.
CREATE OR REPLACE FUNCTION snowflake_id_node.unsubscribe_back(key text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{sealed}');
BEGIN
    PERFORM snowflake_id_node.drop_subscription(m);
    UPDATE snowflake_id_node.move r SET subscription = NULL, suboid = NULL WHERE r.key = m.key;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.unsubscribe_back(text) IS
  'Reverse replication of move key on its sealed source: drops the reverse subscription (the sealed copy stays).';

-- Clean-up on the source once every router routes by the flip: the publication and the slot
-- if they are still there, then the sealed copies, as many schemas as one transaction has
-- room for (drop_some), each only as it was sealed and with nothing outside the move
-- depending on it (55000 otherwise: kept); then the marker and the record. Returns how many
-- schemas are left: the router calls again, each call a transaction of its own, until none.
-- (Two of the move's schemas depending on each other and dropped in different calls: the
-- dependent object goes with the first, and the second is then kept, as changed.)
CREATE OR REPLACE FUNCTION snowflake_id_node.drop_copy(key text, lock_timeout text, wait_timeout interval) RETURNS integer
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{sealed}');
    todo text[] := m.schemas[m.dropped + 1:];
    n integer;
BEGIN
    PERFORM snowflake_id_node.drop_subscription(m);   -- (a move kept for revert: subscribe_back)
    PERFORM snowflake_id_node.drop_replication(m, wait_timeout);
    PERFORM set_config('lock_timeout', lock_timeout, true);
    n := snowflake_id_node.drop_some(m, todo);
    IF n < cardinality(todo) THEN
        UPDATE snowflake_id_node.move r SET dropped = m.dropped + n WHERE r.key = m.key;
        RETURN cardinality(todo) - n;
    END IF;
    EXECUTE format('DROP TABLE IF EXISTS snowflake_id_node.%I', m.marker);
    DELETE FROM snowflake_id_node.move r WHERE r.key = m.key;
    RETURN 0;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.drop_copy(text, text, interval) IS
  'Move clean-up on the source: drops the publication, slot and the sealed copies of move key (as many as fit in one transaction, if nothing outside depends on them), and, the last gone, its record; returns how many schemas are left.';

-- The lock table every session of this server shares: how many locks it holds in all
-- (max_locks_per_transaction for each process that can take locks), for how many processes,
-- and how many are in it now (not those held by the fast path). A transaction holds its
-- locks until it ends: one that locks more than the room left fails, out of shared memory.
CREATE OR REPLACE FUNCTION snowflake_id_node.lock_table(OUT capacity bigint, OUT processes bigint, OUT in_use bigint)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    processes := current_setting('max_connections')::bigint
        + coalesce(current_setting('autovacuum_worker_slots', true), current_setting('autovacuum_max_workers'))::bigint
        + current_setting('max_worker_processes')::bigint + current_setting('max_wal_senders')::bigint
        + current_setting('max_prepared_transactions')::bigint + 1;
    capacity := current_setting('max_locks_per_transaction')::bigint * processes;
    in_use := (SELECT count(*) FROM pg_locks WHERE NOT fastpath);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.lock_table() IS
  'The server''s shared lock table: the locks it holds in all, for how many processes, and how many are in it now.';

-- The fence and the seal each lock every table of a move's schemas in one transaction (the
-- seal reads every sequence too, and holds its locks until it commits): a batch too large
-- for the lock table here is refused before anything is made (53400), not once its writes
-- are fenced. The shard locks the mover holds already are in use.
CREATE OR REPLACE FUNCTION snowflake_id_node.fence_room(schemas text[]) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    t record;
    -- Their tables and sequences, and the catalogs and their indexes the checks read.
    needed bigint := 64 + (SELECT count(*) FROM unnest(schemas) s JOIN pg_namespace n ON n.nspname = s
                             JOIN pg_depend d ON d.refclassid = 'pg_namespace'::regclass AND d.refobjid = n.oid
                                  AND d.classid = 'pg_class'::regclass AND d.deptype = 'n'
                             JOIN pg_class c ON c.oid = d.objid AND c.relkind IN ('r', 'p', 'S'));
BEGIN
    SELECT * INTO t FROM snowflake_id_node.lock_table();
    IF needed > t.capacity - t.in_use THEN
        RAISE EXCEPTION 'fencing % shards at once takes about % locks here in one transaction, and the lock table has room for % more (max_locks_per_transaction = %, for % processes; % in use)',
            cardinality(schemas), needed, t.capacity - t.in_use, current_setting('max_locks_per_transaction'), t.processes, t.in_use
            USING ERRCODE = 'configuration_limit_exceeded',
                  HINT = format('Move fewer shards at once (batch_size of rebalance and drain_node), or set max_locks_per_transaction to at least %s on this node and restart it.',
                                ceil((needed + t.in_use) * 1.2 / t.processes));
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.fence_room(text[]) IS
  'Move check on the source: 53400 when fencing and sealing the schemas at once would take more locks than the lock table has room for.';

-- Drops the first of a move's schemas here, then as many more as this transaction has room
-- for in the lock table, and returns how many it dropped (the caller records them; the rest
-- go in transactions of their own). A drop locks every object of a schema until it commits:
-- the copies of a batch of a thousand shards, dropped at once, would take tens of thousands
-- of locks and fail, out of shared memory, on every try. So the first schema's locks are
-- counted, and the others take at most half the room then left (other sessions need some).
CREATE OR REPLACE FUNCTION snowflake_id_node.drop_some(m snowflake_id_node.move, schemas text[]) RETURNS integer
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    held bigint := (SELECT count(*) FROM pg_locks l WHERE l.pid = pg_backend_pid());
    n integer;
BEGIN
    PERFORM snowflake_id_node.drop_checked(m, schemas[1:1], schemas);
    SELECT least(cardinality(schemas),
                 1 + greatest((t.capacity - t.in_use) / 2
                              / greatest((SELECT count(*) FROM pg_locks l WHERE l.pid = pg_backend_pid()) - held, 1), 0))
      INTO n FROM snowflake_id_node.lock_table() t;
    PERFORM snowflake_id_node.drop_checked(m, schemas[2:n], schemas);
    RETURN n;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.drop_some(snowflake_id_node.move, text[]) IS
  'Drops the first of schemas of move m, then as many more as the lock table has room for in this transaction; returns how many.';

-- Drops schemas of move m here (drop_schemas). A sealed copy (the source's) only as it was
-- sealed, under ACCESS EXCLUSIVE locks (nothing can come to depend on it meanwhile): each
-- schema's fingerprint the one its seal kept, and nothing outside the move's schemas still
-- to drop (rest) depending on it; 55000 otherwise, and it is kept.
CREATE OR REPLACE FUNCTION snowflake_id_node.drop_checked(m snowflake_id_node.move, schemas text[], rest text[]) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    s text;
    i integer;
    why text;
BEGIN
    IF coalesce(cardinality(schemas), 0) = 0 THEN
        RETURN;
    END IF;
    IF m.role = 'source' THEN
        IF EXISTS (SELECT FROM snowflake_id_node.move_tables(schemas)) THEN
            EXECUTE 'LOCK TABLE ' || (SELECT string_agg(x.t::text, ', ') FROM snowflake_id_node.move_tables(schemas) x)
                    || ' IN ACCESS EXCLUSIVE MODE';
        END IF;
        FOREACH s IN ARRAY schemas LOOP
            i := array_position(m.schemas, s);
            -- (No fingerprints: a split's sealed copies (seal_check) and the standby's hidden
            -- ones (split_hide); the DDL guard refused changes to them since.)
            IF m.fingerprints IS NOT NULL AND md5(snowflake_id_node.fingerprint(s)::text) IS DISTINCT FROM m.fingerprints[i] THEN
                RAISE EXCEPTION 'the sealed copy of shard % (schema %) changed after the seal: it is kept', m.shards[i], quote_ident(s)
                    USING ERRCODE = 'object_not_in_prerequisite_state',
                          HINT = 'Something was made in it after the move sealed it; look, save what must be kept, then drop it by hand and SELECT repair_moves().';
            END IF;
        END LOOP;
        -- (Only what depends on these schemas from outside the move's schemas still to drop:
        -- the rest of refusal() is about moving them, and they are sealed copies now.)
        why := snowflake_id_node.dependent_refusal(schemas, rest, NULL);
        IF why IS NOT NULL THEN
            RAISE EXCEPTION 'the sealed copy of shards % is kept: %', m.shards, why USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
    END IF;
    PERFORM snowflake_id_node.drop_schemas(schemas);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.drop_checked(snowflake_id_node.move, text[], text[]) IS
  'Drops schemas of move m here; a sealed copy only as it was sealed and if nothing outside the move''s schemas left (rest) depends on it (55000 otherwise).';

-- Drops a move's copies (the sealed ones on the source, those it made on the target): each
-- schema whole, and its row in the shard catalog, under the catalog's lock as drop_shard
-- takes it. (Not drop_shard itself: it looks next_id() up by name, which reads every
-- next_id() of the node, once per shard.)
CREATE OR REPLACE FUNCTION snowflake_id_node.drop_schemas(schemas text[]) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    IF cardinality(schemas) > 0 THEN
        LOCK TABLE @extschema@.snowflake_id_shard IN SHARE ROW EXCLUSIVE MODE;
        -- One statement for all: one walk of their dependencies, not one per schema.
        EXECUTE 'DROP SCHEMA IF EXISTS ' || (SELECT string_agg(DISTINCT quote_ident(s), ', ') FROM unnest(schemas) s) || ' CASCADE';
        DELETE FROM @extschema@.snowflake_id_shard c WHERE c.schema_name = ANY (schemas);
        PERFORM snowflake_id_node.partman_forget(schemas);
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.drop_schemas(text[]) IS
  'Drops a move''s copies: each schema whole, its row in the shard catalog and pg_partman''s configuration of its tables.';

-- The source's replication resources of a move: publication and its slot, the WAL sender
-- using it ended first (bounded by wait_timeout): the subscription's, or the target's copy
-- still making it (a slot not yet made goes with its WAL sender). Table-sync slots of the
-- subscription m.suboid (pg_<suboid>_sync_*) too, should there be any: copy_rows makes
-- the copy, so the subscription syncs no table, but one that did would leave them.
CREATE OR REPLACE FUNCTION snowflake_id_node.drop_replication(m snowflake_id_node.move, wait_timeout interval) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
AS $$
#variable_conflict use_variable
DECLARE
    deadline timestamptz := snowflake_id_node.monotonic() + wait_timeout;
    slot text;
BEGIN
    IF m.publication IS NOT NULL THEN
        EXECUTE format('DROP PUBLICATION IF EXISTS %I', m.publication);
    END IF;
    LOOP
        SELECT r.slot_name INTO slot FROM pg_replication_slots r
         WHERE r.slot_name = m.slot
            OR (m.suboid IS NOT NULL AND r.slot_name LIKE format('pg\_%s\_sync\_%%', m.suboid))
         LIMIT 1;
        EXIT WHEN NOT FOUND;
        PERFORM pg_terminate_backend(r.active_pid) FROM pg_replication_slots r
         WHERE r.slot_name = slot AND r.active_pid IS NOT NULL;
        BEGIN
            PERFORM pg_drop_replication_slot(slot);
        EXCEPTION WHEN object_in_use OR undefined_object THEN
            IF snowflake_id_node.monotonic() > deadline THEN
                RAISE EXCEPTION 'replication slot % is still in use after %', slot, wait_timeout
                    USING ERRCODE = 'object_in_use';
            END IF;
            PERFORM snowflake_id_node.sleep(0.01);
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.drop_replication(snowflake_id_node.move, interval) IS
  'Drops a move''s publication and slot here (and any table-sync slots of its subscription), ending the WAL senders using them.';

-- == The fence ==

-- BEFORE ... FOR EACH STATEMENT trigger on the source's tables during a move: 40001 while
-- the move is fenced, its mover alive and its fence within its time (fence_until), or once it
-- is sealed; otherwise the write goes through (its mover died or stalled before the decision
-- point, which it can then no longer pass: within_fence). On a target's copies until they
-- serve (fence_tables): 55000 for every write, whoever's; the move's own writes are a
-- replica's, which do not fire it. SECURITY DEFINER: writers (any role) read the move's
-- record; it trusts nothing but the table's schema.
CREATE OR REPLACE FUNCTION snowflake_id_node.fence() RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m record;
BEGIN
    FOR m IN SELECT r.key, r.state, r.shards, r.schemas, r.fence_until FROM snowflake_id_node.move r
              WHERE (r.role = 'source' OR r.state = 'incoming') AND TG_TABLE_SCHEMA = ANY (r.schemas) LOOP
        IF m.state = 'incoming' THEN
            -- (a target's copy not serving yet: no write but its move's, which does not fire this)
            PERFORM snowflake_id_node.refuse_change(r, TG_OP) FROM snowflake_id_node.move r WHERE r.key = m.key;
        END IF;
        IF m.state = 'fenced' AND (NOT snowflake_id_node.alive(m.shards) OR snowflake_id_node.monotonic() > m.fence_until) THEN
            -- The mover is gone or past its time, unless it sealed just before: the latest version decides
            -- (FOR SHARE waits for a seal in progress and reads past this statement's snapshot. An
            -- idle writer's hold of it delays no undo: the writer holds its table's lock to its end
            -- anyway, which the undo's DROP TRIGGER on that table waits for first.)
            SELECT r.state INTO m.state FROM snowflake_id_node.move r WHERE r.key = m.key FOR SHARE;
            CONTINUE WHEN m.state IS DISTINCT FROM 'sealed';
        END IF;
        IF m.state IN ('fenced', 'sealed') THEN
            RAISE EXCEPTION 'shard % is moving to another node: write refused, retry it',
                m.shards[array_position(m.schemas, TG_TABLE_SCHEMA::text)]
                USING ERRCODE = 'serialization_failure',
                      HINT = 'Retry the transaction: once the move is done the router sends it to the new node.';
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.fence() IS
  'Trigger: refuses writes (40001) to a shard being moved while its mover lives and once it is sealed, and (55000) to a target''s copy not serving yet.';
REVOKE ALL ON FUNCTION snowflake_id_node.fence() FROM PUBLIC;
