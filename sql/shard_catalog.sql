-- The catalog of the shards create_shard makes: one row per schema. A table cannot be made
-- twice, so this file is the fresh install's alone; an upgrade changes the table in its own
-- delta (sql/upgrade/from-X.sql). Its shard bound is the layout's largest shard, the shard
-- field of the largest ID (sql/installer.sql says why).

CREATE TABLE snowflake_id_shard (
    schema_name text PRIMARY KEY,
    shard integer NOT NULL UNIQUE CHECK (shard BETWEEN 0 AND @extschema@.id_shard(9223372036854775807)),
    sequence regclass NOT NULL,
    created_schema boolean NOT NULL
);
COMMENT ON TABLE snowflake_id_shard IS 'Logical shards made by create_shard: one schema each, with its sequence.';
-- Dumped with the database (pg_dump), though it belongs to the extension.
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_shard', '');
