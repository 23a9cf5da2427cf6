-- Comparing the content of two copies of a shard (docs/cluster.md, "What a move verifies"):
-- a move before its seal, verify_shard on demand. Each table's rows are ordered by its
-- primary key and cut into chunks at bounds taken from one side; each side gives, per
-- chunk, its rows and a digest: SHA-256 over the SHA-256 of each row's text, in key order
-- (fixed-width row hashes: no row's text can pass for two rows). Everything that reads a
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

-- Runs query q (a %s for the table, x its rows, then the chunk's, the order's and the bounds'
-- expressions) on table t as its owner; its text.
CREATE OR REPLACE FUNCTION snowflake_id_node.on_rows(t regclass, q text, bounds text) RETURNS text
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
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

-- Per chunk of table t (bounds: the chunks' lower bounds, an array literal), its rows and
-- digest, as JSON {"chunk": [rows, digest]}; only the chunks listed (NULL: all).
CREATE OR REPLACE FUNCTION snowflake_id_node.chunk_digests(t regclass, bounds text, chunks integer[]) RETURNS json
LANGUAGE sql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_node.on_rows(t,
    'SELECT coalesce(json_object_agg(c, json_build_array(n, d)), ''{}'')::text FROM (
       SELECT width_bucket(%2$s, %4$s) c, count(*) n,
              encode(sha256(string_agg(sha256(textsend((x.*)::text)), ''''::bytea ORDER BY %3$s)), ''hex'') d
         FROM ONLY %1$s x' || CASE WHEN chunks IS NULL THEN '' ELSE format(' WHERE width_bucket(%%2$s, %%4$s) = ANY (%L::integer[])', chunks) END
    || ' GROUP BY 1) s', bounds)::json;
COMMENT ON FUNCTION snowflake_id_node.chunk_digests(regclass, text, integer[]) IS
  'Rows and digest of each chunk of table t (only those listed; NULL: all), as JSON {"chunk": [rows, digest]}.';

-- The content of a shard's tables here, to compare with another copy's: JSON
-- {"h": horizon, "t": {table: {"b": bounds, "c": chunk_digests}}}. Bounds come from base
-- (the other side's), else are taken here, one every 1,000 rows in key order. horizon is
-- the oldest transaction running before the rows were read: a row written since has an
-- xmin from it on (content_fence).
CREATE OR REPLACE FUNCTION snowflake_id_node.content_base(schemas text[], base json) RETURNS text
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    horizon text := pg_snapshot_xmin(pg_current_snapshot())::text;
    t regclass;
    b text;
    tables jsonb := '{}';
BEGIN
    FOR t IN SELECT x.t FROM snowflake_id_node.move_tables(schemas) x LOOP
        b := coalesce(base->'t'->t::text->>'b', snowflake_id_node.on_rows(t,
                 'SELECT coalesce(array_agg(k ORDER BY k), ''{}'')::text FROM (SELECT DISTINCT k FROM (
                    SELECT %2$s AS k, row_number() OVER (ORDER BY %2$s) r FROM ONLY %1$s x) s WHERE r %% 1000 = 1) d', NULL));
        tables := tables || jsonb_build_object(t::text, json_build_object('b', b, 'c', snowflake_id_node.chunk_digests(t, b, NULL)));
    END LOOP;
    RETURN json_build_object('h', horizon, 't', tables)::text;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.content_base(text[], json) IS
  'The digests of every chunk of the schemas'' tables here (bounds from base, else taken here), with the horizon of what they saw, as JSON.';

-- Under a move's fence: the digests of the chunks of each table that may have changed here
-- since content_base gave base (and those listed in recheck, {table: [chunks]}). A chunk
-- changed if it holds a row written since (xmin at or after base's horizon: an insert or
-- an update's new version) or holds another number of rows (a delete). One scan per table;
-- a second over the chunks that changed. JSON {table: {"n": rows, "c": chunk_digests}}.
-- NULL when base is (the move is not verified).
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
    tables jsonb := '{}';
BEGIN
    IF base IS NULL THEN
        RETURN NULL;
    END IF;
    FOR t IN SELECT x.t FROM snowflake_id_node.move_tables(schemas) x LOOP
        b := base->'t'->t::text;
        now := snowflake_id_node.on_rows(t, format(
            'SELECT json_build_object(''n'', coalesce(sum(n), 0), ''c'', coalesce(json_object_agg(c, n), ''{}''),
                                      ''new'', coalesce(array_agg(c) FILTER (WHERE new), ''{}''))::text
               FROM (SELECT width_bucket(%%2$s, %%4$s) c, count(*) n, bool_or(pg_catalog.age(x.xmin) <= pg_catalog.age(%L::xid)) new
                       FROM ONLY %%1$s x GROUP BY 1) s', (base->>'h')::bigint % 4294967296), b->>'b')::json;
        changed := ARRAY(SELECT json_array_elements_text(now->'new')::integer
                         UNION SELECT json_array_elements_text(recheck->t::text)::integer
                         UNION SELECT coalesce(o.c, n.c)::integer
                                 FROM json_each_text(now->'c') n(c, v) FULL JOIN json_each(b->'c') o(c, v) ON o.c = n.c
                                WHERE n.v IS DISTINCT FROM o.v->>0);
        tables := tables || jsonb_build_object(t::text, json_build_object('n', now->'n',
            'c', snowflake_id_node.overlay(changed, CASE WHEN cardinality(changed) > 0 THEN snowflake_id_node.chunk_digests(t, b->>'b', changed) END)));
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

-- The rows of one chunk of table t, in key order: JSON [[key, row text], ...].
CREATE OR REPLACE FUNCTION snowflake_id_node.chunk_rows(t regclass, bounds text, chunk integer) RETURNS text
LANGUAGE sql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_node.on_rows(t, format(
    'SELECT coalesce(json_agg(json_build_array(%%5$s, (x.*)::text) ORDER BY %%3$s), ''[]'')::text
       FROM ONLY %%1$s x WHERE width_bucket(%%2$s, %%4$s) = %s', chunk), bounds);
COMMENT ON FUNCTION snowflake_id_node.chunk_rows(regclass, text, integer) IS
  'The rows of one chunk of table t in key order, as JSON [[key, row text], ...].';


-- The schema of shard s here (NULL: none).
CREATE OR REPLACE FUNCTION snowflake_id_node.shard_schema(s integer) RETURNS text
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
RETURN (SELECT c.schema_name FROM @extschema@.snowflake_id_shard c WHERE c.shard = s);
COMMENT ON FUNCTION snowflake_id_node.shard_schema(integer) IS 'The schema of shard s on this node; NULL if it has none.';

REVOKE ALL ON FUNCTION snowflake_id_node.row_key(regclass), snowflake_id_node.on_rows(regclass, text, text),
    snowflake_id_node.chunk_digests(regclass, text, integer[]), snowflake_id_node.content_base(text[], json),
    snowflake_id_node.content_fence(text[], json, json), snowflake_id_node.chunk_rows(regclass, text, integer),
    snowflake_id_node.overlay(integer[], json), snowflake_id_node.shard_schema(integer) FROM PUBLIC;
