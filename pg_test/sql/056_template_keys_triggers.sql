-- A template with foreign keys between its tables, triggers and storage parameters: each
-- shard made from it has them, pointing at its own tables and firing there; what cannot be
-- copied right is refused by name (0A000, 42501), nothing made.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
\set VERBOSITY sqlstate
CREATE FUNCTION public.snowflake_reg_bump_likes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('UPDATE %I.photos SET like_count = like_count + 1 WHERE id = $1', TG_TABLE_SCHEMA) USING NEW.photo_id;
    RETURN NULL;
END $$;
CREATE FUNCTION public.snowflake_reg_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := '2030-01-01';
    RETURN NEW;
END $$;
CREATE SCHEMA ktpl;
CREATE TABLE ktpl.users (id bigint PRIMARY KEY, name text NOT NULL) WITH (fillfactor = 80, toast.autovacuum_enabled = false);
CREATE TABLE ktpl.photos (id bigint PRIMARY KEY, user_id bigint NOT NULL REFERENCES ktpl.users ON DELETE CASCADE,
                          like_count integer NOT NULL DEFAULT 0, updated_at timestamptz);
CREATE TABLE ktpl.likes (user_id bigint REFERENCES ktpl.users, photo_id bigint,
                         PRIMARY KEY (user_id, photo_id),
                         CONSTRAINT "odd "" % name" FOREIGN KEY (photo_id) REFERENCES ktpl.photos (id) DEFERRABLE INITIALLY DEFERRED);
CREATE TRIGGER count_like AFTER INSERT ON ktpl.likes FOR EACH ROW EXECUTE FUNCTION public.snowflake_reg_bump_likes();
CREATE TRIGGER "stamp %I" BEFORE UPDATE OF like_count ON ktpl.photos FOR EACH ROW
    WHEN (OLD.like_count IS DISTINCT FROM NEW.like_count) EXECUTE FUNCTION public.snowflake_reg_stamp();
CREATE TRIGGER off BEFORE DELETE ON ktpl.users FOR EACH ROW EXECUTE FUNCTION public.snowflake_reg_stamp();
-- A key to its own table, one of two columns MATCH FULL with a column list to set null, a
-- statement trigger with a transition table, a TRUNCATE trigger, a deferred constraint trigger.
CREATE TABLE ktpl.comments (id bigint PRIMARY KEY, parent_id bigint REFERENCES ktpl.comments ON DELETE CASCADE,
                            user_id bigint, photo_id bigint, note text,
                            FOREIGN KEY (user_id, photo_id) REFERENCES ktpl.likes MATCH FULL ON DELETE SET NULL (photo_id) ON UPDATE RESTRICT);
CREATE FUNCTION public.snowflake_reg_noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END';
CREATE TRIGGER seen AFTER INSERT ON ktpl.comments REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION public.snowflake_reg_noop();
CREATE TRIGGER emptied AFTER TRUNCATE ON ktpl.comments FOR EACH STATEMENT EXECUTE FUNCTION public.snowflake_reg_noop('a', 'b''c');
CREATE CONSTRAINT TRIGGER late AFTER UPDATE OF note, photo_id ON ktpl.comments DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION public.snowflake_reg_noop();
ALTER TABLE ktpl.users DISABLE TRIGGER off;
SELECT create_shard('kshard1', 1, template => 'ktpl');
-- The keys point at the shard's tables; the triggers are on them; the layout is the template's.
SELECT conrelid::regclass AS "table", conname, pg_get_constraintdef(oid) AS def
  FROM pg_constraint WHERE connamespace = 'kshard1'::regnamespace AND contype = 'f' ORDER BY 1, 2;
SELECT tgrelid::regclass AS "table", tgname, tgenabled FROM pg_trigger
 WHERE tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'kshard1'::regnamespace) AND NOT tgisinternal ORDER BY 1, 2;
SELECT c.relname, c.reloptions, z.reloptions AS toast FROM pg_class c LEFT JOIN pg_class z ON z.oid = c.reltoastrelid
 WHERE c.relnamespace = 'kshard1'::regnamespace AND c.relkind = 'r' ORDER BY 1;
SELECT snowflake_id_node.fingerprint('kshard1') = snowflake_id_node.fingerprint('ktpl') AS same_layout;
-- They work on the shard's rows, not the template's.
INSERT INTO kshard1.users VALUES (1, 'ann');
INSERT INTO kshard1.photos (id, user_id) VALUES (10, 1);
INSERT INTO kshard1.likes VALUES (1, 10);
SELECT id, like_count, updated_at FROM kshard1.photos;
SELECT count(*) AS template_rows FROM ktpl.photos;
INSERT INTO kshard1.photos (id, user_id) VALUES (11, 2);
BEGIN;
INSERT INTO kshard1.likes VALUES (1, 99);
COMMIT;
-- A trigger or key added to the template and the shard alike (as alter_shards does) is
-- copied by the next create_shard too, and the two still read alike.
CREATE TRIGGER stamp_users BEFORE UPDATE ON ktpl.users FOR EACH ROW EXECUTE FUNCTION public.snowflake_reg_stamp();
CREATE TRIGGER stamp_users BEFORE UPDATE ON kshard1.users FOR EACH ROW EXECUTE FUNCTION public.snowflake_reg_stamp();
SELECT create_shard('kshard2', 2, template => 'ktpl');
SELECT snowflake_id_node.fingerprint('kshard2') = snowflake_id_node.fingerprint('kshard1') AS same_layout;
-- Idempotent: the second call makes nothing twice.
SELECT create_shard('kshard2', 2, template => 'ktpl');
SELECT count(*) AS keys FROM pg_constraint WHERE connamespace = 'kshard2'::regnamespace AND contype = 'f';
-- A column whose name holds the text that names the table: the definition is split where
-- the table's name is, after a head rebuilt from the catalog, not where the text first appears.
CREATE SCHEMA ktpl_odd;
CREATE TABLE ktpl_odd.users (id bigint PRIMARY KEY, "a ON ktpl_odd.users FOR" text);
CREATE TRIGGER odd BEFORE UPDATE OF "a ON ktpl_odd.users FOR", id ON ktpl_odd.users FOR EACH ROW EXECUTE FUNCTION public.snowflake_reg_stamp();
SELECT create_shard('kshard3', 3, template => 'ktpl_odd');
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'kshard3.users'::regclass;
SELECT count(*) AS template_triggers FROM pg_trigger WHERE tgrelid = 'ktpl_odd.users'::regclass;
CREATE FUNCTION pg_temp.refusal(template text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM create_shard('kbad', 9, template => template);
    RETURN 'accepted';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
-- A key to a table outside the template: its rows are not the shard's.
CREATE TABLE public.snowflake_reg_countries (code text PRIMARY KEY);
CREATE SCHEMA ktpl_out;
CREATE TABLE ktpl_out.users (id bigint PRIMARY KEY, country text REFERENCES public.snowflake_reg_countries);
SELECT pg_temp.refusal('ktpl_out');
-- A trigger whose function another role owns (it could change what every shard's writes
-- run), or whose WHEN condition calls one: refused (42501), as for a default.
CREATE ROLE snowflake_reg_trigger_owner;
CREATE SCHEMA kmal AUTHORIZATION snowflake_reg_trigger_owner;
SET ROLE snowflake_reg_trigger_owner;
CREATE FUNCTION kmal.touch() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
CREATE FUNCTION kmal.yes(bigint) RETURNS boolean LANGUAGE sql IMMUTABLE RETURN true;
RESET ROLE;
CREATE SCHEMA ktpl_mal;
CREATE TABLE ktpl_mal.users (id bigint PRIMARY KEY);
CREATE TRIGGER t BEFORE INSERT ON ktpl_mal.users FOR EACH ROW EXECUTE FUNCTION kmal.touch();
SELECT pg_temp.refusal('ktpl_mal');
DROP TRIGGER t ON ktpl_mal.users;
CREATE TRIGGER t BEFORE INSERT ON ktpl_mal.users FOR EACH ROW WHEN (kmal.yes(NEW.id)) EXECUTE FUNCTION public.snowflake_reg_stamp();
SELECT pg_temp.refusal('ktpl_mal');
-- A rule, and a constraint trigger reading another table of the template: refused (0A000).
CREATE SCHEMA ktpl_rule;
CREATE TABLE ktpl_rule.a (id bigint PRIMARY KEY);
CREATE TABLE ktpl_rule.b (id bigint PRIMARY KEY);
CREATE CONSTRAINT TRIGGER c AFTER INSERT ON ktpl_rule.a FROM ktpl_rule.b FOR EACH ROW EXECUTE FUNCTION public.snowflake_reg_stamp();
SELECT pg_temp.refusal('ktpl_rule');
DROP TRIGGER c ON ktpl_rule.a;
CREATE RULE no_delete AS ON DELETE TO ktpl_rule.a DO INSTEAD NOTHING;
SELECT pg_temp.refusal('ktpl_rule');
SELECT to_regnamespace('kbad') IS NULL AS nothing_made;
-- A trigger whose function is in the template schema: the copy calls the shard's copy of it.
CREATE SCHEMA ktpl_fn;
CREATE TABLE ktpl_fn.a (id bigint PRIMARY KEY);
CREATE FUNCTION ktpl_fn.touch() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
CREATE TRIGGER t BEFORE INSERT ON ktpl_fn.a FOR EACH ROW EXECUTE FUNCTION ktpl_fn.touch();
SELECT pg_temp.refusal('ktpl_fn');
SELECT tgfoid::regprocedure AS copy_calls FROM pg_trigger WHERE tgrelid = 'kbad.a'::regclass AND tgname = 't';
SELECT drop_shard('kbad', cascade => true);
-- A move carries ordinary triggers and keys (the rows arrive with session_replication_role
-- = replica: they fired on the source); one enabled ALWAYS or REPLICA would fire again.
SELECT snowflake_id_node.refusal('{kshard1}') AS movable;
ALTER TABLE kshard1.likes ENABLE ALWAYS TRIGGER count_like;
SELECT snowflake_id_node.refusal('{kshard1}');
SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('kshard1'), snowflake_id_node.fingerprint('ktpl'),
                                                'the shard', 'the template') AS enabled_differs;
ALTER TABLE kshard1.likes ENABLE REPLICA TRIGGER count_like;
SELECT snowflake_id_node.refusal('{kshard1}');
ALTER TABLE kshard1.likes ENABLE TRIGGER count_like;
SET client_min_messages = warning;
SELECT drop_shard(schema_name, cascade => true) FROM snowflake_id_shards WHERE shard IN (1, 2, 3);
DROP SCHEMA ktpl, ktpl_odd, ktpl_out, ktpl_mal, kmal, ktpl_rule, ktpl_fn CASCADE;
DROP TABLE public.snowflake_reg_countries;
DROP FUNCTION public.snowflake_reg_bump_likes(), public.snowflake_reg_stamp(), public.snowflake_reg_noop();
DROP ROLE snowflake_reg_trigger_owner;
RESET client_min_messages;
