-- snowflake_id 0.2.0 -> 0.3.0, in place: ALTER EXTENSION snowflake_id UPDATE TO '0.3.0'.
--
-- Each section carries one part of 0.3.0 to a 0.2.0 installation, in the same words as the
-- fresh install. reliability/t_upgrade.sh installs 0.2.0 (and 0.1.0) as released, runs the
-- chain and requires the result to equal a fresh 0.3.0 install (reliability/surface.sql).
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.3.0'" to load this file. \quit
-- The shard installer (issues 19 and 24): create_shard's template is locked, then read at a
-- snapshot taken after the locks and walked for every object its copies would use or run
-- (snowflake_id_internal.template_read, sql/template_read.sql); policies and row-level
-- security are copied; only a single-column bigint key defaults to next_id(); create_shards
-- takes a template; drop_shard with cascade drops a schema it made in one step.

CREATE SCHEMA snowflake_id_internal;
COMMENT ON SCHEMA snowflake_id_internal IS 'Internals of snowflake_id: helpers of its SQL functions, with no rights of their own.';
GRANT USAGE ON SCHEMA snowflake_id_internal TO PUBLIC;
CREATE FUNCTION snowflake_id_internal.template_read(template oid)
RETURNS TABLE (kind text, rel oid, name text, detail text, deps text)
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'template_read_wrapper';
COMMENT ON FUNCTION snowflake_id_internal.template_read(oid) IS
  'create_shard''s reading of a template schema: its tables locked, then what the shards would copy and run, at a snapshot taken after the locks.';

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

-- create_shard(schema_name, shard, template => 'tpl'): the shard layout declared once.
-- After create_shard(schema_name, shard), every table of schema tpl is made in the shard's
-- schema with CREATE TABLE ... (LIKE tpl.t INCLUDING ALL): columns, defaults, generated
-- columns, NOT NULL, CHECK, primary key, unique and exclusion constraints, indexes, extended
-- statistics, comments, identity; then its row-level security settings and policies. A
-- single-column bigint primary key then defaults to the shard's own next_id() (identity
-- dropped); a key of several columns keeps its columns as they are. Foreign keys are not
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
-- check reads the catalog as the copy does (src/template_read.rs). Nothing of the template
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

CREATE FUNCTION create_shards(prefix text, first_shard integer, count integer, template text) RETURNS void
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
    IF count < 0 OR first_shard NOT BETWEEN 0 AND 8191
       OR first_shard::bigint + count - 1 > 8191 THEN
        RAISE EXCEPTION 'shards % to % are out of range: valid shards are 0 to 8191',
            first_shard, first_shard::bigint + count - 1
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    PERFORM snowflake_id_internal.create_shards_from(
        array(SELECT prefix || n FROM generate_series(first_shard, first_shard + count - 1) n),
        array(SELECT n FROM generate_series(first_shard, first_shard + count - 1) n),
        template);
END
$$;
COMMENT ON FUNCTION create_shards(text, integer, integer, text) IS
  'create_shard(prefix || n, n, template) for n = first_shard .. first_shard + count - 1, in one transaction, the template read and checked once.';

-- The template form of create_shard and create_shards: the template's tables locked and read
-- once (snowflake_id_internal.template_read), then each shard made and filled.
CREATE FUNCTION snowflake_id_internal.create_shards_from(schema_names text[], shards integer[], template text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
-- The reading's estimated cost is high (a recursive walk) and its real cost a millisecond:
-- compiling it would cost more than running it.
SET jit = off
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
    s text;
    made oid;
    key record;
    deps text;
BEGIN
    IF octet_length(template) > 63 THEN
        RAISE EXCEPTION 'template schema name "%" is too long: % bytes, at most 63', template, octet_length(template)
            USING ERRCODE = 'name_too_long';
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
    SELECT string_agg(r.detail, ', ' ORDER BY r.detail) FILTER (WHERE r.kind = 'other'),
           string_agg(r.detail, '; ' ORDER BY r.detail) FILTER (WHERE r.kind = 'refused'),
           string_agg(DISTINCT r.detail, ', ') FILTER (WHERE r.kind = 'untrusted'),
           array_agg(r.rel ORDER BY r.name) FILTER (WHERE r.kind = 'table'),
           array_agg(r.name ORDER BY r.name) FILTER (WHERE r.kind = 'table'),
           array_agg(r.rel ORDER BY r.rel, r.detail) FILTER (WHERE r.kind = 'rls'),
           array_agg(r.detail ORDER BY r.rel, r.detail) FILTER (WHERE r.kind = 'rls'),
           array_agg(r.rel ORDER BY r.rel, r.name) FILTER (WHERE r.kind = 'policy'),
           array_agg(r.name ORDER BY r.rel, r.name) FILTER (WHERE r.kind = 'policy'),
           array_agg(r.detail ORDER BY r.rel, r.name) FILTER (WHERE r.kind = 'policy'),
           array_agg(coalesce(r.deps, '') ORDER BY r.rel, r.name) FILTER (WHERE r.kind = 'policy')
      INTO other, refused, untrusted, tables, names, rls_rel, rls, policy_rel, policy_name, policy_def, policy_deps
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
        PERFORM @extschema@.create_shard(s, shards[i]);
        FOR j IN 1 .. coalesce(cardinality(tables), 0) LOOP
            CONTINUE WHEN to_regclass(format('%I.%I', s, names[j])) IS NOT NULL;
            EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING ALL)', s, names[j], template, names[j]);
            made := format('%I.%I', s, names[j])::regclass;
            -- A single-column bigint primary key is the shard's ID.
            SELECT a.attname, a.attidentity INTO key FROM pg_index i
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
             WHERE i.indrelid = made AND i.indisprimary AND i.indnkeyatts = 1 AND a.atttypid = 'bigint'::regtype;
            IF FOUND THEN
                IF key.attidentity <> '' THEN
                    EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I DROP IDENTITY', s, names[j], key.attname);
                END IF;
                EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I SET DEFAULT %I.next_id()', s, names[j], key.attname, s);
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
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.create_shards_from(text[], integer[], text) IS
  'The template form of create_shard and create_shards: the template locked, read and checked once, then each shard made and filled.';
