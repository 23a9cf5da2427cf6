-- Comparing the content of two copies of a shard (docs/cluster.md, "What a move verifies"):
-- a move before its seal, verify_shard on demand. Each table's rows are ordered by its
-- primary key and cut into chunks at bounds taken from one side; each side gives, per
-- chunk, its rows and a digest: SHA-256 over each row's text, in key order, the rows
-- separated by a zero byte (which no text holds: no row's text can pass for two rows). One
-- SHA-256 per chunk, not one per row as well: digesting a table took an eighth of the time. Everything that reads a
-- table runs as its owner under restricted-operation rules (snowflake_id_node.as_owner):
-- the row's text (its types' output functions), the key's order and width_bucket (its
-- type's comparison) are the owner's code.

-- How the rows of table t are ordered and chunked: ord, its primary key's columns (else the
-- row's text); chunk, the first of them, of type typ (with its collation); key, the text
-- naming a row in messages.
CREATE OR REPLACE FUNCTION snowflake_id_node.row_key(t regclass, OUT ord text, OUT chunk text, OUT typ text, OUT key text)
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(string_agg(format('x.%I', a.attname), ', ' ORDER BY k.o), '(x.*)::text COLLATE "C"'),
           coalesce((array_agg(format('x.%I', a.attname) ORDER BY k.o))[1], '(x.*)::text COLLATE "C"'),
           coalesce((array_agg(format_type(a.atttypid, NULL) || '[]'
                               || coalesce((SELECT format(' COLLATE %I.%I', n.nspname, c.collname) FROM pg_collation c
                                              JOIN pg_namespace n ON n.oid = c.collnamespace WHERE c.oid = a.attcollation), '')
                               ORDER BY k.o))[1], 'text[] COLLATE "C"'),
           coalesce(CASE WHEN count(*) = 1 THEN format('x.%I::text', (array_agg(a.attname))[1])
                         ELSE 'ROW(' || string_agg(format('x.%I', a.attname), ', ' ORDER BY k.o) || ')::text' END, '(x.*)::text')
      FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY k(att, o)
      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.att
     WHERE i.indrelid = t AND i.indisprimary;
END;
COMMENT ON FUNCTION snowflake_id_node.row_key(regclass) IS
  'How the rows of table t are compared: their order (primary key, else the row''s text), the chunking column and its array type, a row''s key as text.';

-- The tables of the schemas that hold rows, in move_tables' order: plain ones and
-- partitions (a partitioned table's rows are its partitions'). A move copies, counts and
-- compares these, each partition as a table of its own: a row is where its bounds put it.
CREATE OR REPLACE FUNCTION snowflake_id_node.content_tables(schemas text[]) RETURNS TABLE (t regclass)
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT x.t FROM snowflake_id_node.move_tables(schemas) WITH ORDINALITY x(t, o) JOIN pg_class c ON c.oid = x.t
     WHERE c.relkind = 'r' ORDER BY x.o;
END;
COMMENT ON FUNCTION snowflake_id_node.content_tables(text[]) IS
  'The tables of the schemas that hold rows (plain ones and partitions), which a move copies, counts and compares.';

-- Runs query q (a %s for the table, x its rows, then the chunk's, the order's and the bounds'
-- expressions) on table t as its owner; its text. Without JIT: compiling these queries for
-- a table of a million rows took longer than running them (seconds under a move's fence).
CREATE OR REPLACE FUNCTION snowflake_id_node.on_rows(t regclass, q text, bounds text) RETURNS text
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    k record := snowflake_id_node.row_key(t);
BEGIN
    RETURN snowflake_id_node.as_owner((SELECT c.relowner FROM pg_class c WHERE c.oid = t),
        format(q, t, k.chunk, k.ord, format('%L::%s', coalesce(bounds, '{}'), k.typ), k.key));
END
$$;
COMMENT ON FUNCTION snowflake_id_node.on_rows(regclass, text, text) IS
  'Runs a query over table t''s rows (x) as its owner under restricted-operation rules; its text.';

-- The longest row text (bytes) that enters a chunk's digest as it is; a longer one enters
-- as its own SHA-256 (chunk_digests), and is shown cut (chunk_rows).
CREATE OR REPLACE FUNCTION snowflake_id_node.digest_whole() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN 65536;
COMMENT ON FUNCTION snowflake_id_node.digest_whole() IS
  'The longest row text (bytes) a chunk''s digest takes as it is; a longer one enters as its own SHA-256.';

-- Per chunk of table t (bounds: the chunks' lower bounds, an array literal; chunk 0 holds
-- the keys below the first, the last those from the last bound on), its rows and digest, as JSON {"chunk": [rows, digest]}; only
-- the chunks listed (NULL: all), empty ones left out. Each chunk is read on its own, by a
-- range of the primary key's index in its order (no sort; a chunk read again under a
-- move's fence costs its own rows only). A row's text over 64 kB goes into the chunk's
-- digest as "H" and its own SHA-256 (a row's text begins with "(": none can pass for
-- it), so a chunk's input stays within 1,000 x 64 kB however well the rows compress on
-- disk (a text value holds at most 1 GB).
CREATE OR REPLACE FUNCTION snowflake_id_node.chunk_digests(t regclass, bounds text, chunks integer[]) RETURNS json
LANGUAGE sql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_node.on_rows(t, format(
    'SELECT coalesce(json_object_agg(r.c, r.v), ''{}'')::text FROM (
       SELECT b.c, d.n, d.v
         FROM (SELECT u.o::integer AS c, u.lo, lead(u.lo) OVER (ORDER BY u.o) AS hi
                 FROM unnest(%%4$s) WITH ORDINALITY u(lo, o)) b
        CROSS JOIN LATERAL (SELECT count(*) AS n, %4$s AS v
                              FROM (SELECT textsend((x.*)::text) AS h FROM ONLY %%1$s x
                                     WHERE %%2$s >= b.lo AND %%2$s < b.hi ORDER BY %%3$s) s) d
        WHERE b.hi IS NOT NULL AND %1$s
       UNION ALL
       SELECT cardinality(%%4$s), count(*), %4$s
         FROM (SELECT textsend((x.*)::text) AS h FROM ONLY %%1$s x
                WHERE %3$s AND %%2$s >= (%%4$s)[cardinality(%%4$s)] ORDER BY %%3$s) s
       UNION ALL
       SELECT 0, count(*), %4$s
         FROM (SELECT textsend((x.*)::text) AS h FROM ONLY %%1$s x
                WHERE %2$s AND (cardinality(%%4$s) = 0 OR %%2$s < (%%4$s)[1]) ORDER BY %%3$s) s) r
      WHERE r.n > 0',
    CASE WHEN chunks IS NULL THEN 'true' ELSE format('b.c = ANY (%L::integer[])', chunks) END,
    CASE WHEN chunks IS NULL OR 0 = ANY (chunks) THEN 'true' ELSE 'false' END,
    CASE WHEN chunks IS NULL THEN 'true' ELSE format('cardinality(%%4$s) = ANY (%L::integer[])', chunks) END,
    -- a chunk's rows and digest, over its rows' text s.h (bytea)
    format('json_build_array(count(*), encode(sha256(string_agg(CASE WHEN octet_length(s.h) <= %s THEN s.h
                ELSE decode(''48'', ''hex'') || sha256(s.h) END, decode(''00'', ''hex''))), ''hex''))',
           snowflake_id_node.digest_whole())), bounds)::json;
COMMENT ON FUNCTION snowflake_id_node.chunk_digests(regclass, text, integer[]) IS
  'Rows and digest of each chunk of table t (only those listed; NULL: all), as JSON {"chunk": [rows, digest]}.';

-- The bounds of the chunks of a shard's tables here, one every 1,000 rows in key order (a
-- table without a primary key is one chunk: it has no index to read ranges by), as JSON
-- {"t": {table: {"b": bounds}}}, for content_base on both sides.
CREATE OR REPLACE FUNCTION snowflake_id_node.content_bounds(schemas text[]) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t regclass;
    tables jsonb := '{}';
BEGIN
    -- (A table whose owner may not use its schema cannot be read as its owner: it is left
    -- out here, so on both sides, and compared by its rows' count only.)
    FOR t IN SELECT x.t FROM snowflake_id_node.content_tables(schemas) x JOIN pg_class c ON c.oid = x.t
              WHERE has_schema_privilege(c.relowner, c.relnamespace, 'USAGE') LOOP
        tables := tables || jsonb_build_object(t::text, json_build_object('b',
            CASE WHEN NOT EXISTS (SELECT FROM pg_index i WHERE i.indrelid = t AND i.indisprimary) THEN '{}'
                 ELSE snowflake_id_node.on_rows(t,
                     'SELECT coalesce(array_agg(k ORDER BY k), ''{}'')::text FROM (SELECT DISTINCT k FROM (
                        SELECT %2$s AS k, row_number() OVER (ORDER BY %2$s) r FROM ONLY %1$s x) s WHERE r %% 1000 = 1) d', NULL) END));
    END LOOP;
    RETURN json_build_object('t', tables)::text;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.content_bounds(text[]) IS
  'The bounds of the chunks of the schemas'' tables here (one every 1,000 rows in key order), as JSON.';

-- The content of a shard's tables here, to compare with another copy's: JSON
-- {"h": horizon, "t": {table: {"b": bounds, "c": chunk_digests}}}, chunked at the bounds
-- content_bounds gave (bounds). horizon is the oldest transaction running before the rows
-- were read: a row written since has an xmin from it on (content_fence).
CREATE OR REPLACE FUNCTION snowflake_id_node.content_base(schemas text[], bounds json) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    horizon text := pg_snapshot_xmin(pg_current_snapshot())::text;
    t regclass;
    b text;
    tables jsonb := '{}';
BEGIN
    FOR t IN SELECT x.t FROM snowflake_id_node.content_tables(schemas) x WHERE bounds->'t'->x.t::text IS NOT NULL LOOP
        b := bounds->'t'->t::text->>'b';
        tables := tables || jsonb_build_object(t::text, json_build_object('b', b, 'c', snowflake_id_node.chunk_digests(t, b, NULL)));
    END LOOP;
    RETURN json_build_object('h', horizon, 't', tables)::text;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.content_base(text[], json) IS
  'The digests of every chunk of the schemas'' tables here, at the bounds content_bounds gave, with the horizon of what they saw, as JSON.';

-- Under a move's fence: the digests of the chunks of each table that may have changed here
-- since content_base gave base (and those listed in recheck, {table: [chunks]}). A row
-- written since has an xmin at or after base's horizon (an insert, an update's new
-- version): one scan per table finds their chunks, digested again. A row can also have gone
-- (a delete, an update's old version): rows older than the horizon were all there at base,
-- so if the other chunks hold as many rows as they did then, none went from them; else (a
-- delete outside the chunks written) a second scan counts every chunk's rows and those that
-- hold fewer are digested again. JSON {table: {"n": rows, "c": chunk_digests}}; NULL when
-- base is (the move is not verified).
CREATE OR REPLACE FUNCTION snowflake_id_node.content_fence(schemas text[], base json, recheck json) RETURNS text
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    t regclass;
    b json;
    now json;
    changed integer[];
    d jsonb;
    tables jsonb := '{}';
BEGIN
    IF base IS NULL THEN
        RETURN NULL;
    END IF;
    FOR t IN SELECT x.t FROM snowflake_id_node.content_tables(schemas) x WHERE base->'t'->x.t::text IS NOT NULL LOOP
        b := base->'t'->t::text;
        now := snowflake_id_node.on_rows(t, format(
            'SELECT json_build_object(''n'', count(*), ''new'', coalesce(array_agg(DISTINCT width_bucket(%%2$s, %%4$s))
                                          FILTER (WHERE pg_catalog.age(x.xmin) <= pg_catalog.age(%L::xid)), ''{}''))::text
               FROM ONLY %%1$s x', (base->>'h')::bigint % 4294967296), b->>'b')::json;
        changed := ARRAY(SELECT json_array_elements_text(now->'new')::integer UNION SELECT json_array_elements_text(recheck->t::text)::integer);
        d := CASE WHEN cardinality(changed) > 0 THEN snowflake_id_node.chunk_digests(t, b->>'b', changed) ELSE '{}' END;
        IF (now->>'n')::bigint - (SELECT coalesce(sum((v->>0)::bigint), 0) FROM jsonb_each(d) e(k, v))
           <> (SELECT coalesce(sum((e.v->>0)::bigint), 0) FROM json_each(b->'c') e(k, v) WHERE e.k::integer <> ALL (changed)) THEN
            changed := changed || ARRAY(
                SELECT coalesce(o.k, n.k)::integer
                  FROM json_each_text(snowflake_id_node.on_rows(t, 'SELECT coalesce(json_object_agg(c, n), ''{}'')::text
                         FROM (SELECT width_bucket(%2$s, %4$s) c, count(*) n FROM ONLY %1$s x GROUP BY 1) s', b->>'b')::json) n(k, v)
                  FULL JOIN json_each(b->'c') o(k, v) ON o.k = n.k
                 WHERE coalesce(n.v, '0') IS DISTINCT FROM coalesce(o.v->>0, '0') AND coalesce(o.k, n.k)::integer <> ALL (changed));
            d := d || snowflake_id_node.chunk_digests(t, b->>'b', changed)::jsonb;
        END IF;
        tables := tables || jsonb_build_object(t::text, json_build_object('n', now->'n', 'c', snowflake_id_node.overlay(changed, d::json)));
    END LOOP;
    RETURN tables::text;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.content_fence(text[], json, json) IS
  'Under a move''s fence: the digests of the chunks of the schemas'' tables that changed here since content_base (and those in recheck), as JSON; NULL if base is.';

-- The chunks listed, each with its digest in d or, emptied, as [0, null].
CREATE OR REPLACE FUNCTION snowflake_id_node.overlay(chunks integer[], d json) RETURNS json
LANGUAGE sql IMMUTABLE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
RETURN coalesce((SELECT json_object_agg(k, coalesce(d->k::text, '[0, null]'::json)) FROM unnest(chunks) k), '{}');
COMMENT ON FUNCTION snowflake_id_node.overlay(integer[], json) IS 'The chunks listed with their digests in d, an empty one as [0, null].';

-- The rows of one chunk of table t, in key order: JSON [[key, row text], ...]; a row's text
-- over 64 kB as its first 200 characters, its length and its SHA-256.
CREATE OR REPLACE FUNCTION snowflake_id_node.chunk_rows(t regclass, bounds text, chunk integer) RETURNS text
LANGUAGE sql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_node.on_rows(t, format(
    'SELECT coalesce(json_agg(json_build_array(%%5$s, CASE WHEN octet_length(y.r) <= %s THEN y.r
                                   ELSE left(y.r, 200) || format('' ... (%%%%s bytes, SHA-256 %%%%s)'', octet_length(y.r), encode(sha256(textsend(y.r)), ''hex'')) END)
                              ORDER BY %%3$s), ''[]'')::text
       FROM ONLY %%1$s x CROSS JOIN LATERAL (SELECT (x.*)::text AS r OFFSET 0) y WHERE width_bucket(%%2$s, %%4$s) = %s', snowflake_id_node.digest_whole(), chunk), bounds);
COMMENT ON FUNCTION snowflake_id_node.chunk_rows(regclass, text, integer) IS
  'The rows of one chunk of table t in key order, as JSON [[key, row text], ...].';


-- The schema of shard s here (NULL: none).
CREATE OR REPLACE FUNCTION snowflake_id_node.shard_schema(s integer) RETURNS text
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
RETURN (SELECT c.schema_name FROM @extschema@.snowflake_id_shard c WHERE c.shard = s);
COMMENT ON FUNCTION snowflake_id_node.shard_schema(integer) IS 'The schema of shard s on this node; NULL if it has none.';

REVOKE ALL ON FUNCTION snowflake_id_node.row_key(regclass), snowflake_id_node.content_tables(text[]), snowflake_id_node.on_rows(regclass, text, text),
    snowflake_id_node.chunk_digests(regclass, text, integer[]), snowflake_id_node.content_base(text[], json), snowflake_id_node.content_bounds(text[]),
    snowflake_id_node.content_fence(text[], json, json), snowflake_id_node.chunk_rows(regclass, text, integer),
    snowflake_id_node.overlay(integer[], json), snowflake_id_node.shard_schema(integer), snowflake_id_node.digest_whole() FROM PUBLIC;
