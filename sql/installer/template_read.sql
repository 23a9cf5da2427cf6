-- create_shard's reading of a template schema ($1, its OID): what the shards would copy, and
-- everything the copies would use or run. snowflake_id_internal.template_read() runs it after
-- it has locked the template's tables, at a snapshot taken after the locks were granted
-- (src/pg/template_read.rs), as the caller. Every catalog is reached through an index, from the
-- template's own objects: the cost does not grow with the number of shards already made.
--
-- One row per finding, (kind, rel, name, detail):
--   table      a table to copy (rel, name)
--   other      an object in the template schema that is not a table (detail: which)
--   refused    something of table rel that create_shard does not copy (detail: what, where, why)
--   untrusted  an object the copies would use or run, owned by a role that is neither the
--              caller nor a superuser, who could change what it does (detail: which, owner);
--              or a function the copies must not call whoever owns it (detail: which, why)
--   rls        row-level security of table rel (detail: ENABLE or FORCE)
--   identity   the replica identity of table rel, when not the default (detail: FULL,
--              NOTHING or USING INDEX), which LIKE does not copy and a move's copy needs
--   policy     policy `name` of table rel; detail: the rest of its CREATE POLICY after
--              "ON table"; deps: what it refers to, besides its table ("classid:objid")
--   options    the storage parameters of table rel (detail: the list ALTER TABLE ... SET takes)
--   key        foreign key `name` of table rel to a table of the template (detail: its
--              definition, the shard's schema as its one %I)
--   trigger    trigger `name` of table rel (detail: its CREATE TRIGGER, the shard's schema
--              as its one %I; deps: its pg_trigger.tgenabled)
--   ftrigger   a trigger whose function is the template's: as trigger, the shard's schema
--              also as %1$I where it names the function (made once the functions are)
--   partition  table rel is a partition of the template's table `name` (detail: its bound,
--              FOR VALUES ... or DEFAULT; deps: how many tables it is under, made in that order)
--   view       a view to copy (rel, name; detail: its options, the list WITH takes; deps: how
--              many of the template's views it reads, through others too, made in that order)
--   matview    a materialized view to copy, with its indexes (as view)
--   function   a function or procedure of the template to copy (rel: its OID; name; detail:
--              the xmin of its pg_proc row, which any change to it since changes)
--   sequence   a sequence to copy (rel, name), but an identity column's (which LIKE copies);
--              detail: its options, as CREATE SEQUENCE takes them; deps: the column owning
--              it (a serial's), as ALTER SEQUENCE ... OWNED BY takes it after the schema
--   default    column `name` of table rel whose default is nextval() of the template's
--              sequence (detail: its name): the copy's takes the shard's sequence
--   watch      a relation the walk went through (src/pg/template_read.rs watches it)
--
-- The trust walk. It starts from what CREATE TABLE ... (LIKE ... INCLUDING ALL) copies of each
-- table: the column types and collations, defaults and generated expressions, constraints,
-- indexes, extended statistics; from the foreign keys, triggers (their functions and WHEN
-- conditions) and policies create_shard copies; and from each view's query (its rule) and a
-- materialized view's indexes.
-- From there it follows, transitively:
--   * everything an object refers to, as PostgreSQL records it (pg_depend, from the object):
--     the functions, operators, types, casts' functions, collations, operator classes in an
--     expression, a type's I/O and support functions, a domain's base type, a range's subtype
--     and functions, an array's element type, an operator's
--     function and estimators, a function's language, and what an SQL-standard body refers to;
--   * what an object consists of, which PostgreSQL records the other way round: a domain's
--     constraints, a composite type's columns, an operator family's operators and support functions, an operator's
--     commutator and negator (not in pg_depend), and, for a table or view reached on the way
--     (a composite type's relation, a sequence, a table an SQL-standard body writes), its
--     defaults, constraints, indexes, triggers, rules, policies and statistics.
-- Only the objects' owners decide trust; the template's tables, their parts and the schemas
-- and extensions on the way are not judged: they are copied, or run nothing. Code a trusted
-- function reaches by name at run time (a PL/pgSQL body) is its owner's responsibility.
--
-- Owners are not enough for the functions the copied parts call, which the walk reads from
-- their expressions as well (PostgreSQL records no dependency on a built-in function: it is
-- pinned). Whoever writes to a shard runs them with their own rights, so a call is refused,
-- whoever owns the function, when the function
--   * runs SQL given as text, or reads relations or schemas named by text, at run time
--     (ts_rewrite, ts_stat, the *_to_xml family; dblink's functions): mallory's query, or
--     mallory's view, would run as the writer, and pg_depend sees none of it;
--   * changes the writer's session (set_config: a search_path putting mallory's schema
--     before pg_catalog);
--   * is not executable by PUBLIC (pg_read_file, lo_export, pg_reload_conf ...), unless it
--     is the caller's own, neither built in nor an extension's: it is a privilege of some
--     roles, which the copies would use on mallory's behalf whenever such a role writes.
WITH RECURSIVE
-- Whether the SQL installed copies sequences, materialized views and functions (0.4.0 on):
-- between a new library and ALTER EXTENSION UPDATE, older SQL would leave them out of the
-- shards, so they are then found as other objects and refused, as that SQL did.
modern(yes) AS (
    SELECT pg_catalog.to_regprocedure('snowflake_id_internal.copy_function(text,text,oid,text,text,text[])') IS NOT NULL),
in_schema AS (
    SELECT d.classid, d.objid FROM pg_catalog.pg_depend d
     WHERE d.refclassid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND d.refobjid = $1
       AND d.deptype = 'n'),
tables AS (
    SELECT c.oid AS rel, c.relname FROM in_schema o JOIN pg_catalog.pg_class c ON c.oid = o.objid
     WHERE o.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND c.relkind IN ('r', 'p')),
views AS (
    SELECT c.oid AS rel, c.relname, c.relkind FROM in_schema o JOIN pg_catalog.pg_class c ON c.oid = o.objid
     WHERE o.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
       AND (c.relkind = 'v' OR (c.relkind = 'm' AND (SELECT m.yes FROM modern m)))),
-- The template's sequences but an identity column's (LIKE copies that one).
sequences AS (
    SELECT c.oid AS rel, c.relname FROM in_schema o JOIN pg_catalog.pg_class c ON c.oid = o.objid
     WHERE o.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND c.relkind = 'S' AND (SELECT m.yes FROM modern m)
       AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend i
                        WHERE i.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND i.objid = c.oid AND i.deptype = 'i')),
-- Defaults that are exactly nextval() of one of them, as PostgreSQL prints it (the schema
-- not on create_shard's path): copied taking the shard's sequence instead.
seq_defaults(rel, attnum, seq) AS (
    SELECT a.adrelid, a.adnum, s.rel FROM tables t JOIN pg_catalog.pg_attrdef a ON a.adrelid = t.rel
      JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_attrdef'::pg_catalog.regclass AND d.objid = a.oid
       AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
      JOIN sequences s ON s.rel = d.refobjid JOIN pg_catalog.pg_namespace n ON n.oid = $1
     WHERE pg_catalog.pg_get_expr(a.adbin, a.adrelid)
           = pg_catalog.format('nextval(%L::regclass)', pg_catalog.format('%I.%I', n.nspname, s.relname))),
-- The template's functions and procedures (not aggregates: refused as other objects).
functions AS (
    SELECT f.oid AS fn, f.proname FROM in_schema o JOIN pg_catalog.pg_proc f ON f.oid = o.objid
     WHERE o.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND f.prokind IN ('f', 'p') AND (SELECT m.yes FROM modern m)),
-- The references of a table's parts that the copy makes to the shard's object of the same
-- name instead of the template's (each has its rows below: key, ftrigger, default): a foreign
-- key's to a table of the template, a trigger's to its function, a default's to the sequence
-- it takes nextval() of. Any other reference to the template's objects is refused.
rewritten(classid, objid, refclassid, refobjid) AS (
    SELECT 'pg_catalog.pg_constraint'::pg_catalog.regclass::oid, k.oid, 'pg_catalog.pg_class'::pg_catalog.regclass::oid, k.confrelid
      FROM tables t JOIN pg_catalog.pg_constraint k ON k.conrelid = t.rel AND k.contype = 'f'
     WHERE k.confrelid IN (SELECT u.rel FROM tables u)
    UNION ALL
    SELECT 'pg_catalog.pg_trigger'::pg_catalog.regclass, g.oid, 'pg_catalog.pg_proc'::pg_catalog.regclass, g.tgfoid
      FROM tables t JOIN pg_catalog.pg_trigger g ON g.tgrelid = t.rel
    UNION ALL
    SELECT 'pg_catalog.pg_attrdef'::pg_catalog.regclass, a.oid, 'pg_catalog.pg_class'::pg_catalog.regclass, q.seq
      FROM seq_defaults q JOIN pg_catalog.pg_attrdef a ON a.adrelid = q.rel AND a.adnum = q.attnum),
-- The template's views each view reads, directly or through others.
view_reads(rel, reads) AS (
    SELECT v.rel, d.refobjid FROM views v JOIN pg_catalog.pg_rewrite w ON w.ev_class = v.rel
      JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass AND d.objid = w.oid
       AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
     WHERE d.refobjid <> v.rel AND d.refobjid IN (SELECT u.rel FROM views u)
    UNION
    SELECT r.rel, d.refobjid FROM view_reads r JOIN pg_catalog.pg_rewrite w ON w.ev_class = r.reads
      JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass AND d.objid = w.oid
       AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
     WHERE d.refobjid <> r.reads AND d.refobjid IN (SELECT u.rel FROM views u)),
-- What the copy takes of each table.
parts(rel, classid, objid) AS (
    SELECT t.rel, 'pg_catalog.pg_attrdef'::pg_catalog.regclass::oid, a.oid
      FROM tables t JOIN pg_catalog.pg_attrdef a ON a.adrelid = t.rel
    UNION ALL
    SELECT t.rel, 'pg_catalog.pg_constraint'::pg_catalog.regclass, k.oid
      FROM tables t JOIN pg_catalog.pg_constraint k ON k.conrelid = t.rel
    UNION ALL
    SELECT t.rel, 'pg_catalog.pg_trigger'::pg_catalog.regclass, g.oid
      FROM tables t JOIN pg_catalog.pg_trigger g ON g.tgrelid = t.rel AND NOT g.tgisinternal
    UNION ALL
    SELECT t.rel, 'pg_catalog.pg_class'::pg_catalog.regclass, i.indexrelid
      FROM tables t JOIN pg_catalog.pg_index i ON i.indrelid = t.rel
    UNION ALL
    SELECT t.rel, 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass, s.oid
      FROM tables t JOIN pg_catalog.pg_statistic_ext s ON s.stxrelid = t.rel
    UNION ALL
    SELECT t.rel, 'pg_catalog.pg_policy'::pg_catalog.regclass, p.oid
      FROM tables t JOIN pg_catalog.pg_policy p ON p.polrelid = t.rel
    UNION ALL
    -- (a view's query, which its copy runs; a materialized view's indexes)
    SELECT v.rel, 'pg_catalog.pg_rewrite'::pg_catalog.regclass, w.oid
      FROM views v JOIN pg_catalog.pg_rewrite w ON w.ev_class = v.rel AND w.rulename = '_RETURN'
    UNION ALL
    SELECT v.rel, 'pg_catalog.pg_class'::pg_catalog.regclass, i.indexrelid
      FROM views v JOIN pg_catalog.pg_index i ON i.indrelid = v.rel
    UNION ALL
    -- (a function of the template: what it refers to, its SQL-standard body's too)
    SELECT f.fn, 'pg_catalog.pg_proc'::pg_catalog.regclass, f.fn FROM functions f),
reached(classid, objid) AS (
    -- What the columns refer to (their types and collations) ...
    SELECT d.refclassid, d.refobjid FROM tables t JOIN pg_catalog.pg_depend d
        ON d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = t.rel AND d.objsubid > 0
     WHERE d.deptype IN ('n', 'a', 'i')
    UNION
    -- ... what a partition key refers to (its operator classes and collations: the copy's
    -- routing runs them) ...
    SELECT d.refclassid, d.refobjid FROM tables t JOIN pg_catalog.pg_partitioned_table k ON k.partrelid = t.rel
      JOIN pg_catalog.pg_depend d
        ON d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = t.rel AND d.objsubid = 0
     WHERE d.deptype = 'n' AND d.refclassid <> 'pg_catalog.pg_namespace'::pg_catalog.regclass
       AND NOT (d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refobjid IN (SELECT u.rel FROM tables u))
    UNION
    -- ... and the parts, besides their own table and its other parts (an index's constraint).
    SELECT d.refclassid, d.refobjid FROM parts p JOIN pg_catalog.pg_depend d
        ON d.classid = p.classid AND d.objid = p.objid
     WHERE d.deptype IN ('n', 'a', 'i')
       AND NOT (d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refobjid = p.rel)
       AND NOT EXISTS (SELECT FROM parts q WHERE q.rel = p.rel AND q.classid = d.refclassid AND q.objid = d.refobjid)
       -- (a foreign key's table and index in the template, a view's tables and views, a
       -- sequence of the template: copied, not run)
       AND NOT (d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
                AND (d.refobjid IN (SELECT t.rel FROM tables t) OR d.refobjid IN (SELECT v.rel FROM views v)
                     OR d.refobjid IN (SELECT q.rel FROM sequences q)
                     OR d.refobjid IN (SELECT q.objid FROM parts q WHERE q.classid = 'pg_catalog.pg_class'::pg_catalog.regclass)))
       -- (a function of the template: copied, and walked as a part)
       AND NOT (d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.refobjid IN (SELECT f.fn FROM functions f))
    UNION
    SELECT e.classid, e.objid FROM reached r CROSS JOIN LATERAL (
        SELECT d.refclassid, d.refobjid FROM pg_catalog.pg_depend d
         WHERE d.classid = r.classid AND d.objid = r.objid AND d.deptype IN ('n', 'a', 'i')
        UNION ALL
        SELECT 'pg_catalog.pg_constraint'::pg_catalog.regclass, k.oid FROM pg_catalog.pg_constraint k
         WHERE r.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND k.contypid = r.objid
           AND k.contypid <> 0  -- (most constraints' contypid is 0: the estimate would be theirs)
        UNION ALL
        SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, y.typrelid FROM pg_catalog.pg_type y
         WHERE r.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND y.oid = r.objid AND y.typrelid <> 0
        UNION ALL
        SELECT 'pg_catalog.pg_amop'::pg_catalog.regclass, o.oid FROM pg_catalog.pg_amop o
         WHERE r.classid = 'pg_catalog.pg_opfamily'::pg_catalog.regclass AND o.amopfamily = r.objid
        UNION ALL
        SELECT 'pg_catalog.pg_amproc'::pg_catalog.regclass, p.oid FROM pg_catalog.pg_amproc p
         WHERE r.classid = 'pg_catalog.pg_opfamily'::pg_catalog.regclass AND p.amprocfamily = r.objid
        UNION ALL
        SELECT 'pg_catalog.pg_operator'::pg_catalog.regclass, x.x FROM pg_catalog.pg_operator o,
               LATERAL (VALUES (o.oprcom), (o.oprnegate)) x(x)
         WHERE r.classid = 'pg_catalog.pg_operator'::pg_catalog.regclass AND o.oid = r.objid AND x.x <> 0
        UNION ALL
        SELECT 'pg_catalog.pg_attrdef'::pg_catalog.regclass, a.oid FROM pg_catalog.pg_attrdef a
         WHERE r.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND a.adrelid = r.objid
        UNION ALL
        SELECT 'pg_catalog.pg_constraint'::pg_catalog.regclass, k.oid FROM pg_catalog.pg_constraint k
         WHERE r.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND k.conrelid = r.objid
        UNION ALL
        SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, i.indexrelid FROM pg_catalog.pg_index i
         WHERE r.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND i.indrelid = r.objid
        UNION ALL
        SELECT 'pg_catalog.pg_trigger'::pg_catalog.regclass, g.oid FROM pg_catalog.pg_trigger g
         WHERE r.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND g.tgrelid = r.objid
        UNION ALL
        SELECT 'pg_catalog.pg_rewrite'::pg_catalog.regclass, w.oid FROM pg_catalog.pg_rewrite w
         WHERE r.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND w.ev_class = r.objid
        UNION ALL
        SELECT 'pg_catalog.pg_policy'::pg_catalog.regclass, p.oid FROM pg_catalog.pg_policy p
         WHERE r.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND p.polrelid = r.objid
        UNION ALL
        SELECT 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass, s.oid FROM pg_catalog.pg_statistic_ext s
         WHERE r.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND s.stxrelid = r.objid
    ) e(classid, objid)),
-- Whose each object is: pg_shdepend records every owner, but the bootstrap superuser's
-- (pinned) and those of a table's row type, an array type and, from PostgreSQL 18, a
-- multirange type (their table's, their element type's, their range's, which the walk
-- reaches too). A multirange is left out on every version, so that a refusal names the
-- same objects everywhere. The template's tables and their parts are not judged.
owned(classid, objid, owner) AS (
    SELECT r.classid, r.objid, s.refobjid
      FROM reached r JOIN pg_catalog.pg_shdepend s
        ON s.dbid = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
       AND s.classid = r.classid AND s.objid = r.objid AND s.objsubid = 0 AND s.deptype = 'o'
     WHERE r.classid IN ('pg_catalog.pg_proc'::pg_catalog.regclass, 'pg_catalog.pg_operator'::pg_catalog.regclass,
                         'pg_catalog.pg_type'::pg_catalog.regclass, 'pg_catalog.pg_class'::pg_catalog.regclass,
                         'pg_catalog.pg_collation'::pg_catalog.regclass, 'pg_catalog.pg_opclass'::pg_catalog.regclass,
                         'pg_catalog.pg_opfamily'::pg_catalog.regclass, 'pg_catalog.pg_conversion'::pg_catalog.regclass,
                         'pg_catalog.pg_ts_config'::pg_catalog.regclass, 'pg_catalog.pg_ts_dict'::pg_catalog.regclass,
                         'pg_catalog.pg_language'::pg_catalog.regclass)
       AND NOT (r.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
                AND r.objid IN (SELECT p.objid FROM parts p WHERE p.classid = 'pg_catalog.pg_class'::pg_catalog.regclass))
       AND NOT (r.classid = 'pg_catalog.pg_type'::pg_catalog.regclass
                AND EXISTS (SELECT FROM pg_catalog.pg_type y WHERE y.oid = r.objid AND y.typtype = 'm'))),
-- The functions the copied parts call, read from their stored expressions (built-in ones are
-- pinned: pg_depend does not list them), and the functions the walk reached.
called(fn) AS (
    SELECT m[1]::pg_catalog.oid FROM parts p CROSS JOIN LATERAL (
        SELECT a.adbin::text FROM pg_catalog.pg_attrdef a
         WHERE p.classid = 'pg_catalog.pg_attrdef'::pg_catalog.regclass AND a.oid = p.objid
        UNION ALL
        SELECT k.conbin::text FROM pg_catalog.pg_constraint k
         WHERE p.classid = 'pg_catalog.pg_constraint'::pg_catalog.regclass AND k.oid = p.objid
        UNION ALL
        SELECT pg_catalog.concat(i.indexprs::text, ' ', i.indpred::text) FROM pg_catalog.pg_index i
         WHERE p.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND i.indexrelid = p.objid
        UNION ALL
        SELECT s.stxexprs::text FROM pg_catalog.pg_statistic_ext s
         WHERE p.classid = 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass AND s.oid = p.objid
        UNION ALL
        SELECT pg_catalog.concat(q.polqual::text, ' ', q.polwithcheck::text) FROM pg_catalog.pg_policy q
         WHERE p.classid = 'pg_catalog.pg_policy'::pg_catalog.regclass AND q.oid = p.objid
        UNION ALL
        SELECT g.tgqual::text FROM pg_catalog.pg_trigger g
         WHERE p.classid = 'pg_catalog.pg_trigger'::pg_catalog.regclass AND g.oid = p.objid
        UNION ALL
        SELECT w.ev_action::text FROM pg_catalog.pg_rewrite w
         WHERE p.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass AND w.oid = p.objid) e(t)
      CROSS JOIN LATERAL pg_catalog.regexp_matches(e.t, E':(?:funcid|aggfnoid|winfnoid) (\\d+)', 'g') m
    UNION
    SELECT r.objid FROM reached r WHERE r.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass),
-- Those of them the copies must not call (see the header), and why.
forbidden(fn, why) AS (
    SELECT f.oid, CASE
           WHEN f.pronamespace = 'pg_catalog'::pg_catalog.regnamespace
            AND f.proname IN ('ts_rewrite', 'ts_stat', 'query_to_xml', 'query_to_xmlschema', 'query_to_xml_and_xmlschema',
                              'table_to_xml', 'table_to_xmlschema', 'table_to_xml_and_xmlschema',
                              'cursor_to_xml', 'cursor_to_xmlschema', 'schema_to_xml', 'schema_to_xmlschema',
                              'schema_to_xml_and_xmlschema', 'database_to_xml', 'database_to_xmlschema',
                              'database_to_xml_and_xmlschema',
                              -- (a name given as text, looked up when it runs: nextval('tpl.s'::text)
                              -- would take the template's sequence in every shard)
                              'regclass', 'to_regclass', 'to_regproc', 'to_regprocedure', 'to_regoper', 'to_regoperator',
                              'to_regtype', 'to_regtypemod', 'to_regnamespace', 'to_regrole', 'to_regcollation')
             OR EXISTS (SELECT FROM pg_catalog.pg_depend x JOIN pg_catalog.pg_extension e ON e.oid = x.refobjid
                         WHERE x.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND x.objid = f.oid
                           AND x.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND x.deptype = 'e'
                           AND e.extname = 'dblink')
           THEN 'it runs SQL, or reads what a name given at run time names, as whoever writes'
           WHEN f.pronamespace = 'pg_catalog'::pg_catalog.regnamespace AND f.proname = 'set_config'
           THEN 'it changes the session of whoever writes'
           WHEN f.proacl IS NOT NULL
            AND NOT EXISTS (SELECT FROM pg_catalog.aclexplode(f.proacl) a
                             WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
            -- (the caller's own function, neither built in nor an extension's, is theirs to judge)
            AND NOT (f.proowner = current_user::pg_catalog.regrole AND f.oid >= 16384
                     AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend x
                                      WHERE x.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND x.objid = f.oid
                                        AND x.deptype = 'e'))
           THEN 'PUBLIC may not execute it: it would run with the rights of whoever writes'
           END
      FROM called c JOIN pg_catalog.pg_proc f ON f.oid = c.fn)
SELECT 'table' AS kind, t.rel, t.relname::text AS name, NULL::text AS detail, NULL::text AS deps FROM tables t
UNION ALL
SELECT 'other', NULL, NULL, pg_catalog.pg_describe_object(o.classid, o.objid, 0), NULL
  FROM in_schema o
 WHERE NOT (o.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
            AND (o.objid IN (SELECT t.rel FROM tables t) OR o.objid IN (SELECT v.rel FROM views v)
                 OR o.objid IN (SELECT q.rel FROM sequences q)))
   AND NOT (o.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND o.objid IN (SELECT f.fn FROM functions f))
   AND o.classid <> 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass
   -- an identity column's sequence
   AND NOT (o.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND EXISTS (
            SELECT FROM pg_catalog.pg_depend i
             WHERE i.classid = o.classid AND i.objid = o.objid AND i.deptype = 'i'
               AND i.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND i.refobjid IN (SELECT t.rel FROM tables t)))
UNION ALL
SELECT 'untrusted', NULL, NULL,
       pg_catalog.format('%s (owner %s)', pg_catalog.pg_describe_object(o.classid, o.objid, 0), o.owner::pg_catalog.regrole), NULL
  FROM owned o
 WHERE o.owner <> current_user::pg_catalog.regrole
   AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid = o.owner)
UNION ALL
SELECT 'untrusted', NULL, NULL,
       pg_catalog.format('%s (%s)', pg_catalog.pg_describe_object('pg_catalog.pg_proc'::pg_catalog.regclass, f.fn, 0), f.why), NULL
  FROM forbidden f WHERE f.why IS NOT NULL
UNION ALL
-- Relations the walk went through, besides the tables (a composite type's, a sequence, a
-- table an SQL function body writes): a change to one forgets a cached reading.
SELECT 'watch', r.objid, NULL, NULL, NULL FROM reached r WHERE r.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
UNION ALL
SELECT 'refused', w.ev_class, w.rulename::text, pg_catalog.format('rule %I on table %I', w.rulename, t.relname), NULL
  FROM tables t JOIN pg_catalog.pg_rewrite w ON w.ev_class = t.rel
UNION ALL
-- A view is copied as its query and options: anything else on it (a rule besides its query, an
-- INSTEAD OF trigger, a column default) would be left out of the copy.
SELECT 'refused', v.rel, NULL,
       pg_catalog.format('%s (create_shard copies a view''s query and options only)', pg_catalog.pg_describe_object(x.classid, x.objid, 0)), NULL
  FROM views v CROSS JOIN LATERAL (
       SELECT 'pg_catalog.pg_rewrite'::pg_catalog.regclass::oid, w.oid FROM pg_catalog.pg_rewrite w
        WHERE w.ev_class = v.rel AND w.rulename <> '_RETURN'
       UNION ALL
       SELECT 'pg_catalog.pg_trigger'::pg_catalog.regclass, g.oid FROM pg_catalog.pg_trigger g WHERE g.tgrelid = v.rel
       UNION ALL
       SELECT 'pg_catalog.pg_attrdef'::pg_catalog.regclass, a.oid FROM pg_catalog.pg_attrdef a WHERE a.adrelid = v.rel) x(classid, objid)
UNION ALL
SELECT CASE v.relkind WHEN 'm' THEN 'matview' ELSE 'view' END, v.rel, v.relname::text,
       (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(pg_catalog.split_part(o.o, '=', 1)) || ' = '
                                     || pg_catalog.quote_literal(pg_catalog.substr(o.o, pg_catalog.strpos(o.o, '=') + 1)), ', ')
          FROM pg_catalog.unnest(c.reloptions) o(o)),
       (SELECT pg_catalog.count(*) FROM view_reads r WHERE r.rel = v.rel)::text
  FROM views v JOIN pg_catalog.pg_class c ON c.oid = v.rel
UNION ALL
SELECT 'function', f.fn, f.proname::text, p.xmin::text, NULL
  FROM functions f JOIN pg_catalog.pg_proc p ON p.oid = f.fn
UNION ALL
SELECT 'refused', f.fn, f.proname::text, 'function next_id() (the name of the shard''s own ID function)', NULL
  FROM functions f JOIN pg_catalog.pg_proc p ON p.oid = f.fn WHERE f.proname = 'next_id' AND p.pronargs = 0
UNION ALL
-- A function whose copy would still use the template's objects, or could not be made before
-- the views: a body given as text naming the template (or a SET clause naming it), which
-- PostgreSQL resolves only when it runs; an SQL-standard body reading a view of the template.
SELECT 'refused', f.fn, f.proname::text, x.why, NULL
  FROM functions f JOIN pg_catalog.pg_proc p ON p.oid = f.fn JOIN pg_catalog.pg_namespace n ON n.oid = $1,
       LATERAL (SELECT pg_catalog.format('function %s, whose body (text, resolved when it runs) or settings name the template''s schema (so would its copy''s)',
                                         f.fn::pg_catalog.regprocedure)
                 WHERE p.prosqlbody IS NULL
                   AND (pg_catalog.strpos(pg_catalog.lower(p.prosrc), pg_catalog.lower(n.nspname)) > 0
                        OR pg_catalog.strpos(pg_catalog.lower(coalesce(pg_catalog.array_to_string(p.proconfig, ' '), '')),
                                             pg_catalog.lower(n.nspname)) > 0)
                UNION ALL
                SELECT pg_catalog.format('function %s, whose body reads view %s of the template (the shard''s functions are made before its views)',
                                         f.fn::pg_catalog.regprocedure, d.refobjid::pg_catalog.regclass)
                  FROM pg_catalog.pg_depend d
                 WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = f.fn
                   AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refobjid IN (SELECT v.rel FROM views v)) x(why)
UNION ALL
SELECT 'sequence', q.rel, q.relname::text,
       pg_catalog.format('AS %s INCREMENT BY %s MINVALUE %s MAXVALUE %s START WITH %s CACHE %s %sCYCLE',
                         x.seqtypid::pg_catalog.regtype, x.seqincrement, x.seqmin, x.seqmax, x.seqstart, x.seqcache,
                         CASE WHEN x.seqcycle THEN '' ELSE 'NO ' END),
       (SELECT pg_catalog.format('%I.%I', c.relname, a.attname)
          FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_class c ON c.oid = d.refobjid
          JOIN pg_catalog.pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
         WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = q.rel AND d.deptype = 'a'
           AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refobjid IN (SELECT t.rel FROM tables t))
  FROM sequences q JOIN pg_catalog.pg_sequence x ON x.seqrelid = q.rel
UNION ALL
SELECT 'refused', q.rel, q.relname::text, 'sequence table_id_seq (the name of the shard''s own ID sequence)', NULL
  FROM sequences q WHERE q.relname = 'table_id_seq'
UNION ALL
SELECT 'default', d.rel, a.attname::text, q.relname::text, NULL
  FROM seq_defaults d JOIN pg_catalog.pg_attribute a ON a.attrelid = d.rel AND a.attnum = d.attnum
  JOIN sequences q ON q.rel = d.seq
UNION ALL
-- A part that refers to another relation of the template, or to a table's row type (a
-- column of another table's row type, a default taking another table's identity sequence, a
-- policy reading another table): its copy would refer to the template's, not the shard's.
SELECT 'refused', p.rel, NULL,
       pg_catalog.format('%s, which refers to %s (so would its copy)', pg_catalog.pg_describe_object(p.classid, p.objid, d.objsubid),
                         pg_catalog.pg_describe_object(d.refclassid, d.refobjid, 0)), NULL
  FROM (SELECT t.rel, 'pg_catalog.pg_class'::pg_catalog.regclass::oid AS classid, t.rel AS objid FROM tables t
        UNION ALL SELECT q.rel, q.classid, q.objid FROM parts q
         WHERE q.classid NOT IN ('pg_catalog.pg_rewrite'::pg_catalog.regclass, 'pg_catalog.pg_proc'::pg_catalog.regclass)) p
  JOIN pg_catalog.pg_depend d ON d.classid = p.classid AND d.objid = p.objid
 WHERE (p.classid <> 'pg_catalog.pg_class'::pg_catalog.regclass OR p.objid <> p.rel OR d.objsubid > 0)
   -- (a partition's index, key or trigger made from its table's: made again by ATTACH PARTITION)
   AND d.deptype NOT IN ('P', 'S')
   -- (what the copy rewrites to the shard's object)
   AND (p.classid, p.objid, d.refclassid, d.refobjid) NOT IN (SELECT w.classid, w.objid, w.refclassid, w.refobjid FROM rewritten w)
   AND ((d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refobjid <> p.rel
         AND d.refobjid IN (SELECT o.objid FROM in_schema o WHERE o.classid = 'pg_catalog.pg_class'::pg_catalog.regclass))
     OR (d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.refobjid IN (SELECT f.fn FROM functions f))
     OR (d.refclassid = 'pg_catalog.pg_type'::pg_catalog.regclass
         AND d.refobjid IN (SELECT c.reltype FROM in_schema o JOIN pg_catalog.pg_class c ON c.oid = o.objid
                             WHERE o.classid = 'pg_catalog.pg_class'::pg_catalog.regclass)))
UNION ALL
-- The same for a policy that reads its own table in a subquery: its copy would read the
-- template's. pg_depend does not record that reference (the policy depends on its table
-- anyway): it is read from the expression itself, whose subqueries name their relations.
SELECT 'refused', p.polrelid, p.polname::text,
       pg_catalog.format('policy %I on table %I, which reads that table in a subquery (so would its copy)', p.polname, t.relname), NULL
  FROM tables t JOIN pg_catalog.pg_policy p ON p.polrelid = t.rel
 WHERE EXISTS (SELECT FROM pg_catalog.regexp_matches(coalesce(p.polqual::text, '') || ' ' || coalesce(p.polwithcheck::text, ''),
                                                     E':relid (\\d+)', 'g') m
                WHERE m[1]::oid = p.polrelid)
UNION ALL
-- Partitions, made in the shard as partitions of its copy of their table, with their bounds
-- (literals); their indexes, keys and triggers made from the table's come with ATTACH. A
-- partition whose table is outside the template, or a table with a partition outside it,
-- would be copied as neither; a key expression would be run by the copy, unwalked.
SELECT 'partition', c.oid, p.relname::text, pg_catalog.pg_get_expr(c.relpartbound, c.oid),
       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_partition_ancestors(c.oid) a)::text
  FROM tables t JOIN pg_catalog.pg_class c ON c.oid = t.rel AND c.relispartition
  JOIN pg_catalog.pg_inherits i ON i.inhrelid = c.oid JOIN pg_catalog.pg_class p ON p.oid = i.inhparent
 WHERE i.inhparent IN (SELECT u.rel FROM tables u)
UNION ALL
SELECT 'refused', i.inhrelid, NULL,
       pg_catalog.format('partition %s of table %s, one of them outside the template (the copy would not be the table''s partition)',
                         i.inhrelid::pg_catalog.regclass, i.inhparent::pg_catalog.regclass), NULL
  FROM tables t JOIN pg_catalog.pg_inherits i ON i.inhrelid = t.rel OR i.inhparent = t.rel
 WHERE NOT (i.inhrelid IN (SELECT u.rel FROM tables u) AND i.inhparent IN (SELECT u.rel FROM tables u))
   AND EXISTS (SELECT FROM pg_catalog.pg_partitioned_table k WHERE k.partrelid = i.inhparent)
UNION ALL
SELECT 'refused', t.rel, NULL,
       pg_catalog.format('partitioned table %I, whose partition key has an expression (%s)', t.relname,
                         pg_catalog.pg_get_partkeydef(t.rel)), NULL
  FROM tables t JOIN pg_catalog.pg_partitioned_table k ON k.partrelid = t.rel
 WHERE k.partexprs IS NOT NULL
UNION ALL
SELECT 'rls', t.rel, t.relname::text, x.x, NULL
  FROM tables t JOIN pg_catalog.pg_class c ON c.oid = t.rel,
       LATERAL (VALUES ('ENABLE', c.relrowsecurity), ('FORCE', c.relforcerowsecurity)) x(x, flag)
 WHERE x.flag
UNION ALL
SELECT 'identity', t.rel, t.relname::text,
       CASE c.relreplident WHEN 'f' THEN 'FULL' WHEN 'n' THEN 'NOTHING' ELSE 'USING INDEX' END, NULL
  FROM tables t JOIN pg_catalog.pg_class c ON c.oid = t.rel
 WHERE c.relreplident <> 'd'
UNION ALL
SELECT 'policy', p.polrelid, p.polname::text,
       pg_catalog.format('AS %s FOR %s TO %s', CASE WHEN p.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END,
           CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
           (SELECT pg_catalog.string_agg(CASE WHEN r.r = 0 THEN 'PUBLIC' ELSE r.r::pg_catalog.regrole::text END, ', ')
              FROM pg_catalog.unnest(p.polroles) r(r)))
       || coalesce(' USING (' || pg_catalog.pg_get_expr(p.polqual, p.polrelid) || ')', '')
       || coalesce(' WITH CHECK (' || pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid) || ')', ''),
       (SELECT pg_catalog.string_agg(DISTINCT d.refclassid || ':' || d.refobjid, ' ' ORDER BY d.refclassid || ':' || d.refobjid)
          FROM pg_catalog.pg_depend d
         WHERE d.classid = 'pg_catalog.pg_policy'::pg_catalog.regclass AND d.objid = p.oid
           AND NOT (d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refobjid = p.polrelid))
  FROM tables t JOIN pg_catalog.pg_policy p ON p.polrelid = t.rel
UNION ALL
-- Storage parameters (the table's, and its TOAST table's as toast.*), which LIKE does not copy.
SELECT 'options', t.rel, t.relname::text,
       (SELECT pg_catalog.string_agg(o.p || pg_catalog.quote_ident(pg_catalog.split_part(o.o, '=', 1)) || ' = '
                                     || pg_catalog.quote_literal(pg_catalog.substr(o.o, pg_catalog.strpos(o.o, '=') + 1)), ', ')
          FROM (SELECT '', x FROM pg_catalog.unnest(c.reloptions) x
                UNION ALL
                SELECT 'toast.', x FROM pg_catalog.pg_class z, pg_catalog.unnest(z.reloptions) x WHERE z.oid = c.reltoastrelid) o(p, o)),
       NULL
  FROM tables t JOIN pg_catalog.pg_class c ON c.oid = t.rel
 WHERE c.reloptions IS NOT NULL
    OR EXISTS (SELECT FROM pg_catalog.pg_class z WHERE z.oid = c.reltoastrelid AND z.reloptions IS NOT NULL)
UNION ALL
-- A foreign key to a table outside the template: its copy would point at a table whose rows
-- are not the shard's, and which a move does not carry.
SELECT 'refused', k.conrelid, k.conname::text,
       pg_catalog.format('foreign key %I on table %I, which refers to table %s outside the template (its rows do not move with the shard)',
                         k.conname, t.relname, k.confrelid::pg_catalog.regclass), NULL
  FROM tables t JOIN pg_catalog.pg_constraint k ON k.conrelid = t.rel AND k.contype = 'f' AND k.conparentid = 0
 WHERE k.confrelid NOT IN (SELECT u.rel FROM tables u)
UNION ALL
-- Foreign keys between the template's tables and the tables' triggers, each as a statement
-- whose one %I is the shard's schema (every other % doubled): PostgreSQL's own definition,
-- split where it names the template's table. The head before that name is rebuilt here from
-- the catalog and must be what PostgreSQL printed (a quoted column name can hold any text):
-- otherwise the object is refused, never copied from a guess. deps: a trigger's ENABLE state.
SELECT CASE WHEN y.ok THEN CASE WHEN x.fn IS NULL THEN x.kind ELSE 'ftrigger' END ELSE 'refused' END, x.rel, x.name,
       CASE WHEN y.ok
            THEN pg_catalog.replace(x.head, '%', '%%') || '%I.' || pg_catalog.replace(x.target, '%', '%%')
                 || CASE WHEN x.fn IS NULL THEN pg_catalog.replace(y.tail, '%', '%%')
                         ELSE pg_catalog.replace(pg_catalog.replace(y.tail, '%', '%%'), pg_catalog.replace(x.fn, '%', '%%'),
                                                 'EXECUTE FUNCTION %1$I.' || pg_catalog.replace(x.fn_name, '%', '%%') || '(') END
            ELSE pg_catalog.format('%s, whose definition create_shard cannot read back (%s)', x.what, x.def) END,
       x.deps
  FROM (SELECT 'key' AS kind, k.conrelid AS rel, k.conname::text AS name, pg_catalog.pg_get_constraintdef(k.oid) AS def,
               pg_catalog.format('FOREIGN KEY (%s) REFERENCES ',
                   (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY c.n)
                      FROM pg_catalog.unnest(k.conkey) WITH ORDINALITY c(att, n)
                      JOIN pg_catalog.pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = c.att)) AS head,
               pg_catalog.format('%I.%I(', n.nspname, r.relname) AS tpl, pg_catalog.quote_ident(r.relname) || '(' AS target,
               pg_catalog.format('foreign key %I on table %I', k.conname, t.relname) AS what, NULL::text AS deps,
               NULL::text AS fn, NULL::text AS fn_name
          FROM tables t JOIN pg_catalog.pg_constraint k ON k.conrelid = t.rel AND k.contype = 'f' AND k.conparentid = 0
          JOIN pg_catalog.pg_class r ON r.oid = k.confrelid JOIN pg_catalog.pg_namespace n ON n.oid = $1
         WHERE k.confrelid IN (SELECT u.rel FROM tables u)
        UNION ALL
        SELECT 'trigger', g.tgrelid, g.tgname::text, pg_catalog.pg_get_triggerdef(g.oid),
               pg_catalog.format('CREATE %sTRIGGER %I %s %s ON ', CASE WHEN g.tgconstraint <> 0 THEN 'CONSTRAINT ' ELSE '' END, g.tgname,
                   CASE WHEN g.tgtype & 2 <> 0 THEN 'BEFORE' WHEN g.tgtype & 64 <> 0 THEN 'INSTEAD OF' ELSE 'AFTER' END,
                   pg_catalog.array_to_string(ARRAY[
                       CASE WHEN g.tgtype & 4 <> 0 THEN 'INSERT' END, CASE WHEN g.tgtype & 8 <> 0 THEN 'DELETE' END,
                       CASE WHEN g.tgtype & 16 <> 0 THEN 'UPDATE' || coalesce(' OF ' ||
                           (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY c.n)
                              FROM pg_catalog.unnest(g.tgattr::pg_catalog.int2[]) WITH ORDINALITY c(att, n)
                              JOIN pg_catalog.pg_attribute a ON a.attrelid = g.tgrelid AND a.attnum = c.att), '') END,
                       CASE WHEN g.tgtype & 32 <> 0 THEN 'TRUNCATE' END], ' OR ')),
               pg_catalog.format('%I.%I ', n.nspname, t.relname), pg_catalog.quote_ident(t.relname) || ' ',
               pg_catalog.format('trigger %I on table %I', g.tgname, t.relname), g.tgenabled::text,
               -- (a function of the template: its copy calls the shard's, made first)
               CASE WHEN f.fn IS NOT NULL THEN pg_catalog.format('EXECUTE FUNCTION %I.%I(', n.nspname, f.proname) END,
               pg_catalog.quote_ident(f.proname)
          FROM tables t JOIN pg_catalog.pg_trigger g ON g.tgrelid = t.rel AND NOT g.tgisinternal AND g.tgparentid = 0
          JOIN pg_catalog.pg_namespace n ON n.oid = $1
          LEFT JOIN functions f ON f.fn = g.tgfoid) x,
       -- what follows the table's name, read back only if it names such a function exactly once
       LATERAL (SELECT v.tail, pg_catalog.starts_with(x.def, x.head || x.tpl)
                       AND (x.fn IS NULL OR pg_catalog.length(v.tail) - pg_catalog.length(pg_catalog.replace(v.tail, x.fn, ''))
                                            = pg_catalog.length(x.fn))
                  FROM (SELECT pg_catalog.substr(x.def, pg_catalog.length(x.head || x.tpl) + 1)) v(tail)) y(tail, ok)
