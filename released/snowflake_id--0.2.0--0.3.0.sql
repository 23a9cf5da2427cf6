-- Assembled by scripts/assemble-sql from sql/upgrade/from-0.2.0.sql and the files it includes: edit the sources, not this file.
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.3.0'" to load this file. \quit

-- ==== sql/upgrade/from-0.2.0.sql ====
-- snowflake_id 0.2.0 -> 0.3.0: what ALTER EXTENSION snowflake_id UPDATE runs on a 0.2.0
-- installation, in order. scripts/assemble-sql makes sql/snowflake_id--0.2.0--0.3.0.sql of
-- this file, each `--#include FILE` line replaced by that file: the SQL sources the fresh
-- install loads, written so that they can run again (CREATE OR REPLACE, COMMENT), are
-- included as they are; what cannot be written so (new schemas and tables, changes to
-- tables, types and operators, drops, properties of functions cargo pgrx declares) is
-- written here, once. reliability/t_upgrade.sh installs 0.2.0 (and 0.1.0) as released, runs
-- the chain and requires the result to equal a fresh 0.3.0 install (reliability/surface.sql).

-- == The node side of snowflake_id_router ==
-- ==== sql/node.sql ====
-- The node side of snowflake_id_router's protocol, in the internal schema snowflake_id_node
-- (docs/cluster-design.md). Nothing here is for applications: the schema is on no one's
-- search_path, and only its owner (the superuser who created the extension) may use it; the
-- router calls it over dblink as a superuser. Every function is CREATE OR REPLACE, so that
-- the upgrade script loads this same text.
--
-- Moves. A move of shards from a source node to a target node is driven by the router;
-- every step it takes on a node is one call of one function here, one transaction that
-- checks its preconditions, does its work and records it in snowflake_id_node.move (one row
-- per move and node, key '<router8>/<move id>'). What a move makes on a node (marker table,
-- publication, slot, subscription, fence triggers, the target's copies) is named by its
-- record, so whoever removes it later removes exactly that.
--
-- Proof of life: the mover's session on each node holds a session-level owner-only lock
-- (lock_class(), shard) for every shard it moves (snowflake_id_node.own_lock: an advisory
-- lock in a key space no other role can reach, pg_locks.objsubid 3). A record whose locks nobody holds belongs
-- to a mover that is gone; only then may another session (a repair) undo or complete it,
-- and every step function here refuses unless the calling session holds them.
--
-- The fence: statement triggers calling snowflake_id_node.fence() on the source's tables.
-- It refuses every write (40001) while the record is 'fenced' and the mover is alive, or
-- once the record is 'sealed' (the decision point: from there the move is completed, never
-- undone). A mover that dies before the seal leaves a fence that lets writes through.
-- The move table is not dumped: a dump taken mid-move restores inert triggers, no state.

CREATE SCHEMA snowflake_id_node;
COMMENT ON SCHEMA snowflake_id_node IS
  'Internals of snowflake_id: the node side of snowflake_id_router''s protocol (moves, identity, connect strings).';
REVOKE ALL ON SCHEMA snowflake_id_node FROM PUBLIC;

CREATE OR REPLACE FUNCTION snowflake_id_node.conninfo(connstr text, OUT keyword text, OUT value text, OUT secret boolean)
RETURNS SETOF record
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'conninfo_wrapper';
COMMENT ON FUNCTION snowflake_id_node.conninfo(text) IS
  'The options libpq reads from a connect string (PQconninfoParse: key=value or URI), with whether libpq treats each as secret; 22023 if libpq refuses it.';

-- What a node is, whatever connect string reaches it: the cluster's system identifier and
-- the database's OID. A promoted physical standby keeps both.
CREATE OR REPLACE FUNCTION snowflake_id_node.identity() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN (SELECT c.system_identifier::text FROM pg_control_system() c) || '/'
    || (SELECT d.oid::text FROM pg_database d WHERE d.datname = current_database());
COMMENT ON FUNCTION snowflake_id_node.identity() IS
  'This database''s identity: <system identifier>/<database OID>, the same through any connect string and on a promoted standby.';

-- The lock class of shard locks ('SFID' as a 32-bit integer), on nodes and routers: owner-only
-- advisory locks (snowflake_id_node.own_lock, pg_locks.objsubid 3).
CREATE OR REPLACE FUNCTION snowflake_id_node.lock_class() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN 1397114180;
COMMENT ON FUNCTION snowflake_id_node.lock_class() IS
  'Advisory lock class of the shard locks (key 2: the shard) that movers hold on nodes and routers.';

CREATE TABLE snowflake_id_node.move (
    key text PRIMARY KEY,                       -- '<router8>/<move id>'
    router text NOT NULL,                       -- the router's identity
    role text NOT NULL CHECK (role IN ('source', 'target')),
    peer text NOT NULL,                         -- the other node's identity
    shards integer[] NOT NULL,
    schemas text[] NOT NULL CHECK (cardinality(schemas) = cardinality(shards) AND cardinality(shards) > 0),
    state text NOT NULL CHECK (state IN ('preparing', 'copying', 'fenced', 'sealed', 'incoming', 'serving')),
    marker text NOT NULL,                       -- marker table, in snowflake_id_node
    created text[] NOT NULL DEFAULT '{}',       -- target: the schemas this move made
    publication text,                           -- source
    slot text,                                  -- source
    subscription text,                          -- target
    suboid oid,                                 -- target: the subscription's OID
    fingerprints text[],                        -- source: each schema's fingerprint when sealed (md5)
    guarded text,                               -- source: md5 of the schemas' owners and privileges at the fence (set_fence)
    dropped integer NOT NULL DEFAULT 0,         -- source, sealed: how many of schemas are dropped (in order)
    made timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK ((role = 'source') = (state IN ('preparing', 'copying', 'fenced', 'sealed')))
);
COMMENT ON TABLE snowflake_id_node.move IS
  'Moves of snowflake_id_router in progress on this node: one row per move, what it made here and its state.';
CREATE INDEX ON snowflake_id_node.move USING gin (schemas);

-- True when this session holds the shard locks of all shards.
CREATE OR REPLACE FUNCTION snowflake_id_node.holds(shards integer[]) RETURNS boolean
LANGUAGE sql STABLE CALLED ON NULL INPUT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN shards IS NOT NULL AND (SELECT count(DISTINCT l.objid) FROM pg_locks l
         WHERE l.locktype = 'advisory' AND l.granted AND l.pid = pg_backend_pid()
           AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
           AND l.classid = snowflake_id_node.lock_class()::oid AND l.objsubid = 3
           AND l.objid::bigint = ANY (shards::bigint[])) = (SELECT count(DISTINCT s) FROM unnest(shards) s);
COMMENT ON FUNCTION snowflake_id_node.holds(integer[]) IS 'True when this session holds the shard locks of all shards.';

-- True when some session holds the shard lock of one of the shards: a mover (or repair) lives.
CREATE OR REPLACE FUNCTION snowflake_id_node.alive(shards integer[]) RETURNS boolean
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN EXISTS (SELECT FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted
                  AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                  AND l.classid = snowflake_id_node.lock_class()::oid AND l.objsubid = 3
                  AND l.objid::bigint = ANY (shards::bigint[]));
COMMENT ON FUNCTION snowflake_id_node.alive(integer[]) IS
  'True when some session holds the shard lock of one of the shards (its mover or a repair is alive).';

-- Takes the shard locks (session level) for this session, waiting up to wait for a session
-- that holds one (a mover whose router just died ends within seconds); then 55P03 naming
-- the shard and the session holding it. All or none: on refusal the locks taken by this
-- call are released.
CREATE OR REPLACE FUNCTION snowflake_id_node.lock_shards(shards integer[], wait interval DEFAULT interval '0')
RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    deadline timestamptz := snowflake_id_node.monotonic() + wait;
    s integer;
    taken integer[] := '{}';
    holder text;
    -- The ones this session holds already, read once (pg_locks is every lock of the server,
    -- and a batch has a hundred shards).
    held bigint[] := ARRAY(SELECT l.objid::bigint FROM pg_locks l
                            WHERE l.locktype = 'advisory' AND l.granted AND l.pid = pg_backend_pid()
                              AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                              AND l.classid = snowflake_id_node.lock_class()::oid AND l.objsubid = 3
                              AND l.objid::bigint = ANY (shards::bigint[]));
BEGIN
    FOREACH s IN ARRAY shards LOOP
        CONTINUE WHEN s = ANY (taken) OR s = ANY (held);
        WHILE NOT snowflake_id_node.own_lock(snowflake_id_node.lock_class(), s, true, false, false) LOOP
            IF snowflake_id_node.monotonic() >= deadline THEN
                PERFORM snowflake_id_node.own_unlock(snowflake_id_node.lock_class(), t, true, false) FROM unnest(taken) t;
                SELECT format('pid %s, %s', a.pid, coalesce(nullif(a.application_name, ''), a.usename::text)) INTO holder
                  FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                 WHERE l.locktype = 'advisory' AND l.granted AND l.classid = snowflake_id_node.lock_class()::oid
                   AND l.objsubid = 3 AND l.objid::bigint = s
                   AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                 LIMIT 1;
                RAISE EXCEPTION 'shard % is being moved or repaired by another session on this node (%)', s,
                    coalesce(holder, 'gone since') USING ERRCODE = 'lock_not_available';
            END IF;
            PERFORM snowflake_id_node.sleep(0.01);
        END LOOP;
        taken := taken || s;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.lock_shards(integer[], interval) IS
  'Takes the shard locks of shards for this session (all or none), waiting up to wait; 55P03 when another session holds one.';

CREATE OR REPLACE FUNCTION snowflake_id_node.unlock_shards(shards integer[]) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    s integer;
BEGIN
    FOREACH s IN ARRAY shards LOOP
        WHILE snowflake_id_node.holds(ARRAY[s]) LOOP
            PERFORM snowflake_id_node.own_unlock(snowflake_id_node.lock_class(), s, true, false);
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.unlock_shards(integer[]) IS 'Releases this session''s shard locks of shards.';

-- The record of a move on this node, for a step function: 55000 unless it exists with one
-- of the states given and this session holds its shard locks.
CREATE OR REPLACE FUNCTION snowflake_id_node.record(key text, states text[]) RETURNS snowflake_id_node.move
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move;
BEGIN
    SELECT * INTO m FROM snowflake_id_node.move r WHERE r.key = record.key FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'move % has no record on this node', key USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF NOT m.state = ANY (states) THEN
        RAISE EXCEPTION 'move % is % on this node, not %', key, m.state, array_to_string(states, ' or ')
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF NOT snowflake_id_node.holds(m.shards) THEN
        RAISE EXCEPTION 'this session does not hold the shard locks of move % (shards %)', key, m.shards
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN m;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.record(text, text[]) IS
  'The record of move key, locked; 55000 unless in one of states and this session holds its shard locks.';

-- == What a shard's schema is made of ==

-- The tables of a schema (oid, name). Found through pg_depend's
-- index on the namespace, not by scanning pg_class: a node may hold thousands of shards.
-- Neither STRICT nor SET search_path, so that the planner inlines it into each query that
-- calls it: a function it cannot inline is planned afresh on every call, which was 40% of
-- a fingerprint's time (a move fingerprints each schema four times). Its body is bound at
-- creation (BEGIN ATOMIC), so no search_path reaches it; a NULL schema has no tables.
CREATE OR REPLACE FUNCTION snowflake_id_node.tables(nsp oid) RETURNS TABLE (oid oid, name name, kind "char")
LANGUAGE sql STABLE PARALLEL SAFE ROWS 5
BEGIN ATOMIC
    SELECT c.oid, c.relname, c.relkind
      FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
     WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = nsp AND d.classid = 'pg_class'::regclass
       AND d.deptype = 'n' AND c.relkind IN ('r', 'p', 'f', 'v', 'm')
     ORDER BY c.relname;
END;
COMMENT ON FUNCTION snowflake_id_node.tables(oid) IS
  'The tables (and views, foreign tables) of a schema.';

-- The fingerprint of a schema's layout, compared wherever two layouts must agree: a shard
-- and its copy on another node (a move refuses when they differ, before any row moves and
-- again under the fence, naming the first difference), a template on every node and the
-- shards made from it (the router's template_status). A sorted array of lines, one per
-- table, column, constraint, index, trigger, rule, policy, free sequence and any other
-- object in the schema, each as PostgreSQL prints it with search_path = pg_catalog, the
-- schema's own name standing as %I, so that a template and a shard made from it
-- (create_shard(..., template => ...)) read alike:
--   table posts: table
--   column posts.edits: integer NOT NULL DEFAULT 0, position 4
--   constraint on posts: PRIMARY KEY (id)
--   index on posts: CREATE INDEX ON %I.posts USING btree (user_id, id)
-- (an index marked " (invalid)", or " (replica identity)" when it is the table's).
-- Not in it: names of constraints and indexes (LIKE ... INCLUDING ALL makes its own), the
-- default and identity of a bigint primary key column (create_shard sets it to the shard's
-- next_id()), NOT NULL constraints as such (PostgreSQL 18 lists them as constraints, 15
-- does not: the column says NOT NULL), storage parameters, comments, a move's own fence
-- triggers and marker table, and what create_shard makes besides the tables (next_id(),
-- table_id_seq). Each catalog is read by the table's OID (an index lookup): a node may
-- hold thousands of shards. One query for the whole schema: a query per table and catalog
-- took 1.7 times as long (a move fingerprints its schemas four times, once under the fence).
CREATE OR REPLACE FUNCTION snowflake_id_node.fingerprint(schema_name text) RETURNS text[]
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    nsp oid := to_regnamespace(quote_ident(schema_name));
    own text := '(^|[^[:alnum:]_$"])' || regexp_replace(quote_ident(schema_name), '([^[:alnum:]_])', '\\\1', 'g') || '\.';
BEGIN
    IF nsp IS NULL THEN
        RAISE EXCEPTION 'schema % does not exist', quote_ident(schema_name) USING ERRCODE = 'invalid_schema_name';
    END IF;
    RETURN coalesce((
    WITH t AS MATERIALIZED (
        SELECT x.oid, x.name, x.kind, c.relpersistence, c.relrowsecurity, c.relforcerowsecurity, c.relreplident
          FROM snowflake_id_node.tables(nsp) x JOIN pg_class c ON c.oid = x.oid),
    lines (l) AS (
        SELECT format('table %s: %s%s%s%s', quote_ident(t.name),
                   CASE t.relpersistence WHEN 'u' THEN 'unlogged ' WHEN 't' THEN 'temporary ' ELSE '' END,
                   CASE t.kind WHEN 'r' THEN 'table' WHEN 'p' THEN 'partitioned table' WHEN 'v' THEN 'view'
                        WHEN 'm' THEN 'materialized view' ELSE 'foreign table' END,
                   CASE WHEN t.relrowsecurity THEN ', row level security' || CASE WHEN t.relforcerowsecurity THEN ' forced' ELSE '' END
                        ELSE '' END,
                   CASE t.relreplident WHEN 'f' THEN ', replica identity full' WHEN 'n' THEN ', replica identity nothing'
                        WHEN 'i' THEN ', replica identity index' ELSE '' END)
          FROM t
        UNION ALL
        SELECT format('column %s.%s: %s%s%s%s, position %s', quote_ident(t.name), quote_ident(a.attname),
                   format_type(a.atttypid, a.atttypmod),
                   CASE WHEN a.attcollation <> (SELECT y.typcollation FROM pg_type y WHERE y.oid = a.atttypid)
                        THEN ' COLLATE ' || a.attcollation::regcollation::text END,
                   CASE WHEN a.attnotnull THEN ' NOT NULL' END,
                   -- (The bigint primary key's default is not printed at all: printing the
                   -- shard's next_id() call looks up every next_id() of the node.)
                   CASE WHEN a.atttypid = 'bigint'::regtype
                             AND EXISTS (SELECT FROM pg_index i WHERE i.indrelid = t.oid AND i.indisprimary
                                            AND a.attnum = ANY (i.indkey)) THEN NULL
                        WHEN a.attidentity = 'a' THEN ' GENERATED ALWAYS AS IDENTITY'
                        WHEN a.attidentity = 'd' THEN ' GENERATED BY DEFAULT AS IDENTITY'
                        ELSE (SELECT CASE WHEN a.attgenerated = 's' THEN ' GENERATED ALWAYS AS ' || pg_get_expr(ad.adbin, ad.adrelid) || ' STORED'
                                          ELSE ' DEFAULT ' || pg_get_expr(ad.adbin, ad.adrelid) END
                                FROM pg_attrdef ad WHERE ad.adrelid = t.oid AND ad.adnum = a.attnum) END,
                   rank() OVER (PARTITION BY t.oid ORDER BY a.attnum))
          FROM t JOIN pg_attribute a ON a.attrelid = t.oid
         WHERE a.attnum > 0 AND NOT a.attisdropped
        UNION ALL
        SELECT format('constraint on %s: %s', quote_ident(t.name), pg_get_constraintdef(k.oid))
          FROM t JOIN pg_constraint k ON k.conrelid = t.oid WHERE k.contype <> 'n'
        UNION ALL
        -- pg_get_indexdef without the index's name: CREATE [UNIQUE] INDEX ON ...
        SELECT format('index on %s: %s%s%s', quote_ident(t.name),
                   overlay(x.def PLACING '' FROM position(' INDEX ' IN x.def) + 7 FOR length(quote_ident(x.relname)) + 1),
                   CASE WHEN NOT i.indisvalid THEN ' (invalid)' END, CASE WHEN i.indisreplident THEN ' (replica identity)' END)
          FROM t JOIN pg_index i ON i.indrelid = t.oid,
               LATERAL (SELECT pg_get_indexdef(i.indexrelid) AS def, c.relname FROM pg_class c WHERE c.oid = i.indexrelid) x
        UNION ALL
        SELECT format('trigger on %s: %s', quote_ident(t.name), pg_get_triggerdef(g.oid))
          FROM t JOIN pg_trigger g ON g.tgrelid = t.oid
         WHERE NOT g.tgisinternal AND g.tgfoid <> 'snowflake_id_node.fence()'::regprocedure
        UNION ALL
        SELECT format('rule on %s: %s', quote_ident(t.name), pg_get_ruledef(r.oid))
          FROM t JOIN pg_rewrite r ON r.ev_class = t.oid WHERE r.rulename <> '_RETURN'
        UNION ALL
        SELECT format('policy on %s: %s %s FOR %s TO %s USING (%s) WITH CHECK (%s)', quote_ident(t.name),
                   quote_ident(p.polname), CASE WHEN p.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END,
                   CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE' WHEN 'd' THEN 'DELETE'
                        ELSE 'ALL' END,
                   (SELECT string_agg(x.r, ', ' ORDER BY x.r COLLATE "C")
                      FROM (SELECT CASE WHEN r = 0 THEN 'PUBLIC' ELSE r::regrole::text END FROM unnest(p.polroles) r) x(r)),
                   pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
          FROM t JOIN pg_policy p ON p.polrelid = t.oid
        UNION ALL
        -- Everything else in the schema: sequences no column owns (not table_id_seq), types,
        -- functions (not the shard's own next_id()), ... (found through the namespace: a
        -- lookup by name would read every next_id() of the node)
        SELECT CASE WHEN d.classid = 'pg_class'::regclass THEN
                    (SELECT format('sequence %s: %s INCREMENT %s MINVALUE %s MAXVALUE %s START %s CACHE %s%s',
                                   quote_ident(c.relname), format_type(q.seqtypid, NULL), q.seqincrement, q.seqmin, q.seqmax,
                                   q.seqstart, q.seqcache, CASE WHEN q.seqcycle THEN ' CYCLE' ELSE '' END)
                       FROM pg_class c JOIN pg_sequence q ON q.seqrelid = c.oid
                      WHERE c.oid = d.objid AND c.relname <> 'table_id_seq'
                        AND NOT EXISTS (SELECT FROM pg_depend o WHERE o.classid = 'pg_class'::regclass AND o.objid = c.oid
                                           AND o.refclassid = 'pg_class'::regclass AND o.deptype IN ('a', 'i')))
               ELSE (SELECT concat_ws(' ', o.type, o.identity) FROM pg_identify_object(d.classid, d.objid, 0) o) END
          FROM pg_depend d
         WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = nsp AND d.deptype = 'n'
           AND NOT (d.classid = 'pg_proc'::regclass AND d.objid IS NOT DISTINCT FROM snowflake_id_internal.shard_function(nsp))
           AND NOT (d.classid = 'pg_class'::regclass
                    AND (SELECT c.relkind <> 'S' FROM pg_class c WHERE c.oid = d.objid)))
    SELECT array_agg(x.l ORDER BY x.l COLLATE "C")
      FROM (SELECT regexp_replace(l, own, '\1%I.', 'g') AS l FROM lines WHERE l IS NOT NULL) x), '{}');
END
$$;

COMMENT ON FUNCTION snowflake_id_node.fingerprint(text) IS
  'The layout of a schema as sorted lines (tables, columns, constraints, indexes, triggers, rules, policies, free sequences, other objects; its own name as %I): equal for a template and the shards made from it.';

-- The first line where two fingerprints differ, said with the labels of both sides:
--   column posts.note: (text DEFAULT 'x'::text, position 5) in shard_7 on node 'a', (absent) in template tpl on node 'b'
-- NULL when they are equal.
CREATE OR REPLACE FUNCTION snowflake_id_node.fingerprint_difference(a text[], b text[], a_label text, b_label text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    first text;
    k text;  -- what the line is about: a table or column by name, anything else by its definition
BEGIN
    SELECT l INTO first FROM (SELECT unnest(a) EXCEPT ALL SELECT unnest(b)
                              UNION ALL (SELECT unnest(b) EXCEPT ALL SELECT unnest(a))) x(l)
     ORDER BY l COLLATE "C" LIMIT 1;
    IF first IS NULL THEN
        RETURN NULL;
    END IF;
    k := CASE WHEN first ~ '^(table|column|sequence) ' THEN split_part(first, ': ', 1) ELSE first END;
    RETURN format('%s: (%s) in %s, (%s) in %s', k,
        coalesce((SELECT CASE WHEN l = k THEN 'present' ELSE substr(l, length(k) + 3) END
                    FROM unnest(a) l WHERE l = k OR starts_with(l, k || ': ') LIMIT 1), 'absent'), a_label,
        coalesce((SELECT CASE WHEN l = k THEN 'present' ELSE substr(l, length(k) + 3) END
                    FROM unnest(b) l WHERE l = k OR starts_with(l, k || ': ') LIMIT 1), 'absent'), b_label);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.fingerprint_difference(text[], text[], text, text) IS
  'The first difference between two fingerprints, with a label for each side; NULL when equal.';

-- Why the schemas cannot move, or NULL: what a move would not carry or would have to drop.
-- A move copies tables with logical replication and drops the source's schemas at the end:
-- an unlogged, foreign or partitioned table, a partition or inheritance child, a view,
-- materialized view, trigger or rule in them would not arrive, a table without primary key
-- or replica identity could not replicate UPDATE and DELETE, a column holding OIDs (type
-- oid, the lo extension's lo, or a domain, array, composite or range made of them: what
-- references large objects) would arrive naming objects of the source that the move does
-- not carry (large objects), and anything outside them that depends on them (a view, a
-- foreign key, a function, a column of their row type, an extension installed in them)
-- would be dropped with them.
CREATE OR REPLACE FUNCTION snowflake_id_node.refusal(schemas text[], own_publication text DEFAULT NULL) RETURNS text
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    nsps oid[] := ARRAY(SELECT to_regnamespace(quote_ident(s)) FROM unnest(schemas) s);
    why text;
BEGIN
    WITH RECURSIVE tabs AS (SELECT t.* FROM unnest(nsps) n, snowflake_id_node.tables(n) t),
    -- Each column of the tables and every type its values are made of: a domain's base
    -- type, an array's (or a vector's) element type, a composite type's columns, a range's
    -- subtype, a multirange's range.
    made_of(rel, col, coltype, typ) AS (
        SELECT t.oid, a.attname, a.atttypid, a.atttypid FROM tabs t
          JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped
         WHERE t.kind = 'r'
        UNION
        SELECT m.rel, m.col, m.coltype, p.typ FROM made_of m JOIN pg_type y ON y.oid = m.typ
          CROSS JOIN LATERAL (SELECT y.typbasetype WHERE y.typtype = 'd'
                              UNION ALL SELECT y.typelem WHERE y.typelem <> 0
                              UNION ALL SELECT a.atttypid FROM pg_attribute a
                                         WHERE a.attrelid = y.typrelid AND a.attnum > 0 AND NOT a.attisdropped
                              UNION ALL SELECT r.rngsubtype FROM pg_range r WHERE r.rngtypid = y.oid
                              UNION ALL SELECT r.rngtypid FROM pg_range r WHERE r.rngmultitypid = y.oid) p(typ))
    SELECT x.why INTO why FROM (
        SELECT 1 AS prio, format('%s %s cannot move: %s', CASE t.kind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view'
                             WHEN 'f' THEN 'foreign table' ELSE 'partitioned table' END, t.oid::regclass,
                         'logical replication does not carry it') AS why
          FROM tabs t WHERE t.kind <> 'r'
        UNION ALL
        SELECT 2, format('unlogged table %s cannot move: logical replication does not carry its rows', t.oid::regclass)
          FROM tabs t JOIN pg_class c ON c.oid = t.oid WHERE c.relpersistence = 'u'
        UNION ALL
        SELECT 3, format('table %s cannot move: it is a partition or inheritance child of %s', t.oid::regclass, i.inhparent::regclass)
          FROM tabs t JOIN pg_inherits i ON i.inhrelid = t.oid
        UNION ALL
        SELECT 4, format('trigger %s on table %s cannot move: triggers are not carried', quote_ident(g.tgname), t.oid::regclass)
          FROM tabs t JOIN pg_trigger g ON g.tgrelid = t.oid
         WHERE NOT g.tgisinternal AND g.tgfoid <> 'snowflake_id_node.fence()'::regprocedure
        UNION ALL
        SELECT 5, format('rule %s on table %s cannot move: rules are not carried', quote_ident(r.rulename), t.oid::regclass)
          FROM tabs t JOIN pg_rewrite r ON r.ev_class = t.oid WHERE r.rulename <> '_RETURN' AND t.kind = 'r'
        UNION ALL
        SELECT 6, format('table %s cannot move: it has no primary key or replica identity, so its UPDATEs and DELETEs cannot be replicated', t.oid::regclass)
          FROM tabs t JOIN pg_class c ON c.oid = t.oid
         WHERE t.kind = 'r' AND NOT (c.relreplident = 'f'
               OR (c.relreplident = 'd' AND EXISTS (SELECT FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary))
               OR (c.relreplident = 'i' AND EXISTS (SELECT FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident)))
        UNION ALL
        SELECT DISTINCT 7, format('table %s cannot move: its column %s of type %s holds OIDs, which name objects of this node '
                                  'such as large objects, and a move does not carry large objects',
                                  m.rel::regclass, quote_ident(m.col), format_type(m.coltype, NULL))
          FROM made_of m WHERE m.typ = 'oid'::regtype
        UNION ALL
        SELECT 8, format('%s depends on %s, which a move would drop with the old copy',
                         coalesce((SELECT pg_describe_object('pg_class'::regclass, r.ev_class, 0) FROM pg_rewrite r
                                    WHERE o.classid = 'pg_rewrite'::regclass AND r.oid = o.objid),
                                  pg_describe_object(o.classid, o.objid, 0)),
                         pg_describe_object(o.refclassid, o.refobjid, 0))
          FROM snowflake_id_node.outside_dependents(nsps, own_publication) o
    ) x ORDER BY x.prio, x.why LIMIT 1;
    RETURN why;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.refusal(text[], text) IS
  'Why the schemas cannot move (the first reason, naming the object), or NULL.';

-- Objects outside the schemas that depend on something in them (the schemas, their
-- relations and functions, their tables' row types), which DROP SCHEMA ... CASCADE would
-- drop. own_publication (the move's own) is not counted.
CREATE OR REPLACE FUNCTION snowflake_id_node.outside_dependents(nsps oid[], own_publication text DEFAULT NULL)
RETURNS TABLE (classid oid, objid oid, refclassid oid, refobjid oid)
LANGUAGE sql STABLE CALLED ON NULL INPUT PARALLEL SAFE ROWS 1
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH members AS (
        SELECT 'pg_namespace'::regclass::oid AS classid, n AS objid FROM unnest(nsps) n
        UNION ALL
        SELECT d.classid, d.objid FROM pg_depend d
         WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = ANY (nsps) AND d.deptype = 'n'
        UNION ALL
        SELECT 'pg_type'::regclass, y.oid FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
          JOIN pg_type y ON y.oid IN (c.reltype, (SELECT e.typarray FROM pg_type e WHERE e.oid = c.reltype))
         WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = ANY (nsps) AND d.classid = 'pg_class'::regclass
           AND d.deptype = 'n'),
    dependents AS (
        SELECT DISTINCT d.classid, d.objid, m.classid AS refclassid, m.objid AS refobjid
          FROM members m JOIN pg_depend d ON d.refclassid = m.classid AND d.refobjid = m.objid
         WHERE d.deptype IN ('n', 'a'))
    SELECT x.classid, x.objid, x.refclassid, x.refobjid FROM dependents x
     WHERE NOT coalesce((CASE x.classid
               WHEN 'pg_class'::regclass THEN (SELECT c.relnamespace FROM pg_class c WHERE c.oid = x.objid)
               WHEN 'pg_type'::regclass THEN (SELECT y.typnamespace FROM pg_type y WHERE y.oid = x.objid)
               WHEN 'pg_proc'::regclass THEN (SELECT p.pronamespace FROM pg_proc p WHERE p.oid = x.objid)
               WHEN 'pg_constraint'::regclass THEN (SELECT k.connamespace FROM pg_constraint k WHERE k.oid = x.objid)
               WHEN 'pg_statistic_ext'::regclass THEN (SELECT s.stxnamespace FROM pg_statistic_ext s WHERE s.oid = x.objid)
               WHEN 'pg_rewrite'::regclass THEN (SELECT c.relnamespace FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class WHERE r.oid = x.objid)
               WHEN 'pg_trigger'::regclass THEN (SELECT c.relnamespace FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE t.oid = x.objid)
               WHEN 'pg_attrdef'::regclass THEN (SELECT c.relnamespace FROM pg_attrdef a JOIN pg_class c ON c.oid = a.adrelid WHERE a.oid = x.objid)
               WHEN 'pg_policy'::regclass THEN (SELECT c.relnamespace FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid WHERE p.oid = x.objid)
               END) = ANY (nsps), false)
       AND NOT (x.classid = 'pg_publication_namespace'::regclass
                AND (SELECT p.pubname FROM pg_publication_namespace pn JOIN pg_publication p ON p.oid = pn.pnpubid
                      WHERE pn.oid = x.objid) IS NOT DISTINCT FROM own_publication)
       AND NOT (x.classid = 'pg_publication_rel'::regclass
                AND (SELECT p.pubname FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid
                      WHERE pr.oid = x.objid) IS NOT DISTINCT FROM own_publication);
END;
COMMENT ON FUNCTION snowflake_id_node.outside_dependents(oid[], text) IS
  'Objects outside the schemas that depend on something in them (DROP SCHEMA ... CASCADE would drop them); own_publication is not counted.';

-- == Privileges and owners: carried from the source's schemas to the target's copies ==

-- The schemas' owners and privileges as JSON (schema, tables, sequences, columns,
-- functions): owners as role names (pg_authid.rolname, not identifiers: whoever puts one
-- in a statement quotes it, once), privileges as aclitem[] text: the target resolves
-- them to its own roles.
CREATE OR REPLACE FUNCTION snowflake_id_node.grants(schemas text[]) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH nsp AS (SELECT n.oid, n.nspname FROM unnest(schemas) s JOIN pg_namespace n ON n.nspname = s),
    rels AS (
        SELECT c.oid, c.relkind, c.relowner, c.relacl, n.nspname, c.relname,
               EXISTS (SELECT FROM pg_depend o WHERE o.classid = 'pg_class'::regclass AND o.objid = c.oid
                          AND o.refclassid = 'pg_class'::regclass AND o.deptype IN ('a', 'i')) AS owned
          FROM nsp n JOIN pg_depend d ON d.refclassid = 'pg_namespace'::regclass AND d.refobjid = n.oid
               AND d.classid = 'pg_class'::regclass AND d.deptype = 'n'
          JOIN pg_class c ON c.oid = d.objid AND c.relkind IN ('r', 'S'))
    SELECT coalesce(json_agg(g ORDER BY g.kind, g.object, g.col), '[]')::text FROM (
        SELECT 'schema' AS kind, quote_ident(n.nspname) AS object, NULL::text AS col, false AS owned,
               pg_get_userbyid(n.nspowner)::text AS owner, n.nspacl::text AS acl, n.nspname AS schema
          FROM nsp x JOIN pg_namespace n ON n.oid = x.oid
        UNION ALL
        SELECT CASE r.relkind WHEN 'S' THEN 'sequence' ELSE 'table' END, format('%I.%I', r.nspname, r.relname), NULL,
               r.owned, pg_get_userbyid(r.relowner)::text, r.relacl::text, r.nspname
          FROM rels r
        UNION ALL
        SELECT 'column', format('%I.%I', r.nspname, r.relname), quote_ident(a.attname), true, NULL, a.attacl::text, r.nspname
          FROM rels r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
         WHERE a.attacl IS NOT NULL
        UNION ALL
        SELECT 'function', format('%I.%I(%s)', n.nspname, p.proname, pg_get_function_identity_arguments(p.oid)), NULL, false,
               pg_get_userbyid(p.proowner)::text, p.proacl::text, n.nspname
          FROM nsp n JOIN pg_depend d ON d.refclassid = 'pg_namespace'::regclass AND d.refobjid = n.oid
               AND d.classid = 'pg_proc'::regclass AND d.deptype = 'n'
          JOIN pg_proc p ON p.oid = d.objid) g;
END;
COMMENT ON FUNCTION snowflake_id_node.grants(text[]) IS
  'Owners and privileges of the schemas and everything in them, as JSON, for set_grants on another node.';

-- The roles grants(...) names (owners, grantees, grantors) and the schemas' policies name,
-- as role names (not identifiers).
CREATE OR REPLACE FUNCTION snowflake_id_node.roles(schemas text[]) RETURNS text[]
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH g AS (SELECT * FROM json_to_recordset(snowflake_id_node.grants(schemas)::json)
                   AS x(kind text, object text, col text, owned boolean, owner text, acl text, schema text))
    SELECT coalesce(array_agg(DISTINCT r ORDER BY r), '{}') FROM (
        SELECT g.owner FROM g WHERE g.owner IS NOT NULL
        UNION ALL
        SELECT pg_get_userbyid(e.grantor)::text FROM g, aclexplode(nullif(g.acl, '{}')::aclitem[]) e
        UNION ALL
        SELECT pg_get_userbyid(e.grantee)::text FROM g, aclexplode(nullif(g.acl, '{}')::aclitem[]) e WHERE e.grantee <> 0
        UNION ALL
        SELECT pg_get_userbyid(r)::text FROM unnest(schemas) s
          JOIN pg_namespace n ON n.nspname = s, snowflake_id_node.tables(n.oid) t
          JOIN pg_policy p ON p.polrelid = t.oid, unnest(p.polroles) r WHERE r <> 0) x(r);
END;
COMMENT ON FUNCTION snowflake_id_node.roles(text[]) IS
  'The names of the roles the schemas'' owners, privileges and policies name.';

-- The owner and privileges (NULL: the default) of one object of grants(...).
CREATE OR REPLACE FUNCTION snowflake_id_node.acl(kind text, object text, col text, schema_name text)
RETURNS TABLE (owner oid, acl aclitem[])
LANGUAGE sql STABLE CALLED ON NULL INPUT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT n.nspowner, coalesce(n.nspacl, acldefault('n', n.nspowner)) FROM pg_namespace n
     WHERE kind = 'schema' AND n.oid = to_regnamespace(object)
    UNION ALL
    SELECT c.relowner, coalesce(c.relacl, acldefault((CASE kind WHEN 'sequence' THEN 's' ELSE 'r' END)::"char", c.relowner))
      FROM pg_class c WHERE kind IN ('table', 'sequence') AND c.oid = to_regclass(object)
    UNION ALL
    SELECT c.relowner, coalesce(a.attacl, '{}') FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
     WHERE kind = 'column' AND c.oid = to_regclass(object) AND quote_ident(a.attname) = col
    UNION ALL
    -- A function by the schema it is in (a lookup by name would read every next_id() of the node).
    SELECT p.proowner, coalesce(p.proacl, acldefault('f', p.proowner))
      FROM pg_namespace n JOIN pg_depend d ON d.refclassid = 'pg_namespace'::regclass AND d.refobjid = n.oid
           AND d.classid = 'pg_proc'::regclass AND d.deptype = 'n'
      JOIN pg_proc p ON p.oid = d.objid
     WHERE kind = 'function' AND n.nspname = schema_name
       AND format('%I.%I(%s)', n.nspname, p.proname, pg_get_function_identity_arguments(p.oid)) = object;
END;
COMMENT ON FUNCTION snowflake_id_node.acl(text, text, text, text) IS
  'Owner and privileges (defaults spelt out) of a schema, table, sequence, column or function named as grants() names it.';

-- Gives the copies the owners and privileges grants(...) read on the source, then checks
-- that each object's privileges equal the source's (55000 naming the first that does not).
-- Roles are names, quoted once where a statement names them (%I).
CREATE OR REPLACE FUNCTION snowflake_id_node.set_grants(key text, grants text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{incoming}');
    mine text := snowflake_id_node.grants(m.schemas);
    g record;
    target_sql text;
    cur aclitem[];
    owner_oid oid;
    want aclitem[];
    e record;
    sorted_want text;
    sorted_cur text;
BEGIN
    -- Only the objects whose owner or privileges read here (grants() of the copies) are not
    -- those read on the source, or that have no counterpart here: often none. It runs under
    -- the fence, and a batch has hundreds of objects.
    FOR g IN SELECT x.* FROM json_to_recordset(grants::json)
                 AS x(kind text, object text, col text, owned boolean, owner text, acl text, schema text)
               LEFT JOIN json_to_recordset(mine::json)
                 AS y(kind text, object text, col text, owned boolean, owner text, acl text, schema text)
                 ON y.kind = x.kind AND y.object = x.object AND coalesce(y.col, '') = coalesce(x.col, '')
              WHERE y.kind IS NULL OR (y.owned, y.owner, y.acl) IS DISTINCT FROM (x.owned, x.owner, x.acl)
              ORDER BY CASE x.kind WHEN 'schema' THEN 0 WHEN 'table' THEN 1 ELSE 2 END LOOP
        target_sql := format('%s %s', CASE g.kind WHEN 'column' THEN 'TABLE' ELSE upper(g.kind) END, g.object);
        SELECT a.owner, a.acl INTO owner_oid, cur FROM snowflake_id_node.acl(g.kind, g.object, g.col, g.schema) a;
        IF NOT FOUND THEN
            RAISE EXCEPTION '% % has no counterpart in the copy on this node', g.kind, concat_ws(' ', g.object, g.col)
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        -- Only what differs is changed (ALTER FUNCTION looks up every function of the name).
        IF g.owner IS NOT NULL AND NOT g.owned
           AND owner_oid IS DISTINCT FROM (SELECT o.oid FROM pg_roles o WHERE o.rolname = g.owner) THEN
            EXECUTE format('ALTER %s OWNER TO %I', target_sql, g.owner);
            SELECT a.owner, a.acl INTO owner_oid, cur FROM snowflake_id_node.acl(g.kind, g.object, g.col, g.schema) a;
        END IF;
        want := coalesce(g.acl::aclitem[], CASE g.kind WHEN 'column' THEN '{}'::aclitem[]
                    ELSE acldefault((CASE g.kind WHEN 'schema' THEN 'n' WHEN 'sequence' THEN 's' WHEN 'function' THEN 'f' ELSE 'r' END)::"char", owner_oid) END);
        CONTINUE WHEN (SELECT array_agg(x::text ORDER BY x::text) FROM unnest(cur) x)
                      IS NOT DISTINCT FROM (SELECT array_agg(x::text ORDER BY x::text) FROM unnest(want) x);
        -- (An empty aclitem[] is not one acl functions take: none of its items to explode.)
        FOR e IN SELECT DISTINCT x.grantee FROM aclexplode(CASE WHEN cardinality(cur) > 0 THEN cur END) x LOOP
            EXECUTE format('REVOKE ALL %s ON %s FROM %s CASCADE', coalesce('(' || g.col || ')', ''), target_sql,
                           CASE WHEN e.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(e.grantee)) END);
        END LOOP;
        FOR e IN SELECT x.grantor, x.grantee, x.is_grantable, string_agg(x.privilege_type, ', ') AS privs
                   FROM aclexplode(CASE WHEN cardinality(want) > 0 THEN want END) x
                  GROUP BY 1, 2, 3 ORDER BY x.grantor <> owner_oid, 1, 2, 3 LOOP
            IF e.grantor <> owner_oid THEN
                EXECUTE format('SET LOCAL ROLE %I', pg_get_userbyid(e.grantor));
            END IF;
            EXECUTE format('GRANT %s %s ON %s TO %s%s', e.privs, coalesce('(' || g.col || ')', ''), target_sql,
                           CASE WHEN e.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(e.grantee)) END,
                           CASE WHEN e.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
            IF e.grantor <> owner_oid THEN
                RESET ROLE;
            END IF;
        END LOOP;
        SELECT a.acl INTO cur FROM snowflake_id_node.acl(g.kind, g.object, g.col, g.schema) a;
        sorted_cur := (SELECT array_agg(x::text ORDER BY x::text) FROM unnest(cur) x)::text;
        sorted_want := (SELECT array_agg(x::text ORDER BY x::text) FROM unnest(want) x)::text;
        IF sorted_cur IS DISTINCT FROM sorted_want THEN
            RAISE EXCEPTION 'could not give % % the privileges it has on the source: % here, % there', g.kind,
                concat_ws(' ', g.object, g.col), coalesce(sorted_cur, '{}'), coalesce(sorted_want, '{}')
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.set_grants(text, text) IS
  'Gives the target copies of move key the owners and privileges of grants() read on the source; 55000 if one cannot be given.';

-- == The steps of a move, on the source ==

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
    IF peer = snowflake_id_node.identity() THEN
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
    -- later is not published; the checks under the fence refuse the move then.
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
CREATE OR REPLACE FUNCTION snowflake_id_node.set_fence(key text, lock_timeout text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move := snowflake_id_node.record(key, '{copying}');
    t regclass;
BEGIN
    PERFORM set_config('lock_timeout', lock_timeout, true);
    EXECUTE 'LOCK TABLE ' || (SELECT string_agg(x.t::text, ', ') FROM snowflake_id_node.move_tables(m.schemas) x)
            || ' IN EXCLUSIVE MODE';
    FOR t IN SELECT x.t FROM snowflake_id_node.move_tables(m.schemas) x LOOP
        EXECUTE format('CREATE TRIGGER %I BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s
                          FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_node.fence()', m.marker, t);
    END LOOP;
    -- The owners and privileges the copies get (grants(), read after the marker): none may
    -- change from now on until the move ends (sql/node_guard.sql; seal_check compares again).
    UPDATE snowflake_id_node.move r SET state = 'fenced', guarded = md5(snowflake_id_node.grants(m.schemas)) WHERE r.key = m.key;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.set_fence(text, text) IS
  'Move step on the source: fences every table of move key''s schemas (EXCLUSIVE lock, bounded by lock_timeout; statement triggers) (fenced).';

-- The tables of the schemas (regclass).
CREATE OR REPLACE FUNCTION snowflake_id_node.move_tables(schemas text[]) RETURNS TABLE (t regclass)
LANGUAGE sql STABLE STRICT PARALLEL SAFE ROWS 5
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT x.oid::regclass FROM unnest(schemas) s JOIN pg_namespace n ON n.nspname = s, snowflake_id_node.tables(n.oid) x
     ORDER BY n.nspname COLLATE "C", x.name COLLATE "C";   -- by name: OIDs differ from node to node
END;
COMMENT ON FUNCTION snowflake_id_node.move_tables(text[]) IS 'The tables of the schemas.';

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

-- Row counts of every table of the move's schemas, one line each (both nodes, under the
-- fence), counted by snowflake_id_node.count_rows: a sequential scan with no planner, so
-- nothing the tables' owner defined (an index expression's function, which planning a
-- count(*) folds) runs as the router's superuser.
-- (PL/pgSQL: count_rows is declared after this file, in sql/remote.sql.)
CREATE OR REPLACE FUNCTION snowflake_id_node.row_counts(key text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT string_agg('table ' || x.t || ': ' || snowflake_id_node.count_rows(x.t) || ' rows', E'\n' ORDER BY x.o)
              FROM snowflake_id_node.move m, snowflake_id_node.move_tables(m.schemas) WITH ORDINALITY x(t, o)
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
    PERFORM set_config('lock_timeout', lock_timeout, true);
    EXECUTE 'LOCK TABLE ' || (SELECT string_agg(x.t::text, ', ') FROM snowflake_id_node.move_tables(m.schemas) x)
            || ' IN EXCLUSIVE MODE';
    FOR i IN 1 .. cardinality(m.schemas) LOOP
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
    PERFORM set_config('snowflake_id_node.seal_checked', key, true),
            set_config('snowflake_id_node.seal_fingerprints',
                       (SELECT array_agg(md5(p) ORDER BY o) FROM unnest(prints) WITH ORDINALITY x(p, o))::text, true);
    RETURN json_build_object('rows', snowflake_id_node.row_counts(key), 'sequences', snowflake_id_node.sequences(key))::text;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.seal_check(text, text[], text) IS
  'Move step on the source: checks the schemas'' fingerprints against the target''s under EXCLUSIVE locks held to the end of the transaction; returns the rows the copies must hold and the sequences to carry (JSON).';

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
    UPDATE snowflake_id_node.move r SET state = 'sealed', fingerprints = current_setting('snowflake_id_node.seal_fingerprints')::text[]
     WHERE r.key = m.key;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.seal(text) IS
  'Move step on the source: seals move key (sealed), only after seal_check in the same transaction.';

-- Every sequence of the move's schemas with the newest value it gave (NULL: none), as JSON.
CREATE OR REPLACE FUNCTION snowflake_id_node.sequences(key text) RETURNS text
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(json_agg(json_build_object('schema', n.nspname, 'name', c.relname,
                                               'last', pg_sequence_last_value(c.oid), 'increment', q.seqincrement)
                             ORDER BY n.nspname, c.relname), '[]')::text
      FROM snowflake_id_node.move m, unnest(m.schemas) s JOIN pg_namespace n ON n.nspname = s
      JOIN pg_depend d ON d.refclassid = 'pg_namespace'::regclass AND d.refobjid = n.oid
           AND d.classid = 'pg_class'::regclass AND d.deptype = 'n'
      JOIN pg_class c ON c.oid = d.objid AND c.relkind = 'S'
      JOIN pg_sequence q ON q.seqrelid = c.oid
     WHERE m.key = sequences.key;
END;
COMMENT ON FUNCTION snowflake_id_node.sequences(text) IS
  'Every sequence of move key''s schemas (identity ones too) with the newest value it gave, as JSON.';

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
            IF md5(snowflake_id_node.fingerprint(s)::text) IS DISTINCT FROM m.fingerprints[i] THEN
                RAISE EXCEPTION 'the sealed copy of shard % (schema %) changed after the seal: it is kept', m.shards[i], quote_ident(s)
                    USING ERRCODE = 'object_not_in_prerequisite_state',
                          HINT = 'Something was made in it after the move sealed it; look, save what must be kept, then drop it by hand and SELECT repair_moves().';
            END IF;
        END LOOP;
        why := snowflake_id_node.refusal(rest);
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
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.drop_schemas(text[]) IS
  'Drops a move''s copies: each schema whole and its row in the shard catalog.';

-- The source's replication resources of a move: publication and its slot, the WAL sender
-- using it ended first (bounded by wait_timeout): the subscription's, or the target's copy
-- still making it (a slot not yet made goes with its WAL sender). Table-sync slots of the
-- subscription m.suboid (pg_<suboid>_sync_*) too, should there be any: copy_rows makes
-- the copy, so the subscription syncs no table, but one that did would leave them.
CREATE OR REPLACE FUNCTION snowflake_id_node.drop_replication(m snowflake_id_node.move, wait_timeout interval) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
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

-- == The steps of a move, on the target ==

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
    IF peer = snowflake_id_node.identity() THEN
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

-- Makes the copies from the template, invisible to snowflake_id_shards, and the marker
-- table; records them (incoming) with the schemas made, all in one transaction.
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
    PERFORM snowflake_id_node.target_check(router, peer, shards, schemas, '{}', template);
    INSERT INTO snowflake_id_node.move (key, router, role, peer, shards, schemas, state, marker, created)
    VALUES (key, router, 'target', peer, shards, schemas, 'incoming', marker, schemas);
    -- Made here, not adopted: create_shard would use a schema that another session made
    -- since the check, which an undo would then drop as the move's.
    FOR i IN 1 .. cardinality(shards) LOOP
        EXECUTE format('CREATE SCHEMA %I', schemas[i]);
    END LOOP;
    -- create_shard(schemas[i], shards[i], template) for each, in one call: the template read
    -- and checked once for the batch, not once per shard.
    PERFORM snowflake_id_internal.create_shards_from(schemas, shards, template);
    EXECUTE format('CREATE TABLE snowflake_id_node.%I (fenced boolean PRIMARY KEY)', marker);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.prepare_target(text, text, text, integer[], text[], text) IS
  'Move step on the target: records move key (incoming) and makes the copies from the template and the marker table.';

-- The initial copy (copying), made by this node itself: on the source, the move's slot
-- (named as its publication) and every row of the move's tables (and its marker table) at
-- the slot's snapshot, over one connection in one transaction, into the copies made here
-- (snowflake_id_node.copy_from_source: src/sql/copy_rows.rs). Making the slot waits for the
-- transactions running on the source, so the router bounds this call by copy_timeout and
-- cancels it: a slot whose making is cut short goes with the source's WAL sender, and one
-- made is the source record's, which its undo drops. With session_replication_role =
-- replica, as in a table-sync worker: no trigger of a copy's (foreign keys among the
-- shard's tables, checked on the source) fires for rows copied in any order. Returns the
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
        ARRAY(SELECT x.t::oid FROM snowflake_id_node.move_tables(m.schemas) x)
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

-- The subscription (copying), once the rows are copied: to the move's publication and
-- slot on the source, with nothing to copy (copy_data = false): it applies every change
-- committed there after the slot's snapshot. A worker's error disables it
-- (disable_on_error), which marked() reports at once.
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
                   m.marker, source_connstr, m.marker, m.marker);
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

-- Activation (serving): every sequence carried (set to the further of its value here and
-- the source's, so IDs continue above every ID the source gave whatever the clocks say),
-- and the copies enter snowflake_id_shards. Only once the source is sealed.
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
    FOR q IN SELECT * FROM json_to_recordset(sequences::json) AS x(schema text, name text, last bigint, increment bigint) LOOP
        seq := to_regclass(format('%I.%I', q.schema, q.name));
        IF seq IS NULL THEN
            RAISE EXCEPTION 'sequence %.% of the source has no counterpart here', quote_ident(q.schema), quote_ident(q.name)
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        CONTINUE WHEN q.last IS NULL;
        PERFORM setval(seq, CASE WHEN q.increment > 0 THEN greatest(q.last, coalesce(pg_sequence_last_value(seq), q.last))
                                 ELSE least(q.last, coalesce(pg_sequence_last_value(seq), q.last)) END, true);
    END LOOP;
    UPDATE snowflake_id_node.move r SET state = 'serving' WHERE r.key = m.key;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.activate(text, text) IS
  'Move step on the target: carries every sequence from the source''s values, then serves the copies of move key (serving).';

-- Clean-up on the target after the flip: the subscription, the marker, the record.
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
    DELETE FROM snowflake_id_node.move r WHERE r.key = m.key;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.finish(text) IS
  'Move clean-up on the target: drops move key''s subscription and marker, and its record.';

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
    m snowflake_id_node.move := snowflake_id_node.record(key, '{preparing,copying,fenced,incoming}');
    t regclass;
    n integer;
BEGIN
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
        FOR t IN SELECT g.tgrelid::regclass FROM unnest(m.schemas) x JOIN pg_namespace n ON n.nspname = x,
                        snowflake_id_node.tables(n.oid) r JOIN pg_trigger g ON g.tgrelid = r.oid
                  WHERE g.tgname = m.marker LOOP
            EXECUTE format('DROP TRIGGER %I ON %s', m.marker, t);
        END LOOP;
        PERFORM snowflake_id_node.drop_replication(m, wait_timeout);
        EXECUTE format('DROP TABLE IF EXISTS snowflake_id_node.%I', m.marker);
    END IF;
    DELETE FROM snowflake_id_node.move r WHERE r.key = m.key;
    RETURN 0;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.undo(text, interval, oid) IS
  'Undoes what move key made on this node before its decision point (target: subscription, copies; source: fence, publication, slot, marker) and, all gone, its record; returns how many copies are left to drop.';

-- == The fence ==

-- BEFORE ... FOR EACH STATEMENT trigger on the source's tables during a move: 40001 while
-- the move is fenced and its mover alive, or once it is sealed; otherwise the write goes
-- through (its mover died before the decision point). SECURITY DEFINER: writers (any
-- role) read the move's record; it trusts nothing but the table's schema.
CREATE OR REPLACE FUNCTION snowflake_id_node.fence() RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m record;
BEGIN
    FOR m IN SELECT r.key, r.state, r.shards, r.schemas FROM snowflake_id_node.move r
              WHERE r.role = 'source' AND TG_TABLE_SCHEMA = ANY (r.schemas) LOOP
        IF m.state = 'fenced' AND NOT snowflake_id_node.alive(m.shards) THEN
            -- The mover is gone, unless it sealed just before: the latest version decides
            -- (FOR SHARE waits for a seal in progress and reads past this statement's snapshot).
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
  'Trigger: refuses writes (40001) to a shard being moved while its mover lives and once it is sealed.';
REVOKE ALL ON FUNCTION snowflake_id_node.fence() FROM PUBLIC;

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
                AND NOT EXISTS (SELECT FROM snowflake_id_node.move r WHERE r.marker = s.subname) LOOP
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
                AND NOT EXISTS (SELECT FROM snowflake_id_node.move r WHERE r.marker = p.pubname) LOOP
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
-- ==== sql/remote.sql ====
-- The router's private machinery, written in C (src/pg/remote.rs, own_lock.rs, as_owner.rs,
-- hold_cancel.rs, time.rs), in the internal schema snowflake_id_node and closed to PUBLIC:
-- only the extension's owner (the superuser who created it) and code running with its
-- rights (the router's SECURITY DEFINER functions) may call these. docs/security.md says
-- what each guarantees; docs/cluster-design.md how the router uses them.
--
-- Connections (remote_*): a registry of this backend's, in place of dblink's session-wide
-- names. A connection belongs to the role that opened it; every other role finds none of
-- that name. It is closed with the subtransaction that opened it if that aborts, and at the
-- end of the top-level transaction unless kept (remote_keep, superuser sessions only). Its
-- session starts with the router's settings (search_path and the rest, in the startup
-- packet, above what the peer's database or role set). Every wait is interruptible and
-- bounded by the monotonic clock; a cancel sent to a frozen peer is waited for 1 s at most.

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_open(name text, connstr text, options text, peer text, timeout double precision)
RETURNS integer LANGUAGE c VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_open_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_open(text, text, text, text, double precision) IS
  'Opens connection name (this role''s) by connstr, its own libpq options being options, within timeout seconds; peer names it in messages. Returns the peer''s backend pid. 42710 if open already.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_close(name text)
RETURNS boolean LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_close_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_close(text) IS 'Closes this role''s connection name; whether it was open.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_close_prefixed(prefix text)
RETURNS integer LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_close_prefixed_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_close_prefixed(text) IS 'Closes this role''s connections whose names start with prefix; how many.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_names()
RETURNS text[] LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_names_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_names() IS 'The names of this role''s open connections, sorted.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_connstr(name text)
RETURNS text LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_connstr_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_connstr(text) IS 'The connect string this role''s connection name was opened with (NULL: not open).';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_pid(name text)
RETURNS integer LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_pid_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_pid(text) IS 'The peer''s backend pid of this role''s connection name.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_keep(name text, keep boolean)
RETURNS void LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_keep_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_keep(text, boolean) IS
  'Marks connection name to outlive the transaction (keep) or not; only a superuser''s session keeps any (42501).';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_send(name text, sql text)
RETURNS void LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_send_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_send(text, text) IS 'Sends sql on connection name without waiting for it.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_busy(name text)
RETURNS boolean LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_busy_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_busy(text) IS 'Whether what was sent on connection name still runs.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_cancel(name text)
RETURNS boolean LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_cancel_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_cancel(text) IS
  'Asks the peer to cancel what runs on connection name, waiting 1 s at most; whether the request was taken.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_receive(name text, timeout double precision, what text)
RETURNS text LANGUAGE c VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_receive_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_receive(text, double precision, text) IS
  'Waits up to timeout seconds for what was sent on connection name: the first column of its first row; a remote error raised again with its SQLSTATE (message after "what: "); 57014 "what did not finish in time" after cancelling it.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_result(name text, timeout double precision, what text)
RETURNS text[] LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_result_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_result(text, double precision, text) IS
  'As remote_receive, but a remote error is returned: {value, sqlstate, message}.';

-- Locks only the owner can take: advisory locks whose pg_locks.objsubid is 3, a key space
-- no pg_advisory_* function reaches (they use 1 and 2).
CREATE OR REPLACE FUNCTION snowflake_id_node.own_lock(class integer, key integer, session boolean, shared boolean, wait boolean)
RETURNS boolean LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'own_lock_wrapper';
COMMENT ON FUNCTION snowflake_id_node.own_lock(integer, integer, boolean, boolean, boolean) IS
  'Takes the owner-only advisory lock (class, key) (pg_locks.objsubid 3) for the session or transaction, shared or exclusive; without wait false if taken by another session, with it waits under lock_timeout.';

CREATE OR REPLACE FUNCTION snowflake_id_node.own_unlock(class integer, key integer, session boolean, shared boolean)
RETURNS boolean LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'own_unlock_wrapper';
COMMENT ON FUNCTION snowflake_id_node.own_unlock(integer, integer, boolean, boolean) IS
  'Releases one hold of the owner-only advisory lock (class, key); whether this session held it.';

-- The clock of deadlines: monotonic, so a wall clock stepped back stretches no wait.
CREATE OR REPLACE FUNCTION snowflake_id_node.monotonic()
RETURNS timestamptz LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'monotonic_wrapper';
COMMENT ON FUNCTION snowflake_id_node.monotonic() IS
  'This backend''s monotonic clock, as 2000-01-01 plus the time since its first reading: for deadlines, not a time of day.';

CREATE OR REPLACE FUNCTION snowflake_id_node.sleep(seconds double precision)
RETURNS void LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'sleep_wrapper';
COMMENT ON FUNCTION snowflake_id_node.sleep(double precision) IS
  'Sleeps seconds by the monotonic clock, interruptibly (pg_sleep sleeps to an end read from the wall clock).';

-- Queries on other roles' tables: as their owner, under restricted-operation rules.
CREATE OR REPLACE FUNCTION snowflake_id_node.as_owner(role oid, query text)
RETURNS text LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'as_owner_wrapper';
COMMENT ON FUNCTION snowflake_id_node.as_owner(oid, text) IS
  'Runs query as role with SECURITY_RESTRICTED_OPERATION, search_path pg_catalog, pg_temp and row_security off (as VACUUM and REINDEX run a table owner''s code): its first column, first row, as text.';

-- The part of a move that must not stop half-way (its seal's commit to its flip): a query
-- run with query cancels held off (src/pg/hold_cancel.rs).
CREATE OR REPLACE FUNCTION snowflake_id_node.hold_cancel(query text)
RETURNS text LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'hold_cancel_wrapper';
COMMENT ON FUNCTION snowflake_id_node.hold_cancel(text) IS
  'Runs query with query cancels (cancel requests, statement_timeout) held off until it ends: one that arrives meanwhile is taken right after; a terminate is not held off. Its first column, first row, as text.';

-- A table's rows as count(*) counts them, without planning a query on it (planning runs its
-- owner's index expressions): a sequential scan at the statement's snapshot.
CREATE OR REPLACE FUNCTION snowflake_id_node.count_rows(rel oid)
RETURNS bigint LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'count_rows_wrapper';
COMMENT ON FUNCTION snowflake_id_node.count_rows(oid) IS
  'The rows of table rel visible to the statement''s snapshot, counted by a sequential scan with no planner and nothing of its owner''s run.';

REVOKE ALL ON FUNCTION snowflake_id_node.remote_open(text, text, text, text, double precision),
    snowflake_id_node.remote_close(text), snowflake_id_node.remote_close_prefixed(text),
    snowflake_id_node.remote_names(), snowflake_id_node.remote_connstr(text), snowflake_id_node.remote_pid(text),
    snowflake_id_node.remote_keep(text, boolean), snowflake_id_node.remote_send(text, text),
    snowflake_id_node.remote_busy(text), snowflake_id_node.remote_cancel(text),
    snowflake_id_node.remote_receive(text, double precision, text),
    snowflake_id_node.remote_result(text, double precision, text),
    snowflake_id_node.own_lock(integer, integer, boolean, boolean, boolean),
    snowflake_id_node.own_unlock(integer, integer, boolean, boolean),
    snowflake_id_node.monotonic(), snowflake_id_node.sleep(double precision),
    snowflake_id_node.as_owner(oid, text), snowflake_id_node.count_rows(oid),
    snowflake_id_node.hold_cancel(text) FROM PUBLIC;
-- ==== sql/node_guard.sql ====
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
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT m.* FROM snowflake_id_node.move m
     WHERE m.state IN ('fenced', 'sealed', 'incoming') AND NOT snowflake_id_node.holds(m.shards);
END;
COMMENT ON FUNCTION snowflake_id_node.guarded_moves() IS
  'The move records here whose schemas only their mover (holding their shard locks) may change now: fenced, sealed, incoming.';

-- 55000 naming the move: what refuses a change of its schemas.
CREATE OR REPLACE FUNCTION snowflake_id_node.refuse_change(m snowflake_id_node.move, what text) RETURNS void
LANGUAGE plpgsql STABLE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '% on shard % (schema %) refused: the shard is being moved (move %, %)', what, m.shards[1],
        quote_ident(m.schemas[1]), m.key, m.state
        USING ERRCODE = 'object_not_in_prerequisite_state',
              HINT = 'Writes, schema and privilege changes to a shard wait for its move; try again once move_history shows it done.';
END
$$;
COMMENT ON FUNCTION snowflake_id_node.refuse_change(snowflake_id_node.move, text) IS
  '55000: a change of a moving shard''s schema, refused.';

-- ddl_command_end: a command on an object of a guarded move's schemas, or one (GRANT,
-- REVOKE) that changed the owners or privileges of a fenced or sealed move's schemas.
-- SECURITY DEFINER: whoever runs DDL reads the move records through it; it trusts only what
-- PostgreSQL reports of the command.
CREATE OR REPLACE FUNCTION snowflake_id_node.guard_ddl() RETURNS event_trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m snowflake_id_node.move;
    c record;
BEGIN
    FOR m IN SELECT * FROM snowflake_id_node.guarded_moves() LOOP
        FOR c IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
            IF c.schema_name = ANY (m.schemas)
               OR (c.schema_name IS NULL AND c.object_type = 'schema' AND c.object_identity = ANY (SELECT quote_ident(s) FROM unnest(m.schemas) s)) THEN
                PERFORM snowflake_id_node.refuse_change(m, c.command_tag);
            ELSIF c.schema_name IS NULL AND m.state <> 'incoming' AND m.guarded IS NOT NULL
                  AND md5(snowflake_id_node.grants(m.schemas)) IS DISTINCT FROM m.guarded THEN
                PERFORM snowflake_id_node.refuse_change(m, c.command_tag);
            END IF;
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.guard_ddl() IS
  'Event trigger (ddl_command_end): refuses DDL, GRANT, REVOKE and COMMENT on the schemas of a shard being moved (55000).';

-- sql_drop: an object of a guarded move's schemas dropped (or the schema itself).
CREATE OR REPLACE FUNCTION snowflake_id_node.guard_drop() RETURNS event_trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m snowflake_id_node.move;
BEGIN
    FOR m IN SELECT * FROM snowflake_id_node.guarded_moves() LOOP
        IF EXISTS (SELECT FROM pg_event_trigger_dropped_objects() d
                    WHERE d.schema_name = ANY (m.schemas) OR (d.object_type = 'schema' AND d.object_name = ANY (m.schemas))) THEN
            PERFORM snowflake_id_node.refuse_change(m, 'DROP');
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.guard_drop() IS
  'Event trigger (sql_drop): refuses dropping anything of the schemas of a shard being moved (55000).';

REVOKE ALL ON FUNCTION snowflake_id_node.guarded_moves(), snowflake_id_node.refuse_change(snowflake_id_node.move, text),
    snowflake_id_node.guard_ddl(), snowflake_id_node.guard_drop() FROM PUBLIC;

-- ALWAYS: in a session whose session_replication_role is replica too.
CREATE EVENT TRIGGER snowflake_id_guard_ddl ON ddl_command_end EXECUTE FUNCTION snowflake_id_node.guard_ddl();
ALTER EVENT TRIGGER snowflake_id_guard_ddl ENABLE ALWAYS;
CREATE EVENT TRIGGER snowflake_id_guard_drop ON sql_drop EXECUTE FUNCTION snowflake_id_node.guard_drop();
ALTER EVENT TRIGGER snowflake_id_guard_drop ENABLE ALWAYS;

-- == The shard catalog's bound is the layout's largest shard (sql/shard_catalog.sql) ==
ALTER TABLE snowflake_id_shard DROP CONSTRAINT snowflake_id_shard_shard_check,
    ADD CONSTRAINT snowflake_id_shard_shard_check
        CHECK (shard BETWEEN 0 AND @extschema@.id_shard(9223372036854775807));

-- == The installer's helpers, in an internal schema (sql/shard_catalog.sql) ==
CREATE SCHEMA snowflake_id_internal;
COMMENT ON SCHEMA snowflake_id_internal IS 'Internals of snowflake_id: helpers of its SQL functions, with no rights of their own.';
GRANT USAGE ON SCHEMA snowflake_id_internal TO PUBLIC;

-- == The installer, and convert_column: shard numbers checked by make_id; snowflake_id_shards
-- lists the shards served here (it reads snowflake_id_node.move) ==
-- ==== sql/installer.sql ====
-- The per-schema shard installer: Instagram's one-schema-per-logical-shard scheme.
--
-- create_shard('insta5', 5) makes schema insta5 (if missing), its sequence
-- insta5.table_id_seq and a function insta5.next_id() returning next_id(5, that sequence),
-- and records the shard in snowflake_id_shard. The generated function has an SQL-standard
-- body: it is parsed once, at creation, so it calls this extension's generator
-- (snowflake_id_internal.shard_next_id, next_id(shard, seq) under a name of its own) and
-- names the sequence by OID (both recorded as dependencies); search_path at call time cannot
-- redirect it, and it pins its own search_path besides. It runs with the caller's rights.
--
-- Thousands of shards, each with a function named next_id: PostgreSQL resolves a function
-- call by name, even a schema-qualified one, through a cached list of every function of that
-- name in every schema, and any change to pg_proc drops that list. So making a shard never
-- looks the name next_id up: a new function is made under a name of its own
-- (snowflake_id_new_next_id_<shard>), its comment and the template's defaults are set through
-- that name, and it is then renamed next_id (a check of that one name in that schema). Each
-- shard then costs the same, however many there are already.
--
-- Adopting a schema that already runs Instagram's PL/pgSQL insta5.next_id(): the sequence
-- is kept, and the function is replaced in place (same OID), so every column default that
-- calls it switches to the native generator. The old function's IDs are (time <= now,
-- shard, any counter); the sequence is first advanced to (now, shard, the largest counter),
-- so every new ID is greater than every old one.
--
-- The layout's limits (the largest shard, the largest counter) are not written here: they
-- are the fields of the largest ID, id_shard(9223372036854775807) and
-- id_sequence(9223372036854775807), as the layout in Rust (src/id/layouts.rs) decodes it,
-- and a shard number is checked by make_id, with its own error.
--
-- The catalog table is sql/shard_catalog.sql's; everything here can run again (CREATE OR
-- REPLACE), so an upgrade script includes this file as it is (scripts/assemble-sql).

-- The shards this node serves: not a move's copy before it is activated, nor a copy a move
-- has sealed (snowflake_id_node.move), so a fan-out never sees a shard twice.
CREATE OR REPLACE VIEW snowflake_id_shards AS
    SELECT c.schema_name, c.shard, c.sequence FROM snowflake_id_shard c
     WHERE NOT EXISTS (SELECT FROM snowflake_id_node.move m
                        WHERE c.schema_name = ANY (m.schemas) AND m.state IN ('incoming', 'sealed'))
     ORDER BY c.shard;
COMMENT ON VIEW snowflake_id_shards IS
  'Logical shards made by create_shard and served here (not a move''s copy before or after it serves): schema, shard number, sequence.';
-- Readable by every role, as pg_namespace is: an application's node-side functions look
-- shards up here.
GRANT SELECT ON snowflake_id_shards TO PUBLIC;

-- next_id(shard, seq) under a name no shard's function has: what a shard's next_id() calls.
CREATE OR REPLACE FUNCTION snowflake_id_internal.shard_next_id(shard integer, seq regclass) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'next_id_wrapper';
COMMENT ON FUNCTION snowflake_id_internal.shard_next_id(integer, regclass) IS
  'next_id(shard, seq) under a name of its own, called by each shard''s next_id() (made by create_shard): its name is looked up without reading every shard''s next_id().';

-- The next_id() of the shard in schema nsp, by its catalog key: a lookup by name
-- (to_regprocedure, or a call) reads every next_id() of the node.
CREATE OR REPLACE FUNCTION snowflake_id_internal.shard_function(nsp oid) RETURNS oid
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN (SELECT p.oid FROM pg_proc p
         WHERE p.proname = 'next_id' AND p.proargtypes = ''::oidvector AND p.pronamespace = nsp);
COMMENT ON FUNCTION snowflake_id_internal.shard_function(oid) IS
  'The next_id() of the shard in a schema (by OID), found by its catalog key, not by name: NULL if it has none.';

-- create_shard(schema_name, shard) but for the last step: returns the name the shard's
-- function has, next_id if it was there already (replaced in place), else the name of its
-- own it was made under, which the caller sets defaults through and then renames next_id.
CREATE OR REPLACE FUNCTION snowflake_id_internal.make_shard(schema_name text, shard integer) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    existing @extschema@.snowflake_id_shard;
    other text;
    nsp oid;
    made_schema boolean;
    seq oid;
    seq_kind "char";
    seq_owner regrole;
    old_fn oid;
    counter bigint;
    seq_min bigint;
    seq_max bigint;
    dependent regclass;
    fn text;
BEGIN
    -- A shard outside the layout: make_id's own error (22003, naming the valid range).
    PERFORM @extschema@.make_id(clock_timestamp(), shard);
    -- PostgreSQL truncates longer names to 63 bytes: two such names would be one schema.
    IF octet_length(schema_name) > 63 THEN
        RAISE EXCEPTION 'schema name "%" is too long: % bytes, at most 63', schema_name, octet_length(schema_name)
            USING ERRCODE = 'name_too_long';
    END IF;
    IF schema_name = '' THEN
        RAISE EXCEPTION 'schema name must not be empty' USING ERRCODE = 'invalid_name';
    END IF;
    -- System schemas, and temporary ones (pg_temp_N), whose objects vanish with a session
    -- while the catalog row would stay.
    IF schema_name LIKE 'pg\_%' OR schema_name = 'information_schema' THEN
        RAISE EXCEPTION 'schema name "%" is reserved: a shard cannot be a system or temporary schema', schema_name
            USING ERRCODE = 'reserved_name';
    END IF;

    -- One create_shard/drop_shard at a time, so the checks below cannot be overtaken by
    -- another session's (READ COMMITTED: each statement after the lock sees its commits).
    LOCK TABLE @extschema@.snowflake_id_shard IN SHARE ROW EXCLUSIVE MODE;
    SELECT c.schema_name INTO other FROM @extschema@.snowflake_id_shard c
     WHERE c.shard = make_shard.shard AND c.schema_name <> make_shard.schema_name;
    IF FOUND THEN
        RAISE EXCEPTION 'shard % is already given to schema %', shard, quote_ident(other)
            USING ERRCODE = 'unique_violation';
    END IF;
    SELECT * INTO existing FROM @extschema@.snowflake_id_shard c
     WHERE c.schema_name = make_shard.schema_name;
    IF FOUND AND existing.shard <> shard THEN
        RAISE EXCEPTION 'schema % is already shard %', quote_ident(schema_name), existing.shard
            USING ERRCODE = 'unique_violation';
    END IF;

    nsp := to_regnamespace(quote_ident(schema_name));
    made_schema := nsp IS NULL;
    IF made_schema THEN
        EXECUTE format('CREATE SCHEMA %I', schema_name);
        nsp := to_regnamespace(quote_ident(schema_name));
    ELSIF (SELECT n.nspowner <> current_user::regrole FROM pg_namespace n WHERE n.oid = nsp) THEN
        RAISE WARNING 'schema % is owned by role %, who can replace what create_shard makes in it',
            quote_ident(schema_name), (SELECT n.nspowner::regrole FROM pg_namespace n WHERE n.oid = nsp);
    END IF;

    -- Adopting a schema in use (Instagram's PL/pgSQL next_id() and its sequence; not when
    -- this is already a shard, made native before): wait until
    -- no transaction that wrote with the old function, or used the sequence, is still open,
    -- and keep new ones out until we commit, so that no ID from the old function can follow
    -- the native generator's. First the tables whose column defaults call the function being
    -- replaced: SHARE waits for their open writers and blocks new ones, which then see the
    -- new body.
    old_fn := snowflake_id_internal.shard_function(nsp);
    IF old_fn IS NOT NULL AND (SELECT p.proowner <> current_user::regrole FROM pg_proc p WHERE p.oid = old_fn) THEN
        RAISE WARNING 'function %.next_id() is owned by role %, who keeps it when create_shard replaces its body',
            quote_ident(schema_name), (SELECT p.proowner::regrole FROM pg_proc p WHERE p.oid = old_fn);
    END IF;
    IF old_fn IS NOT NULL AND existing.schema_name IS NULL THEN
        FOR dependent IN
            SELECT DISTINCT ad.adrelid::regclass FROM pg_depend d
              JOIN pg_attrdef ad ON d.classid = 'pg_attrdef'::regclass AND ad.oid = d.objid
              JOIN pg_class c ON c.oid = ad.adrelid AND c.relkind IN ('r', 'p')
             WHERE d.refclassid = 'pg_proc'::regclass AND d.refobjid = old_fn
        LOOP
            EXECUTE format('LOCK TABLE %s IN SHARE MODE', dependent);
        END LOOP;
    END IF;

    -- Only a real sequence is adopted, and nothing in the schema is run: its state is read
    -- with pg_sequence_last_value(), never with a query on whatever bears the name.
    SELECT c.oid, c.relkind, c.relowner INTO seq, seq_kind, seq_owner FROM pg_class c
     WHERE c.relnamespace = nsp AND c.relname = 'table_id_seq';
    IF seq IS NULL THEN
        EXECUTE format('CREATE SEQUENCE %I.table_id_seq AS bigint', schema_name);
        seq := format('%I.table_id_seq', schema_name)::regclass;
    ELSIF seq_kind <> 'S' THEN
        RAISE EXCEPTION '"%" is not a sequence', format('%I.table_id_seq', schema_name)
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'create_shard adopts only a sequence named table_id_seq.';
    ELSIF existing.schema_name IS NULL THEN
        IF seq_owner <> current_user::regrole THEN
            RAISE WARNING 'sequence %.table_id_seq is owned by role %, who can reset it (setval) and so make next_id() repeat IDs',
                quote_ident(schema_name), seq_owner;
        END IF;
        -- ALTER ... OWNER TO its own owner changes nothing, but takes ACCESS EXCLUSIVE: it
        -- waits for every transaction holding the sequence's lock (every nextval() caller).
        -- It needs the caller to own the sequence (or be superuser): 42501 otherwise.
        EXECUTE format('ALTER SEQUENCE %s OWNER TO %s', seq::regclass, seq_owner);
    END IF;

    -- A sequence whose range cannot hold IDs (AS integer, descending): next_id's own error.
    SELECT q.seqmin, q.seqmax INTO seq_min, seq_max FROM pg_sequence q WHERE q.seqrelid = seq;
    IF NOT @extschema@.make_id(clock_timestamp(), shard, @extschema@.id_sequence(9223372036854775807))
           BETWEEN seq_min AND seq_max THEN
        RAISE EXCEPTION 'sequence "%" cannot hold snowflake IDs: its range is % to %', seq::regclass, seq_min, seq_max
            USING ERRCODE = 'sequence_generator_limit_exceeded',
                  HINT = format('ALTER SEQUENCE %s AS bigint MINVALUE 1 MAXVALUE 9223372036854775807', seq::regclass);
    END IF;
    -- A sequence still holding a plain counter (new, or Instagram's PL/pgSQL's) is moved
    -- above every ID the old function can have made; one holding IDs already is left alone.
    counter := coalesce(pg_sequence_last_value(seq), 0);
    IF counter < (1::bigint << 42) THEN
        PERFORM setval(seq, @extschema@.make_id(clock_timestamp(), shard, @extschema@.id_sequence(9223372036854775807)), true);
    END IF;
    -- A new function under a name of its own (the schema is new, or has no next_id()), an
    -- existing one replaced in place.
    fn := CASE WHEN old_fn IS NULL THEN 'snowflake_id_new_next_id_' || shard ELSE 'next_id' END;
    EXECUTE format(
        'CREATE %s FUNCTION %I.%I(OUT result bigint) '
        'LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY INVOKER '
        'SET search_path = pg_catalog, pg_temp '
        'RETURN snowflake_id_internal.shard_next_id(%s, %L::regclass)',
        CASE WHEN old_fn IS NULL THEN '' ELSE 'OR REPLACE' END, schema_name, fn, shard, seq::regclass);
    EXECUTE format('COMMENT ON FUNCTION %I.%I() IS %L', schema_name, fn,
        format('Next snowflake ID of logical shard %s, from sequence %s (made by create_shard).', shard, seq::regclass));
    IF existing.schema_name IS NOT NULL THEN
        UPDATE @extschema@.snowflake_id_shard c SET sequence = seq
         WHERE c.schema_name = make_shard.schema_name AND c.sequence <> seq;
    ELSE
        BEGIN
            INSERT INTO @extschema@.snowflake_id_shard VALUES (schema_name, shard, seq, made_schema);
        EXCEPTION WHEN unique_violation THEN
            -- Only under REPEATABLE READ or SERIALIZABLE, whose snapshot predates the lock:
            -- another session's create_shard committed a conflicting row meanwhile.
            RAISE EXCEPTION 'shard % or schema % was taken by a concurrent create_shard', shard, quote_ident(schema_name)
                USING ERRCODE = 'serialization_failure', HINT = 'Retry the transaction.';
        END;
    END IF;
    RETURN fn;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.make_shard(text, integer) IS
  'create_shard(schema_name, shard) but for renaming a newly made function next_id: returns the name the shard''s function has.';

CREATE OR REPLACE FUNCTION create_shard(schema_name text, shard integer) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn text := snowflake_id_internal.make_shard(schema_name, shard);
BEGIN
    IF fn <> 'next_id' THEN
        EXECUTE format('ALTER FUNCTION %I.%I() RENAME TO next_id', schema_name, fn);
    END IF;
END
$$;
COMMENT ON FUNCTION create_shard(text, integer) IS
  'Makes (or adopts) schema_name as logical shard: its sequence table_id_seq and its next_id() function. Idempotent.';

CREATE OR REPLACE FUNCTION create_shards(prefix text, first_shard integer, count integer) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF count < 0 THEN
        RAISE EXCEPTION 'count % is negative: create_shards makes count shards from first_shard on', count
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    -- The first and the last shard are checked as make_id checks a shard (22003).
    PERFORM @extschema@.make_id(clock_timestamp(), first_shard);
    IF count > 0 THEN
        PERFORM @extschema@.make_id(clock_timestamp(), least(first_shard::bigint + count - 1, 2147483647)::integer);
    END IF;
    FOR n IN first_shard .. first_shard + count - 1 LOOP
        PERFORM @extschema@.create_shard(prefix || n, n);
    END LOOP;
END
$$;
COMMENT ON FUNCTION create_shards(text, integer, integer) IS
  'create_shard(prefix || n, n) for n = first_shard .. first_shard + count - 1, in one transaction.';

CREATE OR REPLACE FUNCTION drop_shard(schema_name text, cascade boolean DEFAULT false) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s @extschema@.snowflake_id_shard;
    behaviour text := CASE WHEN cascade THEN 'CASCADE' ELSE 'RESTRICT' END;
BEGIN
    LOCK TABLE @extschema@.snowflake_id_shard IN SHARE ROW EXCLUSIVE MODE;
    SELECT * INTO s FROM @extschema@.snowflake_id_shard c WHERE c.schema_name = drop_shard.schema_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'schema % is not a snowflake_id shard', quote_ident(schema_name)
            USING ERRCODE = 'undefined_object';
    END IF;
    -- Whatever of the shard is already gone (dropped by hand) is skipped; the row goes.
    -- RESTRICT: a table whose default calls next_id() refuses the drop (2BP01), by name.
    -- With cascade, a schema create_shard made goes first, with everything in it: one
    -- dependency walk instead of three (what was moved out of it goes next, by name and OID).
    IF cascade AND s.created_schema AND to_regnamespace(quote_ident(schema_name)) IS NOT NULL THEN
        EXECUTE format('DROP SCHEMA %I CASCADE', schema_name);
    END IF;
    IF to_regprocedure(format('%I.next_id()', schema_name)) IS NOT NULL THEN
        EXECUTE format('DROP FUNCTION %I.next_id() %s', schema_name, behaviour);
    END IF;
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = s.sequence AND c.relkind = 'S') THEN
        EXECUTE format('DROP SEQUENCE %s %s', s.sequence, behaviour);
    END IF;
    IF s.created_schema AND to_regnamespace(quote_ident(schema_name)) IS NOT NULL THEN
        EXECUTE format('DROP SCHEMA %I %s', schema_name, behaviour);
    END IF;
    DELETE FROM @extschema@.snowflake_id_shard c WHERE c.schema_name = drop_shard.schema_name;
END
$$;
COMMENT ON FUNCTION drop_shard(text, boolean) IS
  'Drops what create_shard made (function, sequence, and the schema if it made it); refuses while tables depend on them, unless cascade.';

-- create_shard(schema_name, shard, template => 'tpl'): the shard layout declared once.
-- After create_shard(schema_name, shard), every table of schema tpl is made in the shard's
-- schema with CREATE TABLE ... (LIKE tpl.t INCLUDING ALL): columns, defaults, generated
-- columns, NOT NULL, CHECK, primary key, unique and exclusion constraints, indexes, extended
-- statistics, comments, identity; then its row-level security settings, policies and replica
-- identity (FULL, NOTHING, or USING INDEX: the copy's index made from the template's). A
-- single-column bigint (or snowflake) primary key then defaults to the shard's own next_id()
-- (identity dropped); a key of several columns keeps its columns as they are. Foreign keys are not
-- copied; a table with triggers or rules, or with a policy that reads a table of the
-- template (its copy would read the template's), is refused (0A000): make those in each shard.
--
-- The template must be a plain schema of tables: anything else in it (views, sequences other
-- than identity ones, functions, types) is refused (42809). So is a template whose copies
-- would use or run anything owned by a role that is neither the caller nor a superuser
-- (42501): functions, operators, types, domains, collations, operator classes, casts'
-- functions, text search configurations, sequences, found transitively from the tables'
-- columns, defaults, constraints, indexes, statistics and policies (sql/template_read.sql).
-- The template's tables stay locked from that check to the end of the transaction, and the
-- check reads the catalog as the copy does (src/pg/template_read.rs). Nothing of the template
-- is executed here. A table the shard already has is left as it is: the call is idempotent.
CREATE OR REPLACE FUNCTION create_shard(schema_name text, shard integer, template text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- template => NULL is the two-argument form, not a silent no-op.
    IF template IS NULL THEN
        PERFORM @extschema@.create_shard(schema_name, shard);
        RETURN;
    END IF;
    IF schema_name IS NULL OR shard IS NULL THEN
        RAISE EXCEPTION 'create_shard: schema_name and shard must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM snowflake_id_internal.create_shards_from(ARRAY[schema_name], ARRAY[shard], template);
END
$$;
COMMENT ON FUNCTION create_shard(text, integer, text) IS
  'create_shard(schema_name, shard), then every table of schema template made in it (LIKE ... INCLUDING ALL, with its policies), a single-column bigint primary key defaulting to its next_id(). Idempotent.';

CREATE OR REPLACE FUNCTION create_shards(prefix text, first_shard integer, count integer, template text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF template IS NULL THEN
        PERFORM @extschema@.create_shards(prefix, first_shard, count);
        RETURN;
    END IF;
    IF prefix IS NULL OR first_shard IS NULL OR count IS NULL THEN
        RAISE EXCEPTION 'create_shards: prefix, first_shard and count must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF count < 0 THEN
        RAISE EXCEPTION 'count % is negative: create_shards makes count shards from first_shard on', count
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    -- The first and the last shard are checked as make_id checks a shard (22003).
    PERFORM @extschema@.make_id(clock_timestamp(), first_shard);
    IF count > 0 THEN
        PERFORM @extschema@.make_id(clock_timestamp(), least(first_shard::bigint + count - 1, 2147483647)::integer);
    END IF;
    PERFORM snowflake_id_internal.create_shards_from(
        array(SELECT prefix || n FROM generate_series(first_shard, first_shard + count - 1) n),
        array(SELECT n FROM generate_series(first_shard, first_shard + count - 1) n),
        template);
END
$$;
COMMENT ON FUNCTION create_shards(text, integer, integer, text) IS
  'create_shard(prefix || n, n, template) for n = first_shard .. first_shard + count - 1, in one transaction, the template read and checked once.';

-- Written in Rust (src/pg/template_read.rs): the template's tables locked, then read at a
-- snapshot taken after the locks (sql/template_read.sql).
CREATE OR REPLACE FUNCTION snowflake_id_internal.template_read(template oid)
RETURNS TABLE (kind text, rel oid, name text, detail text, deps text)
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'template_read_wrapper'
-- Its plan's estimated cost is high (a recursive walk) and its real cost a millisecond:
-- compiling it would cost more than running it. Policies are read back as text, and floats
-- in them must come out exact.
SET jit = off SET extra_float_digits = 3;
COMMENT ON FUNCTION snowflake_id_internal.template_read(oid) IS
  'create_shard''s reading of a template schema: its tables locked, then what the shards would copy and run, at a snapshot taken after the locks.';

-- An index's definition but for its name and its table's: pg_get_indexdef from USING on
-- (method, columns, operator classes, INCLUDE, storage parameters, predicate), after UNIQUE.
-- An index LIKE made from another has the other's shape (NULL: not an index of a table).
CREATE OR REPLACE FUNCTION snowflake_id_internal.index_shape(idx oid) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN (SELECT CASE WHEN starts_with(x.def, x.head) THEN u.u || substr(x.def, length(x.head) + 1) END
          FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
          JOIN pg_namespace n ON n.oid = t.relnamespace,
               LATERAL (SELECT CASE WHEN i.indisunique THEN 'UNIQUE ' ELSE '' END) u(u),
               LATERAL (SELECT pg_get_indexdef(i.indexrelid),
                               format('CREATE %sINDEX %I ON %I.%I ', u.u, c.relname, n.nspname, t.relname)) x(def, head)
         WHERE i.indexrelid = idx);
COMMENT ON FUNCTION snowflake_id_internal.index_shape(oid) IS
  'An index''s definition without its name or its table''s (pg_get_indexdef from USING on): equal for an index and its copy made by LIKE.';

-- Gives table copy (made from template table tpl_table by LIKE) the template's replica
-- identity, FULL, NOTHING or USING INDEX (identity: template_read's detail): for an index,
-- the copy's index of the same shape (index_shape; LIKE names the copies of indexes after
-- their new table). A template whose identity index is gone has the identity NOTHING in
-- effect (PostgreSQL's rule), and so gets its copy.
CREATE OR REPLACE FUNCTION snowflake_id_internal.copy_replica_identity(tpl_table oid, copy regclass, identity text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    shape text;
    idx name;
BEGIN
    IF identity IN ('FULL', 'NOTHING') THEN
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY %s', copy, identity);
        RETURN;
    END IF;
    SELECT snowflake_id_internal.index_shape(i.indexrelid) INTO shape FROM pg_index i
     WHERE i.indrelid = tpl_table AND i.indisreplident;
    IF NOT FOUND THEN
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY NOTHING', copy);
        RETURN;
    END IF;
    SELECT c.relname INTO idx FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     WHERE i.indrelid = copy AND snowflake_id_internal.index_shape(i.indexrelid) = shape
     ORDER BY i.indexrelid LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table % has no copy of its template''s replica identity index (%)', copy, shape
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    EXECUTE format('ALTER TABLE %s REPLICA IDENTITY USING INDEX %I', copy, idx);
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.copy_replica_identity(oid, regclass, text) IS
  'Gives a table copy made by LIKE its template table''s replica identity (an index: the copy''s index of the same definition).';

-- The template form of create_shard and create_shards: the template's tables locked and read
-- once (snowflake_id_internal.template_read), then each shard made and filled.
CREATE OR REPLACE FUNCTION snowflake_id_internal.create_shards_from(schema_names text[], shards integer[], template text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tpl oid;
    other text;
    refused text;
    untrusted text;
    tables oid[];
    names text[];
    rls_rel oid[];
    rls text[];
    policy_rel oid[];
    policy_name text[];
    policy_def text[];
    policy_deps text[];
    identity_rel oid[];
    identity text[];
    s text;
    kind "char";
    made oid;
    key record;
    deps text;
    fn text;
BEGIN
    IF octet_length(template) > 63 THEN
        RAISE EXCEPTION 'template schema name "%" is too long: % bytes, at most 63', template, octet_length(template)
            USING ERRCODE = 'name_too_long';
    END IF;
    -- System schemas hold no tables of ours (pg_catalog's are pinned, so the template would
    -- look empty), and a temporary schema's would be another session's.
    IF template LIKE 'pg\_%' OR template = 'information_schema' THEN
        RAISE EXCEPTION 'schema "%" cannot be a template: it is a system or temporary schema', template
            USING ERRCODE = 'reserved_name';
    END IF;
    tpl := to_regnamespace(quote_ident(template));
    IF tpl IS NULL THEN
        RAISE EXCEPTION 'template schema "%" does not exist', template USING ERRCODE = 'invalid_schema_name';
    END IF;
    IF template = ANY (schema_names) THEN
        RAISE EXCEPTION 'schema % cannot be its own template', quote_ident(template)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The shard catalog's lock first, as create_shard takes it, then the template's tables.
    LOCK TABLE @extschema@.snowflake_id_shard IN SHARE ROW EXCLUSIVE MODE;
    SELECT array_to_string((array_agg(r.detail ORDER BY r.detail) FILTER (WHERE r.kind = 'other'))[1:10], ', ')
           || CASE WHEN count(*) FILTER (WHERE r.kind = 'other') > 10
                   THEN format(' and %s more', count(*) FILTER (WHERE r.kind = 'other') - 10) ELSE '' END,
           string_agg(r.detail, '; ' ORDER BY r.detail) FILTER (WHERE r.kind = 'refused'),
           string_agg(DISTINCT r.detail, ', ') FILTER (WHERE r.kind = 'untrusted'),
           array_agg(r.rel ORDER BY r.name) FILTER (WHERE r.kind = 'table'),
           array_agg(r.name ORDER BY r.name) FILTER (WHERE r.kind = 'table'),
           array_agg(r.rel ORDER BY r.rel, r.detail) FILTER (WHERE r.kind = 'rls'),
           array_agg(r.detail ORDER BY r.rel, r.detail) FILTER (WHERE r.kind = 'rls'),
           array_agg(r.rel ORDER BY r.rel, r.name) FILTER (WHERE r.kind = 'policy'),
           array_agg(r.name ORDER BY r.rel, r.name) FILTER (WHERE r.kind = 'policy'),
           array_agg(r.detail ORDER BY r.rel, r.name) FILTER (WHERE r.kind = 'policy'),
           array_agg(coalesce(r.deps, '') ORDER BY r.rel, r.name) FILTER (WHERE r.kind = 'policy'),
           array_agg(r.rel ORDER BY r.rel) FILTER (WHERE r.kind = 'identity'),
           array_agg(r.detail ORDER BY r.rel) FILTER (WHERE r.kind = 'identity')
      INTO other, refused, untrusted, tables, names, rls_rel, rls, policy_rel, policy_name, policy_def, policy_deps,
           identity_rel, identity
      FROM snowflake_id_internal.template_read(tpl) r;
    IF other IS NOT NULL THEN
        RAISE EXCEPTION 'template schema % is not a plain schema of tables: it holds %', quote_ident(template), other
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF untrusted IS NOT NULL THEN
        RAISE EXCEPTION 'template schema % uses code its shards would run that the caller does not trust: %',
            quote_ident(template), untrusted
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Use functions, operators, types and the like owned by you or by a superuser in the template''s tables.';
    END IF;
    IF refused IS NOT NULL THEN
        RAISE EXCEPTION 'template schema % has what create_shard does not copy: %', quote_ident(template), refused
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Make these in each shard after create_shard, or leave them out of the template.';
    END IF;

    FOR i IN 1 .. cardinality(schema_names) LOOP
        s := schema_names[i];
        fn := snowflake_id_internal.make_shard(s, shards[i]);
        FOR j IN 1 .. coalesce(cardinality(tables), 0) LOOP
            -- A table the shard has already is left as it is; anything else by that name (say,
            -- an index LIKE named after an earlier table) is in the way.
            SELECT c.relkind INTO kind FROM pg_class c
             WHERE c.relnamespace = to_regnamespace(quote_ident(s)) AND c.relname = names[j];
            CONTINUE WHEN kind IN ('r', 'p');
            IF FOUND THEN
                RAISE EXCEPTION 'relation %.% already exists and is not a table', quote_ident(s), quote_ident(names[j])
                    USING ERRCODE = 'duplicate_table',
                          HINT = 'An index of an earlier table may have taken the name (CREATE TABLE ... LIKE names indexes after their table): rename the template''s table.';
            END IF;
            EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING ALL)', s, names[j], template, names[j]);
            made := format('%I.%I', s, names[j])::regclass;
            -- A single-column bigint (or snowflake) primary key is the shard's ID.
            SELECT a.attname, a.attidentity INTO key FROM pg_index i
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
             WHERE i.indrelid = made AND i.indisprimary AND i.indnkeyatts = 1
               AND a.atttypid IN ('bigint'::regtype, '@extschema@.snowflake'::regtype);
            IF FOUND THEN
                IF key.attidentity <> '' THEN
                    EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I DROP IDENTITY', s, names[j], key.attname);
                END IF;
                EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I SET DEFAULT %I.%I()', s, names[j], key.attname, s, fn);
            END IF;
            FOR k IN 1 .. coalesce(cardinality(rls_rel), 0) LOOP
                CONTINUE WHEN rls_rel[k] <> tables[j];
                EXECUTE format('ALTER TABLE %I.%I %s ROW LEVEL SECURITY', s, names[j], rls[k]);
            END LOOP;
            FOR k IN 1 .. coalesce(cardinality(policy_rel), 0) LOOP
                CONTINUE WHEN policy_rel[k] <> tables[j];
                EXECUTE format('CREATE POLICY %I ON %I.%I ', policy_name[k], s, names[j]) || policy_def[k];
                -- The copy is made from the policy's text: it must name exactly what the
                -- checked original names (a name can resolve to another object than it did).
                SELECT coalesce(string_agg(DISTINCT d.refclassid || ':' || d.refobjid, ' '
                                           ORDER BY d.refclassid || ':' || d.refobjid), '')
                  INTO deps FROM pg_policy p JOIN pg_depend d ON d.classid = 'pg_policy'::regclass AND d.objid = p.oid
                 WHERE p.polrelid = made AND p.polname = policy_name[k]
                   AND NOT (d.refclassid = 'pg_class'::regclass AND d.refobjid = made);
                IF deps <> policy_deps[k] THEN
                    RAISE EXCEPTION 'the copy of policy % on %.% refers to other objects than the template''s', quote_ident(policy_name[k]), quote_ident(template), quote_ident(names[j])
                        USING ERRCODE = 'object_not_in_prerequisite_state',
                              DETAIL = format('The template''s refers to %s, the copy to %s (pg_depend classid:objid).', policy_deps[k], deps);
                END IF;
            END LOOP;
            FOR k IN 1 .. coalesce(cardinality(identity_rel), 0) LOOP
                CONTINUE WHEN identity_rel[k] <> tables[j];
                PERFORM snowflake_id_internal.copy_replica_identity(tables[j], made, identity[k]);
            END LOOP;
        END LOOP;
        IF fn <> 'next_id' THEN
            EXECUTE format('ALTER FUNCTION %I.%I() RENAME TO next_id', s, fn);
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.create_shards_from(text[], integer[], text) IS
  'The template form of create_shard and create_shards: the template locked, read and checked once, then each shard made and filled.';
-- ==== sql/convert.sql ====
-- convert_column: adopting a table whose bigint key comes from bigserial or an identity.
--
-- In place and in one transaction: the table is locked ACCESS EXCLUSIVE (as ALTER TABLE
-- would), the sequence is moved up to the largest value the column holds (rows inserted
-- with explicit IDs can be above the sequence's last_value), and the column's default
-- becomes next_id(shard, <sequence>), whose IDs are all above the sequence's newest value.
-- The column keeps its type, values, constraints and the foreign keys pointing at it.
--
-- A bigserial column keeps its sequence (still OWNED BY the column). An identity column's
-- sequence is part of the identity and goes with it (DROP IDENTITY), so a new sequence of
-- the same name takes its place, OWNED BY the column; roles that may INSERT into the table
-- get USAGE on it, as next_id needs (an identity needed no grant). ALWAYS becomes an
-- ordinary default: an explicit ID is then accepted.
--
-- Runs with the caller's rights (SECURITY INVOKER): only the table's owner can convert it.
-- search_path is pinned; every name is quoted.
CREATE OR REPLACE FUNCTION convert_column(tbl regclass, col name, shard integer) RETURNS regclass
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel record;
    att record;
    seq regclass;
    seq_schema name;
    seq_name name;
    dep "char";
    others text;
    newest bigint;
    highest bigint;
    grantee text;
BEGIN
    -- A shard outside the layout: make_id's own error (22003, naming the valid range).
    PERFORM @extschema@.make_id(clock_timestamp(), shard);
    SELECT c.relkind, c.relowner, c.relacl INTO rel FROM pg_class c WHERE c.oid = tbl;
    IF rel.relkind IS DISTINCT FROM 'r' THEN
        RAISE EXCEPTION '% is not an ordinary table', tbl
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'convert_column converts a column of a table (not a view, sequence, partitioned table or foreign table).';
    END IF;
    IF NOT pg_has_role(current_user, rel.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', tbl USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- No insert may slip in between reading the largest ID and the new default.
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);

    SELECT a.attnum, a.atttypid, a.attidentity INTO att
      FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column % of table % does not exist', quote_ident(col), tbl
            USING ERRCODE = 'undefined_column';
    END IF;
    IF att.atttypid NOT IN ('bigint'::regtype, '@extschema@.snowflake'::regtype) THEN
        RAISE EXCEPTION 'column % of table % is %, not bigint: IDs need 64 bits',
                quote_ident(col), tbl, format_type(att.atttypid, NULL)
            USING ERRCODE = 'datatype_mismatch',
                  HINT = format('ALTER TABLE %s ALTER COLUMN %I TYPE bigint first (it rewrites the table and the columns of foreign keys pointing at it must follow).', tbl, col);
    END IF;
    -- The sequence the column owns: 'a' for serial/bigserial (OWNED BY), 'i' for an identity.
    SELECT d.objid::regclass, d.deptype INTO seq, dep
      FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
     WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
       AND d.refobjid = tbl AND d.refobjsubid = att.attnum AND d.deptype IN ('a', 'i');
    IF seq IS NULL THEN
        RAISE EXCEPTION 'column % of table % has no sequence of its own', quote_ident(col), tbl
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'convert_column converts a bigserial or identity column (one whose sequence is OWNED BY it).';
    END IF;
    -- Another column's default drawing from the same sequence would keep drawing small
    -- numbers from a sequence that now holds IDs, or collide with them.
    SELECT string_agg(format('%s.%I', ad.adrelid::regclass, a.attname), ', ' ORDER BY 1) INTO others
      FROM pg_depend d
      JOIN pg_attrdef ad ON d.classid = 'pg_attrdef'::regclass AND ad.oid = d.objid
      JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
     WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = seq
       AND (ad.adrelid, ad.adnum) <> (tbl, att.attnum);
    IF others IS NOT NULL THEN
        RAISE EXCEPTION 'sequence % is shared: the default of % also uses it', seq, others
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Give the other columns their own sequence first.';
    END IF;

    EXECUTE format('SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM %s', seq) INTO newest;
    EXECUTE format('SELECT max(%I) FROM %s', col, tbl) INTO highest;
    highest := greatest(newest, highest, 0);
    -- Refuse a table that could take no insert afterwards: no ID of this shard above it (the
    -- last ID of the shard: the horizon's time and the largest counter, those of the largest ID).
    IF highest >= @extschema@.make_id(@extschema@.id_timestamp(9223372036854775807), shard,
                                      @extschema@.id_sequence(9223372036854775807)) THEN
        RAISE EXCEPTION 'column % of table % holds %: no snowflake ID of shard % is above it', quote_ident(col), tbl, highest, shard
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;

    IF dep = 'i' THEN
        SELECT n.nspname, c.relname INTO seq_schema, seq_name
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = seq;
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', tbl, col);
        -- Owned by the table's owner (OWNED BY requires it), whoever converts.
        EXECUTE format('CREATE SEQUENCE %I.%I AS bigint', seq_schema, seq_name);
        seq := format('%I.%I', seq_schema, seq_name)::regclass;
        EXECUTE format('ALTER SEQUENCE %s OWNER TO %s', seq, rel.relowner::regrole);
        EXECUTE format('ALTER SEQUENCE %s OWNED BY %s.%I', seq, tbl, col);
        -- Whoever may INSERT: on the table, or on some of its columns.
        FOR grantee IN
            SELECT DISTINCT CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END
              FROM (SELECT (aclexplode(rel.relacl)).*
                    UNION ALL
                    SELECT (aclexplode(a.attacl)).* FROM pg_attribute a
                     WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped AND a.attacl IS NOT NULL) x
              LEFT JOIN pg_roles r ON r.oid = x.grantee
             WHERE x.privilege_type = 'INSERT' AND x.grantee <> rel.relowner
        LOOP
            EXECUTE format('GRANT USAGE ON SEQUENCE %s TO %s', seq, grantee);
        END LOOP;
    ELSE
        -- A serial's sequence may be AS integer (serial widened to bigint): IDs need bigint.
        EXECUTE format('ALTER SEQUENCE %s AS bigint MAXVALUE 9223372036854775807 NO CYCLE', seq);
    END IF;
    IF highest > 0 THEN
        PERFORM setval(seq, highest, true);
    END IF;
    EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %I.next_id(%s, %L::regclass)',
                   tbl, col, '@extschema@', shard, seq);
    RETURN seq;
END
$$;
COMMENT ON FUNCTION convert_column(regclass, name, integer) IS
  'Turns a bigserial or identity key (bigint, or changed to snowflake) into DEFAULT next_id(shard, its sequence), in place; every new ID is above every existing one. Returns the sequence.';

-- == What the router's views and rebalancer read on a node ==
-- ==== sql/node_status.sql ====
-- What snowflake_id_router's views node_status and shard_status, and its rebalancer, read on
-- a data node, in few queries however many shards it holds. Two limits shape it:
--   * cost: each shard is reached by index lookups (its schema by name, the schema's
--     relations through pg_depend), never by a join whose plan could scan a catalog once
--     per shard, so the work grows with the shards and not with their square;
--   * locks: a table's size, a sequence's value and a count each lock the relation until
--     the transaction ends, and a node's lock table holds max_locks_per_transaction x
--     max_connections of them (6,400 by default), fewer than thousands of shards need (about
--     six a shard). node_stats takes none; shard_stats answers for at most `count` shards a
--     call, from the first above `after`, and the router asks again for the next ones.
-- Rows are the statistics system's estimate (pg_stat_get_live_tuples), bytes the sizes on
-- disk: counting every row of every shard would read the whole node. Internal, like the
-- rest of snowflake_id_node.

-- The node: its replication settings, the shards it serves and their rows, the database's
-- size, the moves running on it and what moves left (snowflake_id_node.leftovers(): move
-- records, slots, publications, subscriptions, fences, markers), the WAL the slots hold
-- and the lag of its standbys. Slot and WAL figures read the WAL position of a primary, or the
-- replayed one on a standby. It takes no relation lock.
CREATE OR REPLACE FUNCTION snowflake_id_node.node_stats(
    OUT wal_level text, OUT in_recovery boolean,
    OUT shards integer, OUT rows bigint, OUT bytes bigint,
    OUT moves_running integer, OUT leftovers text[],
    OUT slot_wal_bytes bigint, OUT free_slots integer, OUT free_wal_senders integer,
    OUT standbys integer, OUT sync_standbys integer, OUT standby_lag_bytes bigint)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH here AS (
        SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END AS lsn),
    shard_tables AS (
        -- One hash over pg_class (no index leads with relnamespace), no lock taken.
        SELECT sum(pg_stat_get_live_tuples(c.oid)) AS rows
          FROM pg_class c
         WHERE c.relkind IN ('r', 'p')
           AND c.relnamespace IN (SELECT n.oid FROM @extschema@.snowflake_id_shards s
                                   JOIN pg_namespace n ON n.nspname = s.schema_name)),
    -- A move's record here, and whether its mover lives (holds the shard locks); what a
    -- running move uses is not left over: its record, and what is named for it
    -- (sfid_<router>_<move>, its key being <router>/<move>), or, while any move runs, a
    -- subscription's table-sync slot (pg_<subscription>_sync_<table>_<system>).
    running AS (
        SELECT m.key, 'sfid_' || replace(m.key, '/', '_') AS name
          FROM snowflake_id_node.move m WHERE snowflake_id_node.alive(m.shards)),
    senders AS (
        SELECT r.sync_state, r.replay_lsn FROM pg_stat_replication r
          JOIN pg_stat_activity a ON a.pid = r.pid
         WHERE a.datid IS NULL)                      -- physical: a logical walsender has a database
    SELECT current_setting('wal_level'), pg_is_in_recovery(),
           (SELECT count(*) FROM @extschema@.snowflake_id_shards)::integer,
           coalesce((SELECT rows FROM shard_tables), 0)::bigint, pg_database_size(current_database()),
           (SELECT count(*) FROM running)::integer,
           ARRAY(SELECT x FROM snowflake_id_node.leftovers() x
                  WHERE NOT EXISTS (SELECT FROM running r
                                     WHERE x ~ (r.name || '(?![0-9])') OR x LIKE 'move record ' || r.key || ' %'
                                        OR x ~ '^replication slot pg_[0-9]+_sync_')
                  ORDER BY 1),
           (SELECT max(pg_wal_lsn_diff((SELECT lsn FROM here), r.restart_lsn))::bigint FROM pg_replication_slots r),
           current_setting('max_replication_slots')::integer - (SELECT count(*) FROM pg_replication_slots)::integer,
           current_setting('max_wal_senders')::integer
               - (SELECT count(*) FROM pg_stat_activity a WHERE a.backend_type = 'walsender')::integer,
           (SELECT count(*) FROM senders)::integer,
           (SELECT count(*) FROM senders WHERE sync_state IN ('sync', 'quorum'))::integer,
           (SELECT max(pg_wal_lsn_diff((SELECT lsn FROM here), replay_lsn))::bigint FROM senders);
END;
COMMENT ON FUNCTION snowflake_id_node.node_stats() IS
  'This node for snowflake_id_router''s node_status: replication settings, shards served and their rows (estimated), the database''s size, moves running and what moves left, WAL held by slots, standby lag; no relation lock.';

-- The shards this node serves, in order: all a by_shard_count plan needs, without a lock.
CREATE OR REPLACE FUNCTION snowflake_id_node.served_shards() RETURNS integer[]
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN ARRAY(SELECT s.shard FROM @extschema@.snowflake_id_shards s ORDER BY s.shard);
COMMENT ON FUNCTION snowflake_id_node.served_shards() IS
  'The shards this node serves, in order, for snowflake_id_router''s rebalancer.';

-- The shards this node serves, at most count of them from the first above after, in shard
-- order: each one's tables, their rows (estimated) and bytes, the newest ID its sequence
-- issued (next_id keeps the newest ID in it), the time in it and how far that is ahead of
-- this node's clock (after a failover to a standby whose clock is behind, or a move to such
-- a node, next_id issues IDs above the newest until the clock catches up), and, when recent,
-- how many rows hold an ID made in the last minute: those of the bigint columns of its plain
-- tables (partitions included) defaulting to the shard's next_id() (or to its sequence),
-- counted by the index of each such column, so the work grows with the rows written in that
-- minute, not with the table.
CREATE OR REPLACE FUNCTION snowflake_id_node.shard_stats(recent boolean, after integer, count integer)
RETURNS TABLE (shard integer, schema_name text, tables integer, rows bigint, bytes bigint,
               newest_id bigint, newest_at timestamptz, ahead_of_clock interval, ids_last_minute bigint)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s record;
    nsp oid;
    fn oid;
    col record;
    n bigint;
BEGIN
    FOR s IN SELECT x.shard, x.schema_name, x.sequence FROM @extschema@.snowflake_id_shards x
              WHERE x.shard > after ORDER BY x.shard LIMIT count LOOP
        shard := s.shard;
        schema_name := s.schema_name;
        nsp := to_regnamespace(quote_ident(s.schema_name));
        SELECT count(c.oid)::integer, coalesce(sum(pg_stat_get_live_tuples(c.oid)), 0)::bigint,
               coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
          INTO tables, rows, bytes
          FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
         WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = nsp AND d.classid = 'pg_class'::regclass
           AND c.relkind IN ('r', 'p');
        -- A sequence dropped by hand leaves its OID in the registry: no newest ID then.
        newest_id := CASE WHEN EXISTS (SELECT FROM pg_class q WHERE q.oid = s.sequence AND q.relkind = 'S')
                          THEN pg_sequence_last_value(s.sequence) END;
        newest_at := @extschema@.id_timestamp(newest_id);
        ahead_of_clock := newest_at - clock_timestamp();
        ids_last_minute := NULL;
        IF recent THEN
            ids_last_minute := 0;
            -- Once, before the query: a lookup by name there ran once per row.
            fn := snowflake_id_internal.shard_function(nsp);
            FOR col IN
                SELECT c.oid::regclass AS rel, a.attname, c.relowner AS owner
                  FROM (SELECT d.objid FROM pg_depend d
                         WHERE d.refclassid = 'pg_proc'::regclass AND d.classid = 'pg_attrdef'::regclass
                           AND d.refobjid = fn
                        UNION
                        SELECT d.objid FROM pg_depend d
                         WHERE d.refclassid = 'pg_class'::regclass AND d.classid = 'pg_attrdef'::regclass
                           AND d.refobjid = s.sequence) dep
                  JOIN pg_attrdef ad ON ad.oid = dep.objid
                  JOIN pg_class c ON c.oid = ad.adrelid AND c.relkind = 'r'
                  JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum AND a.atttypid = 'bigint'::regtype
            LOOP
                -- Each plain table on its own (ONLY: an inheritance child may be a foreign
                -- table), a bigint column against a bigint: pg_catalog's operator and the
                -- column's index. Run as the table's owner under restricted-operation rules:
                -- planning it folds what the owner's index expressions call.
                -- (An owner who may not read its own table there is not asked: unknown.)
                IF has_schema_privilege(col.owner, nsp, 'USAGE') AND has_table_privilege(col.owner, col.rel, 'SELECT') THEN
                    n := snowflake_id_node.as_owner(col.owner, format('SELECT count(*)::text FROM ONLY %s WHERE %I >= %s',
                             col.rel, col.attname, @extschema@.make_id(clock_timestamp() - interval '1 minute', s.shard)));
                ELSE
                    n := NULL;
                END IF;
                ids_last_minute := ids_last_minute + n;
            END LOOP;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.shard_stats(boolean, integer, integer) IS
  'At most count shards this node serves, from the first above after, for snowflake_id_router''s shard_status and rebalancer: tables, rows (estimated), bytes, newest ID, its time and lead over the clock, and (recent) rows with an ID made in the last minute (counted as each table''s owner).';

REVOKE ALL ON FUNCTION snowflake_id_node.node_stats(), snowflake_id_node.served_shards(),
    snowflake_id_node.shard_stats(boolean, integer, integer) FROM PUBLIC;

-- == id_mask(id), id_unmask(masked): the server's key from a file (src/pg/mask_key_file.rs) ==
-- 0.2.0 read the key from the setting snowflake_id.mask_key, which pg_read_all_settings
-- members could read; the key now lives in the file snowflake_id.mask_key_file names, read
-- by each backend. PARALLEL RESTRICTED: a parallel worker would read the file afresh, and
-- could get a newer key than its leader's. (Their descriptions: sql/applications.sql.)
ALTER FUNCTION id_mask(bigint) PARALLEL RESTRICTED;
ALTER FUNCTION id_unmask(bigint) PARALLEL RESTRICTED;

-- == The snowflake type's casts and smallint comparisons (sql/snowflake_casts.sql) ==
-- 0.2.0's casts to integer, numeric and json took bigint: pg_upgrade restores an extension's
-- members one by one, casts sorted by name, and "snowflake int4" came before the binary cast
-- "snowflake int8" it needed ("argument of cast function must match or be binary-coercible
-- from source data type"). Every cast function now takes snowflake itself.
DROP CAST (snowflake AS integer);
DROP CAST (snowflake AS numeric);
DROP CAST (snowflake AS json);
-- ==== sql/snowflake_casts.sql ====
-- The snowflake type's casts to other types and from smallint, and its comparisons with
-- smallint: new in 0.3.0, so the upgrade from 0.2.0 includes this file as it is (after
-- dropping 0.2.0's casts to integer, numeric and json).
--
-- snowflake -> bigint is the only implicit cast from snowflake (sql/snowflake_type.sql): every
-- bigint function and operator accepts a snowflake and resolves to the same int8 function it
-- does for bigint. bigint also converts itself implicitly to numeric, real, double precision
-- and oid; a second such path from snowflake would make `id + id`, `sum(id)` or `abs(id)`
-- ambiguous, or resolve them to their double precision versions (preferred in the numeric
-- category), which round IDs. So mixing a snowflake with those types (`id / 2.5`,
-- `COALESCE(id, 1.5)`, `power(id, 2)`) needs `id::bigint`; pg_test/sql/050_snowflake_type.sql
-- checks that every other use of bigint resolves alike. The casts to every type bigint casts
-- to are on assignment (INSERT, UPDATE, PL/pgSQL) and explicit, by bigint's own C functions.
--
-- Every cast function takes exactly the cast's source type (bigint's C function declared
-- under snowflake): a cast whose function takes bigint needs the binary cast snowflake ->
-- bigint to exist when it is made, which pg_upgrade does not ensure: it restores an
-- extension's members one by one, casts sorted by name ("snowflake int4" before "snowflake
-- int8"), and no dependency orders one cast after another.

CREATE FUNCTION snowflake(smallint) RETURNS snowflake LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int28';
COMMENT ON FUNCTION snowflake(smallint) IS 'A smallint as a snowflake (the cast).';
CREATE CAST (smallint AS snowflake) WITH FUNCTION snowflake(smallint) AS IMPLICIT;
COMMENT ON CAST (smallint AS snowflake) IS 'A smallint as a snowflake (implicit, so that COALESCE(id, 1::smallint) stays snowflake).';
CREATE FUNCTION snowflake_to_int2(snowflake) RETURNS smallint LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int82';
COMMENT ON FUNCTION snowflake_to_int2(snowflake) IS 'The cast from snowflake to smallint (bigint''s).';
CREATE CAST (snowflake AS smallint) WITH FUNCTION snowflake_to_int2(snowflake) AS ASSIGNMENT;
COMMENT ON CAST (snowflake AS smallint) IS 'A snowflake as a smallint, by bigint''s own conversion (on assignment).';
CREATE FUNCTION snowflake_to_int4(snowflake) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int84';
COMMENT ON FUNCTION snowflake_to_int4(snowflake) IS 'The cast from snowflake to integer (bigint''s).';
CREATE CAST (snowflake AS integer) WITH FUNCTION snowflake_to_int4(snowflake) AS ASSIGNMENT;
COMMENT ON CAST (snowflake AS integer) IS 'A snowflake as an integer, by bigint''s own conversion (on assignment).';
CREATE FUNCTION snowflake_to_numeric(snowflake) RETURNS numeric LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int8_numeric';
COMMENT ON FUNCTION snowflake_to_numeric(snowflake) IS 'The cast from snowflake to numeric (bigint''s).';
CREATE CAST (snowflake AS numeric) WITH FUNCTION snowflake_to_numeric(snowflake) AS ASSIGNMENT;
COMMENT ON CAST (snowflake AS numeric) IS 'A snowflake as a numeric, by bigint''s own conversion (on assignment: not implicit, see this file''s header).';
CREATE FUNCTION snowflake_to_float4(snowflake) RETURNS real LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'i8tof';
COMMENT ON FUNCTION snowflake_to_float4(snowflake) IS 'The cast from snowflake to real (bigint''s).';
CREATE CAST (snowflake AS real) WITH FUNCTION snowflake_to_float4(snowflake) AS ASSIGNMENT;
COMMENT ON CAST (snowflake AS real) IS 'A snowflake as a real, by bigint''s own conversion (on assignment).';
CREATE FUNCTION snowflake_to_float8(snowflake) RETURNS double precision LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'i8tod';
COMMENT ON FUNCTION snowflake_to_float8(snowflake) IS 'The cast from snowflake to double precision (bigint''s).';
CREATE CAST (snowflake AS double precision) WITH FUNCTION snowflake_to_float8(snowflake) AS ASSIGNMENT;
COMMENT ON CAST (snowflake AS double precision) IS 'A snowflake as a double precision, by bigint''s own conversion (on assignment).';
CREATE FUNCTION snowflake_to_oid(snowflake) RETURNS oid LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'i8tooid';
COMMENT ON FUNCTION snowflake_to_oid(snowflake) IS 'The cast from snowflake to oid (bigint''s).';
CREATE CAST (snowflake AS oid) WITH FUNCTION snowflake_to_oid(snowflake) AS ASSIGNMENT;
COMMENT ON CAST (snowflake AS oid) IS 'A snowflake as an oid, by bigint''s own conversion (on assignment).';
CREATE FUNCTION snowflake_to_money(snowflake) RETURNS money LANGUAGE internal STABLE STRICT PARALLEL SAFE AS 'int8_cash';
COMMENT ON FUNCTION snowflake_to_money(snowflake) IS 'The cast from snowflake to money (bigint''s).';
CREATE CAST (snowflake AS money) WITH FUNCTION snowflake_to_money(snowflake) AS ASSIGNMENT;
COMMENT ON CAST (snowflake AS money) IS 'A snowflake as money, by bigint''s own conversion (on assignment).';
CREATE FUNCTION snowflake_to_bit(snowflake, integer) RETURNS bit LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'bitfromint8';
COMMENT ON FUNCTION snowflake_to_bit(snowflake, integer) IS 'The cast from snowflake to bit(n) (bigint''s).';
CREATE CAST (snowflake AS bit) WITH FUNCTION snowflake_to_bit(snowflake, integer);
COMMENT ON CAST (snowflake AS bit) IS 'A snowflake as bit(n), by bigint''s own conversion (explicit).';


CREATE FUNCTION snowflake_to_json(snowflake) RETURNS json
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'id_to_json_wrapper';
COMMENT ON FUNCTION snowflake_to_json(snowflake) IS 'The cast from snowflake to json: id_to_json.';
CREATE CAST (snowflake AS json) WITH FUNCTION snowflake_to_json(snowflake);
COMMENT ON CAST (snowflake AS json) IS 'A snowflake as a JSON string, exact in JavaScript: what the json and jsonb builders write for it.';

-- snowflake vs smallint
CREATE FUNCTION snowflake_int2_eq(snowflake, smallint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int82eq';
COMMENT ON FUNCTION snowflake_int2_eq(snowflake, smallint) IS 'snowflake equal to smallint (bigint''s comparison).';
CREATE FUNCTION snowflake_int2_ne(snowflake, smallint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int82ne';
COMMENT ON FUNCTION snowflake_int2_ne(snowflake, smallint) IS 'snowflake not equal to smallint (bigint''s comparison).';
CREATE FUNCTION snowflake_int2_lt(snowflake, smallint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int82lt';
COMMENT ON FUNCTION snowflake_int2_lt(snowflake, smallint) IS 'snowflake less than smallint (bigint''s comparison).';
CREATE FUNCTION snowflake_int2_le(snowflake, smallint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int82le';
COMMENT ON FUNCTION snowflake_int2_le(snowflake, smallint) IS 'snowflake less than or equal to smallint (bigint''s comparison).';
CREATE FUNCTION snowflake_int2_gt(snowflake, smallint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int82gt';
COMMENT ON FUNCTION snowflake_int2_gt(snowflake, smallint) IS 'snowflake greater than smallint (bigint''s comparison).';
CREATE FUNCTION snowflake_int2_ge(snowflake, smallint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int82ge';
COMMENT ON FUNCTION snowflake_int2_ge(snowflake, smallint) IS 'snowflake greater than or equal to smallint (bigint''s comparison).';
CREATE OPERATOR = (LEFTARG = snowflake, RIGHTARG = smallint, FUNCTION = snowflake_int2_eq, COMMUTATOR = =, NEGATOR = <>,
    RESTRICT = eqsel, JOIN = eqjoinsel, MERGES);
CREATE OPERATOR <> (LEFTARG = snowflake, RIGHTARG = smallint, FUNCTION = snowflake_int2_ne, COMMUTATOR = <>, NEGATOR = =,
    RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = snowflake, RIGHTARG = smallint, FUNCTION = snowflake_int2_lt, COMMUTATOR = >, NEGATOR = >=,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = snowflake, RIGHTARG = smallint, FUNCTION = snowflake_int2_le, COMMUTATOR = >=, NEGATOR = >,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = snowflake, RIGHTARG = smallint, FUNCTION = snowflake_int2_gt, COMMUTATOR = <, NEGATOR = <=,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = snowflake, RIGHTARG = smallint, FUNCTION = snowflake_int2_ge, COMMUTATOR = <=, NEGATOR = <,
    RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE FUNCTION snowflake_int2_cmp(snowflake, smallint) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'btint82cmp';
COMMENT ON FUNCTION snowflake_int2_cmp(snowflake, smallint) IS 'Three-way comparison of snowflake and smallint for btree (bigint''s).';

-- smallint vs snowflake
CREATE FUNCTION int2_snowflake_eq(smallint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int28eq';
COMMENT ON FUNCTION int2_snowflake_eq(smallint, snowflake) IS 'smallint equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int2_snowflake_ne(smallint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int28ne';
COMMENT ON FUNCTION int2_snowflake_ne(smallint, snowflake) IS 'smallint not equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int2_snowflake_lt(smallint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int28lt';
COMMENT ON FUNCTION int2_snowflake_lt(smallint, snowflake) IS 'smallint less than snowflake (bigint''s comparison).';
CREATE FUNCTION int2_snowflake_le(smallint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int28le';
COMMENT ON FUNCTION int2_snowflake_le(smallint, snowflake) IS 'smallint less than or equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int2_snowflake_gt(smallint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int28gt';
COMMENT ON FUNCTION int2_snowflake_gt(smallint, snowflake) IS 'smallint greater than snowflake (bigint''s comparison).';
CREATE FUNCTION int2_snowflake_ge(smallint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int28ge';
COMMENT ON FUNCTION int2_snowflake_ge(smallint, snowflake) IS 'smallint greater than or equal to snowflake (bigint''s comparison).';
CREATE OPERATOR = (LEFTARG = smallint, RIGHTARG = snowflake, FUNCTION = int2_snowflake_eq, COMMUTATOR = =, NEGATOR = <>,
    RESTRICT = eqsel, JOIN = eqjoinsel, MERGES);
CREATE OPERATOR <> (LEFTARG = smallint, RIGHTARG = snowflake, FUNCTION = int2_snowflake_ne, COMMUTATOR = <>, NEGATOR = =,
    RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = smallint, RIGHTARG = snowflake, FUNCTION = int2_snowflake_lt, COMMUTATOR = >, NEGATOR = >=,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = smallint, RIGHTARG = snowflake, FUNCTION = int2_snowflake_le, COMMUTATOR = >=, NEGATOR = >,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = smallint, RIGHTARG = snowflake, FUNCTION = int2_snowflake_gt, COMMUTATOR = <, NEGATOR = <=,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = smallint, RIGHTARG = snowflake, FUNCTION = int2_snowflake_ge, COMMUTATOR = <=, NEGATOR = <,
    RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE FUNCTION int2_snowflake_cmp(smallint, snowflake) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'btint28cmp';
COMMENT ON FUNCTION int2_snowflake_cmp(smallint, snowflake) IS 'Three-way comparison of smallint and snowflake for btree (bigint''s).';

-- smallint beside snowflake, and smallint's own operators with smallint, integer and bigint,
-- as integer's above.
ALTER OPERATOR FAMILY snowflake_ops USING btree ADD
    OPERATOR 1 < (snowflake, smallint),
    OPERATOR 2 <= (snowflake, smallint),
    OPERATOR 3 = (snowflake, smallint),
    OPERATOR 4 >= (snowflake, smallint),
    OPERATOR 5 > (snowflake, smallint),
    FUNCTION 1 (snowflake, smallint) snowflake_int2_cmp(snowflake, smallint),
    OPERATOR 1 < (smallint, snowflake),
    OPERATOR 2 <= (smallint, snowflake),
    OPERATOR 3 = (smallint, snowflake),
    OPERATOR 4 >= (smallint, snowflake),
    OPERATOR 5 > (smallint, snowflake),
    FUNCTION 1 (smallint, snowflake) int2_snowflake_cmp(smallint, snowflake),
    OPERATOR 1 < (smallint, smallint), OPERATOR 2 <= (smallint, smallint), OPERATOR 3 = (smallint, smallint),
    OPERATOR 4 >= (smallint, smallint), OPERATOR 5 > (smallint, smallint),
    FUNCTION 1 (smallint, smallint) btint2cmp(smallint, smallint),
    OPERATOR 1 < (smallint, integer), OPERATOR 2 <= (smallint, integer), OPERATOR 3 = (smallint, integer),
    OPERATOR 4 >= (smallint, integer), OPERATOR 5 > (smallint, integer),
    FUNCTION 1 (smallint, integer) btint24cmp(smallint, integer),
    OPERATOR 1 < (integer, smallint), OPERATOR 2 <= (integer, smallint), OPERATOR 3 = (integer, smallint),
    OPERATOR 4 >= (integer, smallint), OPERATOR 5 > (integer, smallint),
    FUNCTION 1 (integer, smallint) btint42cmp(integer, smallint),
    OPERATOR 1 < (smallint, bigint), OPERATOR 2 <= (smallint, bigint), OPERATOR 3 = (smallint, bigint),
    OPERATOR 4 >= (smallint, bigint), OPERATOR 5 > (smallint, bigint),
    FUNCTION 1 (smallint, bigint) btint28cmp(smallint, bigint),
    OPERATOR 1 < (bigint, smallint), OPERATOR 2 <= (bigint, smallint), OPERATOR 3 = (bigint, smallint),
    OPERATOR 4 >= (bigint, smallint), OPERATOR 5 > (bigint, smallint),
    FUNCTION 1 (bigint, smallint) btint82cmp(bigint, smallint);

-- == Every function's declaration written by hand, and every description ==
-- ==== sql/instagram.sql ====
-- Instagram's layout, the core of snowflake_id: next_id, the decoders and make_id. The
-- functions written in Rust (src/sql/instagram.rs) are declared by cargo pgrx, save next_id's
-- two column-default forms, plain fmgr functions declared here; each function's description
-- is its COMMENT here, and nowhere else. Every statement can run again (CREATE OR REPLACE,
-- COMMENT), so an upgrade script includes this file as it is (scripts/assemble-sql).

CREATE OR REPLACE FUNCTION next_id(shard integer, seq regclass) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'next_id_wrapper';
COMMENT ON FUNCTION next_id(integer, regclass) IS
  'Next ID for a logical shard (0-8191) from a sequence: ms since 2011-08-24 21:07:01.721 UTC << 23 | shard << 10 | counter; never repeats, strictly increases per sequence.';

CREATE OR REPLACE FUNCTION next_id(seq regclass) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'next_id_continuing_wrapper';
COMMENT ON FUNCTION next_id(regclass) IS
  'Next ID from a shard''s sequence, for the shard of the newest ID it holds (create_shard sets it; or setval(seq, make_id(now(), shard))): next_id(shard, seq) without restating the shard.';

COMMENT ON FUNCTION id_timestamp(bigint) IS 'Time an ID was made, exact to the millisecond.';
COMMENT ON FUNCTION id_shard(bigint) IS 'Logical shard (0-8191) an ID was made for.';
COMMENT ON FUNCTION id_sequence(bigint) IS 'Per-shard counter (0-1023) of an ID within its millisecond.';
COMMENT ON FUNCTION make_id(timestamptz, integer, integer) IS
  'The ID for a time (truncated to its millisecond), shard and counter; make_id(ts) is the smallest ID of that millisecond, for ranges and partition bounds.';

CREATE OR REPLACE FUNCTION id_decode(id bigint, OUT ts timestamptz, OUT shard integer, OUT seq integer)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (@extschema@.id_timestamp(id), @extschema@.id_shard(id), @extschema@.id_sequence(id));
COMMENT ON FUNCTION id_decode(bigint) IS 'An ID taken apart: its time (exact to the millisecond), shard and counter.';
-- ==== sql/other_ids.sql ====
-- Other people's IDs: decoders and generation by layout name, the time inside UUIDs, ULIDs
-- and ObjectIDs. The functions written in Rust (src/sql/other_ids.rs) are declared by cargo
-- pgrx, save id_decode by layout, a plain fmgr function (it builds its record itself)
-- declared here; each function's description is its COMMENT here, and nowhere else. Every
-- statement can run again, so an upgrade script includes this file as it is.

CREATE OR REPLACE FUNCTION id_decode(id bigint, layout text, OUT ts timestamptz, OUT fields jsonb)
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_decode_layout';
COMMENT ON FUNCTION id_decode(bigint, text) IS 'An ID of a named layout taken apart: its time (exact to the layout''s unit) and its fields by their names in that layout.';
CREATE OR REPLACE FUNCTION id_decode(id bigint, layout text, epoch timestamptz, OUT ts timestamptz, OUT fields jsonb)
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_decode_layout';
COMMENT ON FUNCTION id_decode(bigint, text, timestamptz) IS 'An ID of a named layout taken apart, its time counted from a deployment''s own epoch: its time and its fields by name.';

COMMENT ON FUNCTION id_timestamp(bigint, text) IS 'Time an ID of a named layout (instagram, twitter, discord, sonyflake, pgedge, mastodon, tsid) was made, exact to the layout''s unit.';
COMMENT ON FUNCTION id_timestamp(bigint, text, timestamptz) IS 'Time an ID of a named layout was made, counting from a deployment''s own epoch (a whole millisecond) instead of the layout''s.';
COMMENT ON FUNCTION id_fields(bigint, text) IS 'The fields below an ID''s time in a named layout, as a JSON object keyed by their names in that layout (e.g. worker, process, increment).';
COMMENT ON FUNCTION next_id(integer, regclass, text) IS 'Next ID in a named layout (twitter, discord, pgedge or instagram) for a node from a sequence: the same state and guarantees as next_id(shard, seq).';
COMMENT ON FUNCTION next_id(integer, regclass, text, timestamptz) IS 'Next ID in a named layout counting time from a deployment''s own epoch (a whole millisecond), e.g. 2026-01-01 for Twitter''s layout lasts to 2095.';
COMMENT ON FUNCTION uuid_timestamp(uuid) IS 'Time a UUID of version 1 or 6 (100 ns since 1582-10-15, shown to the microsecond) or 7 (milliseconds) was made; other versions raise an error.';
COMMENT ON FUNCTION ulid_timestamp(text) IS 'Time a ULID (26 Crockford base32 characters, any case) was made, exact to the millisecond.';
COMMENT ON FUNCTION objectid_timestamp(text) IS 'Time a MongoDB ObjectID (24 hexadecimal characters) was made, exact to the second.';
-- ==== sql/applications.sql ====
-- IDs in applications: the text form and masks, the snowflake type's casts and operators.
-- The functions are written in Rust (src/sql/applications.rs) and declared by cargo pgrx;
-- each one's description is its COMMENT here, and nowhere else. (The snowflake type:
-- sql/snowflake_type.sql; convert_column: sql/convert.sql.) Every statement can run again,
-- so an upgrade script includes this file as it is.

COMMENT ON FUNCTION id_to_text(bigint) IS 'The 13-character Crockford base32 text form of an ID (TSID''s alphabet); sorts like the ID.';
COMMENT ON FUNCTION id_from_text(text) IS 'The ID of a 13-character base32 text form; case-insensitive, I and L read as 1, O as 0.';
COMMENT ON FUNCTION id_mask(bigint, text) IS 'The masked public form of an ID under a key (32 hex digits): a keyed permutation of 0 to 2^63-1.';
COMMENT ON FUNCTION id_unmask(bigint, text) IS 'The ID a masked public ID stands for, under the key that masked it.';
COMMENT ON FUNCTION id_mask(bigint) IS 'The masked public form of an ID under the server''s key, read from the file snowflake_id.mask_key_file names.';
COMMENT ON FUNCTION id_unmask(bigint) IS 'The ID a masked public ID stands for, under the server''s key, read from the file snowflake_id.mask_key_file names.';

-- The snowflake type's casts and operators (sql/snowflake_type.sql makes them; the casts of
-- sql/snowflake_casts.sql are described there).
COMMENT ON CAST (snowflake AS bigint) IS 'A snowflake as a bigint, the same 8 bytes (implicit).';
COMMENT ON CAST (bigint AS snowflake) IS 'A bigint as a snowflake, the same 8 bytes (on assignment: INSERT, UPDATE, DEFAULT next_id(...)).';
COMMENT ON CAST (integer AS snowflake) IS 'An integer as a snowflake (implicit, so that COALESCE(id, 0) stays snowflake).';
-- Each operator says what its function says ("snowflake equal to bigint (bigint's
-- comparison)"): the description is written once, on the function.
DO $$
DECLARE
    op oid;
BEGIN
    FOR op IN SELECT d.objid FROM pg_catalog.pg_depend d
               WHERE d.classid = 'pg_catalog.pg_operator'::regclass
                 AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.deptype = 'e'
                 AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'snowflake_id')
    LOOP
        EXECUTE format('COMMENT ON OPERATOR %s IS %L', op::regoperator,
                       obj_description((SELECT o.oprcode FROM pg_catalog.pg_operator o WHERE o.oid = op), 'pg_proc'));
    END LOOP;
END
$$;

-- == alter_shards on the node (new in 0.3.0) ==
-- ==== sql/node_ddl.sql ====
-- The node side of alter_shards (snowflake_id_router): one statement applied to the
-- template schema and to every shard's schema of this node in one transaction, so the node
-- is all-old or all-new, and recorded in that transaction under the router's key for the
-- change, so that a run resumed after an interruption knows this node is done.
--
-- The statement is the router's text with %I standing for the schema (quoted, as format()
-- quotes it), each a name standing alone, and %% for a percent sign; no other % is accepted.
-- It runs with search_path = pg_catalog, pg_temp: names outside pg_catalog are written
-- qualified (%I.posts). A node with a move record refuses it (no_moves_here).

-- The statement for one schema, parsed (not run) by PostgreSQL's parser: its command tag,
-- or an error when it is not exactly one schema change that can run in a transaction block
-- and runs no query (CREATE TABLE AS, SELECT INTO and materialized views are refused).
CREATE OR REPLACE FUNCTION snowflake_id_node.ddl_statement(ddl text) RETURNS text
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ddl_statement_wrapper';
COMMENT ON FUNCTION snowflake_id_node.ddl_statement(text) IS
  'Command tag of a statement alter_shards may run on every shard (one schema change that can run in a transaction block); an error otherwise.';

-- The template's command tag, as every shard's statement has it: each %I a name standing
-- alone (PostgreSQL's scanner finds a name exactly there, nothing joined to it: in a string
-- constant, a dollar quote or a comment a schema's name holding a quote would end it), %%
-- a percent sign and no other %, and, with a name in each place, one schema change that
-- runs in a transaction block and runs no query (ddl_statement's rules); an error otherwise.
CREATE OR REPLACE FUNCTION snowflake_id_node.ddl_template(ddl text) RETURNS text
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ddl_template_wrapper';
COMMENT ON FUNCTION snowflake_id_node.ddl_template(text) IS
  'Command tag of an alter_shards template (%I for the schema, each a name standing alone; %% a percent sign); an error otherwise.';

-- The statement for one schema: %I replaced by the schema's name, quoted, after the template
-- is checked (ddl_template), and parsed again as this schema's statement: the same one
-- statement, the same command tag, whatever the name.
CREATE OR REPLACE FUNCTION snowflake_id_node.ddl_for(ddl text, schema_name text) RETURNS text
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tag text := snowflake_id_node.ddl_template(ddl);
    n integer := (SELECT count(*) FROM regexp_matches(ddl, '%[%I]', 'g') m WHERE m[1] = '%I');
    statement text;
BEGIN
    statement := format(ddl, VARIADIC array_fill(schema_name, ARRAY[n]));
    IF snowflake_id_node.ddl_statement(statement) IS DISTINCT FROM tag THEN
        RAISE EXCEPTION 'alter_shards: the statement for schema % is not the template''s %', quote_ident(schema_name), tag
            USING ERRCODE = 'syntax_error';
    END IF;
    RETURN statement;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.ddl_for(text, text) IS
  'An alter_shards statement for one schema: %I becomes the schema''s name, quoted; %% a percent sign; checked to be the template''s statement.';

-- What each change did here, keyed by the router's name for it ('<router8>/<change id>').
-- Dumped with the database: a restored node still knows the changes it has.
CREATE TABLE snowflake_id_node.schema_change (
    key text PRIMARY KEY,
    ddl text NOT NULL,
    template text NOT NULL,
    schemas integer NOT NULL,
    applied timestamptz NOT NULL
);
COMMENT ON TABLE snowflake_id_node.schema_change IS
  'Changes alter_shards applied on this node, each in the transaction that applied it.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_node.schema_change', '');

-- The room a change needs in the lock table: every schema's objects stay locked until the
-- node's one transaction commits. per_schema locks were counted on the template; NULL
-- when they fit, else the error to raise (53400) with the max_locks_per_transaction
-- that would fit them.
CREATE OR REPLACE FUNCTION snowflake_id_node.lock_room(per_schema integer, schemas integer) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
    needed bigint := per_schema::bigint * schemas;
BEGIN
    SELECT * INTO t FROM snowflake_id_node.lock_table();   -- (sql/node.sql)
    IF needed <= t.capacity - t.in_use THEN
        RETURN NULL;
    END IF;
    RETURN format('the change takes about %s locks here (%s per schema, %s schemas) in one transaction, and the lock table has room for %s more (max_locks_per_transaction = %s, for %s processes; %s in use)',
        needed, per_schema, schemas, t.capacity - t.in_use, current_setting('max_locks_per_transaction'), t.processes, t.in_use)
        || format(E'\nHINT: Set max_locks_per_transaction to at least %s on this node and restart it.',
                  ceil((needed + t.in_use) * 1.2 / t.processes));
END
$$;
COMMENT ON FUNCTION snowflake_id_node.lock_room(integer, integer) IS
  'NULL when a change taking per_schema locks on each of schemas fits in the lock table; otherwise why not.';

-- The role a schema change runs as in a schema: the owner of its tables, sequences and
-- views, under restricted-operation rules (snowflake_id_node.as_owner). A change re-checks
-- constraints, rebuilds indexes and fills defaults: what the tables' owner defined runs,
-- and must not run as the router's superuser. Run as that owner, the change can do what
-- the owner could do by hand, and what it runs has the owner's rights. A schema whose
-- relations several roles own, one of them not a superuser, is refused (42501): no one role
-- runs the change safely there. A schema without relations: its owner.
CREATE OR REPLACE FUNCTION snowflake_id_node.change_role(schema_name text) RETURNS oid
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    nsp oid := to_regnamespace(quote_ident(schema_name));
    owners oid[];
BEGIN
    SELECT array_agg(DISTINCT c.relowner ORDER BY c.relowner) INTO owners
      FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
     WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = nsp AND d.classid = 'pg_class'::regclass
       AND d.deptype = 'n' AND c.relkind IN ('r', 'p', 'S', 'v', 'm', 'f');
    IF owners IS NULL THEN
        RETURN (SELECT n.nspowner FROM pg_namespace n WHERE n.oid = nsp);
    ELSIF cardinality(owners) = 1 THEN
        RETURN owners[1];
    ELSIF EXISTS (SELECT FROM unnest(owners) o WHERE NOT snowflake_id_node.made_by_superuser(o)) THEN
        RAISE EXCEPTION 'the relations of schema % belong to several roles (%): a schema change runs as the owner of a shard''s tables',
            quote_ident(schema_name), (SELECT string_agg(o::regrole::text, ', ') FROM unnest(owners) o)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Give the schema''s tables one owner (ALTER TABLE ... OWNER TO), then call alter_shards again.';
    END IF;
    RETURN (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.change_role(text) IS
  'The role alter_shards runs a change as in a schema: its relations'' one owner (42501 for several, one not a superuser).';

-- A schema change never reaches a shard that a move holds on this node: its sealed copy
-- (hidden; the move drops it only while its definition is the one sealed), its incoming
-- copy (hidden; made from the template and compared at the seal) or its source while it is
-- copied (the seal would find it changed and undo the move). Skipping those would leave a
-- shard without the change once its move completes, on a node recorded as having it; so
-- while this node has a move record, whoever's, the change is refused (55000): the move is
-- completed or undone first, then the change called again. The move table is held (SHARE)
-- to the end of the change's transaction: no move records a step here meanwhile (its step
-- waits, bounded by its own lock_timeout). Waits at most the transaction's lock_timeout.
CREATE OR REPLACE FUNCTION snowflake_id_node.no_moves_here() RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    held text;
BEGIN
    LOCK TABLE snowflake_id_node.move IN SHARE MODE;
    SELECT string_agg(format('move %s (%s, %s) of shard(s) %s', m.key, m.role, m.state, array_to_string(m.shards, ', ')),
                      '; ' ORDER BY m.key)
      INTO held FROM (SELECT * FROM snowflake_id_node.move x ORDER BY x.key LIMIT 3) m;
    IF held IS NOT NULL THEN
        RAISE EXCEPTION 'this node has shards in a move: %', held
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'A schema change must not reach a move''s sealed or incoming copy, nor a shard being copied.',
                  HINT = 'Complete or undo the move first (SELECT * FROM repair_moves() on its router once its mover is gone), then call alter_shards again.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.no_moves_here() IS
  'Refuses (55000) a schema change on this node while it has a move record; holds the move table (SHARE) to the end of the transaction.';

-- The statement ddl (for schema_name) run as change_role(schema_name).
CREATE OR REPLACE FUNCTION snowflake_id_node.change_schema(ddl text, schema_name text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_node.as_owner(snowflake_id_node.change_role(schema_name), snowflake_id_node.ddl_for(ddl, schema_name));
END
$$;
COMMENT ON FUNCTION snowflake_id_node.change_schema(text, text) IS
  'Runs alter_shards'' statement on schema_name as the owner of its tables, under restricted-operation rules.';

-- Up front, on every node before any applies: the change is tried on the template and
-- undone, which checks it here (it parses, its objects exist, it is allowed) and counts
-- the locks it takes per schema. 'applied' when this node has the change already, 'ready'
-- when it can take it; an error (the change's own, or 53400) otherwise.
CREATE OR REPLACE FUNCTION snowflake_id_node.schema_change_check(key text, ddl text, template text, lock_timeout text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    per_schema integer;
    too_many text;
BEGIN
    PERFORM set_config('lock_timeout', lock_timeout, true);
    -- One change at a time on a node: a session of an interrupted run may still be applying.
    PERFORM snowflake_id_node.own_lock(hashtext('snowflake_id_node.schema_change'), 0, false, false, true);
    IF EXISTS (SELECT FROM snowflake_id_node.schema_change c WHERE c.key = schema_change_check.key) THEN
        RETURN 'applied';
    END IF;
    PERFORM snowflake_id_node.ddl_for(ddl, template);
    PERFORM snowflake_id_node.no_moves_here();
    IF to_regnamespace(quote_ident(template)) IS NULL THEN
        RAISE EXCEPTION 'template schema % does not exist', quote_ident(template) USING ERRCODE = 'invalid_schema_name';
    END IF;
    BEGIN
        per_schema := (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid());
        PERFORM snowflake_id_node.change_schema(ddl, template);
        per_schema := (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid()) - per_schema;
        RAISE EXCEPTION USING ERRCODE = 'SFDRY';  -- undoes the try
    EXCEPTION WHEN SQLSTATE 'SFDRY' THEN
    END;
    too_many := snowflake_id_node.lock_room(greatest(per_schema, 1), (SELECT count(*) FROM @extschema@.snowflake_id_shard)::integer + 1);
    IF too_many IS NOT NULL THEN
        RAISE EXCEPTION '%', split_part(too_many, E'\nHINT: ', 1)
            USING ERRCODE = 'configuration_limit_exceeded', HINT = split_part(too_many, E'\nHINT: ', 2);
    END IF;
    RETURN 'ready';
END
$$;
COMMENT ON FUNCTION snowflake_id_node.schema_change_check(text, text, text, text) IS
  'alter_shards'' check before any node changes: tries the change on the template and undoes it, checks the lock table''s room; applied, ready, or an error.';

-- The change itself: template, then every shard's schema (in shard order), one
-- transaction, recorded in it. Returns the number of schemas changed (that of the record,
-- when this node had the change already). Each statement waits at most lock_timeout for
-- its locks; writers to a shard wait until the node's transaction commits.
CREATE OR REPLACE FUNCTION snowflake_id_node.schema_change_apply(key text, ddl text, template text, lock_timeout text) RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    done integer;
    per_schema integer;
    too_many text;
    schemas integer := 1;
    at text := template;  -- the schema being changed
    st text;
    msg text;
    det text;
    hnt text;
BEGIN
    PERFORM set_config('lock_timeout', lock_timeout, true);
    PERFORM snowflake_id_node.own_lock(hashtext('snowflake_id_node.schema_change'), 0, false, false, true);
    SELECT c.schemas INTO done FROM snowflake_id_node.schema_change c WHERE c.key = schema_change_apply.key;
    IF FOUND THEN
        RETURN done;
    END IF;
    PERFORM snowflake_id_node.ddl_for(ddl, template);
    PERFORM snowflake_id_node.no_moves_here();
    IF to_regnamespace(quote_ident(template)) IS NULL THEN
        RAISE EXCEPTION 'template schema % does not exist', quote_ident(template) USING ERRCODE = 'invalid_schema_name';
    END IF;
    -- One block for the whole change (a block per schema would be a subtransaction per
    -- schema, thousands of them): an error names the schema it stopped at.
    BEGIN
        per_schema := (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid());
        PERFORM snowflake_id_node.change_schema(ddl, template);
        per_schema := (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid()) - per_schema;
        too_many := snowflake_id_node.lock_room(greatest(per_schema, 1), (SELECT count(*) FROM @extschema@.snowflake_id_shard)::integer);
        IF too_many IS NOT NULL THEN
            RAISE EXCEPTION '%', split_part(too_many, E'\nHINT: ', 1)
                USING ERRCODE = 'configuration_limit_exceeded', HINT = split_part(too_many, E'\nHINT: ', 2);
        END IF;
        FOR at IN SELECT s.schema_name FROM @extschema@.snowflake_id_shard s ORDER BY s.shard LOOP
            PERFORM snowflake_id_node.change_schema(ddl, at);
            schemas := schemas + 1;
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        msg := format('schema %s: %s', quote_ident(at), msg);
        CASE WHEN det = '' AND hnt = '' THEN RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg;
             WHEN det = '' THEN RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg, HINT = hnt;
             WHEN hnt = '' THEN RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg, DETAIL = det;
             ELSE RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg, DETAIL = det, HINT = hnt;
        END CASE;
    END;
    INSERT INTO snowflake_id_node.schema_change VALUES (key, ddl, template, schemas, clock_timestamp());
    RETURN schemas;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.schema_change_apply(text, text, text, text) IS
  'alter_shards on this node: the statement on the template and every shard''s schema, in one transaction, recorded under key; idempotent.';

-- The shards of this node whose tables differ from the template's (template_status with
-- shards => true): how many there are, and the first one's first difference.
CREATE OR REPLACE FUNCTION snowflake_id_node.shards_unlike(template text, OUT checked integer, OUT differing integer, OUT first text)
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tpl text[] := snowflake_id_node.fingerprint(template);
    s record;
    fp text[];
BEGIN
    checked := 0;
    differing := 0;
    FOR s IN SELECT x.schema_name FROM @extschema@.snowflake_id_shard x ORDER BY x.shard LOOP
        checked := checked + 1;
        fp := snowflake_id_node.fingerprint(s.schema_name);
        IF fp <> tpl THEN
            differing := differing + 1;
            first := coalesce(first, snowflake_id_node.fingerprint_difference(fp, tpl,
                format('shard schema %s', quote_ident(s.schema_name)), format('template %s', quote_ident(template))));
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.shards_unlike(text) IS
  'How many shard schemas of this node were checked against the template, how many differ, and the first difference.';

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_node FROM PUBLIC;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_node FROM PUBLIC;
