-- The per-schema shard installer: Instagram's one-schema-per-logical-shard scheme.
--
-- create_shard('insta5', 5) makes schema insta5 (if missing), its sequence
-- insta5.table_id_seq and a function insta5.next_id() returning next_id(5, that sequence),
-- and records the shard in snowflake_id_shard. The generated function has an SQL-standard
-- body: it is parsed once, at creation, so it calls this extension's next_id and names the
-- sequence by OID (both recorded as dependencies); search_path at call time cannot
-- redirect it, and it pins its own search_path besides. It runs with the caller's rights.
--
-- Adopting a schema that already runs Instagram's PL/pgSQL insta5.next_id(): the sequence
-- is kept, and the function is replaced in place (same OID), so every column default that
-- calls it switches to the native generator. The old function's IDs are (time <= now,
-- shard, counter <= 1023); the sequence is first advanced to (now, shard, 1023), so every
-- new ID is greater than every old one.

CREATE TABLE snowflake_id_shard (
    schema_name text PRIMARY KEY,
    shard integer NOT NULL UNIQUE CHECK (shard BETWEEN 0 AND 8191),
    sequence regclass NOT NULL,
    created_schema boolean NOT NULL
);
COMMENT ON TABLE snowflake_id_shard IS 'Logical shards made by create_shard: one schema each, with its sequence.';
-- Dumped with the database (pg_dump), though it belongs to the extension.
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_shard', '');

CREATE VIEW snowflake_id_shards AS
    SELECT schema_name, shard, sequence FROM snowflake_id_shard ORDER BY shard;
COMMENT ON VIEW snowflake_id_shards IS 'Logical shards made by create_shard: schema, shard number, sequence.';

CREATE FUNCTION create_shard(schema_name text, shard integer) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    other text;
    had_schema boolean := to_regnamespace(quote_ident(schema_name)) IS NOT NULL;
    seq regclass;
    counter bigint;
BEGIN
    IF shard NOT BETWEEN 0 AND 8191 THEN
        RAISE EXCEPTION 'shard % is out of range: valid shards are 0 to 8191', shard
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    SELECT c.schema_name INTO other FROM @extschema@.snowflake_id_shard c
     WHERE c.shard = create_shard.shard AND c.schema_name <> create_shard.schema_name;
    IF FOUND THEN
        RAISE EXCEPTION 'shard % is already given to schema %', shard, quote_ident(other)
            USING ERRCODE = 'unique_violation';
    END IF;
    SELECT c.shard INTO other FROM @extschema@.snowflake_id_shard c
     WHERE c.schema_name = create_shard.schema_name AND c.shard <> create_shard.shard;
    IF FOUND THEN
        RAISE EXCEPTION 'schema % is already shard %', quote_ident(schema_name), other
            USING ERRCODE = 'unique_violation';
    END IF;

    IF NOT had_schema THEN
        EXECUTE format('CREATE SCHEMA %I', schema_name);
    END IF;
    seq := to_regclass(format('%I.table_id_seq', schema_name));
    IF seq IS NULL THEN
        EXECUTE format('CREATE SEQUENCE %I.table_id_seq AS bigint', schema_name);
        seq := format('%I.table_id_seq', schema_name)::regclass;
    END IF;
    -- A sequence still holding a plain counter (new, or Instagram's PL/pgSQL's) is moved
    -- above every ID the old function can have made; one holding IDs already is left alone.
    EXECUTE format('SELECT last_value FROM %s', seq) INTO counter;
    IF counter < (1::bigint << 42) THEN
        PERFORM setval(seq, @extschema@.make_id(clock_timestamp(), shard, 1023), true);
    END IF;
    EXECUTE format(
        'CREATE OR REPLACE FUNCTION %I.next_id(OUT result bigint) '
        'LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY INVOKER '
        'SET search_path = pg_catalog, pg_temp '
        'RETURN %I.next_id(%s, %L::regclass)',
        schema_name, '@extschema@', shard, seq);
    EXECUTE format('COMMENT ON FUNCTION %I.next_id() IS %L', schema_name,
        format('Next snowflake ID of logical shard %s, from sequence %s (made by create_shard).', shard, seq));
    INSERT INTO @extschema@.snowflake_id_shard AS c VALUES (schema_name, shard, seq, NOT had_schema)
        ON CONFLICT ON CONSTRAINT snowflake_id_shard_pkey DO NOTHING;
END
$$;
COMMENT ON FUNCTION create_shard(text, integer) IS
  'Makes (or adopts) schema_name as logical shard: its sequence table_id_seq and its next_id() function. Idempotent.';

CREATE FUNCTION create_shards(prefix text, first_shard integer, count integer) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF count < 0 OR first_shard NOT BETWEEN 0 AND 8191
       OR first_shard::bigint + count - 1 > 8191 THEN
        RAISE EXCEPTION 'shards % to % are out of range: valid shards are 0 to 8191',
            first_shard, first_shard::bigint + count - 1
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    FOR n IN first_shard .. first_shard + count - 1 LOOP
        PERFORM @extschema@.create_shard(prefix || n, n);
    END LOOP;
END
$$;
COMMENT ON FUNCTION create_shards(text, integer, integer) IS
  'create_shard(prefix || n, n) for n = first_shard .. first_shard + count - 1, in one transaction.';

CREATE FUNCTION drop_shard(schema_name text, cascade boolean DEFAULT false) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s @extschema@.snowflake_id_shard;
    behaviour text := CASE WHEN cascade THEN 'CASCADE' ELSE 'RESTRICT' END;
BEGIN
    SELECT * INTO s FROM @extschema@.snowflake_id_shard c WHERE c.schema_name = drop_shard.schema_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'schema % is not a snowflake_id shard', quote_ident(schema_name)
            USING ERRCODE = 'undefined_object';
    END IF;
    -- RESTRICT: a table whose default calls next_id() refuses the drop (2BP01), by name.
    EXECUTE format('DROP FUNCTION %I.next_id() %s', schema_name, behaviour);
    EXECUTE format('DROP SEQUENCE %s %s', s.sequence, behaviour);
    IF s.created_schema THEN
        EXECUTE format('DROP SCHEMA %I %s', schema_name, behaviour);
    END IF;
    DELETE FROM @extschema@.snowflake_id_shard c WHERE c.schema_name = drop_shard.schema_name;
END
$$;
COMMENT ON FUNCTION drop_shard(text, boolean) IS
  'Drops what create_shard made (function, sequence, and the schema if it made it); refuses while tables depend on them, unless cascade.';
