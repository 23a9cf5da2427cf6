-- snowflake_id 0.1.0 -> 0.2.0, in place: ALTER EXTENSION snowflake_id UPDATE TO '0.2.0'.
--
-- Each section below carries one part of 0.2.0 to a 0.1.0 installation, in the same words as
-- the fresh install (snowflake_id--0.2.0.sql, generated from src/ by cargo pgrx). The upgrade
-- test (reliability/t_upgrade.sh) installs 0.1.0 as released, runs this script and requires
-- the result to be identical to a fresh 0.2.0 install: every function's signature,
-- volatility, strictness, parallel safety, settings, body and comment, every table and view.
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.2.0'" to load this file. \quit

-- == The installer (create_shard and friends): hardened, shard templates ==
-- create_shard: only a real sequence is adopted and nothing of the schema is run; names over
-- 63 bytes and system/temporary schemas refused; one create_shard/drop_shard at a time;
-- adoption waits for transactions still using the old function. drop_shard: tolerates parts
-- already dropped by hand. (Same text as sql/installer.sql.)
CREATE OR REPLACE FUNCTION create_shard(schema_name text, shard integer) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    existing @extschema@.snowflake_id_shard;
    other text;
    nsp oid;
    made_schema boolean;
    seq oid;
    seq_kind "char";
    seq_owner regrole;
    old_fn oid;
    counter bigint;
    seq_min bigint;
    seq_max bigint;
    dependent regclass;
BEGIN
    IF shard NOT BETWEEN 0 AND 8191 THEN
        RAISE EXCEPTION 'shard % is out of range: valid shards are 0 to 8191', shard
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
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

    -- One create_shard/drop_shard at a time, so the checks below cannot be overtaken by
    -- another session's (READ COMMITTED: each statement after the lock sees its commits).
    LOCK TABLE @extschema@.snowflake_id_shard IN SHARE ROW EXCLUSIVE MODE;
    SELECT c.schema_name INTO other FROM @extschema@.snowflake_id_shard c
     WHERE c.shard = create_shard.shard AND c.schema_name <> create_shard.schema_name;
    IF FOUND THEN
        RAISE EXCEPTION 'shard % is already given to schema %', shard, quote_ident(other)
            USING ERRCODE = 'unique_violation';
    END IF;
    SELECT * INTO existing FROM @extschema@.snowflake_id_shard c
     WHERE c.schema_name = create_shard.schema_name;
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
    old_fn := to_regprocedure(format('%I.next_id()', schema_name));
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
    ELSIF existing.schema_name IS NULL THEN
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
    IF NOT @extschema@.make_id(clock_timestamp(), shard, 1023) BETWEEN seq_min AND seq_max THEN
        RAISE EXCEPTION 'sequence "%" cannot hold snowflake IDs: its range is % to %', seq::regclass, seq_min, seq_max
            USING ERRCODE = 'sequence_generator_limit_exceeded',
                  HINT = format('ALTER SEQUENCE %s AS bigint MINVALUE 1 MAXVALUE 9223372036854775807', seq::regclass);
    END IF;
    -- A sequence still holding a plain counter (new, or Instagram's PL/pgSQL's) is moved
    -- above every ID the old function can have made; one holding IDs already is left alone.
    counter := coalesce(pg_sequence_last_value(seq), 0);
    IF counter < (1::bigint << 42) THEN
        PERFORM setval(seq, @extschema@.make_id(clock_timestamp(), shard, 1023), true);
    END IF;
    EXECUTE format(
        'CREATE OR REPLACE FUNCTION %I.next_id(OUT result bigint) '
        'LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY INVOKER '
        'SET search_path = pg_catalog, pg_temp '
        'RETURN %I.next_id(%s, %L::regclass)',
        schema_name, '@extschema@', shard, seq::regclass);
    EXECUTE format('COMMENT ON FUNCTION %I.next_id() IS %L', schema_name,
        format('Next snowflake ID of logical shard %s, from sequence %s (made by create_shard).', shard, seq::regclass));
    IF existing.schema_name IS NOT NULL THEN
        UPDATE @extschema@.snowflake_id_shard c SET sequence = seq
         WHERE c.schema_name = create_shard.schema_name AND c.sequence <> seq;
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
END
$$;

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
-- schema with CREATE TABLE ... (LIKE tpl.t INCLUDING ALL): columns, defaults, NOT NULL,
-- CHECK and primary key/unique constraints, indexes, comments (not foreign keys, not
-- triggers). Each bigint primary key column then defaults to the shard's own next_id().
-- The template must be a plain schema of tables: anything else in it (views, sequences
-- other than identity ones, functions, types) is refused, and so is a table whose
-- defaults, constraints, indexes or column types use a function or type the caller cannot
-- trust (owned by another role that is not a superuser), whose code would then run in
-- every shard. Nothing of the template is executed here. A table the shard already has is
-- left as it is, so the call is idempotent.
CREATE FUNCTION create_shard(schema_name text, shard integer, template text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tpl oid;
    nsp oid;
    bad text;
    t record;
    col record;
BEGIN
    -- template => NULL is the two-argument form, not a silent no-op.
    IF template IS NULL THEN
        PERFORM @extschema@.create_shard(schema_name, shard);
        RETURN;
    END IF;
    IF schema_name IS NULL OR shard IS NULL THEN
        RAISE EXCEPTION 'create_shard: schema_name and shard must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF octet_length(template) > 63 THEN
        RAISE EXCEPTION 'template schema name "%" is too long: % bytes, at most 63', template, octet_length(template)
            USING ERRCODE = 'name_too_long';
    END IF;
    tpl := to_regnamespace(quote_ident(template));
    IF tpl IS NULL THEN
        RAISE EXCEPTION 'template schema "%" does not exist', template USING ERRCODE = 'invalid_schema_name';
    END IF;
    IF template = schema_name THEN
        RAISE EXCEPTION 'schema % cannot be its own template', quote_ident(schema_name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A plain schema of tables (and their indexes, row types and identity sequences).
    SELECT string_agg(what, ', ') INTO bad FROM (
        SELECT format('%s %I', CASE c.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view'
                    WHEN 'S' THEN 'sequence' WHEN 'p' THEN 'partitioned table' WHEN 'f' THEN 'foreign table'
                    WHEN 'c' THEN 'type' ELSE 'relation' END, c.relname) AS what
          FROM pg_class c
         WHERE c.relnamespace = tpl AND c.relkind NOT IN ('r', 'i')
           AND NOT (c.relkind = 'S' AND EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                        AND d.objid = c.oid AND d.deptype = 'i'))
        UNION ALL
        SELECT format('function %s', p.oid::regprocedure) FROM pg_proc p WHERE p.pronamespace = tpl
        UNION ALL
        SELECT format('type %s', y.oid::regtype) FROM pg_type y
         WHERE y.typnamespace = tpl AND y.typrelid = 0 AND NOT EXISTS (
               SELECT FROM pg_type e JOIN pg_class c ON c.oid = e.typrelid WHERE e.typarray = y.oid)
        ORDER BY 1) x;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'template schema % is not a plain schema of tables: it holds %', quote_ident(template), bad
            USING ERRCODE = 'wrong_object_type';
    END IF;
    -- Code the copies would run: functions, operators (and the functions behind them) and
    -- types used by the template's tables (defaults, generated columns, constraints, index
    -- expressions, column types), owned by a role that is neither the caller nor a
    -- superuser, who could redefine them.
    WITH deps AS (
        SELECT d.refclassid, d.refobjid
          FROM pg_class c JOIN pg_depend d ON d.refobjsubid >= 0
               AND ((d.classid = 'pg_attrdef'::regclass AND d.objid IN (SELECT a.oid FROM pg_attrdef a WHERE a.adrelid = c.oid))
                 OR (d.classid = 'pg_constraint'::regclass AND d.objid IN (SELECT k.oid FROM pg_constraint k WHERE k.conrelid = c.oid))
                 OR (d.classid = 'pg_class'::regclass AND d.objid IN (SELECT i.indexrelid FROM pg_index i WHERE i.indrelid = c.oid)))
         WHERE c.relnamespace = tpl AND c.relkind = 'r'),
    untrusted AS (
        SELECT r.oid FROM pg_roles r WHERE r.oid <> current_user::regrole AND NOT r.rolsuper)
    SELECT string_agg(DISTINCT what, ', ') INTO bad FROM (
        SELECT format('function %s (owner %s)', p.oid::regprocedure, p.proowner::regrole) AS what
          FROM deps JOIN pg_proc p ON deps.refclassid = 'pg_proc'::regclass AND p.oid = deps.refobjid
         WHERE p.proowner IN (SELECT oid FROM untrusted)
        UNION ALL
        SELECT format('operator %s (owner %s)', o.oid::regoperator, o.oprowner::regrole)
          FROM deps JOIN pg_operator o ON deps.refclassid = 'pg_operator'::regclass AND o.oid = deps.refobjid
         WHERE o.oprowner IN (SELECT oid FROM untrusted)
            OR EXISTS (SELECT FROM pg_proc p WHERE p.oid IN (o.oprcode::oid, o.oprrest::oid, o.oprjoin::oid)
                          AND p.proowner IN (SELECT oid FROM untrusted))
        UNION ALL
        SELECT format('type %s (owner %s)', y.oid::regtype, y.typowner::regrole)
          FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
          JOIN pg_type y ON y.oid = a.atttypid
         WHERE c.relnamespace = tpl AND c.relkind = 'r'
           AND y.typowner IN (SELECT oid FROM untrusted)) x;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'template schema % uses code its shards would run that the caller does not trust: %',
            quote_ident(template), bad
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Use functions, operators and types owned by you or by a superuser in the template''s tables.';
    END IF;

    PERFORM @extschema@.create_shard(schema_name, shard);
    nsp := to_regnamespace(quote_ident(schema_name));
    FOR t IN SELECT c.oid, c.relname FROM pg_class c WHERE c.relnamespace = tpl AND c.relkind = 'r' ORDER BY c.relname LOOP
        CONTINUE WHEN EXISTS (SELECT FROM pg_class c WHERE c.relnamespace = nsp AND c.relname = t.relname);
        EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING ALL)', schema_name, t.relname, template, t.relname);
        FOR col IN
            SELECT a.attname, a.attidentity FROM pg_index i
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
             WHERE i.indrelid = format('%I.%I', schema_name, t.relname)::regclass AND i.indisprimary
               AND a.atttypid = 'bigint'::regtype
        LOOP
            IF col.attidentity <> '' THEN
                EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I DROP IDENTITY', schema_name, t.relname, col.attname);
            END IF;
            EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I SET DEFAULT %I.next_id()',
                schema_name, t.relname, col.attname, schema_name);
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION create_shard(text, integer, text) IS
  'create_shard(schema_name, shard), then every table of schema template made in it (LIKE ... INCLUDING ALL), bigint primary keys defaulting to its next_id(). Idempotent.';

GRANT SELECT ON snowflake_id_shards TO PUBLIC;

-- == Layouts: other people's IDs ==
-- Decoders taking a layout name, next_id in a named layout, UUID/ULID/ObjectID times
-- (src/sql_layouts.rs), exactly as cargo pgrx generates them.
CREATE  FUNCTION "id_fields"(
	"id" bigint, /* i64 */
	"layout" TEXT /* & str */
) RETURNS jsonb /* Jsonb */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_fields_wrapper';

CREATE  FUNCTION "id_timestamp"(
	"id" bigint, /* i64 */
	"layout" TEXT /* & str */
) RETURNS timestamp with time zone /* TimestampWithTimeZone */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_timestamp_in_wrapper';

CREATE  FUNCTION "id_timestamp"(
	"id" bigint, /* i64 */
	"layout" TEXT, /* & str */
	"epoch" timestamp with time zone /* TimestampWithTimeZone */
) RETURNS timestamp with time zone /* TimestampWithTimeZone */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_timestamp_in_epoch_wrapper';

CREATE  FUNCTION "next_id"(
	"node" INT, /* i32 */
	"seq" regclass, /* Regclass */
	"layout" TEXT /* & str */
) RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'next_id_in_wrapper';

CREATE  FUNCTION "next_id"(
	"node" INT, /* i32 */
	"seq" regclass, /* Regclass */
	"layout" TEXT, /* & str */
	"epoch" timestamp with time zone /* TimestampWithTimeZone */
) RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'next_id_in_epoch_wrapper';

CREATE  FUNCTION "uuid_timestamp"(
	"id" uuid /* pgrx :: Uuid */
) RETURNS timestamp with time zone /* TimestampWithTimeZone */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'uuid_timestamp_wrapper';

CREATE  FUNCTION "ulid_timestamp"(
	"ulid" TEXT /* & str */
) RETURNS timestamp with time zone /* TimestampWithTimeZone */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'ulid_timestamp_wrapper';

CREATE  FUNCTION "objectid_timestamp"(
	"objectid" TEXT /* & str */
) RETURNS timestamp with time zone /* TimestampWithTimeZone */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'objectid_timestamp_wrapper';

CREATE FUNCTION id_decode(id bigint, layout text, OUT ts timestamptz, OUT fields jsonb)
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_decode_layout';
CREATE FUNCTION id_decode(id bigint, layout text, epoch timestamptz, OUT ts timestamptz, OUT fields jsonb)
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_decode_layout';
COMMENT ON FUNCTION id_timestamp(bigint, text) IS 'Time an ID of a named layout (instagram, twitter, discord, sonyflake, pgedge, mastodon, tsid) was made, exact to the layout''s unit.';
COMMENT ON FUNCTION id_timestamp(bigint, text, timestamptz) IS 'Time an ID of a named layout was made, counting from a deployment''s own epoch (a whole millisecond) instead of the layout''s.';
COMMENT ON FUNCTION id_fields(bigint, text) IS 'The fields below an ID''s time in a named layout, as a JSON object keyed by their names in that layout (e.g. worker, process, increment).';
COMMENT ON FUNCTION id_decode(bigint, text) IS 'An ID of a named layout taken apart: its time (exact to the layout''s unit) and its fields by their names in that layout.';
COMMENT ON FUNCTION id_decode(bigint, text, timestamptz) IS 'An ID of a named layout taken apart, its time counted from a deployment''s own epoch: its time and its fields by name.';
COMMENT ON FUNCTION next_id(integer, regclass, text) IS 'Next ID in a named layout (twitter, discord, pgedge or instagram) for a node from a sequence: the same state and guarantees as next_id(shard, seq).';
COMMENT ON FUNCTION next_id(integer, regclass, text, timestamptz) IS 'Next ID in a named layout counting time from a deployment''s own epoch (a whole millisecond), e.g. 2026-01-01 for Twitter''s layout lasts to 2095.';
COMMENT ON FUNCTION uuid_timestamp(uuid) IS 'Time a UUID of version 1 or 6 (100 ns since 1582-10-15, shown to the microsecond) or 7 (milliseconds) was made; other versions raise an error.';
COMMENT ON FUNCTION ulid_timestamp(text) IS 'Time a ULID (26 Crockford base32 characters, any case) was made, exact to the millisecond.';
COMMENT ON FUNCTION objectid_timestamp(text) IS 'Time a MongoDB ObjectID (24 hexadecimal characters) was made, exact to the second.';

-- == Applications: text form, masks, JSON, adopting tables ==
-- The same statements as the fresh install: src/sql_apps.rs (the C functions, then their
-- comments), sql/snowflake_type.sql and sql/convert.sql, verbatim.
CREATE FUNCTION id_to_text(id bigint) RETURNS text
    IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_to_text_wrapper';
CREATE FUNCTION id_from_text(id_text text) RETURNS bigint
    IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_from_text_wrapper';
CREATE FUNCTION id_mask(id bigint, key text) RETURNS bigint
    IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_mask_key_wrapper';
CREATE FUNCTION id_unmask(masked bigint, key text) RETURNS bigint
    IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_unmask_key_wrapper';
CREATE FUNCTION id_mask(id bigint) RETURNS bigint
    STABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_mask_wrapper';
CREATE FUNCTION id_unmask(masked bigint) RETURNS bigint
    STABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_unmask_wrapper';
COMMENT ON FUNCTION id_to_text(bigint) IS 'The 13-character Crockford base32 text form of an ID (TSID''s alphabet); sorts like the ID.';
COMMENT ON FUNCTION id_from_text(text) IS 'The ID of a 13-character base32 text form; case-insensitive, I and L read as 1, O as 0.';
COMMENT ON FUNCTION id_mask(bigint, text) IS 'The masked public form of an ID under a key (32 hex digits): a keyed permutation of 0 to 2^63-1.';
COMMENT ON FUNCTION id_unmask(bigint, text) IS 'The ID a masked public ID stands for, under the key that masked it.';
COMMENT ON FUNCTION id_mask(bigint) IS 'The masked public form of an ID under the key in snowflake_id.mask_key.';
COMMENT ON FUNCTION id_unmask(bigint) IS 'The ID a masked public ID stands for, under the key in snowflake_id.mask_key.';

-- The snowflake type: a bigint whose JSON form is a string.
--
-- An ID near 4 x 10^18 is past JavaScript's 2^53: JSON.parse rounds a JSON number that large,
-- and json_agg(t), row_to_json(t) and to_jsonb(t) write bigint columns as JSON numbers. A
-- column of type snowflake stores the same 8 bytes as bigint, with bigint's own text and
-- binary I/O, comparison and hash functions (PostgreSQL's internal int8 functions, declared
-- here under this type), so it sorts, indexes, joins, COPYs and dumps exactly like bigint.
-- What differs is its JSON: PostgreSQL's json and jsonb builders use a user type's cast to
-- json, and this one writes the ID as a string.
--
-- Casts: snowflake -> bigint implicit (every bigint function and operator accepts it);
-- bigint -> snowflake on assignment (INSERT, UPDATE, DEFAULT next_id(...)) and explicitly;
-- integer -> snowflake implicit (so COALESCE(id, 0) stays snowflake). In the numeric type
-- category, so UNION/CASE/COALESCE with bigint resolve to bigint. Comparisons with bigint and integer values and columns are operators of the
-- type's own btree and hash families (which also hold bigint's own, for merge and hash
-- joins), so `WHERE id = 123` and joins to bigint columns use the index and resolve without
-- ambiguity.

CREATE TYPE snowflake;
CREATE FUNCTION snowflake_in(cstring) RETURNS snowflake LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int8in';
CREATE FUNCTION snowflake_out(snowflake) RETURNS cstring LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int8out';
CREATE FUNCTION snowflake_recv(internal) RETURNS snowflake LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int8recv';
CREATE FUNCTION snowflake_send(snowflake) RETURNS bytea LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int8send';
CREATE TYPE snowflake (
    INPUT = snowflake_in, OUTPUT = snowflake_out, RECEIVE = snowflake_recv, SEND = snowflake_send,
    LIKE = bigint, CATEGORY = 'N'
);
COMMENT ON TYPE snowflake IS 'A 64-bit ID stored, compared and indexed like bigint, written to JSON as a string (exact in JavaScript).';
COMMENT ON FUNCTION snowflake_in(cstring) IS 'Text input of snowflake (bigint''s).';
COMMENT ON FUNCTION snowflake_out(snowflake) IS 'Text output of snowflake (bigint''s).';
COMMENT ON FUNCTION snowflake_recv(internal) IS 'Binary input of snowflake (bigint''s: 8 bytes, network order).';
COMMENT ON FUNCTION snowflake_send(snowflake) IS 'Binary output of snowflake (bigint''s: 8 bytes, network order).';

CREATE CAST (snowflake AS bigint) WITHOUT FUNCTION AS IMPLICIT;
CREATE CAST (bigint AS snowflake) WITHOUT FUNCTION AS ASSIGNMENT;
CREATE FUNCTION snowflake(integer) RETURNS snowflake LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int48';
COMMENT ON FUNCTION snowflake(integer) IS 'An integer as a snowflake (the cast).';
CREATE CAST (integer AS snowflake) WITH FUNCTION snowflake(integer) AS IMPLICIT;
-- Explicit casts to what bigint casts to, by bigint's own functions, so `id::int` and
-- `id::numeric` keep working on a column changed to snowflake (explicit only: no new
-- implicit path to make an operator ambiguous).
CREATE CAST (snowflake AS integer) WITH FUNCTION pg_catalog.int4(bigint);
CREATE CAST (snowflake AS numeric) WITH FUNCTION pg_catalog."numeric"(bigint);

-- snowflake vs snowflake
CREATE FUNCTION snowflake_eq(snowflake, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8eq';
COMMENT ON FUNCTION snowflake_eq(snowflake, snowflake) IS 'snowflake equal to snowflake (bigint''s comparison).';
CREATE FUNCTION snowflake_ne(snowflake, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8ne';
COMMENT ON FUNCTION snowflake_ne(snowflake, snowflake) IS 'snowflake not equal to snowflake (bigint''s comparison).';
CREATE FUNCTION snowflake_lt(snowflake, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8lt';
COMMENT ON FUNCTION snowflake_lt(snowflake, snowflake) IS 'snowflake less than snowflake (bigint''s comparison).';
CREATE FUNCTION snowflake_le(snowflake, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8le';
COMMENT ON FUNCTION snowflake_le(snowflake, snowflake) IS 'snowflake less than or equal to snowflake (bigint''s comparison).';
CREATE FUNCTION snowflake_gt(snowflake, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8gt';
COMMENT ON FUNCTION snowflake_gt(snowflake, snowflake) IS 'snowflake greater than snowflake (bigint''s comparison).';
CREATE FUNCTION snowflake_ge(snowflake, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8ge';
COMMENT ON FUNCTION snowflake_ge(snowflake, snowflake) IS 'snowflake greater than or equal to snowflake (bigint''s comparison).';
CREATE OPERATOR = (LEFTARG = snowflake, RIGHTARG = snowflake, FUNCTION = snowflake_eq, COMMUTATOR = =, NEGATOR = <>,
    RESTRICT = eqsel, JOIN = eqjoinsel, HASHES, MERGES);
CREATE OPERATOR <> (LEFTARG = snowflake, RIGHTARG = snowflake, FUNCTION = snowflake_ne, COMMUTATOR = <>, NEGATOR = =,
    RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = snowflake, RIGHTARG = snowflake, FUNCTION = snowflake_lt, COMMUTATOR = >, NEGATOR = >=,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = snowflake, RIGHTARG = snowflake, FUNCTION = snowflake_le, COMMUTATOR = >=, NEGATOR = >,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = snowflake, RIGHTARG = snowflake, FUNCTION = snowflake_gt, COMMUTATOR = <, NEGATOR = <=,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = snowflake, RIGHTARG = snowflake, FUNCTION = snowflake_ge, COMMUTATOR = <=, NEGATOR = <,
    RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE FUNCTION snowflake_cmp(snowflake, snowflake) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'btint8cmp';
COMMENT ON FUNCTION snowflake_cmp(snowflake, snowflake) IS 'Three-way comparison of snowflake and snowflake for btree (bigint''s).';

-- snowflake vs bigint
CREATE FUNCTION snowflake_int8_eq(snowflake, bigint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8eq';
COMMENT ON FUNCTION snowflake_int8_eq(snowflake, bigint) IS 'snowflake equal to bigint (bigint''s comparison).';
CREATE FUNCTION snowflake_int8_ne(snowflake, bigint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8ne';
COMMENT ON FUNCTION snowflake_int8_ne(snowflake, bigint) IS 'snowflake not equal to bigint (bigint''s comparison).';
CREATE FUNCTION snowflake_int8_lt(snowflake, bigint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8lt';
COMMENT ON FUNCTION snowflake_int8_lt(snowflake, bigint) IS 'snowflake less than bigint (bigint''s comparison).';
CREATE FUNCTION snowflake_int8_le(snowflake, bigint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8le';
COMMENT ON FUNCTION snowflake_int8_le(snowflake, bigint) IS 'snowflake less than or equal to bigint (bigint''s comparison).';
CREATE FUNCTION snowflake_int8_gt(snowflake, bigint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8gt';
COMMENT ON FUNCTION snowflake_int8_gt(snowflake, bigint) IS 'snowflake greater than bigint (bigint''s comparison).';
CREATE FUNCTION snowflake_int8_ge(snowflake, bigint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8ge';
COMMENT ON FUNCTION snowflake_int8_ge(snowflake, bigint) IS 'snowflake greater than or equal to bigint (bigint''s comparison).';
CREATE OPERATOR = (LEFTARG = snowflake, RIGHTARG = bigint, FUNCTION = snowflake_int8_eq, COMMUTATOR = =, NEGATOR = <>,
    RESTRICT = eqsel, JOIN = eqjoinsel, HASHES, MERGES);
CREATE OPERATOR <> (LEFTARG = snowflake, RIGHTARG = bigint, FUNCTION = snowflake_int8_ne, COMMUTATOR = <>, NEGATOR = =,
    RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = snowflake, RIGHTARG = bigint, FUNCTION = snowflake_int8_lt, COMMUTATOR = >, NEGATOR = >=,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = snowflake, RIGHTARG = bigint, FUNCTION = snowflake_int8_le, COMMUTATOR = >=, NEGATOR = >,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = snowflake, RIGHTARG = bigint, FUNCTION = snowflake_int8_gt, COMMUTATOR = <, NEGATOR = <=,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = snowflake, RIGHTARG = bigint, FUNCTION = snowflake_int8_ge, COMMUTATOR = <=, NEGATOR = <,
    RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE FUNCTION snowflake_int8_cmp(snowflake, bigint) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'btint8cmp';
COMMENT ON FUNCTION snowflake_int8_cmp(snowflake, bigint) IS 'Three-way comparison of snowflake and bigint for btree (bigint''s).';

-- bigint vs snowflake
CREATE FUNCTION int8_snowflake_eq(bigint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8eq';
COMMENT ON FUNCTION int8_snowflake_eq(bigint, snowflake) IS 'bigint equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int8_snowflake_ne(bigint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8ne';
COMMENT ON FUNCTION int8_snowflake_ne(bigint, snowflake) IS 'bigint not equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int8_snowflake_lt(bigint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8lt';
COMMENT ON FUNCTION int8_snowflake_lt(bigint, snowflake) IS 'bigint less than snowflake (bigint''s comparison).';
CREATE FUNCTION int8_snowflake_le(bigint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8le';
COMMENT ON FUNCTION int8_snowflake_le(bigint, snowflake) IS 'bigint less than or equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int8_snowflake_gt(bigint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8gt';
COMMENT ON FUNCTION int8_snowflake_gt(bigint, snowflake) IS 'bigint greater than snowflake (bigint''s comparison).';
CREATE FUNCTION int8_snowflake_ge(bigint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8ge';
COMMENT ON FUNCTION int8_snowflake_ge(bigint, snowflake) IS 'bigint greater than or equal to snowflake (bigint''s comparison).';
CREATE OPERATOR = (LEFTARG = bigint, RIGHTARG = snowflake, FUNCTION = int8_snowflake_eq, COMMUTATOR = =, NEGATOR = <>,
    RESTRICT = eqsel, JOIN = eqjoinsel, HASHES, MERGES);
CREATE OPERATOR <> (LEFTARG = bigint, RIGHTARG = snowflake, FUNCTION = int8_snowflake_ne, COMMUTATOR = <>, NEGATOR = =,
    RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = bigint, RIGHTARG = snowflake, FUNCTION = int8_snowflake_lt, COMMUTATOR = >, NEGATOR = >=,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = bigint, RIGHTARG = snowflake, FUNCTION = int8_snowflake_le, COMMUTATOR = >=, NEGATOR = >,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = bigint, RIGHTARG = snowflake, FUNCTION = int8_snowflake_gt, COMMUTATOR = <, NEGATOR = <=,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = bigint, RIGHTARG = snowflake, FUNCTION = int8_snowflake_ge, COMMUTATOR = <=, NEGATOR = <,
    RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE FUNCTION int8_snowflake_cmp(bigint, snowflake) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'btint8cmp';
COMMENT ON FUNCTION int8_snowflake_cmp(bigint, snowflake) IS 'Three-way comparison of bigint and snowflake for btree (bigint''s).';

-- snowflake vs integer
CREATE FUNCTION snowflake_int4_eq(snowflake, integer) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int84eq';
COMMENT ON FUNCTION snowflake_int4_eq(snowflake, integer) IS 'snowflake equal to integer (bigint''s comparison).';
CREATE FUNCTION snowflake_int4_ne(snowflake, integer) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int84ne';
COMMENT ON FUNCTION snowflake_int4_ne(snowflake, integer) IS 'snowflake not equal to integer (bigint''s comparison).';
CREATE FUNCTION snowflake_int4_lt(snowflake, integer) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int84lt';
COMMENT ON FUNCTION snowflake_int4_lt(snowflake, integer) IS 'snowflake less than integer (bigint''s comparison).';
CREATE FUNCTION snowflake_int4_le(snowflake, integer) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int84le';
COMMENT ON FUNCTION snowflake_int4_le(snowflake, integer) IS 'snowflake less than or equal to integer (bigint''s comparison).';
CREATE FUNCTION snowflake_int4_gt(snowflake, integer) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int84gt';
COMMENT ON FUNCTION snowflake_int4_gt(snowflake, integer) IS 'snowflake greater than integer (bigint''s comparison).';
CREATE FUNCTION snowflake_int4_ge(snowflake, integer) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int84ge';
COMMENT ON FUNCTION snowflake_int4_ge(snowflake, integer) IS 'snowflake greater than or equal to integer (bigint''s comparison).';
CREATE OPERATOR = (LEFTARG = snowflake, RIGHTARG = integer, FUNCTION = snowflake_int4_eq, COMMUTATOR = =, NEGATOR = <>,
    RESTRICT = eqsel, JOIN = eqjoinsel, MERGES);
CREATE OPERATOR <> (LEFTARG = snowflake, RIGHTARG = integer, FUNCTION = snowflake_int4_ne, COMMUTATOR = <>, NEGATOR = =,
    RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = snowflake, RIGHTARG = integer, FUNCTION = snowflake_int4_lt, COMMUTATOR = >, NEGATOR = >=,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = snowflake, RIGHTARG = integer, FUNCTION = snowflake_int4_le, COMMUTATOR = >=, NEGATOR = >,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = snowflake, RIGHTARG = integer, FUNCTION = snowflake_int4_gt, COMMUTATOR = <, NEGATOR = <=,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = snowflake, RIGHTARG = integer, FUNCTION = snowflake_int4_ge, COMMUTATOR = <=, NEGATOR = <,
    RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE FUNCTION snowflake_int4_cmp(snowflake, integer) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'btint84cmp';
COMMENT ON FUNCTION snowflake_int4_cmp(snowflake, integer) IS 'Three-way comparison of snowflake and integer for btree (bigint''s).';

-- integer vs snowflake
CREATE FUNCTION int4_snowflake_eq(integer, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int48eq';
COMMENT ON FUNCTION int4_snowflake_eq(integer, snowflake) IS 'integer equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int4_snowflake_ne(integer, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int48ne';
COMMENT ON FUNCTION int4_snowflake_ne(integer, snowflake) IS 'integer not equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int4_snowflake_lt(integer, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int48lt';
COMMENT ON FUNCTION int4_snowflake_lt(integer, snowflake) IS 'integer less than snowflake (bigint''s comparison).';
CREATE FUNCTION int4_snowflake_le(integer, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int48le';
COMMENT ON FUNCTION int4_snowflake_le(integer, snowflake) IS 'integer less than or equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int4_snowflake_gt(integer, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int48gt';
COMMENT ON FUNCTION int4_snowflake_gt(integer, snowflake) IS 'integer greater than snowflake (bigint''s comparison).';
CREATE FUNCTION int4_snowflake_ge(integer, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int48ge';
COMMENT ON FUNCTION int4_snowflake_ge(integer, snowflake) IS 'integer greater than or equal to snowflake (bigint''s comparison).';
CREATE OPERATOR = (LEFTARG = integer, RIGHTARG = snowflake, FUNCTION = int4_snowflake_eq, COMMUTATOR = =, NEGATOR = <>,
    RESTRICT = eqsel, JOIN = eqjoinsel, MERGES);
CREATE OPERATOR <> (LEFTARG = integer, RIGHTARG = snowflake, FUNCTION = int4_snowflake_ne, COMMUTATOR = <>, NEGATOR = =,
    RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = integer, RIGHTARG = snowflake, FUNCTION = int4_snowflake_lt, COMMUTATOR = >, NEGATOR = >=,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = integer, RIGHTARG = snowflake, FUNCTION = int4_snowflake_le, COMMUTATOR = >=, NEGATOR = >,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = integer, RIGHTARG = snowflake, FUNCTION = int4_snowflake_gt, COMMUTATOR = <, NEGATOR = <=,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = integer, RIGHTARG = snowflake, FUNCTION = int4_snowflake_ge, COMMUTATOR = <=, NEGATOR = <,
    RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE FUNCTION int4_snowflake_cmp(integer, snowflake) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'btint48cmp';
COMMENT ON FUNCTION int4_snowflake_cmp(integer, snowflake) IS 'Three-way comparison of integer and snowflake for btree (bigint''s).';

CREATE FUNCTION snowflake_sortsupport(internal) RETURNS void LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'btint8sortsupport';
COMMENT ON FUNCTION snowflake_sortsupport(internal) IS 'Sort support for snowflake (bigint''s).';
CREATE FUNCTION snowflake_hash(snowflake) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'hashint8';
COMMENT ON FUNCTION snowflake_hash(snowflake) IS 'Hash of a snowflake (bigint''s, so it joins with bigint by hash).';
CREATE FUNCTION snowflake_hash_extended(snowflake, bigint) RETURNS bigint LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'hashint8extended';
COMMENT ON FUNCTION snowflake_hash_extended(snowflake, bigint) IS 'Seeded 64-bit hash of a snowflake (bigint''s).';

CREATE OPERATOR FAMILY snowflake_ops USING btree;
CREATE OPERATOR CLASS snowflake_ops DEFAULT FOR TYPE snowflake USING btree FAMILY snowflake_ops AS
    OPERATOR 1 < , OPERATOR 2 <= , OPERATOR 3 = , OPERATOR 4 >= , OPERATOR 5 > ,
    FUNCTION 1 snowflake_cmp(snowflake, snowflake),
    FUNCTION 2 snowflake_sortsupport(internal);
ALTER OPERATOR FAMILY snowflake_ops USING btree ADD
    OPERATOR 1 < (snowflake, bigint),
    OPERATOR 2 <= (snowflake, bigint),
    OPERATOR 3 = (snowflake, bigint),
    OPERATOR 4 >= (snowflake, bigint),
    OPERATOR 5 > (snowflake, bigint),
    FUNCTION 1 (snowflake, bigint) snowflake_int8_cmp(snowflake, bigint),
    OPERATOR 1 < (bigint, snowflake),
    OPERATOR 2 <= (bigint, snowflake),
    OPERATOR 3 = (bigint, snowflake),
    OPERATOR 4 >= (bigint, snowflake),
    OPERATOR 5 > (bigint, snowflake),
    FUNCTION 1 (bigint, snowflake) int8_snowflake_cmp(bigint, snowflake),
    OPERATOR 1 < (snowflake, integer),
    OPERATOR 2 <= (snowflake, integer),
    OPERATOR 3 = (snowflake, integer),
    OPERATOR 4 >= (snowflake, integer),
    OPERATOR 5 > (snowflake, integer),
    FUNCTION 1 (snowflake, integer) snowflake_int4_cmp(snowflake, integer),
    OPERATOR 1 < (integer, snowflake),
    OPERATOR 2 <= (integer, snowflake),
    OPERATOR 3 = (integer, snowflake),
    OPERATOR 4 >= (integer, snowflake),
    OPERATOR 5 > (integer, snowflake),
    FUNCTION 1 (integer, snowflake) int4_snowflake_cmp(integer, snowflake),
    OPERATOR 1 < (bigint, bigint), OPERATOR 2 <= (bigint, bigint), OPERATOR 3 = (bigint, bigint),
    OPERATOR 4 >= (bigint, bigint), OPERATOR 5 > (bigint, bigint),
    FUNCTION 1 (bigint, bigint) btint8cmp(bigint, bigint),
    -- integer's own operators, and integer with bigint: a merge join or a sort of the integer
    -- side of `snowflake = integer` looks them up in this family (else XX000 "missing
    -- operator 1(23,23)"), as integer_ops holds them for bigint and integer.
    OPERATOR 1 < (integer, integer), OPERATOR 2 <= (integer, integer), OPERATOR 3 = (integer, integer),
    OPERATOR 4 >= (integer, integer), OPERATOR 5 > (integer, integer),
    FUNCTION 1 (integer, integer) btint4cmp(integer, integer),
    OPERATOR 1 < (integer, bigint), OPERATOR 2 <= (integer, bigint), OPERATOR 3 = (integer, bigint),
    OPERATOR 4 >= (integer, bigint), OPERATOR 5 > (integer, bigint),
    FUNCTION 1 (integer, bigint) btint48cmp(integer, bigint),
    OPERATOR 1 < (bigint, integer), OPERATOR 2 <= (bigint, integer), OPERATOR 3 = (bigint, integer),
    OPERATOR 4 >= (bigint, integer), OPERATOR 5 > (bigint, integer),
    FUNCTION 1 (bigint, integer) btint84cmp(bigint, integer);

CREATE OPERATOR FAMILY snowflake_ops USING hash;
CREATE OPERATOR CLASS snowflake_ops DEFAULT FOR TYPE snowflake USING hash FAMILY snowflake_ops AS
    OPERATOR 1 = ,
    FUNCTION 1 snowflake_hash(snowflake),
    FUNCTION 2 snowflake_hash_extended(snowflake, bigint);
ALTER OPERATOR FAMILY snowflake_ops USING hash ADD
    OPERATOR 1 = (snowflake, bigint),
    OPERATOR 1 = (bigint, snowflake),
    OPERATOR 1 = (bigint, bigint),
    FUNCTION 1 (bigint, bigint) hashint8(bigint),
    FUNCTION 2 (bigint, bigint) hashint8extended(bigint, bigint);

-- min() and max() keep the type (and so the JSON form), and use the index like bigint's.
CREATE FUNCTION snowflake_larger(snowflake, snowflake) RETURNS snowflake LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int8larger';
COMMENT ON FUNCTION snowflake_larger(snowflake, snowflake) IS 'The larger of two snowflakes.';
CREATE FUNCTION snowflake_smaller(snowflake, snowflake) RETURNS snowflake LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int8smaller';
COMMENT ON FUNCTION snowflake_smaller(snowflake, snowflake) IS 'The smaller of two snowflakes.';
CREATE AGGREGATE max(snowflake) (SFUNC = snowflake_larger, STYPE = snowflake, COMBINEFUNC = snowflake_larger, SORTOP = >, PARALLEL = SAFE);
CREATE AGGREGATE min(snowflake) (SFUNC = snowflake_smaller, STYPE = snowflake, COMBINEFUNC = snowflake_smaller, SORTOP = <, PARALLEL = SAFE);
COMMENT ON AGGREGATE max(snowflake) IS 'Largest snowflake ID.';
COMMENT ON AGGREGATE min(snowflake) IS 'Smallest snowflake ID.';

-- The JSON form: a string (src/sql_apps.rs). to_json, to_jsonb, row_to_json, json_agg, jsonb_agg and
-- json_build_object all use this cast for snowflake values.
CREATE FUNCTION id_to_json(id bigint) RETURNS json
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'id_to_json_wrapper';
COMMENT ON FUNCTION id_to_json(bigint) IS 'An ID as a JSON string ("4000000000000000000"), exact in JavaScript; the cast from snowflake to json.';
CREATE CAST (snowflake AS json) WITH FUNCTION id_to_json(bigint);

-- convert_column: adopting a table whose bigint key comes from bigserial or an identity.
--
-- In place and in one transaction: the table is locked ACCESS EXCLUSIVE (as ALTER TABLE
-- would), the sequence is moved up to the largest value the column holds (rows inserted
-- with explicit IDs can be above the sequence's last_value), and the column's default
-- becomes next_id(shard, <sequence>), whose IDs are all above the sequence's newest value.
-- The column keeps its type, values, constraints and the foreign keys pointing at it.
--
-- A bigserial column keeps its sequence (still OWNED BY the column). An identity column's
-- sequence is part of the identity and goes with it (DROP IDENTITY), so a new sequence of
-- the same name takes its place, OWNED BY the column; roles that may INSERT into the table
-- get USAGE on it, as next_id needs (an identity needed no grant). ALWAYS becomes an
-- ordinary default: an explicit ID is then accepted.
--
-- Runs with the caller's rights (SECURITY INVOKER): only the table's owner can convert it.
-- search_path is pinned; every name is quoted.
CREATE FUNCTION convert_column(tbl regclass, col name, shard integer) RETURNS regclass
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel record;
    att record;
    seq regclass;
    seq_schema name;
    seq_name name;
    dep "char";
    others text;
    newest bigint;
    highest bigint;
    grantee text;
BEGIN
    IF shard NOT BETWEEN 0 AND 8191 THEN
        RAISE EXCEPTION 'shard % is out of range: valid shards are 0 to 8191', shard
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    SELECT c.relkind, c.relowner, c.relacl INTO rel FROM pg_class c WHERE c.oid = tbl;
    IF rel.relkind IS DISTINCT FROM 'r' THEN
        RAISE EXCEPTION '% is not an ordinary table', tbl
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'convert_column converts a column of a table (not a view, sequence, partitioned table or foreign table).';
    END IF;
    IF NOT pg_has_role(current_user, rel.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', tbl USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- No insert may slip in between reading the largest ID and the new default.
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);

    SELECT a.attnum, a.atttypid, a.attidentity INTO att
      FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column % of table % does not exist', quote_ident(col), tbl
            USING ERRCODE = 'undefined_column';
    END IF;
    IF att.atttypid <> 'bigint'::regtype THEN
        RAISE EXCEPTION 'column % of table % is %, not bigint: IDs need 64 bits',
                quote_ident(col), tbl, format_type(att.atttypid, NULL)
            USING ERRCODE = 'datatype_mismatch',
                  HINT = format('ALTER TABLE %s ALTER COLUMN %I TYPE bigint first (it rewrites the table and the columns of foreign keys pointing at it must follow).', tbl, col);
    END IF;
    -- The sequence the column owns: 'a' for serial/bigserial (OWNED BY), 'i' for an identity.
    SELECT d.objid::regclass, d.deptype INTO seq, dep
      FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
     WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
       AND d.refobjid = tbl AND d.refobjsubid = att.attnum AND d.deptype IN ('a', 'i');
    IF seq IS NULL THEN
        RAISE EXCEPTION 'column % of table % has no sequence of its own', quote_ident(col), tbl
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'convert_column converts a bigserial or identity column (one whose sequence is OWNED BY it).';
    END IF;
    -- Another column's default drawing from the same sequence would keep drawing small
    -- numbers from a sequence that now holds IDs, or collide with them.
    SELECT string_agg(format('%s.%I', ad.adrelid::regclass, a.attname), ', ' ORDER BY 1) INTO others
      FROM pg_depend d
      JOIN pg_attrdef ad ON d.classid = 'pg_attrdef'::regclass AND ad.oid = d.objid
      JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
     WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = seq
       AND (ad.adrelid, ad.adnum) <> (tbl, att.attnum);
    IF others IS NOT NULL THEN
        RAISE EXCEPTION 'sequence % is shared: the default of % also uses it', seq, others
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Give the other columns their own sequence first.';
    END IF;

    EXECUTE format('SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM %s', seq) INTO newest;
    EXECUTE format('SELECT max(%I) FROM %s', col, tbl) INTO highest;
    highest := greatest(newest, highest, 0);
    -- Refuse a table that could take no insert afterwards: no ID of this shard above it.
    IF highest >= @extschema@.make_id(@extschema@.id_timestamp(9223372036854775807), shard, 1023) THEN
        RAISE EXCEPTION 'column % of table % holds %: no snowflake ID of shard % is above it', quote_ident(col), tbl, highest, shard
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;

    IF dep = 'i' THEN
        SELECT n.nspname, c.relname INTO seq_schema, seq_name
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = seq;
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', tbl, col);
        -- Owned by the table's owner (OWNED BY requires it), whoever converts.
        EXECUTE format('CREATE SEQUENCE %I.%I AS bigint', seq_schema, seq_name);
        seq := format('%I.%I', seq_schema, seq_name)::regclass;
        EXECUTE format('ALTER SEQUENCE %s OWNER TO %s', seq, rel.relowner::regrole);
        EXECUTE format('ALTER SEQUENCE %s OWNED BY %s.%I', seq, tbl, col);
        -- Whoever may INSERT: on the table, or on some of its columns.
        FOR grantee IN
            SELECT DISTINCT CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END
              FROM (SELECT (aclexplode(rel.relacl)).*
                    UNION ALL
                    SELECT (aclexplode(a.attacl)).* FROM pg_attribute a
                     WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped AND a.attacl IS NOT NULL) x
              LEFT JOIN pg_roles r ON r.oid = x.grantee
             WHERE x.privilege_type = 'INSERT' AND x.grantee <> rel.relowner
        LOOP
            EXECUTE format('GRANT USAGE ON SEQUENCE %s TO %s', seq, grantee);
        END LOOP;
    ELSE
        -- A serial's sequence may be AS integer (serial widened to bigint): IDs need bigint.
        EXECUTE format('ALTER SEQUENCE %s AS bigint MAXVALUE 9223372036854775807 NO CYCLE', seq);
    END IF;
    IF highest > 0 THEN
        PERFORM setval(seq, highest, true);
    END IF;
    EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %I.next_id(%s, %L::regclass)',
                   tbl, col, '@extschema@', shard, seq);
    RETURN seq;
END
$$;
COMMENT ON FUNCTION convert_column(regclass, name, integer) IS
  'Turns a bigserial or identity bigint column into DEFAULT next_id(shard, its sequence), in place; every new ID is above every existing one. Returns the sequence.';

-- == Platform ==
CREATE FUNCTION next_id(seq regclass) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'next_id_continuing_wrapper';
COMMENT ON FUNCTION next_id(regclass) IS
  'Next ID from a shard''s sequence, for the shard of the newest ID it holds (create_shard sets it; or setval(seq, make_id(now(), shard))): next_id(shard, seq) without restating the shard.';
