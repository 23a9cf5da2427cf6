-- snowflake_id 0.3.0 -> 0.4.0 (scripts/build-sql builds snowflake_id--0.3.0--0.4.0.sql from
-- this file). What cannot run twice comes first, written here or in 0.4.0-objects.sql (which
-- the fresh install includes too); then the files of functions, whole, as the fresh install
-- loads them (src/sql/files.rs).

-- set_fence takes the fence's time limit (sql/node/move_source.sql).
DROP FUNCTION snowflake_id_node.set_fence(text, text);
-- outside_dependents became dependents_outside, which takes the schemas allowed apart
-- (sql/node/shape.sql); refusal() named it only at run time.
DROP FUNCTION snowflake_id_node.outside_dependents(oid[], text);
-- The guard's event triggers read snowflake_id_node.move through guarded_moves(), whose
-- body names its columns as they were when it was made: off until guard.sql has made it
-- again over the table as 0.4.0-objects.sql leaves it.
-- create_shards_from takes whether to fill the copies' materialized views (a move's are
-- filled by their owners, refresh_copies).
DROP FUNCTION snowflake_id_internal.create_shards_from(text[], integer[], text);
ALTER EVENT TRIGGER snowflake_id_guard_ddl DISABLE;
ALTER EVENT TRIGGER snowflake_id_guard_drop DISABLE;

--#include sql/migrations/0.4.0-objects.sql
--#include sql/node/node.sql
--#include sql/node/shape.sql
--#include sql/node/grants.sql
--#include sql/node/partman.sql
--#include sql/node/move_source.sql
--#include sql/node/move_target.sql
--#include sql/node/repair.sql
--#include sql/node/remote.sql
--#include sql/node/verify.sql
--#include sql/id/instagram.sql
--#include sql/installer/installer.sql
--#include sql/node/split.sql
--#include sql/node/status.sql
--#include sql/node/guard.sql
ALTER EVENT TRIGGER snowflake_id_guard_ddl ENABLE ALWAYS;
ALTER EVENT TRIGGER snowflake_id_guard_drop ENABLE ALWAYS;
--#include sql/node/ddl.sql
--#include sql/node/app.sql
--#include sql/installer/convert.sql
--#include sql/id/applications.sql
--#include sql/id/other_ids.sql
