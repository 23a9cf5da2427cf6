-- pg_partman's configuration of a shard's tables, carried with the shard. pg_partman keeps
-- a row per partitioned table it maintains (part_config, and part_config_sub for
-- sub-partitioning), naming it as 'schema.table', and a template table in its own schema:
-- rows naming a table this node no longer serves make its run_maintenance() fail for every
-- table ("Given parent table not found"), and a node that serves a moved shard without
-- them never makes its partitions ahead. So the move's seal takes the rows of its shards
-- off the source (partman_take, stored in the source's move record, so a repair finds
-- them), the activation gives them to the target (partman_give), and dropping a shard's
-- copy (a split's, whose standby had every row) forgets them. Part of the node side of
-- snowflake_id_router's protocol (sql/node/node.sql says how the parts fit).
--
-- Only a pg_partman that only superusers can change is read or written (partman()): the
-- mover, a superuser, writes its tables and makes and drops tables in its schema.

-- pg_partman's schema here, with its version (NULL when it is not installed); 55000 unless
-- only superusers can change what a move reads and writes there: the extension, its schema
-- and its configuration tables a superuser's, and no other role holding CREATE on the schema
-- or any privilege but SELECT on those tables (a TRIGGER grant would let it run code as the
-- mover; an INSERT, name tables the move then makes or drops; a CREATE, make them first).
CREATE OR REPLACE FUNCTION snowflake_id_node.partman(OUT nsp text, OUT version text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n oid;
    owner oid;
    others text;
BEGIN
    SELECT e.extnamespace, x.nspname, e.extversion, e.extowner INTO n, nsp, version, owner
      FROM pg_extension e JOIN pg_namespace x ON x.oid = e.extnamespace WHERE e.extname = 'pg_partman';
    IF nsp IS NULL THEN
        RETURN;
    END IF;
    SELECT string_agg(w.what, ', ' ORDER BY w.what) INTO others FROM (
        SELECT 'the extension' AS what WHERE NOT snowflake_id_node.made_by_superuser(owner)
        UNION ALL
        SELECT snowflake_id_node.schema_changers(n) WHERE snowflake_id_node.schema_changers(n) IS NOT NULL
        UNION ALL
        SELECT format('table %s (owner %s)', c.oid::regclass, c.relowner::regrole) FROM pg_class c
         WHERE c.relnamespace = n AND c.relname IN ('part_config', 'part_config_sub') AND NOT snowflake_id_node.made_by_superuser(c.relowner)
        UNION ALL
        SELECT format('%s on table %s (granted to %s)', a.privilege_type, c.oid::regclass,
                      CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END)
          FROM pg_class c, aclexplode(c.relacl) a
         WHERE c.relnamespace = n AND c.relname IN ('part_config', 'part_config_sub') AND a.privilege_type <> 'SELECT'
           AND NOT snowflake_id_node.made_by_superuser(a.grantee)) w;
    IF others IS NOT NULL THEN
        RAISE EXCEPTION 'pg_partman on this node is not only the superusers'' to change: %', others
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A move reads and writes pg_partman''s configuration as a superuser: install it in a schema a superuser owns, and grant other roles at most SELECT on its configuration tables.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.partman() IS
  'pg_partman''s schema and version here (NULL if not installed); 55000 unless only superusers can change it.';

-- The pg_partman version keeping any table of the schemas here (NULL: none is kept, or
-- pg_partman is not installed): what the target of their move must have (partman_ready).
CREATE OR REPLACE FUNCTION snowflake_id_node.partman_version(schemas text[]) RETURNS text
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p record;
    kept boolean;
BEGIN
    SELECT * INTO p FROM snowflake_id_node.partman();
    IF p.nsp IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT FROM %I.part_config c WHERE split_part(c.parent_table, ''.'', 1) = ANY ($1))', p.nsp)
       INTO kept USING schemas;
    RETURN CASE WHEN kept THEN p.version END;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.partman_version(text[]) IS
  'The pg_partman version keeping tables of the schemas here; NULL if none.';

-- A move's check on its target: pg_partman of version (the source's, keeping the shards'
-- tables) is here to take their configuration, or 55000 before anything is made.
CREATE OR REPLACE FUNCTION snowflake_id_node.partman_ready(version text) RETURNS void
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p record;
BEGIN
    SELECT * INTO p FROM snowflake_id_node.partman();
    IF p.version IS DISTINCT FROM version THEN
        RAISE EXCEPTION 'pg_partman % keeps the shards'' tables on the source, and this node has %', version,
            coalesce('pg_partman ' || p.version, 'no pg_partman')
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Install the same pg_partman version here (CREATE EXTENSION pg_partman), then move again.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.partman_ready(text) IS
  'A move''s target check: this node has pg_partman of the source''s version (55000 otherwise).';

-- Takes the configuration of the schemas' tables off pg_partman here: their part_config
-- and part_config_sub rows deleted, their template tables dropped; returns them as JSON
-- ({"version", "config": [rows], "sub": [rows]}), NULL when there were none.
CREATE OR REPLACE FUNCTION snowflake_id_node.partman_take(schemas text[]) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p record;
    config json;
    sub json;
    t text;
BEGIN
    SELECT * INTO p FROM snowflake_id_node.partman();
    IF p.nsp IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format('WITH d AS (DELETE FROM %I.part_config_sub c WHERE split_part(c.sub_parent, ''.'', 1) = ANY ($1) RETURNING c)
                    SELECT json_agg(d.c) FROM d', p.nsp) INTO sub USING schemas;
    EXECUTE format('WITH d AS (DELETE FROM %I.part_config c WHERE split_part(c.parent_table, ''.'', 1) = ANY ($1) RETURNING c)
                    SELECT json_agg(d.c) FROM d', p.nsp) INTO config USING schemas;
    IF config IS NULL AND sub IS NULL THEN
        RETURN NULL;
    END IF;
    -- (only a template table named as pg_partman names the one of such a table)
    FOR t IN SELECT DISTINCT split_part(x->>'template_table', '.', 2) FROM json_array_elements(config) x
              WHERE split_part(x->>'template_table', '.', 1) = p.nsp
                AND starts_with(split_part(x->>'template_table', '.', 2),
                                'template_' || replace(x->>'parent_table', '.', '_')) LOOP
        EXECUTE format('DROP TABLE IF EXISTS %I.%I', p.nsp, t);
    END LOOP;
    RETURN json_build_object('version', p.version, 'config', config, 'sub', coalesce(sub, '[]'))::text;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.partman_take(text[]) IS
  'Takes the schemas'' tables'' pg_partman configuration off this node (rows deleted, template tables dropped); returns it as JSON.';

-- Gives pg_partman here the configuration partman_take read on a move's source (taken: its
-- JSON; NULL: nothing): the rows, replacing any of the same tables, and each template table
-- pg_partman names, made as pg_partman makes it (LIKE the parent; one of that name already
-- there is an error). Whatever fails (no pg_partman of that version, removed since the
-- move's check, one that is not only the superusers', a name taken) gives nothing: a
-- WARNING gives the rows, for create_parent by hand, and the activation, past the seal,
-- goes on.
CREATE OR REPLACE FUNCTION snowflake_id_node.partman_give(taken text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p record;
    r json;
    msg text;
BEGIN
    IF taken IS NULL THEN
        RETURN;
    END IF;
    SELECT * INTO p FROM snowflake_id_node.partman();
    IF p.version IS DISTINCT FROM taken::json->>'version' THEN
        RAISE EXCEPTION 'pg_partman % kept them on the source, and this node has %', taken::json->>'version',
            coalesce('pg_partman ' || p.version, 'no pg_partman');
    END IF;
    FOR r IN SELECT * FROM json_array_elements(taken::json->'config') LOOP
        EXECUTE format('DELETE FROM %I.part_config c WHERE c.parent_table = $1', p.nsp) USING r->>'parent_table';
        EXECUTE format('INSERT INTO %I.part_config SELECT * FROM json_populate_record(NULL::%I.part_config, $1)', p.nsp, p.nsp) USING r;
        IF split_part(r->>'template_table', '.', 1) = p.nsp THEN
            EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I)', p.nsp, split_part(r->>'template_table', '.', 2),
                           split_part(r->>'parent_table', '.', 1), split_part(r->>'parent_table', '.', 2));
        END IF;
    END LOOP;
    FOR r IN SELECT * FROM json_array_elements(taken::json->'sub') LOOP
        EXECUTE format('DELETE FROM %I.part_config_sub c WHERE c.sub_parent = $1', p.nsp) USING r->>'sub_parent';
        EXECUTE format('INSERT INTO %I.part_config_sub SELECT * FROM json_populate_record(NULL::%I.part_config_sub, $1)', p.nsp, p.nsp)
          USING r;
    END LOOP;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
    RAISE WARNING 'pg_partman''s configuration of the moved shards'' tables was not given to this node: %', msg
        USING DETAIL = format('Their configuration on the source: %s', taken),
              HINT = 'Their partitions are not made ahead here: run pg_partman''s create_parent for each of these tables.';
END
$$;
COMMENT ON FUNCTION snowflake_id_node.partman_give(text) IS
  'Gives pg_partman here the configuration a move took off its source (rows, template tables); a WARNING if it cannot.';

-- Forgets the configuration of the schemas' tables (dropped copies: a split's, whose
-- standby had every row; a move's, taken at its seal already): a clean-up never fails for
-- it (a WARNING if pg_partman here is not a superuser's).
CREATE OR REPLACE FUNCTION snowflake_id_node.partman_forget(schemas text[]) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    msg text;
BEGIN
    PERFORM snowflake_id_node.partman_take(schemas);
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
    RAISE WARNING 'the pg_partman configuration of the dropped shards'' tables is left: %', msg;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.partman_forget(text[]) IS
  'Deletes the schemas'' tables'' pg_partman configuration here (a WARNING if it cannot).';

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_node FROM PUBLIC;
