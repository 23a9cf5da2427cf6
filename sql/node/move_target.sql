-- The steps of a move on its target node: checks, the copies, their initial rows, the
-- subscription, the flip's activation. Each step is one call by the router, one transaction
-- (sql/node/node.sql; the order of the steps: docs/cluster-design.md).

-- Read-only checks on the target (55000 or 42P06/42710 naming what fails).
CREATE OR REPLACE FUNCTION snowflake_id_node.target_check(router text, peer text, shards integer[], schemas text[],
                                               roles text[], template text) RETURNS void
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    what text;
    free_workers integer;
BEGIN
    IF snowflake_id_node.is_self(peer) THEN
        RAISE EXCEPTION 'the source is this database (%): a shard cannot move onto its own node', peer
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- A move drops on the target only what it made: it never adopts a schema that is here.
    SELECT s INTO what FROM unnest(schemas) s WHERE to_regnamespace(quote_ident(s)) IS NOT NULL LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'this node already has a schema %', quote_ident(what) USING ERRCODE = 'duplicate_schema',
            HINT = 'A move makes the shard''s schema on the target itself; drop or rename the one there if it is stale.';
    END IF;
    SELECT format('shard %s (schema %s)', c.shard, quote_ident(c.schema_name)) INTO what
      FROM @extschema@.snowflake_id_shard c WHERE c.shard = ANY (shards) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'this node already has %', what USING ERRCODE = 'duplicate_object',
            HINT = 'Drop that copy (drop_shard) if it is stale.';
    END IF;
    PERFORM snowflake_id_node.no_other_move(router, shards, schemas);
    PERFORM snowflake_id_node.no_role_for_all();
    IF to_regnamespace(quote_ident(template)) IS NULL THEN
        RAISE EXCEPTION 'template schema "%" does not exist on this node', template USING ERRCODE = 'invalid_schema_name';
    END IF;
    SELECT r INTO what FROM unnest(roles) r WHERE NOT EXISTS (SELECT FROM pg_roles o WHERE o.rolname = r) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'role % does not exist on this node: the shard''s owners, privileges or policies name it', quote_ident(what)
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- The subscription's apply worker (the rows are copied by copy_rows, not by table-sync workers).
    free_workers := current_setting('max_logical_replication_workers')::integer
                    - (SELECT count(*) FROM pg_stat_subscription WHERE pid IS NOT NULL);
    IF free_workers < 1 THEN
        RAISE EXCEPTION 'this node has % free logical replication workers: a move needs 1', free_workers
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Raise max_logical_replication_workers (a restart).';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.target_check(text, text, integer[], text[], text[], text) IS
  'The checks a move''s target must pass (no schema or shard of the same name or number, template, roles, a worker).';

-- Makes the copies from the template, invisible to snowflake_id_shards and fenced against
-- every write but the move's (fence_tables), and the marker table; records them (incoming)
-- with the schemas made, all in one transaction.
CREATE OR REPLACE FUNCTION snowflake_id_node.prepare_target(key text, router text, peer text, shards integer[],
                                                 schemas text[], template text) RETURNS void
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
    PERFORM snowflake_id_node.target_check(router, peer, shards, schemas, '{}', template);
    INSERT INTO snowflake_id_node.move (key, router, role, peer, shards, schemas, state, marker, created)
    VALUES (key, router, 'target', peer, shards, schemas, 'incoming', marker, schemas);
    -- Made here, not adopted: create_shard would use a schema that another session made
    -- since the check, which an undo would then drop as the move's.
    FOR i IN 1 .. cardinality(shards) LOOP
        EXECUTE format('CREATE SCHEMA %I', schemas[i]);
    END LOOP;
    -- create_shard(schemas[i], shards[i], template) for each, in one call: the template read
    -- and checked once for the batch, not once per shard. Their materialized views are left
    -- empty: filled here, their queries (the template owner's code) would run as the mover;
    -- they are refreshed under the fence as their owners (refresh_copies).
    PERFORM snowflake_id_internal.create_shards_from(schemas, shards, template, false);
    -- Until they serve, the copies take rows from the move alone (fence()).
    PERFORM snowflake_id_node.fence_tables(marker, schemas, true);
    EXECUTE format('CREATE TABLE snowflake_id_node.%I (fenced boolean PRIMARY KEY)', marker);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.prepare_target(text, text, text, integer[], text[], text) IS
  'Move step on the target: records move key (incoming) and makes the copies from the template and the marker table.';

-- The copies' owners, before any row goes in (preparing): every row a move writes into a
-- copy runs its owner's code (CHECK constraints, its columns' domain checks, generated
-- columns, index expressions and predicates), which must run as that owner under
-- restricted-operation rules, never as the mover. copy_rows writes as each copy's owner;
-- from PostgreSQL 16 on, the subscription's apply worker too (run_as_owner = false, the
-- default), so the copies get the owners and privileges the source has now (grants: its
-- grants(); set_grants under the fence settles them again). PostgreSQL 15's apply worker
-- writes as the subscription's owner, a superuser, whoever owns the table: there the copies
-- stay the superuser's until the fence (no other role can change them meanwhile), and a
-- move is refused (42501) when a copy of a table whose owner is not a superuser has code
-- that calls anything but PostgreSQL's own IMMUTABLE functions (apply_refusal).
CREATE OR REPLACE FUNCTION snowflake_id_node.own_copies(key text, grants text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{incoming}');
    refusal text;
BEGIN
    IF current_setting('server_version_num')::integer >= 160000 THEN
        PERFORM snowflake_id_node.set_grants(key, grants);
        -- (Row-level security forced on an owner refuses the apply worker's every write.)
        SELECT format('table %s forces row-level security on its owner %I', x.t, r.rolname) INTO refusal
          FROM snowflake_id_node.move_tables(m.schemas) x JOIN pg_class c ON c.oid = x.t JOIN pg_roles r ON r.oid = c.relowner
         WHERE c.relrowsecurity AND c.relforcerowsecurity AND NOT r.rolsuper AND NOT r.rolbypassrls LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION '%: logical replication, which writes as a table''s owner, cannot write into it', refusal
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'ALTER TABLE ... NO FORCE ROW LEVEL SECURITY for the time of the move.';
        END IF;
        RETURN;
    END IF;
    refusal := snowflake_id_node.apply_refusal(m.schemas, grants);
    IF refusal IS NOT NULL THEN
        RAISE EXCEPTION '%: PostgreSQL 15''s logical replication would run it as a superuser', refusal
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Move it onto a node of PostgreSQL 16 or later, or have that code call only IMMUTABLE functions of PostgreSQL''s own.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.own_copies(text, text) IS
  'Move step on the target, before any row: from PostgreSQL 16 on gives the copies of move key the owners and privileges grants reads on the source (55000 for row-level security forced on an owner); on 15 refuses (42501) code of a non-superuser''s table the apply worker would run as a superuser.';

-- What a write into table t runs of its code, each (what, expression as pg_node_tree
-- text): CHECK constraints, defaults and generated columns, index expressions and
-- predicates, the checks of the domains its columns' types, or the types those expressions
-- name (pg_depend), are or contain (through domains, arrays, composite types, ranges); and,
-- with no expression, what no expression
-- shows: an index of an operator class or access method not PostgreSQL's own, a trigger
-- that fires in a subscription's writes (ENABLE ALWAYS or REPLICA).
CREATE OR REPLACE FUNCTION snowflake_id_node.row_code(t regclass) RETURNS TABLE (what text, expr text)
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH RECURSIVE types(typ) AS (
        SELECT a.atttypid FROM pg_attribute a WHERE a.attrelid = row_code.t AND a.attnum > 0 AND NOT a.attisdropped
        UNION ALL
        -- (the types an expression names: a cast to a domain runs its checks)
        SELECT d.refobjid FROM pg_depend d
         WHERE d.refclassid = 'pg_type'::regclass
           AND ((d.classid = 'pg_constraint'::regclass AND d.objid IN (SELECT c.oid FROM pg_constraint c WHERE c.conrelid = row_code.t))
             OR (d.classid = 'pg_attrdef'::regclass AND d.objid IN (SELECT a.oid FROM pg_attrdef a WHERE a.adrelid = row_code.t))
             OR (d.classid = 'pg_class'::regclass AND d.objid IN (SELECT i.indexrelid FROM pg_index i WHERE i.indrelid = row_code.t)))
        UNION
        SELECT x.typ FROM types y JOIN pg_type ty ON ty.oid = y.typ
          CROSS JOIN LATERAL (SELECT ty.typbasetype UNION ALL SELECT ty.typelem
                              UNION ALL SELECT a.atttypid FROM pg_attribute a
                                         WHERE a.attrelid = ty.typrelid AND a.attnum > 0 AND NOT a.attisdropped
                              UNION ALL SELECT r.rngsubtype FROM pg_range r WHERE r.rngtypid = ty.oid
                              UNION ALL SELECT r.rngtypid FROM pg_range r WHERE r.rngmultitypid = ty.oid
                              UNION ALL SELECT d.refobjid FROM pg_constraint c
                                          JOIN pg_depend d ON d.classid = 'pg_constraint'::regclass AND d.objid = c.oid
                                                          AND d.refclassid = 'pg_type'::regclass
                                         WHERE c.contypid = ty.oid) x(typ)
         WHERE x.typ <> 0)
    SELECT format('CHECK constraint %I', c.conname), c.conbin::text
      FROM pg_constraint c WHERE c.conrelid = row_code.t AND c.contype = 'c'
    UNION ALL
    SELECT format(CASE WHEN a.attgenerated <> '' THEN 'generated column %I' ELSE 'default of column %I' END, a.attname), d.adbin::text
      FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum WHERE d.adrelid = row_code.t
    UNION ALL
    SELECT format('index %I', c.relname), e.x::text
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid, LATERAL (VALUES (i.indexprs), (i.indpred)) e(x)
     WHERE i.indrelid = row_code.t AND e.x IS NOT NULL
    UNION ALL
    SELECT format('index %I (operator class %s, access method %s)', c.relname, o.opcname, am.amname), NULL
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam,
           unnest(i.indclass::oid[]) k JOIN pg_opclass o ON o.oid = k
     WHERE i.indrelid = row_code.t AND (o.oid >= 16384 OR am.oid >= 16384)
    UNION ALL
    SELECT format('trigger %I', g.tgname), NULL
      FROM pg_trigger g WHERE g.tgrelid = row_code.t AND NOT g.tgisinternal AND g.tgenabled IN ('A', 'R')
    UNION ALL
    SELECT format('check %I of type %s', c.conname, c.contypid::regtype), c.conbin::text
      FROM types y JOIN pg_constraint c ON c.contypid = y.typ AND c.contype = 'c';
END;
COMMENT ON FUNCTION snowflake_id_node.row_code(regclass) IS
  'The code a write into table t runs (constraints, defaults, generated columns, index expressions, domain checks, replica triggers), each with its expression.';

CREATE OR REPLACE FUNCTION snowflake_id_node.untrusted_call(expr text, schemas oid[]) RETURNS text
LANGUAGE c STABLE STRICT
AS 'MODULE_PATHNAME', 'untrusted_call_wrapper';
COMMENT ON FUNCTION snowflake_id_node.untrusted_call(text, oid[]) IS
  'The first call of stored expression expr (pg_node_tree text) that is neither an IMMUTABLE function of PostgreSQL''s own nor a function or sequence of schemas, described; NULL if none.';

-- The first code of a copy in schemas (of a move) that PostgreSQL 15's apply worker would
-- run as a superuser on behalf of another role, described; NULL when there is none. Only
-- the tables whose owner on the source (grants: its grants()) is not a superuser count; a
-- superuser's table runs its own code. Allowed: PostgreSQL's own IMMUTABLE functions, and
-- the copies' own functions and sequences (untrusted_call).
CREATE OR REPLACE FUNCTION snowflake_id_node.apply_refusal(schemas text[], grants text) RETURNS text
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT format('table %s of role %I: its %s%s', x.t, g.owner, c.what, coalesce(' calls ' || u.call, ''))
      FROM snowflake_id_node.move_tables(schemas) x
      JOIN json_to_recordset(grants::json) AS g(kind text, object text, owner text)
        ON g.kind = 'table' AND to_regclass(g.object) = x.t
      JOIN pg_roles r ON r.rolname = g.owner AND NOT r.rolsuper
     CROSS JOIN LATERAL snowflake_id_node.row_code(x.t) c
     CROSS JOIN LATERAL (SELECT snowflake_id_node.untrusted_call(c.expr,
                                    ARRAY(SELECT n.oid FROM pg_namespace n WHERE n.nspname = ANY (schemas)))) u(call)
     WHERE c.expr IS NULL OR u.call IS NOT NULL
     ORDER BY x.t::text COLLATE "C", c.what COLLATE "C"
     LIMIT 1;
END;
COMMENT ON FUNCTION snowflake_id_node.apply_refusal(text[], text) IS
  'The first code of a move''s copies that PostgreSQL 15''s apply worker would run as a superuser for a table''s non-superuser owner; NULL if none.';

-- The initial copy (copying), made by this node itself: on the source, the move's slot
-- (named as its publication) and every row of the move's tables (content_tables: each
-- partition as a table of its own, into the copy's partition of the same name and bounds;
-- and the marker table) at the slot's snapshot, over one connection in one transaction, into the copies made here
-- (snowflake_id_node.copy_from_source: src/sql/node/copy_rows.rs). Making the slot waits for the
-- transactions running on the source, so the router bounds this call by copy_timeout and
-- cancels it: a slot whose making is cut short goes with the source's WAL sender, and one
-- made is the source record's, which its undo drops. With session_replication_role =
-- replica, as in a table-sync worker and the apply worker after it: no trigger of a copy's
-- fires for the rows copied, in any order: a user's trigger fired on the source when each row
-- was written there (refusal() refuses one enabled ALWAYS or REPLICA, which would fire again),
-- and a foreign key among the shard's tables held there, at the one snapshot copied and in
-- each transaction applied after it, so it holds on the target when it serves. Returns the
-- rows copied.
CREATE OR REPLACE FUNCTION snowflake_id_node.copy_rows(key text, source_connstr text) RETURNS bigint
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp SET session_replication_role = replica
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{incoming}');
BEGIN
    IF m.subscription IS NOT NULL THEN
        RAISE EXCEPTION 'move % has subscribed already', key USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN snowflake_id_node.copy_from_source(source_connstr, m.peer, m.marker,
        ARRAY(SELECT x.t::oid FROM snowflake_id_node.content_tables(m.schemas) x)
        || to_regclass(format('snowflake_id_node.%I', m.marker))::oid);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.copy_rows(text, text) IS
  'Move step on the target: makes move key''s slot on the source and copies its tables'' rows at the slot''s snapshot; returns the rows copied.';

-- The indexes of table t that copy_from_source builds after copying its rows (a table large
-- on the source), as pg_restore does: dropped here, the statements that make them again
-- returned for it to run. Only those such statements make again exactly: an index by its
-- definition (pg_get_indexdef: name, method, columns, expressions, predicate, options), and
-- a primary key or unique constraint then on that index, under its name (USING INDEX); none
-- backing a replica identity or an exclusion constraint, clustered on, in a tablespace of
-- its own, with a comment, security label or column statistics target, or that anything
-- depends on (a foreign key, a view grouping by the key), none of a partition or a table
-- other than a plain one. The copy's transaction drops and makes them: a failure leaves
-- them as they were.
CREATE OR REPLACE FUNCTION snowflake_id_node.defer_indexes(t oid) RETURNS text[]
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    x record;
    made text[] := '{}';
BEGIN
    FOR x IN SELECT i.indexrelid, k.oid AS con, k.conname, k.contype, k.condeferrable, k.condeferred
               FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class r ON r.oid = i.indrelid
               LEFT JOIN pg_constraint k ON k.conrelid = i.indrelid AND k.conindid = i.indexrelid AND k.contype IN ('p', 'u', 'x')
              WHERE i.indrelid = t AND r.relkind = 'r' AND NOT r.relispartition
                AND i.indisvalid AND i.indisready AND i.indislive AND NOT i.indisreplident AND NOT i.indisclustered
                AND c.reltablespace = 0 AND (k.oid IS NULL OR k.contype IN ('p', 'u'))
                -- (a foreign key depends on the unique index it references)
                AND NOT EXISTS (SELECT FROM pg_depend d WHERE (d.refclassid, d.refobjid) IN (('pg_class'::regclass, i.indexrelid),
                                                                                             ('pg_constraint'::regclass, k.oid))
                                                           AND d.deptype <> 'i')   -- (its index, a deferrable one's trigger)
                AND NOT EXISTS (SELECT FROM pg_description d WHERE (d.classoid, d.objoid) IN (('pg_class'::regclass, i.indexrelid),
                                                                                              ('pg_constraint'::regclass, k.oid)))
                AND NOT EXISTS (SELECT FROM pg_seclabel l WHERE l.classoid = 'pg_class'::regclass AND l.objoid = i.indexrelid)
                AND NOT EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = i.indexrelid AND coalesce(a.attstattarget, -1) <> -1)
              ORDER BY k.oid IS NULL, i.indexrelid LOOP
        IF x.con IS NULL THEN
            made := made || pg_get_indexdef(x.indexrelid);
            EXECUTE format('DROP INDEX %s', x.indexrelid::regclass);
        ELSE
            -- (Its index by its definition, then the constraint on it: pg_get_constraintdef
            -- leaves out the index's storage parameters.)
            made := made || pg_get_indexdef(x.indexrelid)
                         || format('ALTER TABLE %s ADD CONSTRAINT %I %s USING INDEX %I%s', t::regclass, x.conname,
                                   CASE x.contype WHEN 'p' THEN 'PRIMARY KEY' ELSE 'UNIQUE' END, x.conname,
                                   CASE WHEN x.condeferred THEN ' DEFERRABLE INITIALLY DEFERRED'
                                        WHEN x.condeferrable THEN ' DEFERRABLE' ELSE '' END);
            EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', t::regclass, x.conname);
        END IF;
    END LOOP;
    RETURN made;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.defer_indexes(oid) IS
  'Move step on the target: drops the indexes (and primary key and unique constraints) of table t that copy_from_source makes again after the copy; returns the statements that make them.';

CREATE OR REPLACE FUNCTION snowflake_id_node.copy_from_source(connstr text, source text, slot text, tables oid[])
RETURNS bigint
LANGUAGE c VOLATILE STRICT
AS 'MODULE_PATHNAME', 'copy_from_source_wrapper';
COMMENT ON FUNCTION snowflake_id_node.copy_from_source(text, text, text, oid[]) IS
  'Makes logical replication slot slot on the node connstr reaches (whose identity must be source) and copies there the rows of tables (local tables, read by schema and name) at its snapshot; returns the rows copied.';

-- A connect string with the router's session settings as its options (after its own,
-- src/pg/node/copy_rows.rs): the subscription's WAL sender on the source then runs with
-- none of what the source's database or role owner set there (a statement_timeout cutting
-- the publisher's queries, exit_on_error).
CREATE OR REPLACE FUNCTION snowflake_id_node.pinned_connstr(connstr text) RETURNS text
LANGUAGE c IMMUTABLE STRICT
AS 'MODULE_PATHNAME', 'pinned_connstr_wrapper';
COMMENT ON FUNCTION snowflake_id_node.pinned_connstr(text) IS
  'connstr with the router''s session settings as its options, after its own.';
REVOKE ALL ON FUNCTION snowflake_id_node.pinned_connstr(text) FROM PUBLIC;

-- The subscription (copying), once the rows are copied: to the move's publication and
-- slot on the source (its session's settings pinned: pinned_connstr), with nothing to copy
-- (copy_data = false): it applies every change committed there after the slot's snapshot.
-- A worker's error disables it (disable_on_error), which marked() reports at once.
CREATE OR REPLACE FUNCTION snowflake_id_node.subscribe(key text, source_connstr text) RETURNS oid
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{incoming}');
    oid oid;
BEGIN
    IF m.subscription IS NOT NULL THEN
        RAISE EXCEPTION 'move % has subscribed already', key USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    PERFORM snowflake_id_node.clear_squatter('subscription', m.marker);
    EXECUTE format('CREATE SUBSCRIPTION %I CONNECTION %L PUBLICATION %I
                      WITH (create_slot = false, slot_name = %L, copy_data = false, disable_on_error = true)',
                   m.marker, snowflake_id_node.pinned_connstr(source_connstr), m.marker, m.marker);
    SELECT s.oid INTO oid FROM pg_subscription s
     WHERE s.subname = m.marker AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database());
    UPDATE snowflake_id_node.move r SET subscription = m.marker, suboid = oid WHERE r.key = m.key;
    RETURN oid;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.subscribe(text, text) IS
  'Move step on the target, after copy_rows: subscribes to move key''s publication and slot on the source (nothing to copy); returns the subscription''s OID.';

-- 55000 at once when the move's subscription has failed: a worker's error disabled it
-- (disable_on_error) or errors were counted. The error itself is in this node's log.
CREATE OR REPLACE FUNCTION snowflake_id_node.check_subscription(m snowflake_id_node.move) RETURNS void
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    enabled boolean;
    errors bigint;
BEGIN
    IF m.suboid IS NULL THEN
        RAISE EXCEPTION 'move % has no subscription on this node', m.key USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    SELECT s.subenabled INTO enabled FROM pg_subscription s WHERE s.oid = m.suboid;
    -- The initial copy's errors: sync_error_count up to 18, sync_table_error_count (and
    -- sync_seq_error_count) from 19; read by name from the row, so one text serves both.
    SELECT st.apply_error_count + coalesce((to_jsonb(st) ->> 'sync_error_count')::bigint, 0)
           + coalesce((to_jsonb(st) ->> 'sync_table_error_count')::bigint, 0)
           + coalesce((to_jsonb(st) ->> 'sync_seq_error_count')::bigint, 0)
      INTO errors FROM pg_stat_subscription_stats st WHERE st.subid = m.suboid;
    IF enabled IS NOT TRUE OR errors > 0 THEN
        RAISE EXCEPTION 'replicating into this node failed: the subscription''s workers reported % error(s)%',
            coalesce(errors, 0), CASE WHEN enabled IS NOT TRUE THEN ' and it disabled itself' ELSE '' END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'This node''s server log says why (subscription ' || quote_ident(m.subscription)
                         || '): a table or column missing here, a type that does not fit, a permission.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.check_subscription(snowflake_id_node.move) IS
  '55000 when a move''s subscription here disabled itself or its workers counted errors.';

-- True when the source's marker row, written after the fence, has arrived; 55000 at once
-- when the subscription failed.
CREATE OR REPLACE FUNCTION snowflake_id_node.marked(key text) RETURNS boolean
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move;
    seen boolean;
BEGIN
    SELECT * INTO m FROM snowflake_id_node.move r WHERE r.key = marked.key AND r.role = 'target';
    EXECUTE format('SELECT EXISTS (SELECT FROM snowflake_id_node.%I)', m.marker) INTO seen;
    IF NOT seen THEN
        PERFORM snowflake_id_node.check_subscription(m);
    END IF;
    RETURN seen;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.marked(text) IS
  'True when the marker row of move key has arrived here; 55000 when its subscription failed.';

-- The transactions running here that hold a transaction ID or snapshot, oldest first: what
-- a new replication slot waits for (to name them when it waits too long).
CREATE OR REPLACE FUNCTION snowflake_id_node.blockers() RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT string_agg(format('pid %s (%s, %s, in a transaction since %s)', a.pid, a.usename,
                             coalesce(nullif(a.application_name, ''), a.backend_type), a.xact_start), '; ' ORDER BY a.xact_start)
      FROM pg_stat_activity a
     WHERE a.pid <> pg_backend_pid() AND a.xact_start IS NOT NULL
       AND (a.backend_xid IS NOT NULL OR a.backend_xmin IS NOT NULL)
       AND a.backend_type = 'client backend';
END;
COMMENT ON FUNCTION snowflake_id_node.blockers() IS
  'The client transactions here holding a transaction ID or snapshot, oldest first (what slot creation waits for).';

-- The materialized views of move key's copies filled from their rows, which replication
-- does not carry: each refreshed under the fence, once the copies have caught up and have
-- their owners (set_grants), before the source is sealed (so each holds what the source's
-- tables held at the fence, and a refresh that fails undoes the move: the source was never
-- sealed), in the order the copies were made (by OID: create_shard makes one after those it
-- reads). REFRESH runs the view's query as its owner under restricted-operation rules, with
-- this function's search_path; an owner who cannot run it (a table's owner revoked its
-- SELECT) is named.
CREATE OR REPLACE FUNCTION snowflake_id_node.refresh_copies(key text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{incoming}');
    v record;
    st text;
    msg text;
BEGIN
    FOR v IN SELECT t.oid::regclass AS rel, c.relowner::regrole AS owner
               FROM unnest(m.schemas) s, snowflake_id_node.tables(to_regnamespace(quote_ident(s))) t
               JOIN pg_class c ON c.oid = t.oid
              WHERE t.kind = 'm' ORDER BY t.oid LOOP
        BEGIN
            EXECUTE format('REFRESH MATERIALIZED VIEW %s', v.rel);
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
            RAISE EXCEPTION 'the copy of materialized view % could not be refreshed as its owner %: %', v.rel, v.owner, msg
                USING ERRCODE = st, HINT = 'Its owner must be able to run its query on the shard, as on the source.';
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.refresh_copies(text) IS
  'Move step on the target, under the fence before the seal: refreshes the copies'' materialized views (their rows are not replicated).';

-- Activation (serving): every sequence carried (set to the further of its value here and
-- the source's, so IDs continue above every ID the source gave whatever the clocks say),
-- pg_partman's configuration of the tables given (sql/node/partman.sql), the copies' fence
-- taken away, and they enter snowflake_id_shards. Only once the source
-- is sealed.
CREATE OR REPLACE FUNCTION snowflake_id_node.activate(key text, sequences text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{incoming}');
    q record;
    seq regclass;
BEGIN
    FOR q IN SELECT * FROM json_to_recordset(sequences::json) AS x(schema text, name text, last bigint, increment bigint)
              WHERE x.name IS NOT NULL LOOP
        seq := to_regclass(format('%I.%I', q.schema, q.name));
        IF seq IS NULL THEN
            RAISE EXCEPTION 'sequence %.% of the source has no counterpart here', quote_ident(q.schema), quote_ident(q.name)
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        CONTINUE WHEN q.last IS NULL;
        PERFORM setval(seq, CASE WHEN q.increment > 0 THEN greatest(q.last, coalesce(pg_sequence_last_value(seq), q.last))
                                 ELSE least(q.last, coalesce(pg_sequence_last_value(seq), q.last)) END, true);
    END LOOP;
    PERFORM snowflake_id_node.partman_give((SELECT e->>'partman' FROM json_array_elements(sequences::json) e
                                             WHERE e->'partman' IS NOT NULL));
    PERFORM snowflake_id_node.fence_tables(m.marker, m.schemas, false);
    UPDATE snowflake_id_node.move r SET state = 'serving' WHERE r.key = m.key;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.activate(text, text) IS
  'Move step on the target: carries every sequence from the source''s values and pg_partman''s configuration, then serves the copies of move key (serving).';

-- Clean-up on the target after the flip: the subscription, the marker, the record. A move
-- kept for revert (publish_back) keeps its record, which names the reverse publication and
-- slot, until end_back has dropped them: a move's slot never outlives its record.
CREATE OR REPLACE FUNCTION snowflake_id_node.finish(key text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{serving}');
BEGIN
    PERFORM snowflake_id_node.drop_subscription(m);
    EXECUTE format('DROP TABLE IF EXISTS snowflake_id_node.%I', m.marker);
    IF m.publication IS NOT NULL OR m.slot IS NOT NULL THEN
        UPDATE snowflake_id_node.move r SET subscription = NULL, suboid = NULL WHERE r.key = m.key;
    ELSE
        DELETE FROM snowflake_id_node.move r WHERE r.key = m.key;
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.finish(text) IS
  'Move clean-up on the target: drops move key''s subscription and marker, and its record (kept while it names reverse replication).';

-- == Reverse replication: a move kept for revert (the router's revert_window) ==
--
-- The source's old copy is kept current by replication in the other direction: a
-- publication of the copies here and a logical slot made here once the source is sealed
-- and this copy caught up, before the flip (no write served here is missed: none is before
-- the flip), and on the source a subscription to them (subscribe_back). The source sends
-- nothing more forward once sealed: no loop, no origin filtering. Their names are the
-- marker's with '_r', recorded on this node's record before they are made.

-- The reverse publication (run before the flip, after activate): the copies' tables by name.
CREATE OR REPLACE FUNCTION snowflake_id_node.publish_back(key text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{serving}');
    name text := m.marker || '_r';
BEGIN
    UPDATE snowflake_id_node.move r SET publication = name, slot = name WHERE r.key = m.key;
    IF EXISTS (SELECT FROM pg_publication p WHERE p.pubname = name AND snowflake_id_node.made_by_superuser(p.pubowner)) THEN
        RETURN;   -- (made by a run interrupted after it)
    END IF;
    PERFORM snowflake_id_node.clear_squatter('publication', name);
    EXECUTE format('CREATE PUBLICATION %I FOR TABLE %s', name,
                   (SELECT string_agg(format('%I.%I', s, t.name), ', ' ORDER BY s, t.name)
                      FROM unnest(m.schemas) s, snowflake_id_node.tables(to_regnamespace(quote_ident(s))) t
                     WHERE t.kind = 'r'));
END
$$;
COMMENT ON FUNCTION snowflake_id_node.publish_back(text) IS
  'Reverse replication of move key on its target: records the reverse publication and slot, and makes the publication.';

-- The reverse slot, after publish_back, in a transaction of its own that writes nothing (a
-- logical slot is not made in one that did): the record read without a row lock.
CREATE OR REPLACE FUNCTION snowflake_id_node.slot_back(key text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move;
    squatter record;
BEGIN
    SELECT * INTO m FROM snowflake_id_node.move r WHERE r.key = slot_back.key AND r.state = 'serving';
    IF m.slot IS NULL OR NOT snowflake_id_node.holds(m.shards) THEN
        RAISE EXCEPTION 'move % has no reverse publication here, or this session does not hold its shard locks', key
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- A slot of that name proves nothing: any role with REPLICATION can make one, in another
    -- database or for another plugin. Only one this move's interrupted run could have made
    -- (pgoutput, here, not in use) is taken; another is dropped (one in use cannot be: the
    -- error keeps the move from keeping its old copy).
    SELECT * INTO squatter FROM pg_replication_slots s
     WHERE s.slot_name = m.slot AND (s.slot_type <> 'logical' OR s.plugin IS DISTINCT FROM 'pgoutput'
                                     OR s.database IS DISTINCT FROM current_database() OR s.active);
    IF FOUND THEN
        RAISE WARNING 'replication slot % (%, plugin %, database %) is not one this move made: dropped', m.slot,
            squatter.slot_type, coalesce(squatter.plugin, 'none'), coalesce(squatter.database::text, 'none');
        PERFORM pg_drop_replication_slot(m.slot);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_replication_slots s WHERE s.slot_name = m.slot) THEN
        PERFORM pg_create_logical_replication_slot(m.slot, 'pgoutput');
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.slot_back(text) IS
  'Reverse replication of move key on its target: makes the reverse slot (after publish_back, before the flip).';

-- The reverse publication and slot dropped (after the source's subscription, unsubscribe_back).
CREATE OR REPLACE FUNCTION snowflake_id_node.end_back(key text, wait_timeout interval) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{serving}');
BEGIN
    PERFORM snowflake_id_node.drop_replication(m, wait_timeout);
    UPDATE snowflake_id_node.move r SET publication = NULL, slot = NULL WHERE r.key = m.key;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.end_back(text, interval) IS
  'Reverse replication of move key on its target: drops the reverse publication and slot (finish then drops the record).';

-- The move's subscription, if it is here: disabled and detached from its slot first (the
-- source removes the slot; it may be unreachable), so dropping it needs no connection.
CREATE OR REPLACE FUNCTION snowflake_id_node.drop_subscription(m snowflake_id_node.move) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    IF m.subscription IS NOT NULL AND EXISTS (SELECT FROM pg_subscription s WHERE s.oid = m.suboid) THEN
        EXECUTE format('ALTER SUBSCRIPTION %I DISABLE', m.subscription);
        EXECUTE format('ALTER SUBSCRIPTION %I SET (slot_name = NONE)', m.subscription);
        EXECUTE format('DROP SUBSCRIPTION %I', m.subscription);
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.drop_subscription(snowflake_id_node.move) IS
  'Drops a move''s subscription here without connecting to the source.';
