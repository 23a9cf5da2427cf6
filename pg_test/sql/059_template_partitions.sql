-- A template with a partitioned table (docs/applications.md's ID-range partitions, by month of
-- ID time): each shard made from it has the table partitioned alike, each partition of the
-- template a partition of the shard's table with the template's bounds (the default one too),
-- with the template's indexes, keys and triggers; what cannot be copied right is refused.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
\set VERBOSITY sqlstate
CREATE FUNCTION public.snowflake_reg_part_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.note := 'stamped';
    RETURN NEW;
END $$;
CREATE SCHEMA ptpl;
CREATE TABLE ptpl.users (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE ptpl.photos (id bigint NOT NULL, user_id bigint NOT NULL REFERENCES ptpl.users, note text,
                          PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE INDEX photos_user ON ptpl.photos (user_id);
CREATE TABLE ptpl.photos_2024_01 PARTITION OF ptpl.photos
    FOR VALUES FROM (make_id('2024-01-01+00')) TO (make_id('2024-02-01+00'));
CREATE TABLE ptpl.photos_2024_02 PARTITION OF ptpl.photos
    FOR VALUES FROM (make_id('2024-02-01+00')) TO (make_id('2024-03-01+00'))
    WITH (fillfactor = 70);
CREATE TABLE ptpl.photos_rest PARTITION OF ptpl.photos DEFAULT;
CREATE TRIGGER stamp BEFORE INSERT ON ptpl.photos FOR EACH ROW EXECUTE FUNCTION public.snowflake_reg_part_stamp();
-- A key to the partitioned table.
CREATE TABLE ptpl.likes (user_id bigint, photo_id bigint REFERENCES ptpl.photos, PRIMARY KEY (user_id, photo_id));
SELECT create_shard('pshard1', 1, template => 'ptpl');
-- The shard's table is partitioned as the template's, each partition with the template's bounds.
SELECT c.relname, c.relkind, pg_get_partkeydef(c.oid) AS key, i.inhparent::regclass AS parent,
       pg_get_expr(c.relpartbound, c.oid) AS bound, c.reloptions
  FROM pg_class c LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
 WHERE c.relnamespace = 'pshard1'::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1;
-- Its indexes, keys and triggers, each once, the partitions' attached to the table's.
SELECT indrelid::regclass AS "table", pg_get_indexdef(indexrelid) ~ 'user_id' AS on_user,
       indisprimary, (SELECT count(*) FROM pg_inherits WHERE inhrelid = indexrelid) AS attached
  FROM pg_index WHERE indrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'pshard1'::regnamespace) ORDER BY 1, 2, 3;
SELECT conrelid::regclass AS "table", confrelid::regclass AS refers_to, conparentid <> 0 AS inherited
  FROM pg_constraint WHERE connamespace = 'pshard1'::regnamespace AND contype = 'f' ORDER BY 1, 2, 3;
SELECT tgrelid::regclass AS "table", tgname, tgparentid <> 0 AS inherited FROM pg_trigger
 WHERE tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'pshard1'::regnamespace) AND NOT tgisinternal ORDER BY 1, 2;
SELECT snowflake_id_node.fingerprint('pshard1') = snowflake_id_node.fingerprint('ptpl') AS same_layout;
-- Rows go to the partition of their ID's month, the default one past the last; IDs come
-- from the shard's next_id().
INSERT INTO pshard1.users VALUES (1, 'ann');
INSERT INTO pshard1.photos (id, user_id) VALUES (make_id('2024-01-15+00'), 1), (make_id('2024-02-15+00'), 1),
                                                (make_id('2025-01-01+00'), 1);
INSERT INTO pshard1.photos (user_id) VALUES (1);
SELECT tableoid::regclass AS partition, count(*), min(note) AS note FROM pshard1.photos GROUP BY 1 ORDER BY 1;
INSERT INTO pshard1.likes VALUES (1, make_id('2024-01-15+00'));
SELECT count(*) AS template_rows FROM ptpl.photos;
-- Idempotent; a partition added to the template (and the shard alike) is copied by the next shard.
SELECT create_shard('pshard1', 1, template => 'ptpl');
CREATE TABLE ptpl.photos_2024_03 PARTITION OF ptpl.photos
    FOR VALUES FROM (make_id('2024-03-01+00')) TO (make_id('2024-04-01+00'));
SELECT create_shard('pshard2', 2, template => 'ptpl');
SELECT pg_get_expr(relpartbound, oid) = pg_get_expr((SELECT relpartbound FROM pg_class WHERE oid = 'ptpl.photos_2024_03'::regclass), oid)
       AS same_bound
  FROM pg_class WHERE oid = 'pshard2.photos_2024_03'::regclass;
SELECT snowflake_id_node.fingerprint('pshard2') = snowflake_id_node.fingerprint('ptpl') AS same_layout;
SELECT snowflake_id_node.fingerprint('pshard2') = snowflake_id_node.fingerprint('pshard1') AS same_layout;
CREATE FUNCTION pg_temp.refusal(template text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM create_shard('pbad', 9, template => template);
    RETURN 'accepted';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
-- A partition of a table outside the template: its copy would not be the table's partition.
CREATE SCHEMA ptpl_outside;
CREATE TABLE ptpl_outside.photos_2024 PARTITION OF ptpl.photos
    FOR VALUES FROM (make_id('2024-06-01+00')) TO (make_id('2024-07-01+00'));
SELECT pg_temp.refusal('ptpl_outside');
-- ... and a table with a partition outside the template: its copy would lack that partition.
SELECT pg_temp.refusal('ptpl');
-- A partition key that is an expression: refused, not run.
CREATE SCHEMA ptpl_expr;
CREATE TABLE ptpl_expr.events (id bigint NOT NULL, at timestamptz) PARTITION BY RANGE ((id / 2));
SELECT pg_temp.refusal('ptpl_expr');
SELECT count(*) AS made FROM pg_namespace WHERE nspname = 'pbad';
-- A partition key's operator class owned by another role: the copy's routing would run its
-- functions, so it is judged as the copied parts' code is (42501).
CREATE ROLE snowflake_reg_part_other;
CREATE OPERATOR CLASS public.snowflake_reg_int8_ops FOR TYPE bigint USING btree AS
    OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >, FUNCTION 1 btint8cmp(bigint, bigint);
ALTER OPERATOR CLASS public.snowflake_reg_int8_ops USING btree OWNER TO snowflake_reg_part_other;
ALTER OPERATOR FAMILY public.snowflake_reg_int8_ops USING btree OWNER TO snowflake_reg_part_other;
CREATE SCHEMA ptpl_opclass;
CREATE TABLE ptpl_opclass.events (id bigint NOT NULL) PARTITION BY RANGE (id public.snowflake_reg_int8_ops);
SELECT pg_temp.refusal('ptpl_opclass');
DROP SCHEMA ptpl_opclass CASCADE;
DROP OPERATOR FAMILY public.snowflake_reg_int8_ops USING btree;
DROP ROLE snowflake_reg_part_other;
