-- == Verifying content: a move before its seal, verify_shard on demand ==
-- (docs/cluster.md, "What a move verifies"; the nodes' side: sql/node/verify.sql.)

-- Whether moves compare their copies' content before the seal (setting verify_moves).
CREATE OR REPLACE FUNCTION snowflake_id_router.verify_moves() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN snowflake_id_router.setting('verify_moves')::boolean;
COMMENT ON FUNCTION snowflake_id_router.verify_moves() IS 'Whether moves compare their copies'' content before the seal (setting verify_moves).';

-- The chunks that differ between two copies, per table: each side's digests as content_base
-- gave them (a, b), overlaid with what content_fence gave since (a_now, b_now; NULL: none).
-- A chunk one side lacks holds no rows there. (jsonb: json's -> parses the whole document
-- at each look-up, a thousand times a table.)
CREATE OR REPLACE FUNCTION snowflake_id_router.chunk_differences(a jsonb, b jsonb, a_now jsonb, b_now jsonb)
RETURNS TABLE (table_name text, chunks integer[])
LANGUAGE sql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT x.t, array_agg(k.c::integer ORDER BY k.c::integer)
      FROM jsonb_object_keys(a->'t') x(t)
     CROSS JOIN LATERAL (SELECT jsonb_object_keys(a->'t'->x.t->'c') UNION SELECT jsonb_object_keys(b->'t'->x.t->'c')
                         UNION SELECT jsonb_object_keys(coalesce(a_now->x.t->'c', '{}')) UNION SELECT jsonb_object_keys(coalesce(b_now->x.t->'c', '{}'))) k(c)
     WHERE coalesce(a_now->x.t->'c'->k.c, a->'t'->x.t->'c'->k.c, '[0, null]')
           IS DISTINCT FROM coalesce(b_now->x.t->'c'->k.c, b->'t'->x.t->'c'->k.c, '[0, null]')
     GROUP BY x.t
     ORDER BY x.t COLLATE "C";
END;
COMMENT ON FUNCTION snowflake_id_router.chunk_differences(jsonb, jsonb, jsonb, jsonb) IS
  'Per table, the chunks whose rows or digest differ between two copies (content_base, overlaid with content_fence).';

-- The content of schemas on two nodes (connections a and b): the chunks' bounds read on a,
-- then both sides' digests read at once: JSON {"a": ..., "b": ..., "recheck": {table:
-- [chunks differing]}}. Before a move's fence the target lags: what differs then is
-- compared again under it.
CREATE OR REPLACE FUNCTION snowflake_id_router.content_base(a text, b text, schemas text[], timeout interval) RETURNS json
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := snowflake_id_node.monotonic() + timeout;
    bounds text;
    x json;
    y json;
BEGIN
    bounds := snowflake_id_router.call(a, format('SELECT snowflake_id_node.content_bounds(%L)', schemas),
                                       greatest(deadline - snowflake_id_node.monotonic(), interval '0'), 'reading the content of the shards');
    PERFORM snowflake_id_router.send(a, format('SELECT snowflake_id_node.content_base(%L, %L)', schemas, bounds));
    PERFORM snowflake_id_router.send(b, format('SELECT snowflake_id_node.content_base(%L, %L)', schemas, bounds));
    x := snowflake_id_router.receive(a, deadline, 'reading the content of the shards');
    y := snowflake_id_router.receive(b, deadline, 'reading the content of the copies');
    RETURN json_build_object('a', x, 'b', y, 'recheck',
        (SELECT coalesce(json_object_agg(d.table_name, d.chunks), '{}') FROM snowflake_id_router.chunk_differences(x::jsonb, y::jsonb, NULL, NULL) d));
END
$$;
COMMENT ON FUNCTION snowflake_id_router.content_base(text, text, text[], interval) IS
  'Reads the content (chunk digests) of schemas on two nodes at once, chunked at the first''s bounds; JSON with the chunks that differ.';

-- The first difference in one chunk of table tbl between the copies connections a and b
-- reach (named a_name, b_name), as text: the first key whose row differs, is missing or
-- is extra, and both rows.
CREATE OR REPLACE FUNCTION snowflake_id_router.first_difference(a text, b text, tbl text, bounds text, chunk integer,
                                                                a_name text, b_name text, timeout interval) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    q text := format('SELECT snowflake_id_node.chunk_rows(%L::pg_catalog.regclass, %L, %s)', tbl, bounds, chunk);
    x json := snowflake_id_router.call(a, q, timeout, 'reading the rows that differ');
    y json := snowflake_id_router.call(b, q, timeout, 'reading the rows that differ');
    rx json;
    ry json;
BEGIN
    FOR i IN 0 .. greatest(json_array_length(x), json_array_length(y)) - 1 LOOP
        rx := x->i;
        ry := y->i;
        CONTINUE WHEN rx::jsonb IS NOT DISTINCT FROM ry::jsonb;
        IF rx->>0 = ry->>0 THEN
            RETURN format('table %s, key %s: %s on %s, %s on %s', tbl, rx->>0, rx->>1, a_name, ry->>1, b_name);
        ELSIF rx IS NOT NULL AND NOT EXISTS (SELECT FROM json_array_elements(y) e WHERE e->>0 = rx->>0) THEN
            RETURN format('table %s, key %s: %s on %s, missing on %s', tbl, rx->>0, rx->>1, a_name, b_name);
        END IF;
        RETURN format('table %s, key %s: missing on %s, %s on %s', tbl, ry->>0, a_name, ry->>1, b_name);
    END LOOP;
    RETURN format('table %s: the same rows in another order on %s (its collation sorts them differently?)', tbl, b_name);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.first_difference(text, text, text, text, integer, text, text, interval) IS
  'The first row that differs in one chunk of a table between two copies: its key and both rows.';

-- Under a move's fence: 55000 naming the table, the first differing key and both rows when
-- the copies differ (base: content_base's; src_now, dst_now: content_fence's on each side).
CREATE OR REPLACE FUNCTION snowflake_id_router.compare_content(move_id bigint, base json, src_now json, dst_now json,
                                                               deadline timestamptz) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_router.move;
    d record;
BEGIN
    IF base IS NULL THEN
        RETURN;
    END IF;
    SELECT * INTO d FROM snowflake_id_router.chunk_differences((base->'a')::jsonb, (base->'b')::jsonb, src_now::jsonb, dst_now::jsonb) LIMIT 1;
    IF FOUND THEN
        SELECT * INTO m FROM snowflake_id_router.move r WHERE r.id = move_id;
        RAISE EXCEPTION 'the copy on node % does not hold the rows of node %: %', quote_literal(m.target), quote_literal(m.source),
            snowflake_id_router.first_difference(snowflake_id_router.node_conn(m.source), snowflake_id_router.node_conn(m.target),
                d.table_name, base->'a'->'t'->d.table_name->>'b', d.chunks[1], format('node %L', m.source), format('node %L', m.target),
                greatest(deadline - snowflake_id_node.monotonic(), interval '1 s'))
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Something changed the copy''s rows as they were applied (a trigger enabled for replica or always, a type whose text differs between the nodes).';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.compare_content(bigint, json, json, json, timestamptz) IS
  'Compares the content of a move''s source and copies under its fence; 55000 naming the table, the first differing key and both rows.';

-- Compares shard's copy on the node the map names with its copy on node (NULL: on every
-- other node holding one), now: one row per chunk that differs (about 1,000 rows in key
-- order), with the node of the copy (copy_on) and its first difference. Not at one point in time: a copy a move is still
-- filling, or writes committed between the two reads, show as differences (run it again).
CREATE OR REPLACE FUNCTION verify_shard(shard integer, node text DEFAULT NULL)
RETURNS TABLE (copy_on text, table_name text, chunk integer, difference text)
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
AS $$
#variable_conflict use_variable
DECLARE
    served text;
    other text;
    schema_name text;
    base json;
    d record;
    c integer;
    wait interval := snowflake_id_router.timeout('copy_timeout');
BEGIN
    SELECT m.node INTO served FROM snowflake_id_router.shard m WHERE m.shard = verify_shard.shard;
    IF served IS NULL THEN
        RAISE EXCEPTION 'shard % is assigned to no node', coalesce(shard::text, 'NULL') USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF node IS NOT NULL AND NOT EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = node) THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object';
    END IF;
    BEGIN
        PERFORM snowflake_id_router.connect_node('snowflake_id_router_verify_a', served);
        schema_name := snowflake_id_router.fetch('snowflake_id_router_verify_a', format('SELECT snowflake_id_node.shard_schema(%s)', shard));
        IF schema_name IS NULL THEN
            RAISE EXCEPTION 'node % serves shard % but holds no schema for it', quote_literal(served), shard
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        FOR other IN SELECT n.name FROM snowflake_id_router.node n
                      WHERE n.name <> served AND (verify_shard.node IS NULL OR n.name = verify_shard.node) ORDER BY n.name LOOP
            PERFORM snowflake_id_router.connect_node('snowflake_id_router_verify_b', other);
            IF snowflake_id_router.fetch('snowflake_id_router_verify_b', format('SELECT snowflake_id_node.shard_schema(%s)', shard))
               IS DISTINCT FROM schema_name THEN
                IF verify_shard.node IS NOT NULL THEN
                    RAISE EXCEPTION 'node % holds no copy of shard % (schema %)', quote_literal(other), shard, quote_ident(schema_name)
                        USING ERRCODE = 'object_not_in_prerequisite_state';
                END IF;
                PERFORM snowflake_id_router.disconnect('snowflake_id_router_verify_b');
                CONTINUE;
            END IF;
            base := snowflake_id_router.content_base('snowflake_id_router_verify_a', 'snowflake_id_router_verify_b', ARRAY[schema_name], wait);
            FOR d IN SELECT * FROM snowflake_id_router.chunk_differences((base->'a')::jsonb, (base->'b')::jsonb, NULL, NULL) LOOP
                FOREACH c IN ARRAY d.chunks LOOP
                    RETURN QUERY SELECT other, d.table_name, c, snowflake_id_router.first_difference('snowflake_id_router_verify_a',
                        'snowflake_id_router_verify_b', d.table_name, base->'a'->'t'->d.table_name->>'b', c,
                        format('node %L (served)', served), format('node %L', other), wait);
                END LOOP;
            END LOOP;
            PERFORM snowflake_id_router.disconnect('snowflake_id_router_verify_b');
        END LOOP;
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_verify_a'), snowflake_id_router.disconnect('snowflake_id_router_verify_b');
        RAISE;
    END;
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_verify_a');
END
$$;
COMMENT ON FUNCTION verify_shard(integer, text) IS
  'Compares a shard''s served copy with its copy on node (NULL: every other node holding one), now: one row per differing chunk, with its first difference.';

-- Verifying a move, first part (cut_over): every chunk of every table read on both sides
-- while writes go on, outside the fence gate; under the fence only what changed since is
-- read again (compare_content). NULL when verify_moves is off.
CREATE OR REPLACE FUNCTION snowflake_id_router.verify_base(src text, dst text, schemas text[]) RETURNS json
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    content json;
BEGIN
    IF NOT snowflake_id_router.verify_moves() THEN
        RETURN NULL;
    END IF;
    PERFORM snowflake_id_router.gate(false, snowflake_id_router.timeout('copy_timeout'));
    content := snowflake_id_router.content_base(src, dst, schemas, snowflake_id_router.timeout('copy_timeout'));
    PERFORM snowflake_id_router.pause_at('verified');
    RETURN content;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.verify_base(text, text, text[]) IS
  'A move''s copies read before its fence (content_base, outside the fence gate), for compare_content under the fence; NULL when verify_moves is off.';
