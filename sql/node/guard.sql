-- A shard in a move refuses schema and privilege changes as it refuses writes.
--
-- From its fence on, a move carries what the source's schemas were at the fence: their
-- definitions (compared with the target's copies under the seal's locks: a change made
-- meanwhile undoes the move), their owners and privileges (read at the fence, carried to the
-- copies, and compared again under the seal's locks), nothing made later. So a change
-- committed on the source after its fence would be lost with the old copy, and one on a
-- target's copy before it serves would be overwritten: while a move record here is fenced
-- or sealed (the source) or incoming (the target), these event triggers refuse, with 55000,
-- any DDL, GRANT, REVOKE, COMMENT or DROP on its schemas by a session that does not hold the
-- move's shard locks (the mover and a repair hold them). A GRANT or REVOKE names no schema
-- to an event trigger: it is refused when it changed the owners or privileges of a fenced
-- or sealed move's schemas (their fingerprint no longer the one taken at the fence).
-- Writes are refused by the fence itself (snowflake_id_node.fence()).

-- The moves whose schemas a session other than their mover may not change now.
CREATE OR REPLACE FUNCTION snowflake_id_node.guarded_moves() RETURNS SETOF snowflake_id_node.move
LANGUAGE sql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT m.* FROM snowflake_id_node.move m
     WHERE m.state IN ('fenced', 'sealed', 'incoming') AND NOT snowflake_id_node.holds(m.shards);
END;
COMMENT ON FUNCTION snowflake_id_node.guarded_moves() IS
  'The move records here whose schemas only their mover (holding their shard locks) may change now: fenced, sealed, incoming.';

-- The schemas move m still has here: a source's not yet dropped (a sealed copy is dropped a
-- few schemas per transaction), a target's made and not yet undone.
CREATE OR REPLACE FUNCTION snowflake_id_node.kept(m snowflake_id_node.move) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN CASE m.role WHEN 'source' THEN m.schemas[m.dropped + 1:] ELSE m.created END;
COMMENT ON FUNCTION snowflake_id_node.kept(snowflake_id_node.move) IS
  'The schemas move m still has on this node: a source''s not yet dropped, a target''s made and not yet undone.';

-- 55000 naming the move (its first shard still here): what refuses a change of its schemas.
CREATE OR REPLACE FUNCTION snowflake_id_node.refuse_change(m snowflake_id_node.move, what text) RETURNS void
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    i integer := coalesce(array_position(m.schemas, (snowflake_id_node.kept(m))[1]), 1);
BEGIN
    RAISE EXCEPTION '% on shard % (schema %) refused: the shard is being moved (move %, %)', what, m.shards[i],
        quote_ident(m.schemas[i]), m.key, m.state
        USING ERRCODE = 'object_not_in_prerequisite_state',
              HINT = 'Writes, schema and privilege changes to a shard wait for its move; try again once move_history shows it done.';
END
$$;
COMMENT ON FUNCTION snowflake_id_node.refuse_change(snowflake_id_node.move, text) IS
  '55000: a change of a moving shard''s schema, refused.';

-- Whether move m's schemas are still where its record says: each it still has under its
-- name, and every table carrying m's fence (its marker, on fence()) in one of them. Judged
-- of m alone: another move's state (a copy half dropped, a target not yet made) is not m's.
-- The catalogs are read as tables, by the caller's snapshot, as m must have been: a copy
-- dropped with its record's count in one transaction committed meanwhile is then neither
-- (to_regnamespace() reads the latest catalogs, so a record read a moment before named a
-- schema just gone: a parallel batch's fence was refused, t_cluster_rebalance).
CREATE OR REPLACE FUNCTION snowflake_id_node.in_place(m snowflake_id_node.move) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT NOT EXISTS (SELECT FROM unnest(snowflake_id_node.kept(m)) s
                        WHERE NOT EXISTS (SELECT FROM pg_namespace n WHERE n.nspname = s))
       AND NOT EXISTS (SELECT FROM pg_trigger t
                         JOIN pg_class c ON c.oid = t.tgrelid
                         JOIN pg_namespace n ON n.oid = c.relnamespace
                        WHERE t.tgname = m.marker
                          AND t.tgfoid = 'snowflake_id_node.fence()'::regprocedure
                          AND NOT n.nspname::text = ANY (snowflake_id_node.kept(m)));
END;
COMMENT ON FUNCTION snowflake_id_node.in_place(snowflake_id_node.move) IS
  'Whether the schemas move m still has exist under their names and every table m fenced is in one of them.';

-- Whether the object (classid, objid) touches the schemas: it or one of its parts (what
-- depends on it internally or automatically: a view's rule, a table's constraints, a
-- partition) is one of them or in one, depends directly on such an object, or has one
-- depend on it that it defines (an inheriting table, an extension's member). Judged by
-- the catalogs, not by a command's kind: an object with no schema of its own (a rule, a
-- trigger, a policy, a table's default or constraint) or in another schema (statistics, a
-- view, a function of a shard's row type) depends on a table of the shard; a table
-- elsewhere that a shard's table inherits from or is a partition of has that table depend
-- on it; an extension, its members. So every command that makes or changes such an object
-- is met, whatever it is.
CREATE OR REPLACE FUNCTION snowflake_id_node.touches(classid oid, objid oid, schemas text[]) RETURNS boolean
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH RECURSIVE parts(classid, objid) AS (
        SELECT touches.classid, touches.objid
        UNION
        SELECT d.classid, d.objid FROM parts p JOIN pg_depend d ON d.refclassid = p.classid AND d.refobjid = p.objid
         WHERE d.deptype IN ('i', 'a')
    ), near(classid, objid) AS (
        SELECT p.classid, p.objid FROM parts p
        UNION SELECT d.refclassid, d.refobjid FROM parts p JOIN pg_depend d ON d.classid = p.classid AND d.objid = p.objid
        -- (what depends on it, only where that changes the dependent's definition: a table
        -- inheriting from a table, an extension's members; not a shard's function or default
        -- calling a function an extension's update replaces)
        UNION SELECT d.classid, d.objid FROM parts p JOIN pg_depend d ON d.refclassid = p.classid AND d.refobjid = p.objid
         WHERE d.deptype = 'e' OR (d.classid = 'pg_class'::regclass AND p.classid = 'pg_class'::regclass)
    )
    SELECT EXISTS (SELECT FROM near o
                    WHERE (o.classid = 'pg_namespace'::regclass
                           AND o.objid IN (SELECT n.oid FROM pg_namespace n WHERE n.nspname = ANY (touches.schemas)))
                       OR (pg_identify_object(o.classid, o.objid, 0)).schema = ANY (touches.schemas));
END;
COMMENT ON FUNCTION snowflake_id_node.touches(oid, oid, text[]) IS
  'Whether an object (or one of its parts) is one of the schemas, in one, or directly depends on or is depended on by an object in one.';

-- What the objects of the schemas use outside them, whose change would change the shards'
-- definitions or behaviour with no DDL on the schemas themselves: walked outward through
-- pg_depend from every object in the schemas (and its parts: defaults, constraints,
-- indexes, triggers, rules) to what each depends on (a type, domain, function, operator,
-- collation, text search configuration, sequence, a table a key references), then on to
-- what those use and their own parts (a domain's constraints, a composite type's
-- columns), and the extension owning any of them. Built-in objects (oid below 16384,
-- which no DDL changes) and schemas (an object's oid, not its schema's name, is what a
-- shard refers to) are not followed, nor snowflake_id itself and its objects (the move's
-- own machinery, which only its owner's ALTER EXTENSION UPDATE changes, moves in flight or
-- not: reliability/t_move_upgrade.sh). As touches(), it reads only the catalogs.
CREATE OR REPLACE FUNCTION snowflake_id_node.used(schemas text[]) RETURNS TABLE (classid oid, objid oid)
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH RECURSIVE ours(classid, objid) AS MATERIALIZED (
        SELECT 'pg_extension'::regclass::oid, e.oid FROM pg_extension e WHERE e.extname = 'snowflake_id'
        UNION ALL
        SELECT d.classid, d.objid FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
         WHERE d.refclassid = 'pg_extension'::regclass AND e.extname = 'snowflake_id' AND d.deptype = 'e'
    ), o(classid, objid) AS (
        SELECT d.classid, d.objid FROM pg_depend d JOIN pg_namespace n ON n.oid = d.refobjid
         WHERE d.refclassid = 'pg_namespace'::regclass AND n.nspname = ANY (used.schemas)
        UNION
        SELECT x.classid, x.objid FROM o, LATERAL (
            SELECT d.classid, d.objid FROM pg_depend d
             WHERE d.refclassid = o.classid AND d.refobjid = o.objid AND d.deptype IN ('i', 'a')
            UNION ALL
            SELECT d.refclassid, d.refobjid FROM pg_depend d
             WHERE d.classid = o.classid AND d.objid = o.objid AND d.refobjid >= 16384
               AND d.refclassid <> 'pg_namespace'::regclass) x
         WHERE (x.classid, x.objid) NOT IN (SELECT u.classid, u.objid FROM ours u)
    )
    SELECT o.classid, o.objid FROM o
     WHERE NOT coalesce((pg_identify_object(o.classid, o.objid, 0)).schema = ANY (used.schemas), false);
END;
COMMENT ON FUNCTION snowflake_id_node.used(text[]) IS
  'The objects outside the schemas that objects in them depend on, directly or through others (and those objects'' parts and extensions).';

-- ddl_command_end: the schema of snowflake_id (and of snowflake_id_router) keeps its name.
-- Their functions name it as it was when they were made (@extschema@ in their scripts), as
-- functions written in PL/pgSQL must: renamed, a schema made under the old name (which the
-- database's owner may make, and who owns public since PostgreSQL 15 and may rename it)
-- would hold what they run, as the superuser who runs a move or reads shard_status. So
-- renaming snowflake_id's schema is refused (2BP01) whoever runs it (rename it back with the
-- event trigger disabled, if it was); a schema of snowflake_id_router's own, whose name this
-- extension does not know, can be altered by superusers only (42501). Called by guard_ddl
-- alone, under its search_path. (A parallel batch's CREATE PUBLICATION once refused as
-- touching another move's shard, blamed on a SET clause here, was most likely in_place()'s
-- race between a record and the catalogs, fixed since: isolation/guard_snapshot.)
CREATE OR REPLACE FUNCTION snowflake_id_node.guard_extension_schema() RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT e.extname, n.nspname FROM pg_catalog.pg_event_trigger_ddl_commands() d
               JOIN pg_catalog.pg_extension e ON e.extnamespace OPERATOR(pg_catalog.=) d.objid
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
              WHERE d.command_tag OPERATOR(pg_catalog.=) 'ALTER SCHEMA'
                AND (e.extname OPERATOR(pg_catalog.=) 'snowflake_id' OR e.extname OPERATOR(pg_catalog.=) 'snowflake_id_router') LOOP
        IF c.extname OPERATOR(pg_catalog.=) 'snowflake_id' AND c.nspname OPERATOR(pg_catalog.<>) '@extschema@' THEN
            RAISE EXCEPTION 'schema % holds extension snowflake_id, whose functions name it: it cannot be renamed', pg_catalog.quote_ident('@extschema@')
                USING ERRCODE = 'dependent_objects_still_exist',
                      DETAIL = 'A schema made under its old name would hold what the extension''s functions run.';
        ELSIF c.extname OPERATOR(pg_catalog.=) 'snowflake_id_router'
              AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) session_user) THEN
            RAISE EXCEPTION 'schema % holds extension snowflake_id_router: only a superuser may alter it', pg_catalog.quote_ident(c.nspname)
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = 'The extension''s functions name the schema: renamed, a schema made under its old name would hold what they run.';
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.guard_extension_schema() IS
  'In the DDL event trigger: refuses renaming the schema of snowflake_id (2BP01), and altering one of snowflake_id_router but by a superuser (42501).';

-- ddl_command_end: a command whose object touches a guarded move's schemas (every DDL
-- command PostgreSQL reports an object of, whatever its kind: denied unless the catalogs
-- show it elsewhere), or one with no object (GRANT, REVOKE) that changed the owners or
-- privileges of a fenced or sealed move's schemas (a target's are set again at the fence).
-- SECURITY DEFINER: whoever runs DDL reads the move records through it; it trusts only what
-- PostgreSQL reports of the command and what its catalogs say.
CREATE OR REPLACE FUNCTION snowflake_id_node.guard_ddl() RETURNS event_trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m snowflake_id_node.move;
    c record;
BEGIN
    PERFORM snowflake_id_node.guard_extension_schema();
    FOR m IN SELECT * FROM snowflake_id_node.guarded_moves() LOOP
        FOR c IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
            IF c.schema_name = ANY (m.schemas) OR snowflake_id_node.touches(c.classid, c.objid, m.schemas) THEN
                PERFORM snowflake_id_node.refuse_change(m, c.command_tag);
            ELSIF (c.classid, c.objid) IN (SELECT u.classid, u.objid FROM snowflake_id_node.used(m.schemas) u) THEN
                PERFORM snowflake_id_node.refuse_change(m, format('%s of %s, which it uses,', c.command_tag,
                                                                  pg_describe_object(c.classid, c.objid, 0)));
            ELSIF c.objid IS NULL AND m.state <> 'incoming' AND m.guarded IS NOT NULL
                  AND md5(snowflake_id_node.grants(m.schemas)) IS DISTINCT FROM m.guarded THEN
                PERFORM snowflake_id_node.refuse_change(m, c.command_tag);
            ELSIF EXISTS (SELECT FROM snowflake_id_node.guarded_moves() x
                           WHERE x.key = m.key AND NOT snowflake_id_node.in_place(x)) THEN
                -- What PostgreSQL reports of a command names where its object is now: one
                -- that took an object out of the schemas (ALTER ... SET SCHEMA, ALTER SCHEMA
                -- ... RENAME) names another schema. So the state itself is judged: the
                -- record read again with the catalogs, by one snapshot (in_place).
                PERFORM snowflake_id_node.refuse_change(m, c.command_tag);
            END IF;
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.guard_ddl() IS
  'Event trigger (ddl_command_end): refuses every DDL command touching the schemas of a shard being moved, and GRANT or REVOKE changing them (55000).';

-- sql_drop: an object of a guarded move's schemas dropped (or the schema itself). A dropped
-- object is gone from the catalogs, and PostgreSQL reports no schema for some of a table's
-- (a rule): one without is judged by the schema its address names first (its table's).
CREATE OR REPLACE FUNCTION snowflake_id_node.guard_drop() RETURNS event_trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m snowflake_id_node.move;
BEGIN
    FOR m IN SELECT * FROM snowflake_id_node.guarded_moves() LOOP
        IF EXISTS (SELECT FROM pg_event_trigger_dropped_objects() d
                    WHERE d.schema_name = ANY (m.schemas) OR (d.object_type = 'schema' AND d.object_name = ANY (m.schemas))
                       OR (d.schema_name IS NULL AND cardinality(d.address_names) > 1 AND d.address_names[1] = ANY (m.schemas))) THEN
            PERFORM snowflake_id_node.refuse_change(m, 'DROP');
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.guard_drop() IS
  'Event trigger (sql_drop): refuses dropping anything of the schemas of a shard being moved (55000).';

REVOKE ALL ON FUNCTION snowflake_id_node.guarded_moves(), snowflake_id_node.refuse_change(snowflake_id_node.move, text),
    snowflake_id_node.touches(oid, oid, text[]), snowflake_id_node.used(text[]),
    snowflake_id_node.kept(snowflake_id_node.move), snowflake_id_node.in_place(snowflake_id_node.move),
    snowflake_id_node.guard_ddl(), snowflake_id_node.guard_drop(), snowflake_id_node.guard_extension_schema() FROM PUBLIC;

-- The event triggers, made once (the block lets a migration load this file again); ALWAYS:
-- in a session whose session_replication_role is replica too.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger WHERE evtname = 'snowflake_id_guard_ddl') THEN
        CREATE EVENT TRIGGER snowflake_id_guard_ddl ON ddl_command_end EXECUTE FUNCTION snowflake_id_node.guard_ddl();
        ALTER EVENT TRIGGER snowflake_id_guard_ddl ENABLE ALWAYS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger WHERE evtname = 'snowflake_id_guard_drop') THEN
        CREATE EVENT TRIGGER snowflake_id_guard_drop ON sql_drop EXECUTE FUNCTION snowflake_id_node.guard_drop();
        ALTER EVENT TRIGGER snowflake_id_guard_drop ENABLE ALWAYS;
    END IF;
END
$$;
