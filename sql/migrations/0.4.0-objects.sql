-- What snowflake_id 0.4.0 changes in the node side's tables, made once: by the upgrade from
-- 0.3.0 (its migration includes this file first) and by the fresh install (after
-- sql/node/objects.sql and sql/installer/shard_catalog.sql, the tables as of 0.3.0;
-- src/sql/files.rs). scripts/build-sql says how.

-- A source's fence holds writes off until this time of the host's monotonic clock
-- (snowflake_id_node.monotonic(), the same in every backend), set by set_fence: past it,
-- writes pass and the seal is refused, even while a stalled mover's session still lives.
ALTER TABLE snowflake_id_node.move ADD COLUMN fence_until timestamptz;

-- pg_partman's configuration of a move's tables, taken off its source at the seal
-- (sql/node/partman.sql: partman_take; NULL: none), for the target's activation.
ALTER TABLE snowflake_id_node.move ADD COLUMN partman text;

-- The router's shard map, as its primary last pushed it here (sql/node/app.sql): what
-- applications read from any node (app_map()) once they have no router to ask. One row.
-- Not dumped: a restored copy of a node gets the map at the router's next push, and never
-- answers with one it was not given.
CREATE TABLE snowflake_id_node.app_map (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    router text NOT NULL,                       -- the identity of the router whose map it is
    version bigint NOT NULL,                    -- that router's map version
    nodes jsonb NOT NULL,                       -- [{"name": ..., "connstr": ...}, ...]
    shards integer[] NOT NULL,
    owners text[] NOT NULL CHECK (cardinality(owners) = cardinality(shards)),
    applied timestamptz NOT NULL
);
COMMENT ON TABLE snowflake_id_node.app_map IS
  'The shard map the router last pushed to this node, with its version (app_map() reads it).';

-- The node's identity as the router registered it (sql/node/node.sql, node_mark): one row,
-- written by the router's add_node (or alter_node, for a node registered by 0.3.0). It is in
-- the data, so a physical standby carries it until it is promoted; two copies of one initdb,
-- which share their system identifier, get different ones. Only the extension owner can
-- write here (schema snowflake_id_node), so a mark proves the router wrote it. Not dumped: a
-- restored copy is a new server, registered as a node of its own.
CREATE TABLE snowflake_id_node.node_mark (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    mark uuid NOT NULL
);
COMMENT ON TABLE snowflake_id_node.node_mark IS
  'The identity the router gave this node when it registered it (one row; carried by physical standbys).';

-- The template each shard was made from (create_shard(..., template => ...), or the copy a
-- move made from one): alter_shards changes only the shards of the template it names. NULL:
-- made without a template, or before 0.4.0 (sql/node/ddl.sql, template_shards, says how
-- such a shard is taken).
ALTER TABLE @extschema@.snowflake_id_shard ADD COLUMN template text;
COMMENT ON COLUMN @extschema@.snowflake_id_shard.template IS
  'The template schema the shard''s tables were made from (NULL: none, or made before 0.4.0).';
