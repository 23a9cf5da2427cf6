-- snowflake_id 0.2.0 -> 0.3.0, in place: ALTER EXTENSION snowflake_id UPDATE TO '0.3.0'.
--
-- Each section carries one part of 0.3.0 to a 0.2.0 installation, in the same words as the
-- fresh install. reliability/t_upgrade.sh installs 0.2.0 (and 0.1.0) as released, runs the
-- chain and requires the result to equal a fresh 0.3.0 install (reliability/surface.sql).
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.3.0'" to load this file. \quit

-- == The node side of snowflake_id_router (sql/node.sql) ==
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

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_node FROM PUBLIC;

-- == What the router's views and rebalancer read on a node (sql/node_status.sql) ==
-- What snowflake_id_router's views node_status and shard_status, and its rebalancer, read on
-- a data node: one call answers for the node, or for every shard it serves, in one pass over
-- the catalog, so that the router sends one query per node however many shards it holds.
-- Rows and bytes are the statistics system's estimates (pg_stat_get_live_tuples) and the
-- relations' sizes on disk (pg_total_relation_size), not counts: counting every row of
-- every shard would read the whole node. Internal, like the rest of snowflake_id_node.

-- The node: its replication settings, the shards it serves, and what moves make on it
-- (replication slots, publications, subscriptions named by the router, and the table-sync
-- slots of subscriptions), with the WAL the slots hold and the lag of its standbys. Slot
-- and WAL figures read the WAL position of a primary, or the replayed one on a standby.
CREATE OR REPLACE FUNCTION snowflake_id_node.node_stats(
    OUT wal_level text, OUT in_recovery boolean,
    OUT shards integer, OUT tables integer, OUT rows bigint, OUT bytes bigint,
    OUT slots text[], OUT publications text[], OUT subscriptions text[],
    OUT slot_wal_bytes bigint, OUT free_slots integer, OUT free_wal_senders integer,
    OUT standbys integer, OUT sync_standbys integer, OUT standby_lag_bytes bigint)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH here AS (
        SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END AS lsn),
    shard_tables AS (
        SELECT count(DISTINCT s.shard) AS shards, count(c.oid) AS tables,
               sum(pg_stat_get_live_tuples(c.oid)) AS rows, sum(pg_total_relation_size(c.oid)) AS bytes
          FROM @extschema@.snowflake_id_shards s
          LEFT JOIN pg_namespace n ON n.nspname = s.schema_name
          LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relkind IN ('r', 'p')),
    -- A router names what a move makes sfid_<router>_<move>; a subscription's table sync
    -- makes slots pg_<subscription oid>_sync_<table oid>_<system identifier>.
    move_slots AS (
        SELECT r.slot_name, r.restart_lsn FROM pg_replication_slots r
         WHERE r.slot_name LIKE 'sfid\_%' OR r.slot_name ~ '^pg_[0-9]+_sync_[0-9]+_[0-9]+$'),
    senders AS (
        SELECT r.sync_state, r.replay_lsn FROM pg_stat_replication r
          JOIN pg_stat_activity a ON a.pid = r.pid
         WHERE a.datid IS NULL)                      -- physical: a logical walsender has a database
    SELECT current_setting('wal_level'), pg_is_in_recovery(),
           (SELECT shards FROM shard_tables)::integer, (SELECT tables FROM shard_tables)::integer,
           coalesce((SELECT rows FROM shard_tables), 0)::bigint, coalesce((SELECT bytes FROM shard_tables), 0)::bigint,
           ARRAY(SELECT slot_name::text FROM move_slots ORDER BY 1),
           ARRAY(SELECT p.pubname::text FROM pg_publication p WHERE p.pubname LIKE 'sfid\_%' ORDER BY 1),
           ARRAY(SELECT s.subname::text FROM pg_subscription s
                  WHERE s.subname LIKE 'sfid\_%'
                    AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                  ORDER BY 1),
           (SELECT max(pg_wal_lsn_diff((SELECT lsn FROM here), r.restart_lsn))::bigint FROM pg_replication_slots r),
           current_setting('max_replication_slots')::integer - (SELECT count(*) FROM pg_replication_slots)::integer,
           current_setting('max_wal_senders')::integer
               - (SELECT count(*) FROM pg_stat_activity a WHERE a.backend_type = 'walsender')::integer,
           (SELECT count(*) FROM senders)::integer,
           (SELECT count(*) FROM senders WHERE sync_state IN ('sync', 'quorum'))::integer,
           (SELECT max(pg_wal_lsn_diff((SELECT lsn FROM here), replay_lsn))::bigint FROM senders);
END;
COMMENT ON FUNCTION snowflake_id_node.node_stats() IS
  'This node for snowflake_id_router''s node_status: replication settings, shards served (rows estimated, bytes on disk), what moves made here, WAL held by slots, standby lag.';

-- Every shard the node serves: its tables' rows (estimated) and bytes, the newest ID its
-- sequence issued (next_id keeps the newest ID in it), the time in it and how far that is
-- ahead of this node's clock (after a failover to a standby whose clock is behind, or a move
-- to such a node, next_id issues IDs above the newest until the clock catches up), and,
-- when recent, how many rows hold
-- an ID made in the last minute: those of the columns defaulting to the shard's next_id()
-- (or to its sequence), counted by the index of each such column, so the work grows with
-- the rows written in that minute, not with the table.
CREATE OR REPLACE FUNCTION snowflake_id_node.shard_stats(recent boolean)
RETURNS TABLE (shard integer, schema_name text, tables integer, rows bigint, bytes bigint,
               newest_id bigint, newest_at timestamptz, ahead_of_clock interval, ids_last_minute bigint)
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    col record;
    n bigint;
    made_shard integer[] := '{}';
    made bigint[] := '{}';
BEGIN
    IF recent THEN
        FOR col IN
            SELECT DISTINCT s.shard, c.oid::regclass AS rel, a.attname
              FROM @extschema@.snowflake_id_shards s
              JOIN pg_namespace ns ON ns.nspname = s.schema_name
              JOIN pg_proc p ON p.pronamespace = ns.oid AND p.proname = 'next_id' AND p.pronargs = 0
              JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass
                   AND ((d.refclassid = 'pg_proc'::regclass AND d.refobjid = p.oid)
                     OR (d.refclassid = 'pg_class'::regclass AND d.refobjid = s.sequence))
              JOIN pg_attrdef ad ON ad.oid = d.objid
              JOIN pg_class c ON c.oid = ad.adrelid AND c.relkind IN ('r', 'p') AND NOT c.relispartition
              JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum AND a.atttypid = 'bigint'::regtype
             ORDER BY s.shard
        LOOP
            -- A bigint column compared with a bigint: pg_catalog's operator, whoever owns the table.
            EXECUTE format('SELECT count(*) FROM %s WHERE %I >= $1', col.rel, col.attname)
               INTO n USING @extschema@.make_id(clock_timestamp() - interval '1 minute', col.shard);
            made_shard := made_shard || col.shard;
            made := made || n;
        END LOOP;
    END IF;
    RETURN QUERY
    SELECT x.shard, x.schema_name, x.tables, x.rows, x.bytes, x.newest_id,
           @extschema@.id_timestamp(x.newest_id), @extschema@.id_timestamp(x.newest_id) - clock_timestamp(),
           CASE WHEN recent THEN coalesce(m.n, 0) END
      FROM (SELECT s.shard, s.schema_name, count(c.oid)::integer AS tables,
                   coalesce(sum(pg_stat_get_live_tuples(c.oid)), 0)::bigint AS rows,
                   coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS bytes,
                   -- A sequence dropped by hand leaves its OID in the registry: no newest ID then.
                   CASE WHEN q.oid IS NOT NULL THEN pg_sequence_last_value(q.oid::regclass) END AS newest_id
              FROM @extschema@.snowflake_id_shards s
              LEFT JOIN pg_class q ON q.oid = s.sequence AND q.relkind = 'S'
              LEFT JOIN pg_namespace ns ON ns.nspname = s.schema_name
              LEFT JOIN pg_class c ON c.relnamespace = ns.oid AND c.relkind IN ('r', 'p')
             GROUP BY s.shard, s.schema_name, q.oid) x
      LEFT JOIN (SELECT u.shard, sum(u.n)::bigint AS n FROM unnest(made_shard, made) u(shard, n) GROUP BY u.shard) m
        ON m.shard = x.shard
     ORDER BY x.shard;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.shard_stats(boolean) IS
  'Every shard this node serves for snowflake_id_router''s shard_status and rebalancer: tables, rows (estimated), bytes, newest ID, its time and lead over the clock, and (recent) rows with an ID made in the last minute.';

REVOKE ALL ON FUNCTION snowflake_id_node.node_stats(), snowflake_id_node.shard_stats(boolean) FROM PUBLIC;

-- == The shard installer (sql/installer.sql; its template reading: sql/template_read.sql,
-- src/template_read.rs) ==
-- create_shard's template is locked, then read at a snapshot taken after the locks and
-- walked for every object its copies would use or run; policies and row-level security are
-- copied; only a single-column bigint key defaults to next_id(); create_shards takes a
-- template; drop_shard with cascade drops a schema it made in one step.

CREATE SCHEMA snowflake_id_internal;
COMMENT ON SCHEMA snowflake_id_internal IS 'Internals of snowflake_id: helpers of its SQL functions, with no rights of their own.';
GRANT USAGE ON SCHEMA snowflake_id_internal TO PUBLIC;
CREATE FUNCTION snowflake_id_internal.template_read(template oid)
RETURNS TABLE (kind text, rel oid, name text, detail text, deps text)
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'template_read_wrapper'
-- Its plan's estimated cost is high (a recursive walk) and its real cost a millisecond:
-- compiling it would cost more than running it. Policies are read back as text, and floats
-- in them must come out exact.
SET jit = off SET extra_float_digits = 3;
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
-- single-column bigint (or snowflake) primary key then defaults to the shard's own next_id()
-- (identity dropped); a key of several columns keeps its columns as they are. Foreign keys are not
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
            -- A single-column bigint (or snowflake) primary key is the shard's ID.
            SELECT a.attname, a.attidentity INTO key FROM pg_index i
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
             WHERE i.indrelid = made AND i.indisprimary AND i.indnkeyatts = 1
               AND a.atttypid IN ('bigint'::regtype, '@extschema@.snowflake'::regtype);
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
