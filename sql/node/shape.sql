-- What a shard's schema is made of, for a move: its tables, its fingerprint (what both
-- sides compare), what refuses a move and what outside it depends on it. Part of the node
-- side of snowflake_id_router's protocol (sql/node/node.sql says how the parts fit).

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
-- table, column, constraint, index, trigger, rule, policy, free sequence, function (with
-- its definition) and any other object in the schema, each as PostgreSQL prints it with search_path = pg_catalog, the
-- schema's own name standing as %I, so that a template and a shard made from it
-- (create_shard(..., template => ...)) read alike:
--   table posts: table
--   table photos: partitioned table partitioned by RANGE (id)
--   table photos_2024_01: table, partition of %I.photos FOR VALUES FROM ('...') TO ('...')
--   column posts.edits: integer NOT NULL DEFAULT 0, position 4
--   constraint on posts: PRIMARY KEY (id)
--   index on posts: CREATE INDEX ON %I.posts USING btree (user_id, id)
--   table recent_posts: view  SELECT posts.id, ... FROM %I.posts WHERE ...; WITH (security_barrier=true)
-- (an index marked " (invalid)", or " (replica identity)" when it is the table's; a trigger
-- not in its ordinary ENABLE state marked " (disabled)", " (enabled always)" or " (enabled replica)").
-- Not in it: names of constraints and indexes (LIKE ... INCLUDING ALL makes its own), the
-- default and identity of a bigint primary key column (create_shard sets it to the shard's
-- next_id()), NOT NULL constraints as such (PostgreSQL 18 lists them as constraints, 15
-- does not: the column says NOT NULL), storage parameters, comments, a move's own fence
-- triggers and marker table, and what create_shard makes besides the tables (next_id(),
-- table_id_seq). Each catalog is read by the table's OID (an index lookup): a node may
-- hold thousands of shards. One query for the whole schema: a query per table and catalog
-- took 1.7 times as long (a move fingerprints its schemas four times, once under the fence).
-- A partition key, and a partition's parent and bounds, are printed: a copy partitioned
-- otherwise would put rows elsewhere, or refuse them.
CREATE OR REPLACE FUNCTION snowflake_id_node.fingerprint(schema_name text) RETURNS text[]
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
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
        SELECT x.oid, x.name, x.kind, c.relpersistence, c.relrowsecurity, c.relforcerowsecurity, c.relreplident, c.reloptions
          FROM snowflake_id_node.tables(nsp) x JOIN pg_class c ON c.oid = x.oid),
    lines (l) AS (
        SELECT format('table %s: %s%s%s%s%s', quote_ident(t.name),
                   CASE t.relpersistence WHEN 'u' THEN 'unlogged ' WHEN 't' THEN 'temporary ' ELSE '' END,
                   CASE t.kind WHEN 'r' THEN 'table' WHEN 'p' THEN 'partitioned table' WHEN 'v' THEN 'view'
                        WHEN 'm' THEN 'materialized view' ELSE 'foreign table' END,
                   CASE WHEN t.kind = 'p' THEN ' partitioned by ' || pg_get_partkeydef(t.oid) ELSE '' END
                   || coalesce((SELECT format(', partition of %s %s', i.inhparent::regclass, pg_get_expr(c.relpartbound, c.oid))
                                  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                                 WHERE i.inhrelid = t.oid AND c.relispartition), ''),
                   CASE WHEN t.relrowsecurity THEN ', row level security' || CASE WHEN t.relforcerowsecurity THEN ' forced' ELSE '' END
                        ELSE '' END,
                   CASE t.relreplident WHEN 'f' THEN ', replica identity full' WHEN 'n' THEN ', replica identity nothing'
                        WHEN 'i' THEN ', replica identity index' ELSE '' END || CASE WHEN t.kind IN ('v', 'm') THEN format(' %s%s', pg_get_viewdef(t.oid), ' WITH (' || array_to_string(t.reloptions, ', ') || ')') ELSE '' END)
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
        SELECT format('trigger on %s: %s%s', quote_ident(t.name), pg_get_triggerdef(g.oid),
                   CASE g.tgenabled WHEN 'D' THEN ' (disabled)' WHEN 'A' THEN ' (enabled always)' WHEN 'R' THEN ' (enabled replica)' END)
          FROM t JOIN pg_trigger g ON g.tgrelid = t.oid
         WHERE NOT g.tgisinternal AND g.tgfoid <> 'snowflake_id_node.fence()'::regprocedure
        UNION ALL
        SELECT format('rule on %s: %s', quote_ident(t.name), pg_get_ruledef(r.oid))
          FROM t JOIN pg_rewrite r ON r.ev_class = t.oid WHERE r.rulename <> '_RETURN'
        UNION ALL
        SELECT format('policy on %s: %s %s FOR %s TO %s USING (%s) WITH CHECK (%s)', quote_ident(t.name),
                   quote_ident(p.polname), CASE WHEN p.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END,
                   CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
                   (SELECT string_agg(x.r, ', ' ORDER BY x.r COLLATE "C")
                      FROM (SELECT CASE WHEN r = 0 THEN 'PUBLIC' ELSE r::regrole::text END FROM unnest(p.polroles) r) x(r)),
                   pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
          FROM t JOIN pg_policy p ON p.polrelid = t.oid
        UNION ALL
        -- Everything else in the schema: sequences no column owns (not table_id_seq), types, functions
        -- (not the shard's own next_id()), ... (through the namespace: not every next_id() of the node)
        SELECT CASE WHEN d.classid = 'pg_class'::regclass THEN
                    (SELECT format('sequence %s: %s INCREMENT %s MINVALUE %s MAXVALUE %s START %s CACHE %s%s',
                                   quote_ident(c.relname), format_type(q.seqtypid, NULL), q.seqincrement, q.seqmin, q.seqmax,
                                   q.seqstart, q.seqcache, CASE WHEN q.seqcycle THEN ' CYCLE' ELSE '' END)
                       FROM pg_class c JOIN pg_sequence q ON q.seqrelid = c.oid
                      WHERE c.oid = d.objid AND c.relname <> 'table_id_seq'
                        AND NOT EXISTS (SELECT FROM pg_depend o WHERE o.classid = 'pg_class'::regclass AND o.objid = c.oid
                                           AND o.refclassid = 'pg_class'::regclass AND o.deptype IN ('a', 'i')))
               -- (a function with its definition: a move's copy is made from the target's template)
               ELSE (SELECT concat_ws(' ', o.type, o.identity) || coalesce(': ' || (SELECT pg_get_functiondef(p.oid) FROM pg_proc p
                        WHERE d.classid = 'pg_proc'::regclass AND p.oid = d.objid AND p.prokind IN ('f', 'p')), '')
                       FROM pg_identify_object(d.classid, d.objid, 0) o) END
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
-- an unlogged or foreign table, an inheritance child, a partition of a table in another
-- schema, a materialized view or rule in them would not arrive (a view comes with the
-- target's copy made from its template, whose definition the fingerprint compares; a partitioned
-- table moves with its partitions in its schema: each published and copied as a table,
-- the target's partitioned alike, which the fingerprint compares); a trigger enabled ALWAYS or REPLICA
-- would fire a second time for each row on the target (an ordinary one does not fire there:
-- the rows arrive with session_replication_role = replica); a table without primary key
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
    nsps oid[] := snowflake_id_node.namespace_oids(schemas);
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
          FROM tabs t WHERE t.kind NOT IN ('r', 'p', 'v', 'm')
        UNION ALL
        SELECT 2, format('unlogged table %s cannot move: logical replication does not carry its rows', t.oid::regclass)
          FROM tabs t JOIN pg_class c ON c.oid = t.oid WHERE c.relpersistence = 'u'
        UNION ALL
        SELECT 3, format('table %s cannot move: it is %s of %s', t.oid::regclass,
                         CASE WHEN c.relispartition THEN 'a partition, in another schema,' ELSE 'an inheritance child' END,
                         i.inhparent::regclass)
          FROM tabs t JOIN pg_inherits i ON i.inhrelid = t.oid JOIN pg_class c ON c.oid = t.oid
          JOIN pg_class p ON p.oid = i.inhparent
         WHERE NOT (c.relispartition AND p.relnamespace = c.relnamespace)
        UNION ALL
        SELECT 4, format('trigger %s on table %s cannot move: it is enabled %s, so it fires in replicated writes and would fire '
                         'again on the target for each row the move copies', quote_ident(g.tgname), t.oid::regclass,
                         CASE g.tgenabled WHEN 'A' THEN 'ALWAYS' ELSE 'REPLICA' END)
          FROM tabs t JOIN pg_trigger g ON g.tgrelid = t.oid
         WHERE NOT g.tgisinternal AND g.tgenabled IN ('A', 'R') AND g.tgfoid <> 'snowflake_id_node.fence()'::regprocedure
        UNION ALL
        SELECT 5, format('rule %s on %s %s cannot move: rules are not carried', quote_ident(r.rulename),
                         CASE t.kind WHEN 'v' THEN 'view' ELSE 'table' END, t.oid::regclass)
          FROM tabs t JOIN pg_rewrite r ON r.ev_class = t.oid WHERE r.rulename <> '_RETURN' AND t.kind IN ('r', 'v')
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
        SELECT 8, d.why FROM (SELECT snowflake_id_node.dependent_refusal(schemas, schemas, own_publication)) d(why)
         WHERE d.why IS NOT NULL
    ) x ORDER BY x.prio, x.why LIMIT 1;
    RETURN why;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.refusal(text[], text) IS
  'Why the schemas cannot move (the first reason, naming the object), or NULL.';

-- Objects outside the schemas allowed that depend on something in the schemas nsps (the
-- schemas, their relations and functions, their tables' row types), which DROP SCHEMA ...
-- CASCADE of nsps would drop. own_publication (the move's own) is not counted. Its cost
-- grows with nsps only: a drop of a thousand copies in batches looks at each batch, not at
-- every copy still to drop each time.
CREATE OR REPLACE FUNCTION snowflake_id_node.dependents_outside(nsps oid[], allowed oid[], own_publication text)
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
               END) = ANY (allowed), false)
       AND NOT (x.classid = 'pg_publication_namespace'::regclass
                AND (SELECT p.pubname FROM pg_publication_namespace pn JOIN pg_publication p ON p.oid = pn.pnpubid
                      WHERE pn.oid = x.objid) IS NOT DISTINCT FROM own_publication)
       AND NOT (x.classid = 'pg_publication_rel'::regclass
                AND (SELECT p.pubname FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid
                      WHERE pr.oid = x.objid) IS NOT DISTINCT FROM own_publication);
END;
COMMENT ON FUNCTION snowflake_id_node.dependents_outside(oid[], oid[], text) IS
  'Objects outside the schemas allowed that depend on something in the schemas nsps (DROP SCHEMA ... CASCADE would drop them); own_publication is not counted.';

-- The OIDs of the schemas named (NULL for one that does not exist).
CREATE OR REPLACE FUNCTION snowflake_id_node.namespace_oids(names text[]) RETURNS oid[]
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN ARRAY(SELECT to_regnamespace(quote_ident(s)) FROM unnest(names) WITH ORDINALITY x(s, o) ORDER BY o);
COMMENT ON FUNCTION snowflake_id_node.namespace_oids(text[]) IS 'The OIDs of the schemas named, in order (NULL for one that does not exist).';

-- The first object outside the schemas allowed that depends on something in the schemas
-- given (dependents_outside), described, as the reason a move refuses or keeps the schemas
-- (NULL: none).
CREATE OR REPLACE FUNCTION snowflake_id_node.dependent_refusal(schemas text[], allowed text[], own_publication text) RETURNS text
LANGUAGE sql STABLE CALLED ON NULL INPUT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT format('%s depends on %s, which a move would drop with the old copy',
                  coalesce((SELECT pg_describe_object('pg_class'::regclass, r.ev_class, 0) FROM pg_rewrite r
                             WHERE o.classid = 'pg_rewrite'::regclass AND r.oid = o.objid),
                           pg_describe_object(o.classid, o.objid, 0)),
                  pg_describe_object(o.refclassid, o.refobjid, 0)) AS why
      FROM snowflake_id_node.dependents_outside(snowflake_id_node.namespace_oids(schemas),
                                                snowflake_id_node.namespace_oids(allowed), own_publication) o
     ORDER BY 1 LIMIT 1;
END;
COMMENT ON FUNCTION snowflake_id_node.dependent_refusal(text[], text[], text) IS
  'The first object outside the schemas allowed depending on something in the schemas given, described; NULL if none.';

