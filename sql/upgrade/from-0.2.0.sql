-- snowflake_id 0.2.0 -> 0.3.0: what ALTER EXTENSION snowflake_id UPDATE runs on a 0.2.0
-- installation, in order. scripts/assemble-sql makes sql/snowflake_id--0.2.0--0.3.0.sql of
-- this file, each `--#include FILE` line replaced by that file: the SQL sources the fresh
-- install loads, written so that they can run again (CREATE OR REPLACE, COMMENT), are
-- included as they are; what cannot be written so (new schemas and tables, changes to
-- tables, types and operators, drops, properties of functions cargo pgrx declares) is
-- written here, once. reliability/t_upgrade.sh installs 0.2.0 (and 0.1.0) as released, runs
-- the chain and requires the result to equal a fresh 0.3.0 install (reliability/surface.sql).

-- == The node side of snowflake_id_router ==
--#include sql/node.sql
--#include sql/remote.sql
--#include sql/node_guard.sql

-- == The shard catalog's bound is the layout's largest shard (sql/shard_catalog.sql) ==
ALTER TABLE snowflake_id_shard DROP CONSTRAINT snowflake_id_shard_shard_check,
    ADD CONSTRAINT snowflake_id_shard_shard_check
        CHECK (shard BETWEEN 0 AND @extschema@.id_shard(9223372036854775807));

-- == The installer's helpers, in an internal schema (sql/shard_catalog.sql) ==
CREATE SCHEMA snowflake_id_internal;
COMMENT ON SCHEMA snowflake_id_internal IS 'Internals of snowflake_id: helpers of its SQL functions, with no rights of their own.';
GRANT USAGE ON SCHEMA snowflake_id_internal TO PUBLIC;

-- == The installer, and convert_column: shard numbers checked by make_id; snowflake_id_shards
-- lists the shards served here (it reads snowflake_id_node.move) ==
--#include sql/installer.sql
--#include sql/convert.sql

-- == What the router's views and rebalancer read on a node ==
--#include sql/node_status.sql

-- == id_mask(id), id_unmask(masked): the server's key from a file (src/pg/mask_key_file.rs) ==
-- 0.2.0 read the key from the setting snowflake_id.mask_key, which pg_read_all_settings
-- members could read; the key now lives in the file snowflake_id.mask_key_file names, read
-- by each backend. PARALLEL RESTRICTED: a parallel worker would read the file afresh, and
-- could get a newer key than its leader's. (Their descriptions: sql/applications.sql.)
ALTER FUNCTION id_mask(bigint) PARALLEL RESTRICTED;
ALTER FUNCTION id_unmask(bigint) PARALLEL RESTRICTED;

-- == The snowflake type's casts and smallint comparisons (sql/snowflake_casts.sql) ==
-- 0.2.0's casts to integer, numeric and json took bigint: pg_upgrade restores an extension's
-- members one by one, casts sorted by name, and "snowflake int4" came before the binary cast
-- "snowflake int8" it needed ("argument of cast function must match or be binary-coercible
-- from source data type"). Every cast function now takes snowflake itself.
DROP CAST (snowflake AS integer);
DROP CAST (snowflake AS numeric);
DROP CAST (snowflake AS json);
--#include sql/snowflake_casts.sql

-- == Every function's declaration written by hand, and every description ==
--#include sql/instagram.sql
--#include sql/other_ids.sql
--#include sql/applications.sql

-- == alter_shards on the node (new in 0.3.0) ==
--#include sql/node_ddl.sql
