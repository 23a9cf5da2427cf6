-- The per-schema shard installer: Instagram's one-schema-per-logical-shard scheme.
--
-- create_shard('insta5', 5) makes schema insta5 (if missing), its sequence
-- insta5.table_id_seq and a function insta5.next_id() returning next_id(5, that sequence),
-- and records the shard in snowflake_id_shard. The generated function has an SQL-standard
-- body: it is parsed once, at creation, so it calls this extension's generator
-- (snowflake_id_internal.shard_next_id, next_id(shard, seq) under a name of its own) and
-- names the sequence by OID (both recorded as dependencies); search_path at call time cannot
-- redirect it, and it pins its own search_path besides. It runs with the caller's rights.
--
-- Thousands of shards, each with a function named next_id: PostgreSQL resolves a function
-- call by name, even a schema-qualified one, through a cached list of every function of that
-- name in every schema, and any change to pg_proc drops that list. So making a shard never
-- looks the name next_id up: a new function is made under a name of its own
-- (snowflake_id_new_next_id_<shard>), its comment and the template's defaults are set through
-- that name, and it is then renamed next_id (a check of that one name in that schema). Each
-- shard then costs the same, however many there are already.
--
-- Adopting a schema that already runs Instagram's PL/pgSQL insta5.next_id(): the sequence
-- is kept, and the function is replaced in place (same OID), so every column default that
-- calls it switches to the native generator. The old function's IDs are (time <= now,
-- shard, any counter); the sequence is first advanced to (now, shard, the largest counter),
-- so every new ID is greater than every old one.
--
-- The layout's limits (the largest shard, the largest counter) are not written here: they
-- are the fields of the largest ID, id_shard(9223372036854775807) and
-- id_sequence(9223372036854775807), as the layout in Rust (src/id/layouts.rs) decodes it,
-- and a shard number is checked by make_id, with its own error.
--
-- The catalog table is sql/installer/shard_catalog.sql's; everything here can run again (CREATE OR
-- REPLACE), so a migration includes this file as it is (scripts/build-sql).

-- The shards this node serves: not a move's copy before it is activated, nor a copy a move
-- has sealed (snowflake_id_node.move), so a fan-out never sees a shard twice.
CREATE OR REPLACE VIEW snowflake_id_shards AS
    SELECT c.schema_name, c.shard, c.sequence, c.template FROM snowflake_id_shard c
     WHERE NOT EXISTS (SELECT FROM snowflake_id_node.move m
                        WHERE c.schema_name = ANY (m.schemas) AND m.state IN ('incoming', 'sealed'))
     ORDER BY c.shard;
COMMENT ON VIEW snowflake_id_shards IS
  'Logical shards made by create_shard and served here (not a move''s copy before or after it serves): schema, shard number, sequence, template.';
-- Readable by every role, as pg_namespace is: an application's node-side functions look
-- shards up here.
GRANT SELECT ON snowflake_id_shards TO PUBLIC;

-- next_id(shard, seq) under a name no shard's function has: what a shard's next_id() calls.
CREATE OR REPLACE FUNCTION snowflake_id_internal.shard_next_id(shard integer, seq regclass) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'next_id_wrapper';
COMMENT ON FUNCTION snowflake_id_internal.shard_next_id(integer, regclass) IS
  'next_id(shard, seq) under a name of its own, called by each shard''s next_id() (made by create_shard): its name is looked up without reading every shard''s next_id().';

-- The next_id() of the shard in schema nsp, by its catalog key: a lookup by name
-- (to_regprocedure, or a call) reads every next_id() of the node.
CREATE OR REPLACE FUNCTION snowflake_id_internal.shard_function(nsp oid) RETURNS oid
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN (SELECT p.oid FROM pg_proc p
         WHERE p.proname = 'next_id' AND p.proargtypes = ''::oidvector AND p.pronamespace = nsp);
COMMENT ON FUNCTION snowflake_id_internal.shard_function(oid) IS
  'The next_id() of the shard in a schema (by OID), found by its catalog key, not by name: NULL if it has none.';

-- The shard's sequence, schema_name.table_id_seq: made, or adopted (adopting: the schema is
-- not a shard yet) when it is a real sequence, after waiting for its users; refused when
-- its range cannot hold IDs; a plain counter moved above every ID the old function can
-- have made.
CREATE OR REPLACE FUNCTION snowflake_id_internal.shard_sequence(schema_name text, nsp oid, shard integer, adopting boolean)
RETURNS oid
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    seq oid;
    seq_kind "char";
    seq_owner regrole;
    counter bigint;
    seq_min bigint;
    seq_max bigint;
BEGIN
    -- Only a real sequence is adopted, and nothing in the schema is run: its state is read
    -- with pg_sequence_last_value(), never with a query on whatever bears the name.
    SELECT c.oid, c.relkind, c.relowner INTO seq, seq_kind, seq_owner FROM pg_class c
     WHERE c.relnamespace = nsp AND c.relname = 'table_id_seq';
    IF seq IS NULL THEN
        EXECUTE format('CREATE SEQUENCE %I.table_id_seq AS bigint', schema_name);
        seq := format('%I.table_id_seq', schema_name)::regclass;
    ELSIF seq_kind <> 'S' THEN
        RAISE EXCEPTION '"%" is not a sequence', format('%I.table_id_seq', schema_name)
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'create_shard adopts only a sequence named table_id_seq.';
    ELSIF adopting THEN
        IF seq_owner <> current_user::regrole THEN
            RAISE WARNING 'sequence %.table_id_seq is owned by role %, who can reset it (setval) and so make next_id() repeat IDs',
                quote_ident(schema_name), seq_owner;
        END IF;
        -- ALTER ... OWNER TO its own owner changes nothing, but takes ACCESS EXCLUSIVE: it
        -- waits for every transaction holding the sequence's lock (every nextval() caller).
        -- It needs the caller to own the sequence (or be superuser): 42501 otherwise.
        EXECUTE format('ALTER SEQUENCE %s OWNER TO %s', seq::regclass, seq_owner);
    END IF;

    -- A sequence whose range cannot hold IDs (AS integer, descending): next_id's own error.
    SELECT q.seqmin, q.seqmax INTO seq_min, seq_max FROM pg_sequence q WHERE q.seqrelid = seq;
    IF NOT @extschema@.make_id(clock_timestamp(), shard, @extschema@.id_sequence(9223372036854775807))
           BETWEEN seq_min AND seq_max THEN
        RAISE EXCEPTION 'sequence "%" cannot hold snowflake IDs: its range is % to %', seq::regclass, seq_min, seq_max
            USING ERRCODE = 'sequence_generator_limit_exceeded',
                  HINT = format('ALTER SEQUENCE %s AS bigint MINVALUE 1 MAXVALUE 9223372036854775807', seq::regclass);
    END IF;
    -- A sequence still holding a plain counter (new, or Instagram's PL/pgSQL's) is moved
    -- above every ID the old function can have made; one holding IDs already is left alone.
    counter := coalesce(pg_sequence_last_value(seq), 0);
    IF counter < (1::bigint << 42) THEN
        PERFORM setval(seq, @extschema@.make_id(clock_timestamp(), shard, @extschema@.id_sequence(9223372036854775807)), true);
    END IF;
    RETURN seq;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.shard_sequence(text, oid, integer, boolean) IS
  'create_shard''s sequence of a shard: made, or adopted and checked; its counter moved above the old IDs.';

-- A shard's schema name and number checked: within the layout, at most 63 bytes, not empty,
-- not a system or temporary schema.
CREATE OR REPLACE FUNCTION snowflake_id_internal.check_shard_name(schema_name text, shard integer) RETURNS void
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
AS $$
BEGIN
    -- A shard outside the layout: make_id's own error (22003, naming the valid range).
    PERFORM @extschema@.make_id(clock_timestamp(), shard, 0);
    -- PostgreSQL truncates longer names to 63 bytes: two such names would be one schema.
    IF octet_length(schema_name) > 63 THEN
        RAISE EXCEPTION 'schema name "%" is too long: % bytes, at most 63', schema_name, octet_length(schema_name)
            USING ERRCODE = 'name_too_long';
    END IF;
    IF schema_name = '' THEN
        RAISE EXCEPTION 'schema name must not be empty' USING ERRCODE = 'invalid_name';
    END IF;
    -- System schemas, and temporary ones (pg_temp_N), whose objects vanish with a session
    -- while the catalog row would stay.
    IF schema_name LIKE 'pg\_%' OR schema_name = 'information_schema' THEN
        RAISE EXCEPTION 'schema name "%" is reserved: a shard cannot be a system or temporary schema', schema_name
            USING ERRCODE = 'reserved_name';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.check_shard_name(text, integer) IS
  'create_shard''s checks of a shard''s schema name and number (22003, 42622, 42602, 42939).';

-- create_shard(schema_name, shard) but for the last step: returns the name the shard's
-- function has, next_id if it was there already (replaced in place), else the name of its
-- own it was made under, which the caller sets defaults through and then renames next_id.
CREATE OR REPLACE FUNCTION snowflake_id_internal.make_shard(schema_name text, shard integer) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    existing @extschema@.snowflake_id_shard;
    other text;
    nsp oid;
    made_schema boolean;
    seq oid;
    old_fn oid;
    dependent regclass;
    fn text;
BEGIN
    PERFORM snowflake_id_internal.check_shard_name(schema_name, shard);

    -- One create_shard/drop_shard at a time, so the checks below cannot be overtaken by
    -- another session's (READ COMMITTED: each statement after the lock sees its commits).
    LOCK TABLE @extschema@.snowflake_id_shard IN SHARE ROW EXCLUSIVE MODE;
    SELECT c.schema_name INTO other FROM @extschema@.snowflake_id_shard c
     WHERE c.shard = make_shard.shard AND c.schema_name <> make_shard.schema_name;
    IF FOUND THEN
        RAISE EXCEPTION 'shard % is already given to schema %', shard, quote_ident(other)
            USING ERRCODE = 'unique_violation';
    END IF;
    SELECT * INTO existing FROM @extschema@.snowflake_id_shard c
     WHERE c.schema_name = make_shard.schema_name;
    IF FOUND AND existing.shard <> shard THEN
        RAISE EXCEPTION 'schema % is already shard %', quote_ident(schema_name), existing.shard
            USING ERRCODE = 'unique_violation';
    END IF;

    nsp := to_regnamespace(quote_ident(schema_name));
    made_schema := nsp IS NULL;
    IF made_schema THEN
        EXECUTE format('CREATE SCHEMA %I', schema_name);
        nsp := to_regnamespace(quote_ident(schema_name));
    ELSIF (SELECT n.nspowner <> current_user::regrole FROM pg_namespace n WHERE n.oid = nsp) THEN
        RAISE WARNING 'schema % is owned by role %, who can replace what create_shard makes in it',
            quote_ident(schema_name), (SELECT n.nspowner::regrole FROM pg_namespace n WHERE n.oid = nsp);
    END IF;

    -- Adopting a schema in use (Instagram's PL/pgSQL next_id() and its sequence; not when
    -- this is already a shard, made native before): wait until
    -- no transaction that wrote with the old function, or used the sequence, is still open,
    -- and keep new ones out until we commit, so that no ID from the old function can follow
    -- the native generator's. First the tables whose column defaults call the function being
    -- replaced: SHARE waits for their open writers and blocks new ones, which then see the
    -- new body.
    old_fn := snowflake_id_internal.shard_function(nsp);
    IF old_fn IS NOT NULL AND (SELECT p.proowner <> current_user::regrole FROM pg_proc p WHERE p.oid = old_fn) THEN
        RAISE WARNING 'function %.next_id() is owned by role %, who keeps it when create_shard replaces its body',
            quote_ident(schema_name), (SELECT p.proowner::regrole FROM pg_proc p WHERE p.oid = old_fn);
    END IF;
    IF old_fn IS NOT NULL AND existing.schema_name IS NULL THEN
        FOR dependent IN
            SELECT DISTINCT ad.adrelid::regclass FROM pg_depend d
              JOIN pg_attrdef ad ON d.classid = 'pg_attrdef'::regclass AND ad.oid = d.objid
              JOIN pg_class c ON c.oid = ad.adrelid AND c.relkind IN ('r', 'p')
             WHERE d.refclassid = 'pg_proc'::regclass AND d.refobjid = old_fn
        LOOP
            EXECUTE format('LOCK TABLE %s IN SHARE MODE', dependent);
        END LOOP;
    END IF;

    seq := snowflake_id_internal.shard_sequence(schema_name, nsp, shard, existing.schema_name IS NULL);
    -- A new function under a name of its own (the schema is new, or has no next_id()), an
    -- existing one replaced in place.
    fn := CASE WHEN old_fn IS NULL THEN 'snowflake_id_new_next_id_' || shard ELSE 'next_id' END;
    EXECUTE format(
        'CREATE %s FUNCTION %I.%I(OUT result bigint) '
        'LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY INVOKER '
        'SET search_path = pg_catalog, pg_temp '
        'RETURN snowflake_id_internal.shard_next_id(%s, %L::regclass)',
        CASE WHEN old_fn IS NULL THEN '' ELSE 'OR REPLACE' END, schema_name, fn, shard, seq::regclass);
    EXECUTE format('COMMENT ON FUNCTION %I.%I() IS %L', schema_name, fn,
        format('Next snowflake ID of logical shard %s, from sequence %s (made by create_shard).', shard, seq::regclass));
    IF existing.schema_name IS NOT NULL THEN
        UPDATE @extschema@.snowflake_id_shard c SET sequence = seq
         WHERE c.schema_name = make_shard.schema_name AND c.sequence <> seq;
    ELSE
        BEGIN
            INSERT INTO @extschema@.snowflake_id_shard VALUES (schema_name, shard, seq, made_schema);
        EXCEPTION WHEN unique_violation THEN
            -- Only under REPEATABLE READ or SERIALIZABLE, whose snapshot predates the lock:
            -- another session's create_shard committed a conflicting row meanwhile.
            RAISE EXCEPTION 'shard % or schema % was taken by a concurrent create_shard', shard, quote_ident(schema_name)
                USING ERRCODE = 'serialization_failure', HINT = 'Retry the transaction.';
        END;
    END IF;
    RETURN fn;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.make_shard(text, integer) IS
  'create_shard(schema_name, shard) but for renaming a newly made function next_id: returns the name the shard''s function has.';

CREATE OR REPLACE FUNCTION create_shard(schema_name text, shard integer) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn text := snowflake_id_internal.make_shard(schema_name, shard);
BEGIN
    IF fn <> 'next_id' THEN
        EXECUTE format('ALTER FUNCTION %I.%I() RENAME TO next_id', schema_name, fn);
    END IF;
END
$$;
COMMENT ON FUNCTION create_shard(text, integer) IS
  'Makes (or adopts) schema_name as logical shard: its sequence table_id_seq and its next_id() function. Idempotent.';

CREATE OR REPLACE FUNCTION create_shards(prefix text, first_shard integer, count integer) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF count < 0 THEN
        RAISE EXCEPTION 'count % is negative: create_shards makes count shards from first_shard on', count
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    -- The first and the last shard are checked as make_id checks a shard (22003).
    PERFORM @extschema@.make_id(clock_timestamp(), first_shard, 0);
    IF count > 0 THEN
        PERFORM @extschema@.make_id(clock_timestamp(), least(first_shard::bigint + count - 1, 2147483647)::integer, 0);
    END IF;
    FOR n IN first_shard .. first_shard + count - 1 LOOP
        PERFORM @extschema@.create_shard(prefix || n, n);
    END LOOP;
END
$$;
COMMENT ON FUNCTION create_shards(text, integer, integer) IS
  'create_shard(prefix || n, n) for n = first_shard .. first_shard + count - 1, in one transaction.';

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
    -- pg_partman keeps tables by name: rows naming the dropped schema's would make its
    -- maintenance fail for every table. A caller who may run the node's own clean-up (a
    -- superuser: pg_partman's tables are a superuser's) has them forgotten.
    IF to_regnamespace(quote_ident(schema_name)) IS NULL AND EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'pg_partman')
       AND has_function_privilege('snowflake_id_node.partman_forget(text[])', 'EXECUTE') THEN
        PERFORM snowflake_id_node.partman_forget(ARRAY[schema_name]);
    END IF;
END
$$;
COMMENT ON FUNCTION drop_shard(text, boolean) IS
  'Drops what create_shard made (function, sequence, and the schema if it made it); refuses while tables depend on them, unless cascade.';

-- create_shard(schema_name, shard, template => 'tpl'): the shard layout declared once.
-- After create_shard(schema_name, shard), every table of schema tpl is made in the shard's
-- schema with CREATE TABLE ... (LIKE tpl.t INCLUDING ALL): columns, defaults, generated
-- columns, NOT NULL, CHECK, primary key, unique and exclusion constraints, indexes, extended
-- statistics, comments, identity; then its storage parameters, triggers (in their ENABLE
-- state), row-level security settings, policies and replica identity (FULL, NOTHING, or USING
-- INDEX: the copy's index made from the template's); once every table is made, the foreign
-- keys between the template's tables, pointing at the shard's. A single-column bigint (or
-- snowflake) primary key then defaults to the shard's own next_id() (identity dropped); a key
-- of several columns keeps its columns as they are. Refused (0A000), naming the object: a
-- rule, a foreign key to a table outside the template (its rows are not the shard's), a
-- policy or constraint trigger that reads another table of the template (its copy would read
-- the template's); make those in each shard. A trigger's function lives outside the
-- template (a function in it is refused, below) and is judged as a default's is.
--
-- Its sequences (but identity columns', which LIKE copies) are made in the shard first, with
-- their options; a default that is nextval() of one takes the shard's (copy_default), a
-- serial's sequence is owned by the shard's column. Its views are made in the shard over the
-- shard's tables (copy_view), in the order they read each other. Anything else in it
-- (aggregates, types) is refused (42809). So is a template whose copies
-- would use or run anything owned by a role that is neither the caller nor a superuser
-- (42501): functions, operators, types, domains, collations, operator classes, casts'
-- functions, text search configurations, sequences, found transitively from the tables'
-- columns, defaults, constraints, foreign keys, indexes, statistics, triggers and policies
-- (sql/installer/template_read.sql).
-- The template's tables stay locked from that check to the end of the transaction, and the
-- check reads the catalog as the copy does (src/pg/template_read.rs). Nothing of the template
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
    PERFORM snowflake_id_internal.check_template_owner(template);
    PERFORM snowflake_id_internal.create_shards_from(ARRAY[schema_name], ARRAY[shard], template, true);
END
$$;
COMMENT ON FUNCTION create_shard(text, integer, text) IS
  'create_shard(schema_name, shard), then every table of schema template made in it (LIKE ... INCLUDING ALL, with its policies), a single-column bigint primary key defaulting to its next_id(). Idempotent.';

CREATE OR REPLACE FUNCTION create_shards(prefix text, first_shard integer, count integer, template text) RETURNS void
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
    IF count < 0 THEN
        RAISE EXCEPTION 'count % is negative: create_shards makes count shards from first_shard on', count
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    -- The first and the last shard are checked as make_id checks a shard (22003).
    PERFORM @extschema@.make_id(clock_timestamp(), first_shard, 0);
    IF count > 0 THEN
        PERFORM @extschema@.make_id(clock_timestamp(), least(first_shard::bigint + count - 1, 2147483647)::integer, 0);
    END IF;
    PERFORM snowflake_id_internal.check_template_owner(template);
    PERFORM snowflake_id_internal.create_shards_from(
        array(SELECT prefix || n FROM generate_series(first_shard, first_shard + count - 1) n),
        array(SELECT n FROM generate_series(first_shard, first_shard + count - 1) n),
        template, true);
END
$$;
COMMENT ON FUNCTION create_shards(text, integer, integer, text) IS
  'create_shard(prefix || n, n, template) for n = first_shard .. first_shard + count - 1, in one transaction, the template read and checked once.';

-- Written in Rust (src/pg/template_read.rs): the template's tables locked, then read at a
-- snapshot taken after the locks (sql/installer/template_read.sql).
CREATE OR REPLACE FUNCTION snowflake_id_internal.template_read(template oid)
RETURNS TABLE (kind text, rel oid, name text, detail text, deps text)
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'template_read_wrapper'
-- Its plan's estimated cost is high (a recursive walk) and its real cost a millisecond:
-- compiling it would cost more than running it. Policies are read back as text, and floats
-- in them must come out exact.
SET jit = off SET extra_float_digits = 3
-- Definitions are read back qualified: the template's names never resolve through a path.
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION snowflake_id_internal.template_read(oid) IS
  'create_shard''s reading of a template schema: its tables locked, then what the shards would copy and run, at a snapshot taken after the locks.';

-- An index's definition but for its name and its table's: pg_get_indexdef from USING on
-- (method, columns, operator classes, INCLUDE, storage parameters, predicate), after UNIQUE.
-- An index LIKE made from another has the other's shape (NULL: not an index of a table).
CREATE OR REPLACE FUNCTION snowflake_id_internal.index_shape(idx oid) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN (SELECT CASE WHEN starts_with(x.def, x.head) THEN u.u || substr(x.def, length(x.head) + 1) END
          FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
          JOIN pg_namespace n ON n.oid = t.relnamespace,
               LATERAL (SELECT CASE WHEN i.indisunique THEN 'UNIQUE ' ELSE '' END) u(u),
               LATERAL (SELECT pg_get_indexdef(i.indexrelid),
                               format('CREATE %sINDEX %I ON %I.%I ', u.u, c.relname, n.nspname, t.relname)) x(def, head)
         WHERE i.indexrelid = idx);
COMMENT ON FUNCTION snowflake_id_internal.index_shape(oid) IS
  'An index''s definition without its name or its table''s (pg_get_indexdef from USING on): equal for an index and its copy made by LIKE.';

-- Gives table copy (made from template table tpl_table by LIKE) the template's replica
-- identity, FULL, NOTHING or USING INDEX (identity: template_read's detail): for an index,
-- the copy's index of the same shape (index_shape; LIKE names the copies of indexes after
-- their new table). A template whose identity index is gone has the identity NOTHING in
-- effect (PostgreSQL's rule), and so gets its copy.
CREATE OR REPLACE FUNCTION snowflake_id_internal.copy_replica_identity(tpl_table oid, copy regclass, identity text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    shape text;
    idx name;
BEGIN
    IF identity IN ('FULL', 'NOTHING') THEN
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY %s', copy, identity);
        RETURN;
    END IF;
    SELECT snowflake_id_internal.index_shape(i.indexrelid) INTO shape FROM pg_index i
     WHERE i.indrelid = tpl_table AND i.indisreplident;
    IF NOT FOUND THEN
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY NOTHING', copy);
        RETURN;
    END IF;
    SELECT c.relname INTO idx FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     WHERE i.indrelid = copy AND snowflake_id_internal.index_shape(i.indexrelid) = shape
     ORDER BY i.indexrelid LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table % has no copy of its template''s replica identity index (%)', copy, shape
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    EXECUTE format('ALTER TABLE %s REPLICA IDENTITY USING INDEX %I', copy, idx);
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.copy_replica_identity(oid, regclass, text) IS
  'Gives a table copy made by LIKE its template table''s replica identity (an index: the copy''s index of the same definition).';

-- The template's schema, named by template, checked: at most 63 bytes, not a system or
-- temporary schema, existing, not among the shards to make.
CREATE OR REPLACE FUNCTION snowflake_id_internal.template_schema(template text, schema_names text[]) RETURNS oid
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
AS $$
DECLARE
    tpl oid;
BEGIN
    IF octet_length(template) > 63 THEN
        RAISE EXCEPTION 'template schema name "%" is too long: % bytes, at most 63', template, octet_length(template)
            USING ERRCODE = 'name_too_long';
    END IF;
    -- System schemas hold no tables of ours (pg_catalog's are pinned, so the template would
    -- look empty), and a temporary schema's would be another session's.
    IF template LIKE 'pg\_%' OR template = 'information_schema' THEN
        RAISE EXCEPTION 'schema "%" cannot be a template: it is a system or temporary schema', template
            USING ERRCODE = 'reserved_name';
    END IF;
    tpl := to_regnamespace(quote_ident(template));
    IF tpl IS NULL THEN
        RAISE EXCEPTION 'template schema "%" does not exist', template USING ERRCODE = 'invalid_schema_name';
    END IF;
    IF template = ANY (schema_names) THEN
        RAISE EXCEPTION 'schema % cannot be its own template', quote_ident(template)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN tpl;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.template_schema(text, text[]) IS
  'create_shard''s checks of a template schema''s name; its OID.';

-- The template's table name copied into shard schema s (CREATE TABLE ... LIKE ... INCLUDING
-- ALL), its single-column bigint or snowflake primary key given the shard's function fn as
-- default; NULL when the shard has that table already.
CREATE OR REPLACE FUNCTION snowflake_id_internal.copy_template_table(s text, name text, template text, fn text)
RETURNS regclass
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    kind "char";
    made regclass;
    key record;
BEGIN
    -- A table the shard has already is left as it is; anything else by that name (say,
    -- an index LIKE named after an earlier table) is in the way.
    SELECT c.relkind INTO kind FROM pg_class c
     WHERE c.relnamespace = to_regnamespace(quote_ident(s)) AND c.relname = name;
    IF kind IN ('r', 'p') THEN
        RETURN NULL;
    END IF;
    IF FOUND THEN
        RAISE EXCEPTION 'relation %.% already exists and is not a table', quote_ident(s), quote_ident(name)
            USING ERRCODE = 'duplicate_table',
                  HINT = 'An index of an earlier table may have taken the name (CREATE TABLE ... LIKE names indexes after their table): rename the template''s table.';
    END IF;
    -- A partitioned table is partitioned alike (template_read refused a key expression).
    EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING ALL)', s, name, template, name)
         || coalesce(' PARTITION BY ' || (SELECT pg_get_partkeydef(k.partrelid) FROM pg_partitioned_table k
                                           WHERE k.partrelid = format('%I.%I', template, name)::regclass), '');
    made := format('%I.%I', s, name)::regclass;
    -- A single-column bigint (or snowflake) primary key is the shard's ID.
    SELECT a.attname, a.attidentity INTO key FROM pg_index i
      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
     WHERE i.indrelid = made AND i.indisprimary AND i.indnkeyatts = 1
       AND a.atttypid IN ('bigint'::regtype, '@extschema@.snowflake'::regtype);
    IF FOUND THEN
        IF key.attidentity <> '' THEN
            EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I DROP IDENTITY', s, name, key.attname);
        END IF;
        EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I SET DEFAULT %I.%I()', s, name, key.attname, s, fn);
    END IF;
    RETURN made;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.copy_template_table(text, text, text, text) IS
  'create_shard''s copy of one template table into a shard, its key defaulting to the shard''s next_id; NULL if the shard has it.';

-- Object objid's definition (kind: view, index, function, or a function's arguments) as
-- PostgreSQL prints it with only schema path on the search_path: path's objects named bare,
-- everything else qualified; floating-point constants with every digit (extra_float_digits
-- 3, whatever the caller's: fewer would round them in the copy). (This function's own SET
-- clauses put both back on every exit.)
CREATE OR REPLACE FUNCTION snowflake_id_internal.printed_in(path text, kind text, objid oid) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET extra_float_digits = 3
AS $$
BEGIN
    PERFORM set_config('search_path', format('%I, pg_temp', path), true);
    RETURN CASE kind WHEN 'view' THEN pg_get_viewdef(objid)
                     WHEN 'index' THEN pg_get_indexdef(objid)
                     WHEN 'function' THEN pg_get_functiondef(objid)
                     WHEN 'arguments' THEN pg_get_function_identity_arguments(objid) END;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.printed_in(text, text, oid) IS
  'create_shard''s print of a view, index or function (or its arguments) with only one schema on the path.';

-- Statement run with only schema path on the search_path, so that the names it leaves bare
-- are path's objects, and check_function_bodies off, as pg_dump restores functions: a
-- function's text body is not analysed when its copy is made (analysing it can run code, a
-- domain's check on a constant, say, as the caller; the template's was checked when it was
-- made, and the copy's references are compared after). (Its SET clauses put both back on
-- every exit.)
CREATE OR REPLACE FUNCTION snowflake_id_internal.run_in(path text, statement text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET check_function_bodies = off
AS $$
BEGIN
    PERFORM set_config('search_path', format('%I, pg_temp', path), true);
    EXECUTE statement;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.run_in(text, text) IS
  'create_shard''s run of a statement with only one schema on the path.';

-- Definition def, as PostgreSQL printed it, with its head (rebuilt from the catalog: the
-- text up to and including the template's object's name) replaced by new_head. A def that
-- does not start with head (a name in it printed otherwise than rebuilt) is refused, 55000
-- naming what: never copied from a guess.
CREATE OR REPLACE FUNCTION snowflake_id_internal.reheaded(def text, head text, new_head text, what text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT starts_with(def, head) THEN
        RAISE EXCEPTION '% cannot be read back: %', what, def USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN new_head || substr(def, length(head) + 1);
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.reheaded(text, text, text, text) IS
  'create_shard''s rewrite of a printed definition''s head, naming the shard''s object; 55000 if it does not read back.';

-- A template's function fn (named name) copied into shard schema s, unless the shard has
-- one of that name and arguments: its definition as PostgreSQL prints it with only the
-- template on the path (the template's objects named bare), its head naming the shard's
-- function, made with only the shard on the path, so an SQL-standard body refers to the
-- shard's objects; then checked, as a view is, to refer to what the template's did when it
-- was read (expected: its refers(), computed once per call), the shard's objects for the
-- template's. A body given as text is copied as it is (template_read refused one naming the
-- template).
CREATE OR REPLACE FUNCTION snowflake_id_internal.copy_function(s text, template text, fn oid, name text, read_as text,
                                                               expected text[]) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    args text := snowflake_id_internal.printed_in(template, 'arguments', fn);
    kind text := CASE WHEN (SELECT p.prokind FROM pg_proc p WHERE p.oid = fn) = 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END;
    made oid;
BEGIN
    SELECT p.oid INTO made FROM pg_proc p WHERE p.pronamespace = to_regnamespace(quote_ident(s)) AND p.proname = name
       AND snowflake_id_internal.printed_in(s, 'arguments', p.oid) = args;
    IF FOUND THEN
        RETURN;
    END IF;
    PERFORM snowflake_id_internal.run_in(s, snowflake_id_internal.reheaded(
        snowflake_id_internal.printed_in(template, 'function', fn), format('CREATE OR REPLACE %s %I.%I(', kind, template, name),
        format('CREATE %s %I.%I(', kind, s, name), format('function %I.%I of the template', template, name)));
    SELECT p.oid INTO made FROM pg_proc p WHERE p.pronamespace = to_regnamespace(quote_ident(s)) AND p.proname = name
       AND snowflake_id_internal.printed_in(s, 'arguments', p.oid) = args;
    -- (the template's function is not locked: one changed since it was read and checked,
    -- its pg_proc row's xmin no longer read_as, is refused, never copied unchecked)
    IF (SELECT p.xmin::text FROM pg_proc p WHERE p.oid = fn) IS DISTINCT FROM read_as THEN
        RAISE EXCEPTION 'function %.% of the template changed while create_shard read it', quote_ident(template), quote_ident(name)
            USING ERRCODE = 'serialization_failure', HINT = 'Retry the transaction.';
    END IF;
    IF made IS NULL OR snowflake_id_internal.refers('pg_proc'::regclass, made) IS DISTINCT FROM expected THEN
        RAISE EXCEPTION 'the copy of function %.% refers to other objects than the template''s', quote_ident(template), quote_ident(name)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('The template''s refers to %s, the copy to %s.', expected,
                                  snowflake_id_internal.refers('pg_proc'::regclass, made)),
                  HINT = 'Name what the function uses outside the template with its schema, and give the template''s objects names no schema on the path has.';
    END IF;
    PERFORM snowflake_id_internal.copy_function_acl(made, fn);
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.copy_function(text, text, oid, text, text, text[]) IS
  'create_shard''s copy of one template function into a shard, its SQL-standard body over the shard''s objects, checked to refer to what the original did.';

-- The template function fn's EXECUTE privileges given to its copy made, instead of the
-- defaults (PUBLIC's, and what ALTER DEFAULT PRIVILEGES adds): a function PUBLIC may not run
-- in the template (a SECURITY DEFINER one, say) may not be run in the shard either.
CREATE OR REPLACE FUNCTION snowflake_id_internal.copy_function_acl(made oid, fn oid) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT DISTINCT a.grantee FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
              WHERE p.oid = made AND a.grantee <> p.proowner LOOP
        EXECUTE format('REVOKE ALL ON ROUTINE %s FROM %s', made::regprocedure,
                       CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(g.grantee::regrole::text) END);
    END LOOP;
    FOR g IN SELECT a.grantee, a.is_grantable FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
              WHERE p.oid = fn AND a.grantee <> p.proowner AND a.privilege_type = 'EXECUTE' LOOP
        EXECUTE format('GRANT EXECUTE ON ROUTINE %s TO %s%s', made::regprocedure,
                       CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(g.grantee::regrole::text) END,
                       CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.copy_function_acl(oid, oid) IS
  'create_shard''s copy of a template function''s EXECUTE privileges onto its copy in a shard.';

-- Column col of copy made, whose template's default is nextval() of the template's sequence
-- seq: its default takes the shard's sequence of that name, unless the copy's was replaced
-- (a single bigint key's, by the shard's next_id()).
CREATE OR REPLACE FUNCTION snowflake_id_internal.copy_default(made regclass, col text, template text, s text, seq text)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM pg_attrdef a JOIN pg_attribute c ON c.attrelid = a.adrelid AND c.attnum = a.adnum
                 JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = a.oid
                WHERE a.adrelid = made AND c.attname = col AND d.refclassid = 'pg_class'::regclass
                  AND d.refobjid = format('%I.%I', template, seq)::regclass) THEN
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT nextval(%L::regclass)', made, col, format('%I.%I', s, seq));
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.copy_default(regclass, text, text, text, text) IS
  'create_shard''s copy of a default that is nextval() of a template sequence: the shard''s sequence instead.';

-- A policy of the template's table name copied onto made, from its text (def); refused
-- (55000) unless the copy refers to exactly the objects the checked original does (deps:
-- pg_depend classid:objid, the table itself left out).
CREATE OR REPLACE FUNCTION snowflake_id_internal.copy_policy(made regclass, template text, name text,
                                                             policy name, def text, deps text)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    copied text;
BEGIN
    EXECUTE format('CREATE POLICY %I ON %s ', policy, made) || def;
    -- The copy is made from the policy's text: it must name exactly what the checked
    -- original names (a name can resolve to another object than it did).
    SELECT coalesce(string_agg(DISTINCT d.refclassid || ':' || d.refobjid, ' '
                               ORDER BY d.refclassid || ':' || d.refobjid), '')
      INTO copied FROM pg_policy p JOIN pg_depend d ON d.classid = 'pg_policy'::regclass AND d.objid = p.oid
     WHERE p.polrelid = made AND p.polname = policy
       AND NOT (d.refclassid = 'pg_class'::regclass AND d.refobjid = made);
    IF copied <> deps THEN
        RAISE EXCEPTION 'the copy of policy % on %.% refers to other objects than the template''s', quote_ident(policy), quote_ident(template), quote_ident(name)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('The template''s refers to %s, the copy to %s (pg_depend classid:objid).', deps, copied);
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.copy_policy(regclass, text, text, name, text, text) IS
  'create_shard''s copy of one template policy onto a shard''s table, checked to refer to what the original does.';

-- A template trigger's copy (name) on table made: its CREATE TRIGGER statement def (the
-- shard's names in it), then the template's ENABLE state (pg_trigger.tgenabled: O, the default; D, A, R).
-- A copy that still refers to anything of the template (a WHEN condition calling its
-- function) is refused (55000).
CREATE OR REPLACE FUNCTION snowflake_id_internal.copy_trigger(made regclass, name text, def text, state text, template text)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    EXECUTE def;
    IF EXISTS (SELECT FROM pg_trigger g JOIN pg_depend d ON d.classid = 'pg_trigger'::regclass AND d.objid = g.oid
                WHERE g.tgrelid = made AND g.tgname = name
                  AND (pg_identify_object(d.refclassid, d.refobjid, 0)).schema = template) THEN
        RAISE EXCEPTION 'the copy of trigger % on %.% refers to the template''s objects', quote_ident(name),
            quote_ident(template), (SELECT quote_ident(c.relname) FROM pg_class c WHERE c.oid = made)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A trigger''s WHEN condition may not call a function of the template.';
    END IF;
    IF state <> 'O' THEN
        EXECUTE format('ALTER TABLE %s %s TRIGGER %I', made,
                       CASE state WHEN 'D' THEN 'DISABLE' WHEN 'A' THEN 'ENABLE ALWAYS' ELSE 'ENABLE REPLICA' END, name);
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.copy_trigger(regclass, text, text, text, text) IS
  'create_shard''s copy of one template trigger onto a shard''s table, in the template''s ENABLE state.';

-- What a view's query (classid pg_class: its rule) or a function (pg_proc: its types and an
-- SQL-standard body) refers to, as PostgreSQL records it: the relations, constraints, types
-- and functions of its own schema by name, anything else by catalog and OID (its schema
-- itself left out). A copy in a shard and its template's original compare equal when each
-- refers to the same outside objects and to its own schema's objects of the same names.
CREATE OR REPLACE FUNCTION snowflake_id_internal.refers(classid oid, objid oid) RETURNS text[]
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH own AS (SELECT o.relnamespace AS nsp FROM pg_class o WHERE refers.classid = 'pg_class'::regclass AND o.oid = refers.objid
                 UNION ALL
                 SELECT f.pronamespace FROM pg_proc f WHERE refers.classid = 'pg_proc'::regclass AND f.oid = refers.objid),
    refs AS (SELECT d.refclassid, d.refobjid, d.refobjsubid
               FROM pg_rewrite w JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
              WHERE refers.classid = 'pg_class'::regclass AND w.ev_class = refers.objid AND w.rulename = '_RETURN'
             UNION ALL
             SELECT d.refclassid, d.refobjid, d.refobjsubid FROM pg_depend d
              WHERE refers.classid = 'pg_proc'::regclass AND d.classid = 'pg_proc'::regclass AND d.objid = refers.objid
                AND d.refclassid <> 'pg_namespace'::regclass),
    named(refclassid, refobjid, name) AS (
        -- a relation of its schema, or a column of one (by name)
        SELECT r.refclassid, r.refobjid, format('own %I%s', c.relname, coalesce('.' || quote_ident(a.attname), ''))
          FROM refs r JOIN pg_class c ON r.refclassid = 'pg_class'::regclass AND c.oid = r.refobjid
          JOIN own ON own.nsp = c.relnamespace
          LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = r.refobjsubid AND r.refobjsubid > 0
        UNION ALL
        -- a constraint of such a relation (a primary key a GROUP BY relies on), by its definition
        SELECT r.refclassid, r.refobjid, format('own constraint on %I: %s', c.relname, pg_get_constraintdef(k.oid))
          FROM refs r JOIN pg_constraint k ON r.refclassid = 'pg_constraint'::regclass AND k.oid = r.refobjid
          JOIN pg_class c ON c.oid = k.conrelid JOIN own ON own.nsp = c.relnamespace
        UNION ALL
        -- a type of its schema (a table's row type), by name
        SELECT r.refclassid, r.refobjid, format('own type %I', y.typname)
          FROM refs r JOIN pg_type y ON r.refclassid = 'pg_type'::regclass AND y.oid = r.refobjid
          JOIN own ON own.nsp = y.typnamespace
        UNION ALL
        -- a function of its schema, by name and arguments' types
        SELECT r.refclassid, r.refobjid, format('own function %I(%s)', f.proname, pg_get_function_identity_arguments(f.oid))
          FROM refs r JOIN pg_proc f ON r.refclassid = 'pg_proc'::regclass AND f.oid = r.refobjid
          JOIN own ON own.nsp = f.pronamespace)
    SELECT coalesce(array_agg(DISTINCT x.x COLLATE "C" ORDER BY x.x COLLATE "C"), '{}')
      FROM (SELECT n.name FROM named n
            UNION ALL
            -- anything else, as itself
            SELECT format('%s:%s:%s', r.refclassid, r.refobjid, r.refobjsubid) FROM refs r
             WHERE NOT EXISTS (SELECT FROM named n WHERE n.refclassid = r.refclassid AND n.refobjid = r.refobjid)) x(x);
END;
COMMENT ON FUNCTION snowflake_id_internal.refers(oid, oid) IS
  'What a view''s query or a function refers to: its own schema''s relations, constraints, types and functions by name, anything else by catalog and OID.';

-- A template view's copy (name, with options) in shard schema s, unless the shard has one
-- already: its query as PostgreSQL prints it with only the template on the path (the
-- template's relations named bare, everything else qualified), made with only the shard on
-- the path (so it reads the shard's relations), then checked to refer to what the
-- template's does, the shard's relations for the template's (refers): a copy that
-- would read anything else is refused, never made from a guess.
CREATE OR REPLACE FUNCTION snowflake_id_internal.copy_view(s text, template text, rel oid, name text, options text,
                                                           materialized boolean, fill boolean) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    def text;
    made regclass;
BEGIN
    IF to_regclass(format('%I.%I', s, name)) IS NOT NULL THEN
        RETURN;
    END IF;
    def := snowflake_id_internal.printed_in(template, 'view', rel);
    -- (a materialized view made empty: its query runs only once the copy is checked, below)
    PERFORM snowflake_id_internal.run_in(s, format('CREATE %sVIEW %I.%I%s AS ', CASE WHEN materialized THEN 'MATERIALIZED ' ELSE '' END,
                                                   s, name, coalesce(' WITH (' || options || ')', ''))
                                            || CASE WHEN materialized THEN rtrim(rtrim(def), ';') || ' WITH NO DATA' ELSE def END);
    made := format('%I.%I', s, name)::regclass;
    IF snowflake_id_internal.refers('pg_class'::regclass, made) IS DISTINCT FROM snowflake_id_internal.refers('pg_class'::regclass, rel) THEN
        RAISE EXCEPTION 'the copy of view %.% refers to other objects than the template''s', quote_ident(template), quote_ident(name)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('The template''s refers to %s, the copy to %s.', snowflake_id_internal.refers('pg_class'::regclass, rel),
                                  snowflake_id_internal.refers('pg_class'::regclass, made)),
                  HINT = 'Name what the view reads outside the template with its schema, and give the template''s relations names no schema on the path has.';
    END IF;
    IF materialized THEN
        PERFORM snowflake_id_internal.copy_indexes(made, rel, s, template, name);
        IF fill THEN
            EXECUTE format('REFRESH MATERIALIZED VIEW %s', made);
        END IF;
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.copy_view(text, text, oid, text, text, boolean, boolean) IS
  'create_shard''s copy of one template view (or materialized view, with its indexes, populated if fill) into a shard, over the shard''s relations, checked to refer to what the original does.';

-- The indexes of the template's materialized view rel (named name) made on its copy made in
-- shard schema s, under their names: each as PostgreSQL prints it with only the template on
-- the path, split where it names the view, qualified (refused, 55000, if it does not read back so),
-- made with only the shard on the path. (An index's expressions and predicate can name
-- only its own relation's columns and functions, which a template cannot hold.)
CREATE OR REPLACE FUNCTION snowflake_id_internal.copy_indexes(made regclass, rel oid, s text, template text, name text)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    i record;
BEGIN
    FOR i IN SELECT snowflake_id_internal.reheaded(snowflake_id_internal.printed_in(template, 'index', x.indexrelid),
                        format('CREATE %sINDEX %I ON %I.%I USING ', CASE WHEN x.indisunique THEN 'UNIQUE ' END, c.relname, template, name),
                        format('CREATE %sINDEX %I ON %s USING ', CASE WHEN x.indisunique THEN 'UNIQUE ' END, c.relname, made),
                        format('index %I of materialized view %I.%I', c.relname, template, name)) AS def, c.relname
               FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid WHERE x.indrelid = rel ORDER BY c.relname LOOP
        IF to_regclass(format('%I.%I', s, i.relname)) IS NOT NULL THEN
            RAISE EXCEPTION 'index % of materialized view %.% cannot be copied: relation %.% already exists', quote_ident(i.relname),
                quote_ident(template), quote_ident(name), quote_ident(s), quote_ident(i.relname)
                USING ERRCODE = 'duplicate_table',
                      HINT = 'An index of a table may have taken the name (CREATE TABLE ... LIKE names indexes after their table): rename the template''s index.';
        END IF;
        PERFORM snowflake_id_internal.run_in(s, i.def);
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.copy_indexes(regclass, oid, text, text, text) IS
  'create_shard''s copy of a template materialized view''s indexes onto its copy in a shard.';

-- What in schema nsp is neither role trusting's nor a superuser's, listed (NULL: nothing):
-- the schema itself, a CREATE privilege on it (PUBLIC's too), its relations, functions,
-- types and operators. Who owns the schema can rename it and put another under its name;
-- who may create in it can add objects (a function of a closer argument type than the one
-- a statement means); who owns an object decides what it does (a table's definitions, a
-- function's body): create_shard reads a template, and uses what a shard's schema already
-- holds, by name, and alter_shards runs a statement naming the schema's objects, so each of
-- these must be trusted by the role that runs them, or another role's code would run as it.
CREATE OR REPLACE FUNCTION snowflake_id_internal.untrusted_in(nsp oid, trusting oid) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH members AS (
        SELECT d.classid, d.objid FROM pg_depend d
         WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = nsp AND d.deptype = 'n')
    SELECT string_agg(x.what, ', ' ORDER BY x.what)
      FROM (SELECT format('schema %I (owner %s)', n.nspname, n.nspowner::regrole), n.nspowner
              FROM pg_namespace n WHERE n.oid = nsp
            UNION ALL
            SELECT format('CREATE on schema %I (granted to %s)', n.nspname,
                          CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END), a.grantee
              FROM pg_namespace n, aclexplode(n.nspacl) a WHERE n.oid = nsp AND a.privilege_type = 'CREATE'
            UNION ALL
            SELECT format('%s %s (owner %s)', CASE c.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view'
                                                   WHEN 'S' THEN 'sequence' WHEN 'i' THEN 'index' WHEN 'c' THEN 'type'
                                                   ELSE 'table' END,
                          c.oid::regclass, c.relowner::regrole), c.relowner
              FROM members m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
            UNION ALL
            SELECT format('function %s (owner %s)', p.oid::regprocedure, p.proowner::regrole), p.proowner
              FROM members m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
            UNION ALL
            SELECT format('type %s (owner %s)', y.oid::regtype, y.typowner::regrole), y.typowner
              FROM members m JOIN pg_type y ON m.classid = 'pg_type'::regclass AND y.oid = m.objid
            UNION ALL
            SELECT format('operator %s (owner %s)', o.oid::regoperator, o.oprowner::regrole), o.oprowner
              FROM members m JOIN pg_operator o ON m.classid = 'pg_operator'::regclass AND o.oid = m.objid) x(what, owner)
     WHERE x.owner <> trusting AND NOT coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.oid = x.owner), false);
END;
COMMENT ON FUNCTION snowflake_id_internal.untrusted_in(oid, oid) IS
  'What in a schema (itself, CREATE on it, its relations, functions, types and operators) is neither a role''s nor a superuser''s, listed; NULL if nothing.';

-- The template's schema, CREATE on it, tables, views, sequences and functions must be the
-- caller's or a superuser's (42501, naming each that is not): their definitions (defaults,
-- checks, index expressions, triggers' conditions, policies, views' queries, functions'
-- bodies) are their owner's code, which every shard made from them would run as whoever
-- writes to or reads it, and as the shard's owner, the caller, where PostgreSQL runs a
-- table's code as its owner (a move's apply, a view); and the copy names them by the
-- template's name, which the schema's owner can give to another schema. Only their owners
-- can give them to another role, and only a trusted role can add to the schema. (A move's
-- copy is made from the target's template by the mover, a superuser, without this check: it
-- must read as the source's shard does, and nothing of the template runs in the making
-- (create_shards_from with fill false: its materialized views are filled under the fence
-- by their owners); it is owned by the source shard's owners before any row is written.)
CREATE OR REPLACE FUNCTION snowflake_id_internal.check_template_owner(template text) RETURNS void
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    others text := snowflake_id_internal.untrusted_in(to_regnamespace(quote_ident(template)), current_user::regrole);
BEGIN
    IF others IS NOT NULL THEN
        RAISE EXCEPTION 'template schema % holds tables, views, sequences or functions of another role, whose definitions its shards would run as you: %',
            quote_ident(template), others
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Make the shards as that role (SET ROLE), or give the template and what it holds to yourself.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.check_template_owner(text) IS
  'create_shard''s refusal (42501) of a template schema, or something in it or a CREATE on it, of another role (not a superuser).';

-- create_shard's refusals of a template (its name; findings: template_read's rows as jsonb),
-- each naming every object concerned: what is not a table (42809), code the caller does not
-- trust (42501), what cannot be copied right (0A000).
CREATE OR REPLACE FUNCTION snowflake_id_internal.check_template(template text, findings jsonb) RETURNS void
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    other text;
    refused text;
    untrusted text;
BEGIN
    SELECT array_to_string((array_agg(r.detail ORDER BY r.detail) FILTER (WHERE r.kind = 'other'))[1:10], ', ')
           || CASE WHEN count(*) FILTER (WHERE r.kind = 'other') > 10
                   THEN format(' and %s more', count(*) FILTER (WHERE r.kind = 'other') - 10) ELSE '' END,
           string_agg(r.detail, '; ' ORDER BY r.detail) FILTER (WHERE r.kind = 'refused'),
           string_agg(DISTINCT r.detail, ', ') FILTER (WHERE r.kind = 'untrusted')
      INTO other, refused, untrusted
      FROM jsonb_to_recordset(findings) AS r(kind text, detail text);
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
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.check_template(text, jsonb) IS
  'create_shard''s refusals of a template, from its reading (template_read''s rows): 42809, 42501, 0A000, naming each object.';

-- Fills shard schema s (its next_id() named fn) from the template's reading (findings:
-- template_read's rows as jsonb): each table the shard lacks, then on it its storage
-- parameters, triggers, row-level security, policies and replica identity (a partition
-- attached to its table first); then, once every table is made, the foreign keys of the
-- tables made (their %I is the shard's schema), the functions, the triggers calling them,
-- the views; the materialized views populated if fill (not in a move's copy, made by the
-- mover: no query of the template's runs there as the mover, and the move refreshes them
-- under its fence as their owners, refresh_copies).
CREATE OR REPLACE FUNCTION snowflake_id_internal.fill_shard(s text, template text, fn text, findings jsonb, fill boolean) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
    f record;
    made regclass;
    made_tables oid[] := '{}';
    made_sequences text[] := '{}';
    others text := snowflake_id_internal.untrusted_in(to_regnamespace(quote_ident(s)), current_user::regrole);
BEGIN
    -- A schema the shard had already: what it holds is used by name (a function of the
    -- template's name is not made again, a view calls it), so it must be trusted as the
    -- template is.
    IF others IS NOT NULL THEN
        RAISE EXCEPTION 'schema % holds what another role may change, which the shard made from template % would use: %',
            quote_ident(s), quote_ident(template), others
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Make the shard in a new schema, or give the schema and what it holds to yourself.';
    END IF;
    -- The sequences first (the tables' defaults take them), those the shard has not.
    FOR f IN SELECT r.* FROM jsonb_to_recordset(findings) AS r(kind text, name text, detail text)
              WHERE r.kind = 'sequence' AND to_regclass(format('%I.%I', s, r.name)) IS NULL ORDER BY r.name LOOP
        EXECUTE format('CREATE SEQUENCE %I.%I ', s, f.name) || f.detail;
        made_sequences := made_sequences || f.name;
    END LOOP;
    -- A partitioned table before its partitions, each attached to it once made.
    FOR t IN SELECT r.rel, r.name, p.name AS parent, p.detail AS bound
               FROM jsonb_to_recordset(findings) AS r(kind text, rel oid, name text)
               LEFT JOIN jsonb_to_recordset(findings) AS p(kind text, rel oid, name text, detail text, deps text)
                 ON p.kind = 'partition' AND p.rel = r.rel
              WHERE r.kind = 'table' ORDER BY coalesce(p.deps::integer, 0), r.name LOOP
        made := snowflake_id_internal.copy_template_table(s, t.name, template, fn);
        CONTINUE WHEN made IS NULL;
        made_tables := made_tables || t.rel;
        IF t.parent IS NOT NULL THEN
            EXECUTE format('ALTER TABLE %I.%I ATTACH PARTITION %s ', s, t.parent, made) || t.bound;
        END IF;
        FOR f IN SELECT r.* FROM jsonb_to_recordset(findings) AS r(kind text, rel oid, name text, detail text, deps text)
                  WHERE r.rel = t.rel AND r.kind IN ('default', 'options', 'trigger', 'rls', 'policy', 'identity')
                  ORDER BY array_position('{default,options,trigger,rls,policy,identity}'::text[], r.kind), r.name, r.detail LOOP
            CASE f.kind
            WHEN 'default' THEN PERFORM snowflake_id_internal.copy_default(made, f.name, template, s, f.detail);
            WHEN 'options' THEN EXECUTE format('ALTER TABLE %s SET (%s)', made, f.detail);
            WHEN 'trigger' THEN PERFORM snowflake_id_internal.copy_trigger(made, f.name, format(f.detail, s), f.deps, template);
            WHEN 'rls' THEN EXECUTE format('ALTER TABLE %s %s ROW LEVEL SECURITY', made, f.detail);
            WHEN 'policy' THEN
                PERFORM snowflake_id_internal.copy_policy(made, template, t.name, f.name, f.detail, coalesce(f.deps, ''));
            ELSE PERFORM snowflake_id_internal.copy_replica_identity(t.rel, made, f.detail);
            END CASE;
        END LOOP;
    END LOOP;
    FOR f IN SELECT r.*, x.name AS table_name FROM jsonb_to_recordset(findings) AS r(kind text, rel oid, name text, detail text)
               JOIN jsonb_to_recordset(findings) AS x(kind text, rel oid, name text) ON x.kind = 'table' AND x.rel = r.rel
              WHERE r.kind = 'key' AND r.rel = ANY (made_tables) ORDER BY r.rel, r.name LOOP
        EXECUTE format('ALTER TABLE %I.%I ADD CONSTRAINT %I ', s, f.table_name, f.name) || format(f.detail, s);
    END LOOP;
    -- The functions, in the order they were made in the template (an SQL-standard body names
    -- only what existed then), before the views that may call them.
    FOR f IN SELECT r.* FROM jsonb_to_recordset(findings) AS r(kind text, rel oid, name text, detail text, refers text[])
              WHERE r.kind = 'function' ORDER BY r.rel LOOP
        PERFORM snowflake_id_internal.copy_function(s, template, f.rel, f.name, f.detail, f.refers);
    END LOOP;
    -- The triggers calling one of them.
    FOR f IN SELECT r.*, x.name AS table_name FROM jsonb_to_recordset(findings) AS r(kind text, rel oid, name text, detail text, deps text)
               JOIN jsonb_to_recordset(findings) AS x(kind text, rel oid, name text) ON x.kind = 'table' AND x.rel = r.rel
              WHERE r.kind = 'ftrigger' AND r.rel = ANY (made_tables) ORDER BY r.rel, r.name LOOP
        PERFORM snowflake_id_internal.copy_trigger(format('%I.%I', s, f.table_name)::regclass, f.name, format(f.detail, s),
                                                   f.deps, template);
    END LOOP;
    -- A serial's sequence owned by its column (deps: table.column), as the template's is.
    FOR f IN SELECT r.* FROM jsonb_to_recordset(findings) AS r(kind text, name text, deps text)
              WHERE r.kind = 'sequence' AND r.name = ANY (made_sequences) AND r.deps IS NOT NULL LOOP
        EXECUTE format('ALTER SEQUENCE %I.%I OWNED BY %I.', s, f.name, s) || f.deps;
    END LOOP;
    FOR f IN SELECT r.* FROM jsonb_to_recordset(findings) AS r(kind text, rel oid, name text, detail text, deps text)
              WHERE r.kind IN ('view', 'matview') ORDER BY r.deps::integer, r.name LOOP
        PERFORM snowflake_id_internal.copy_view(s, template, f.rel, f.name, f.detail, f.kind = 'matview', fill);
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.fill_shard(text, text, text, jsonb, boolean) IS
  'create_shard''s copy of a template into one shard, from the template''s reading: tables, their parts, then the foreign keys between them.';

-- The template form of create_shard and create_shards (fill: true) and of a move's copies
-- (false: fill_shard): the template's tables locked and read once
-- (snowflake_id_internal.template_read), checked, then each shard made and filled.
CREATE OR REPLACE FUNCTION snowflake_id_internal.create_shards_from(schema_names text[], shards integer[], template text, fill boolean)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tpl oid;
    findings jsonb;
    fn text;
BEGIN
    tpl := snowflake_id_internal.template_schema(template, schema_names);
    -- The shard catalog's lock first, as create_shard takes it, then the template's tables.
    LOCK TABLE @extschema@.snowflake_id_shard IN SHARE ROW EXCLUSIVE MODE;
    SELECT coalesce(jsonb_agg(to_jsonb(r)), '[]') INTO findings FROM snowflake_id_internal.template_read(tpl) r;
    PERFORM snowflake_id_internal.check_template(template, findings);
    -- What each function refers to, once (each shard's copy must refer to the same).
    SELECT coalesce(jsonb_agg(CASE WHEN f->>'kind' = 'function'
                                   THEN f || jsonb_build_object('refers', snowflake_id_internal.refers('pg_proc'::regclass, (f->>'rel')::oid))
                                   ELSE f END), '[]')
      INTO findings FROM jsonb_array_elements(findings) f;
    FOR i IN 1 .. cardinality(schema_names) LOOP
        fn := snowflake_id_internal.make_shard(schema_names[i], shards[i]);
        PERFORM snowflake_id_internal.fill_shard(schema_names[i], template, fn, findings, fill);
        IF fn <> 'next_id' THEN
            EXECUTE format('ALTER FUNCTION %I.%I() RENAME TO next_id', schema_names[i], fn);
        END IF;
    END LOOP;
    -- (alter_shards changes the shards of the template it names: snowflake_id_node.template_shards.)
    UPDATE @extschema@.snowflake_id_shard c SET template = create_shards_from.template
     WHERE c.schema_name = ANY (schema_names) AND c.template IS DISTINCT FROM create_shards_from.template;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.create_shards_from(text[], integer[], text, boolean) IS
  'The template form of create_shard and create_shards: the template locked, read and checked once, then each shard made and filled.';
