-- What snowflake_id 0.4.0 changes in the node side's tables, made once: by the upgrade from
-- 0.3.0 (its migration includes this file first) and by the fresh install (after
-- sql/node/objects.sql, the tables as of 0.3.0; src/sql/files.rs). scripts/build-sql says how.

-- A source's fence holds writes off until this time of the host's monotonic clock
-- (snowflake_id_node.monotonic(), the same in every backend), set by set_fence: past it,
-- writes pass and the seal is refused, even while a stalled mover's session still lives.
ALTER TABLE snowflake_id_node.move ADD COLUMN fence_until timestamptz;
