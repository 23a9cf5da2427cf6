-- Undo, repair and status on either node of a move: what a move made here before its seal
-- removed, the records read by repair_moves() and node_status(), leftovers found and
-- dropped. Part of the node side of snowflake_id_router's protocol (sql/node/node.sql).

-- == Undo, either node: everything a move made here before the seal ==

-- Target: the subscription, the copies the move made (never a schema it did not make), as
-- many as one transaction has room for (drop_some), then the marker and the record. Source:
-- the fence triggers, publication, slots, marker, record. Returns how many copies are left
-- (the router calls again until none is). Refused once the move is past its decision point
-- (a sealed source, a serving target).
CREATE OR REPLACE FUNCTION snowflake_id_node.undo(key text, wait_timeout interval, suboid oid) RETURNS integer
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move;
    n integer;
BEGIN
    -- A fenced source's tables before its record: a writer holds its table's lock when the
    -- fence (its mover gone or past its time) reads the record FOR SHARE, and dropping the
    -- fence needs the tables: the other order deadlocks with it. A source not fenced has no
    -- fence to drop (set_fence and lift_fence make and drop it with the state), and nothing
    -- of its tables is locked: a split of thousands of shards refused for want of room in
    -- the lock table is undone without it.
    SELECT * INTO m FROM snowflake_id_node.move r WHERE r.key = undo.key AND r.role = 'source';
    IF FOUND AND m.state = 'fenced' AND EXISTS (SELECT FROM snowflake_id_node.move_tables(m.schemas)) THEN
        EXECUTE 'LOCK TABLE ' || (SELECT string_agg(x.t::text, ', ') FROM snowflake_id_node.move_tables(m.schemas) x)
                || ' IN SHARE ROW EXCLUSIVE MODE';
    END IF;
    m := snowflake_id_node.record(key, '{preparing,copying,fenced,incoming}');
    -- The router knows the subscription's OID even if this node never heard of it.
    m.suboid := coalesce(m.suboid, nullif(suboid, 0));
    IF m.role = 'target' THEN
        PERFORM snowflake_id_node.drop_subscription(m);
        IF cardinality(m.created) > 0 THEN
            n := snowflake_id_node.drop_some(m, m.created);
            IF n < cardinality(m.created) THEN
                UPDATE snowflake_id_node.move r SET created = m.created[n + 1:] WHERE r.key = m.key;
                RETURN cardinality(m.created) - n;
            END IF;
        END IF;
        EXECUTE format('DROP TABLE IF EXISTS snowflake_id_node.%I', m.marker);
    ELSE
        IF m.state = 'fenced' THEN
            PERFORM snowflake_id_node.fence_tables(m.marker, m.schemas, false);
        END IF;
        PERFORM snowflake_id_node.drop_replication(m, wait_timeout);
        EXECUTE format('DROP TABLE IF EXISTS snowflake_id_node.%I', m.marker);
    END IF;
    DELETE FROM snowflake_id_node.move r WHERE r.key = m.key;
    RETURN 0;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.undo(text, interval, oid) IS
  'Undoes what move key made on this node before its decision point (target: subscription, copies; source: fence, publication, slot, marker) and, all gone, its record; returns how many copies are left to drop.';

-- == Taking over a move whose mover stalled after its seal ==

-- The sessions holding the shard locks of move key's record here are that move's own (only
-- the extension owner's code takes such a lock, and a shard in a move record is locked by
-- its move alone): the router's repair, past the move's complete_by, ends them (their
-- transactions roll back, their locks go) and takes the locks for this session, so that the
-- stalled mover, thawed, can do nothing more here. Returns how many sessions it ended; 0
-- without a record.
CREATE OR REPLACE FUNCTION snowflake_id_node.take_over(key text, wait interval) RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move;
    ended integer := 0;
    p integer;
BEGIN
    SELECT * INTO m FROM snowflake_id_node.move r WHERE r.key = take_over.key;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    FOR p IN SELECT DISTINCT l.pid FROM pg_locks l
              WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 3 AND l.pid <> pg_backend_pid()
                AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                AND l.classid = snowflake_id_node.lock_class()::oid AND l.objid::bigint = ANY (m.shards::bigint[]) LOOP
        -- (Waits until it is gone, within wait.)
        IF pg_terminate_backend(p, (extract(epoch FROM wait) * 1000)::bigint) THEN
            ended := ended + 1;
        END IF;
    END LOOP;
    PERFORM snowflake_id_node.lock_shards(m.shards, wait);
    RETURN ended;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.take_over(text, interval) IS
  'Ends the sessions holding the shard locks of move key''s record (the move''s own) and takes the locks for this session; returns how many it ended.';

-- == For repair and status ==

-- The move records here, with whether their shards' locks are held by another session.
CREATE OR REPLACE FUNCTION snowflake_id_node.moves() RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(json_agg(json_build_object('key', m.key, 'router', m.router, 'role', m.role, 'peer', m.peer,
                                               'shards', m.shards, 'schemas', m.schemas, 'state', m.state,
                                               'alive', snowflake_id_node.alive(m.shards)) ORDER BY m.key), '[]')::text
      FROM snowflake_id_node.move m;
END;
COMMENT ON FUNCTION snowflake_id_node.moves() IS
  'The move records on this node as JSON, each with whether another session holds its shard locks (its mover lives).';

-- Whether a role is a superuser: what the router makes on a node (publications,
-- subscriptions) its superuser owns. A name proves nothing (any role with CREATE on the
-- database can make a publication named like a move's); an owner does.
CREATE OR REPLACE FUNCTION snowflake_id_node.made_by_superuser(owner oid) RETURNS boolean
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.oid = owner), false);
COMMENT ON FUNCTION snowflake_id_node.made_by_superuser(oid) IS
  'Whether role owner is a superuser (what the router makes on a node is its superuser''s).';

-- Who, not a superuser, can change schema nsp: owns it or is a member of its owner (the
-- database's owner for pg_database_owner), or may create in it; NULL if none. The rule the
-- router's connections check for the extensions' own schemas (src/pg/node/home.rs, written
-- there in pg_catalog alone, since it runs before anything of the database is called).
CREATE OR REPLACE FUNCTION snowflake_id_node.schema_changers(nsp oid) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT string_agg(w.what, ', ' ORDER BY w.what) FROM (
        SELECT 'every role (PUBLIC) can create objects in schema ' || quote_ident(n.nspname) AS what
          FROM pg_namespace n, aclexplode(n.nspacl) a
         WHERE n.oid = nsp AND a.grantee = 0 AND a.privilege_type = 'CREATE'
        UNION ALL
        SELECT format(CASE WHEN pg_has_role(r.oid, n.nspowner, 'MEMBER') THEN 'role %I can drop schema %I'
                           ELSE 'role %I can create objects in schema %I' END, r.rolname, n.nspname)
          FROM pg_namespace n, pg_roles r
         WHERE n.oid = nsp AND NOT r.rolsuper AND r.rolname <> 'pg_database_owner'
           AND (pg_has_role(r.oid, n.nspowner, 'MEMBER') OR has_schema_privilege(r.oid, n.oid, 'CREATE'))
           AND NOT EXISTS (SELECT FROM aclexplode(n.nspacl) a WHERE a.grantee = 0 AND a.privilege_type = 'CREATE'
                              AND NOT pg_has_role(r.oid, n.nspowner, 'MEMBER'))) w;
END;
COMMENT ON FUNCTION snowflake_id_node.schema_changers(oid) IS
  'Who, not a superuser, can drop schema nsp or create in it (by ownership, membership of its owner, a grant or PUBLIC); NULL if none.';

-- Everything moves have made here and not removed, one line each (for tests and status).
CREATE OR REPLACE FUNCTION snowflake_id_node.leftovers() RETURNS SETOF text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT format('move record %s (%s, %s, shards %s)', m.key, m.role, m.state, m.shards) FROM snowflake_id_node.move m
    UNION ALL
    SELECT format('replication slot %s', s.slot_name) FROM pg_replication_slots s
     WHERE s.slot_name LIKE 'sfid\_%' OR s.slot_name ~ '^pg_[0-9]+_sync_'
    UNION ALL
    SELECT format('publication %s', p.pubname) FROM pg_publication p
     WHERE p.pubname LIKE 'sfid\_%' AND snowflake_id_node.made_by_superuser(p.pubowner)
    UNION ALL
    SELECT format('subscription %s', s.subname) FROM pg_subscription s
     WHERE s.subname LIKE 'sfid\_%' AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
       AND snowflake_id_node.made_by_superuser(s.subowner)
    UNION ALL
    SELECT format('fence trigger %s on %s', g.tgname, g.tgrelid::regclass) FROM pg_trigger g
     WHERE g.tgfoid = 'snowflake_id_node.fence()'::regprocedure
    UNION ALL
    SELECT format('marker table %s', c.oid::regclass) FROM pg_class c
     WHERE c.relname LIKE 'sfid\_%' AND c.relkind = 'r' AND c.relnamespace = 'snowflake_id_node'::regnamespace;
END;
COMMENT ON FUNCTION snowflake_id_node.leftovers() IS
  'What moves made on this node and have not removed (records, slots, publications, subscriptions, fences, markers), one line each.';

-- What moves of a router (its short identity) left here without a record: publications,
-- subscriptions, fence triggers and marker tables named sfid_<router8>_<id> whose
-- move has no record on this node (a restored dump, say), and that only the router's
-- superuser could have made (a superuser's publication or subscription, a trigger calling
-- snowflake_id_node.fence(), a table in snowflake_id_node): another role's object of such a
-- name is never touched. Nothing without a record is
-- in use: every one is made after its record, in the same transaction or the next. Drops
-- them and names each.
CREATE OR REPLACE FUNCTION snowflake_id_node.drop_orphans(router8 text, wait_timeout interval) RETURNS text[]
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    prefix text := 'sfid_' || router8 || '_';
    dropped text[] := '{}';
    x record;
    m snowflake_id_node.move;
BEGIN
    FOR x IN SELECT s.subname FROM pg_subscription s
              WHERE s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                AND starts_with(s.subname, prefix) AND snowflake_id_node.made_by_superuser(s.subowner)
                AND NOT EXISTS (SELECT FROM snowflake_id_node.move r WHERE s.subname IN (r.marker, r.subscription)) LOOP
        EXECUTE format('ALTER SUBSCRIPTION %I DISABLE', x.subname);
        EXECUTE format('ALTER SUBSCRIPTION %I SET (slot_name = NONE)', x.subname);
        EXECUTE format('DROP SUBSCRIPTION %I', x.subname);
        dropped := dropped || format('subscription %s', x.subname);
    END LOOP;
    FOR x IN SELECT g.tgname, g.tgrelid::regclass::text AS rel FROM pg_trigger g
              WHERE g.tgfoid = 'snowflake_id_node.fence()'::regprocedure AND starts_with(g.tgname, prefix)
                AND NOT EXISTS (SELECT FROM snowflake_id_node.move r WHERE r.marker = g.tgname) LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', x.tgname, x.rel);
        dropped := dropped || format('fence trigger %s on %s', x.tgname, x.rel);
    END LOOP;
    FOR x IN SELECT c.oid::regclass::text AS rel FROM pg_class c
              WHERE c.relkind = 'r' AND starts_with(c.relname, prefix) AND c.relnamespace = 'snowflake_id_node'::regnamespace
                AND NOT EXISTS (SELECT FROM snowflake_id_node.move r WHERE r.marker = c.relname) LOOP
        EXECUTE format('DROP TABLE %s', x.rel);
        dropped := dropped || format('marker table %s', x.rel);
    END LOOP;
    FOR x IN SELECT p.pubname FROM pg_publication p
              WHERE starts_with(p.pubname, prefix) AND snowflake_id_node.made_by_superuser(p.pubowner)
                AND NOT EXISTS (SELECT FROM snowflake_id_node.move r WHERE p.pubname IN (r.marker, r.publication)) LOOP
        m.publication := x.pubname;
        PERFORM snowflake_id_node.drop_replication(m, wait_timeout);
        dropped := dropped || format('publication %s', x.pubname);
    END LOOP;
    -- No replication slot: a slot has no owner, and any role with REPLICATION can make one
    -- of a move's name (a change-data-capture tool's, say), so a name proves nothing. A
    -- move's slot never outlives its record: made after it (copy_rows), and dropped in the
    -- transaction that deletes it (undo, complete), which a failed drop rolls back.
    RETURN dropped;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.drop_orphans(text, interval) IS
  'Drops what a router''s moves (router8: its short identity) left here without a move record, naming each.';

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_node FROM PUBLIC;
