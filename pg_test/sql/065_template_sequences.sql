-- Sequences in a template (sql/installer/installer.sql, fill_shard and copy_default): each
-- shard gets its own copy of every sequence of the template (but an identity column's,
-- which LIKE copies), with the template's options and from its start, a serial's owned by
-- its column as the template's is; a default that is nextval() of a template's sequence
-- takes the shard's. The shard's fingerprint equals the template's; a move carries the
-- sequences' values (snowflake_id_node.sequences). A default using a template's sequence
-- otherwise (its copy would use the template's), a sequence named as the shard's own ID
-- sequence, and another role's sequence (42501) are refused.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
SET client_min_messages = warning;
CREATE SCHEMA st;
CREATE SEQUENCE st.ticket INCREMENT BY 5 START WITH 100 MAXVALUE 1000000 CACHE 1;
CREATE TABLE st.orders (id bigserial PRIMARY KEY, ticket bigint NOT NULL DEFAULT nextval('st.ticket'),
                        line serial, note text);
CREATE TABLE st.events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at timestamptz DEFAULT now());
SELECT nextval('st.ticket') AS template_used_its_own;
SELECT create_shard('sshard1', 6501, template => 'st');
-- The shard's sequences: its own, with the template's options, from their start.
SELECT c.relname, q.seqincrement, q.seqstart, q.seqmax, pg_sequence_last_value(c.oid) IS NULL AS unused
  FROM pg_class c JOIN pg_sequence q ON q.seqrelid = c.oid
 WHERE c.relnamespace = 'sshard1'::regnamespace AND c.relname <> 'table_id_seq' ORDER BY 1;
-- Defaults: the ID from the shard's next_id(), the others from the shard's sequences.
SET search_path = pg_catalog;
SELECT a.attname, pg_get_expr(d.adbin, d.adrelid) AS default_of_copy
  FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
 WHERE d.adrelid = 'sshard1.orders'::regclass ORDER BY a.attnum;
-- A serial's sequence is owned by the shard's column, as the template's by the template's.
SELECT pg_get_serial_sequence('sshard1.orders', 'line') AS line_sequence;
RESET search_path;
INSERT INTO sshard1.orders (note) VALUES ('a'), ('b');
SELECT ticket, line, id_shard(id) AS shard FROM sshard1.orders ORDER BY ticket;
SELECT pg_sequence_last_value('st.ticket') AS template_sequence_untouched;
SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('sshard1'),
                                                snowflake_id_node.fingerprint('st'), 'the shard', 'the template') AS difference;
-- Again: nothing changes (idempotent); many shards at once, each with its own.
SELECT create_shard('sshard1', 6501, template => 'st');
SELECT create_shards('sshard', 6502, 2, template => 'st');
INSERT INTO sshard6502.orders (note) VALUES ('c');
SELECT ticket, line FROM sshard6502.orders;
-- A move carries each sequence's value, the template's sequences included.
INSERT INTO snowflake_id_node.move (key, router, role, peer, shards, schemas, state, marker)
VALUES ('r65/1', 'router', 'source', 'peer', '{6501}', '{sshard1}', 'sealed', 'm');
SELECT s->>'name' AS name, s->>'last' AS last
  FROM json_array_elements(snowflake_id_node.sequences('r65/1')::json) s WHERE s->>'name' <> 'table_id_seq' ORDER BY 1;
DELETE FROM snowflake_id_node.move WHERE key = 'r65/1';
\set VERBOSITY sqlstate
-- A default using a template's sequence otherwise: its copy would use the template's.
CREATE SCHEMA st_bad;
CREATE SEQUENCE st_bad.n;
CREATE TABLE st_bad.t (id bigint PRIMARY KEY, code text DEFAULT 'x' || nextval('st_bad.n'));
SELECT create_shard('sshard9', 6509, template => 'st_bad');
\set VERBOSITY terse
SELECT create_shard('sshard9', 6509, template => 'st_bad');
\set VERBOSITY sqlstate
ALTER TABLE st_bad.t ALTER COLUMN code SET DEFAULT nextval('st_bad.n')::text;
SELECT create_shard('sshard9', 6509, template => 'st_bad');
-- A sequence named by text, looked up when the default runs: every shard would take the
-- template's (42501: the cast reads what a name given at run time names).
ALTER TABLE st_bad.t ALTER COLUMN code SET DEFAULT nextval('st_bad.n'::text)::text;
SELECT create_shard('sshard9', 6509, template => 'st_bad');
ALTER TABLE st_bad.t ALTER COLUMN code DROP DEFAULT;
-- A sequence named as the shard's own ID sequence.
CREATE SEQUENCE st_bad.table_id_seq;
\set VERBOSITY terse
SELECT create_shard('sshard9', 6509, template => 'st_bad');
\set VERBOSITY sqlstate
DROP SEQUENCE st_bad.table_id_seq;
-- Another role's sequence in the template (42501).
CREATE ROLE snowflake_reg_smal;
ALTER SEQUENCE st_bad.n OWNER TO snowflake_reg_smal;
SELECT create_shard('sshard9', 6509, template => 'st_bad');
ALTER SEQUENCE st_bad.n OWNER TO CURRENT_USER;
SELECT create_shard('sshard9', 6509, template => 'st_bad');
SELECT to_regclass('sshard9.n') IS NOT NULL AS made;
RESET client_min_messages;
SET client_min_messages = warning;
SELECT drop_shard(schema_name, cascade => true) FROM snowflake_id_shards WHERE shard IN (6501, 6502, 6503, 6509);
DROP SCHEMA st, st_bad CASCADE;
DROP ROLE snowflake_reg_smal;
