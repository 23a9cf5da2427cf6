-- == template_status: the template on every node ==

-- Per node: the fingerprint of the template (snowflake_id_node.fingerprint: tables,
-- columns and types, defaults, constraints, indexes) as a short hash, whether it is the
-- one most nodes have, and if not its first difference from it; the schema changes the
-- node has not got (schema_change_status); with shards => true, how many of its shards
-- differ from its template, and the first difference (one fingerprint per shard: seconds
-- for thousands of shards). A node that cannot be reached is listed with the error.
CREATE OR REPLACE FUNCTION template_status(template text DEFAULT 'tpl', shards boolean DEFAULT false)
RETURNS TABLE (node text, fingerprint text, matches boolean, difference text, changes_behind integer,
               shards_checked integer, shards_differing integer, shard_difference text, error text)
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
AS $$
DECLARE
    n text;
    fp text[];
    got text[] := '{}';
    fps text[] := '{}';          -- each node's fingerprint, as text (an array of arrays would need equal lengths)
    errs text[] := '{}';
    checked integer[] := '{}';
    differing integer[] := '{}';
    firsts text[] := '{}';
    reference text;              -- the fingerprint most nodes have
    reference_node text;
    u text[];
BEGIN
    IF template IS NULL OR shards IS NULL THEN
        RAISE EXCEPTION 'template_status: template and shards must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    FOR n IN SELECT x.name FROM snowflake_id_router.node x ORDER BY x.name LOOP
        got := got || n;
        BEGIN
            PERFORM snowflake_id_router.connect_node('snowflake_id_router_status', n);
            fps := fps || snowflake_id_router.fetch('snowflake_id_router_status', format(
                'SELECT snowflake_id_node.fingerprint(%L)::text', template));
            errs := errs || NULL::text;
            IF shards THEN
                u := snowflake_id_router.fetch('snowflake_id_router_status', format(
                    'SELECT ARRAY[checked::text, differing::text, first]::text FROM snowflake_id_node.shards_unlike(%L)', template));
                checked := checked || u[1]::integer;
                differing := differing || u[2]::integer;
                firsts := firsts || u[3];
            ELSE
                checked := checked || NULL::integer;
                differing := differing || NULL::integer;
                firsts := firsts || NULL::text;
            END IF;
            PERFORM snowflake_id_router.disconnect('snowflake_id_router_status');
        EXCEPTION WHEN OTHERS THEN
            PERFORM snowflake_id_router.disconnect('snowflake_id_router_status');
            fps := fps || NULL::text;
            errs := errs || SQLERRM;
            checked := checked || NULL::integer;
            differing := differing || NULL::integer;
            firsts := firsts || NULL::text;
        END;
    END LOOP;
    -- (A tie goes to the fingerprint of the first node by name.)
    SELECT x.f INTO reference FROM unnest(fps) WITH ORDINALITY x(f, i) WHERE x.f IS NOT NULL
     GROUP BY x.f ORDER BY count(*) DESC, min(x.i) LIMIT 1;
    reference_node := got[array_position(fps, reference)];
    RETURN QUERY
        SELECT g.n, left(encode(sha256(convert_to(array_to_string(g.fp::text[], E'\n'), 'UTF8')), 'hex'), 16),
               g.fp = reference,
               CASE WHEN g.fp <> reference THEN snowflake_id_node.fingerprint_difference(g.fp::text[], reference::text[],
                   format('node %s', quote_literal(g.n)), format('node %s', quote_literal(reference_node))) END,
               (SELECT count(*)::integer FROM snowflake_id_router.schema_change c JOIN snowflake_id_router.schema_change_node cn ON cn.change = c.id
                 WHERE cn.node = g.n AND cn.state <> 'done' AND c.state IN ('running', 'incomplete') AND c.template = template_status.template),
               g.checked, g.differing, g.first, g.err
          FROM unnest(got, fps, errs, checked, differing, firsts) g(n, fp, err, checked, differing, first)
         ORDER BY g.n;
END
$$;
COMMENT ON FUNCTION template_status(text, boolean) IS
  'Per node: the template''s fingerprint, whether it is the one most nodes have and its first difference, schema changes not yet got; with shards, the shards that differ from it.';
