-- alter_shards per template (issue 35): each shard records the template it was made from,
-- and a schema change named for a template reaches only its shards. A shard of no known
-- template (made before 0.4.0) is taken as the template's when its tables are the
-- template's, and recorded so.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
\set VERBOSITY sqlstate
CREATE SCHEMA t60_photos;
CREATE TABLE t60_photos.t60_photo (id bigint PRIMARY KEY, caption text);
CREATE SCHEMA t60_notes;
CREATE TABLE t60_notes.t60_note (id bigint PRIMARY KEY, note text NOT NULL);
SELECT create_shard('t60_p1', 6001, template => 't60_photos');
SELECT create_shard('t60_p2', 6002, template => 't60_photos');
SELECT create_shard('t60_n1', 6003, template => 't60_notes');
SELECT create_shard('t60_old_p', 6004, template => 't60_photos');
SELECT create_shard('t60_old_n', 6005, template => 't60_notes');
SELECT create_shard('t60_bare', 6006);
-- As 0.3.0 left them: no template recorded.
UPDATE snowflake_id_shard SET template = NULL WHERE schema_name IN ('t60_old_p', 't60_old_n');
SELECT schema_name, template FROM snowflake_id_shards WHERE shard BETWEEN 6001 AND 6006 ORDER BY shard;

-- A change named for t60_photos: its template, its two shards and the old shard with its
-- tables; not t60_notes' shards, nor the bare one (which has no t60_photo to change).
SELECT snowflake_id_node.schema_change_apply('t60/1', 'ALTER TABLE %I.t60_photo ADD COLUMN likes integer NOT NULL DEFAULT 0', 't60_photos', '1s') > 0 AS applied;
SELECT table_schema FROM information_schema.columns
 WHERE column_name = 'likes' AND table_name = 't60_photo' ORDER BY 1;
SELECT schema_name, template FROM snowflake_id_shards WHERE shard BETWEEN 6001 AND 6006 ORDER BY shard;
-- The other template's change reaches only its own.
SELECT snowflake_id_node.schema_change_apply('t60/2', 'CREATE INDEX ON %I.t60_note (note)', 't60_notes', '1s') > 0 AS applied;
SELECT schemaname FROM pg_indexes WHERE tablename = 't60_note' AND indexdef LIKE '%(note)%' ORDER BY 1;
SELECT schema_name, template FROM snowflake_id_shards WHERE shard BETWEEN 6001 AND 6006 ORDER BY shard;
-- create_shard again from another template records the latest.
SELECT create_shard('t60_bare', 6006, template => 't60_notes');
SELECT template FROM snowflake_id_shards WHERE shard = 6006;
