-- The catalog of the shards create_shard makes, one row per schema, and the schema of the
-- installer's helpers. A table or schema cannot be made twice, so this file is the fresh
-- install's alone, as of 0.3.0; a later release changes them in its own
-- sql/migrations/V-objects.sql (scripts/build-sql). The catalog's shard bound is the layout's largest shard, the
-- shard field of the largest ID (sql/installer/installer.sql says why).

CREATE TABLE snowflake_id_shard (
    schema_name text PRIMARY KEY,
    shard integer NOT NULL UNIQUE CHECK (shard BETWEEN 0 AND @extschema@.id_shard(9223372036854775807)),
    sequence regclass NOT NULL,
    created_schema boolean NOT NULL
);
COMMENT ON TABLE snowflake_id_shard IS 'Logical shards made by create_shard: one schema each, with its sequence.';
-- Dumped with the database (pg_dump), though it belongs to the extension.
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_shard', '');

-- The internal schema of the installer's helpers (sql/installer/installer.sql): on every role's reach,
-- as the functions in it hold no rights of their own.
CREATE SCHEMA snowflake_id_internal;
COMMENT ON SCHEMA snowflake_id_internal IS 'Internals of snowflake_id: helpers of its SQL functions, with no rights of their own.';
GRANT USAGE ON SCHEMA snowflake_id_internal TO PUBLIC;
