-- The node side of snowflake_id_router's protocol, in the internal schema snowflake_id_node
-- (docs/cluster-design.md). Nothing here is for applications: the schema is on no one's
-- search_path, and only its owner (the superuser who created the extension) may use it; the
-- router calls it over its own connections as a superuser. The schema and the move table are
-- sql/node_objects.sql's (made once); every function here is CREATE OR REPLACE, so that a
-- migration loads this same text.
--
-- Moves. A move of shards from a source node to a target node is driven by the router;
-- every step it takes on a node is one call of one function here, one transaction that
-- checks its preconditions, does its work and records it in snowflake_id_node.move (one row
-- per move and node, key '<router8>/<move id>'). What a move makes on a node (marker table,
-- publication, slot, subscription, fence triggers, the target's copies) is named by its
-- record, so whoever removes it later removes exactly that. The schema and the move table
-- are sql/node_objects.sql's (made once); every function here is CREATE OR REPLACE, so a
-- migration includes this file whole.
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
