-- Privileges and owners, carried from a move's source schemas to the target's copies. Part
-- of the node side of snowflake_id_router's protocol (sql/node/node.sql).

-- The schemas' owners and privileges as JSON (schema, tables (partitioned ones and views, materialized too), sequences, columns,
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
               -- (a sequence owned by a column follows its table's owner; a partition does not)
               c.relkind = 'S' AND EXISTS (SELECT FROM pg_depend o WHERE o.classid = 'pg_class'::regclass AND o.objid = c.oid
                                              AND o.refclassid = 'pg_class'::regclass AND o.deptype IN ('a', 'i')) AS owned
          FROM nsp n JOIN pg_depend d ON d.refclassid = 'pg_namespace'::regclass AND d.refobjid = n.oid
               AND d.classid = 'pg_class'::regclass AND d.deptype = 'n'
          JOIN pg_class c ON c.oid = d.objid AND c.relkind IN ('r', 'p', 'S', 'v', 'm'))
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
