-- The node side of snowflake_id_router's protocol, in the internal schema snowflake_id_node
-- (docs/cluster-design.md). Nothing here is for applications: the schema is on no one's
-- search_path, and only its owner (the superuser who created the extension) may use it; the
-- router calls it over dblink as a superuser. Every object is CREATE OR REPLACE, so that the
-- upgrade script loads this same text.

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

-- The fingerprint of a schema's layout, compared wherever two layouts must agree: a
-- template on every node (the router's template_status), a shard and its copy on another
-- node (moves refuse to start when they differ, naming the first difference). It is a
-- sorted list of lines, one per table, column, constraint and index, each as PostgreSQL
-- prints it with search_path = pg_catalog, the schema's own name standing as %I, so that a
-- template and a shard made from it (create_shard(..., template => ...)) read alike:
--   table posts: table
--   column posts.edits: integer NOT NULL DEFAULT 0, position 4
--   constraint on posts: PRIMARY KEY (id)
--   index on posts: CREATE INDEX ON %I.posts USING btree (user_id, id)
-- Not in it: names of constraints and indexes (LIKE ... INCLUDING ALL makes its own),
-- the default and identity of a bigint primary key column (create_shard sets it to the
-- shard's next_id()), NOT NULL constraints as such (PostgreSQL 18 lists them as
-- constraints, 15 does not: the column says NOT NULL), storage parameters, triggers
-- (a move fences writes with triggers of its own), and what create_shard makes besides
-- the tables (next_id(), table_id_seq).

CREATE OR REPLACE FUNCTION snowflake_id_node.fingerprint(schema_name text) RETURNS text[]
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    nsp oid := to_regnamespace(quote_ident(schema_name));
    -- The schema's own name, qualifying a name (not ending a longer one): a regular
    -- expression with every character but letters, digits and _ escaped.
    own text := '(^|[^[:alnum:]_$"])' || regexp_replace(quote_ident(schema_name), '([^[:alnum:]_])', '\\\1', 'g') || '\.';
    lines text[];
BEGIN
    IF nsp IS NULL THEN
        RAISE EXCEPTION 'schema % does not exist', quote_ident(schema_name) USING ERRCODE = 'invalid_schema_name';
    END IF;
    WITH rel AS (
        -- (A move's marker table comes and goes with the move.)
        SELECT c.oid, c.relname, c.relkind, c.relpersistence FROM pg_class c
         WHERE c.relnamespace = nsp AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
           AND c.relname <> 'snowflake_id_move_marker'),
    pk AS (
        SELECT i.indrelid, a.attnum FROM rel JOIN pg_index i ON i.indrelid = rel.oid AND i.indisprimary
          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
         WHERE a.atttypid = 'bigint'::regtype),
    line AS (
        SELECT format('table %s: %s%s', quote_ident(rel.relname),
                   CASE rel.relpersistence WHEN 'u' THEN 'unlogged ' WHEN 't' THEN 'temporary ' ELSE '' END,
                   CASE rel.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'partitioned table' WHEN 'v' THEN 'view'
                        WHEN 'm' THEN 'materialized view' ELSE 'foreign table' END) AS l
          FROM rel
        UNION ALL
        SELECT format('column %s.%s: %s%s%s%s, position %s', quote_ident(rel.relname), quote_ident(a.attname),
                   format_type(a.atttypid, a.atttypmod),
                   CASE WHEN a.attcollation <> t.typcollation THEN ' COLLATE ' || a.attcollation::regcollation::text END,
                   CASE WHEN a.attnotnull THEN ' NOT NULL' END,
                   CASE WHEN pk.attnum IS NOT NULL THEN NULL
                        WHEN a.attgenerated = 's' THEN ' GENERATED ALWAYS AS ' || pg_get_expr(d.adbin, d.adrelid) || ' STORED'
                        WHEN a.attidentity = 'a' THEN ' GENERATED ALWAYS AS IDENTITY'
                        WHEN a.attidentity = 'd' THEN ' GENERATED BY DEFAULT AS IDENTITY'
                        ELSE ' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid) END,
                   rank() OVER (PARTITION BY a.attrelid ORDER BY a.attnum))
          FROM rel JOIN pg_attribute a ON a.attrelid = rel.oid AND a.attnum > 0 AND NOT a.attisdropped
          JOIN pg_type t ON t.oid = a.atttypid
          LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
          LEFT JOIN pk ON pk.indrelid = a.attrelid AND pk.attnum = a.attnum
        UNION ALL
        SELECT format('constraint on %s: %s', quote_ident(rel.relname), pg_get_constraintdef(k.oid))
          FROM rel JOIN pg_constraint k ON k.conrelid = rel.oid AND k.contype <> 'n'
        UNION ALL
        -- pg_get_indexdef without the index's name: CREATE [UNIQUE] INDEX ON ...
        SELECT format('index on %s: %s%s', quote_ident(rel.relname),
                   overlay(pg_get_indexdef(i.indexrelid)
                           PLACING '' FROM position(' INDEX ' IN pg_get_indexdef(i.indexrelid)) + 7
                           FOR length(quote_ident(x.relname)) + 1),
                   CASE WHEN NOT i.indisvalid THEN ' (invalid)' END)
          FROM rel JOIN pg_index i ON i.indrelid = rel.oid JOIN pg_class x ON x.oid = i.indexrelid)
    SELECT array_agg(regexp_replace(l, own, '\1%I.', 'g') ORDER BY l COLLATE "C") INTO lines FROM line;
    RETURN coalesce(lines, '{}');
END
$$;
COMMENT ON FUNCTION snowflake_id_node.fingerprint(text) IS
  'The layout of a schema''s tables as sorted lines (tables, columns, constraints, indexes; its own name as %I): equal for a template and the shards made from it.';

-- The first line where two fingerprints differ, said with the labels of both sides:
--   column posts.note: (text DEFAULT 'x'::text, position 5) in shard_7 on node 'a', (absent) in template tpl on node 'b'
-- NULL when they are equal.
CREATE OR REPLACE FUNCTION snowflake_id_node.fingerprint_difference(a text[], b text[], a_label text, b_label text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    first text;
    k text;  -- what the line is about: a table or column by name, a constraint or index by its definition
BEGIN
    SELECT l INTO first FROM (SELECT unnest(a) EXCEPT ALL SELECT unnest(b)
                              UNION ALL (SELECT unnest(b) EXCEPT ALL SELECT unnest(a))) x(l)
     ORDER BY l COLLATE "C" LIMIT 1;
    IF first IS NULL THEN
        RETURN NULL;
    END IF;
    k := CASE WHEN first ~ '^(table|column) ' THEN split_part(first, ': ', 1) ELSE first END;
    RETURN format('%s: (%s) in %s, (%s) in %s', k,
        coalesce((SELECT CASE WHEN l = k THEN 'present' ELSE substr(l, length(k) + 3) END
                    FROM unnest(a) l WHERE l = k OR starts_with(l, k || ': ') LIMIT 1), 'absent'), a_label,
        coalesce((SELECT CASE WHEN l = k THEN 'present' ELSE substr(l, length(k) + 3) END
                    FROM unnest(b) l WHERE l = k OR starts_with(l, k || ': ') LIMIT 1), 'absent'), b_label);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.fingerprint_difference(text[], text[], text, text) IS
  'The first difference between two fingerprints, with a label for each side; NULL when equal.';

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_node FROM PUBLIC;
