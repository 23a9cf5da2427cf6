-- Functions and procedures in a template (sql/installer/installer.sql, copy_function): each is
-- made in the shard from its definition with the shard on the path, so an SQL-standard body
-- works on the shard's tables, and checked to refer to what the template's does (refers());
-- made before the views, so a view calling one calls the shard's. A body given as text is
-- copied as it is: one naming the template's schema is refused (0A000), as is a default or
-- trigger calling a function of the template (its copy would call the template's) and a body
-- reading a view of the template; another role's function in the template, or called by a
-- function's body, is refused (42501). The shard's fingerprint, function bodies included,
-- equals the template's.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
SET client_min_messages = warning;
CREATE SCHEMA ft;
CREATE TABLE ft.photos (id bigint PRIMARY KEY, caption text, likes integer NOT NULL DEFAULT 0);
CREATE FUNCTION ft.like_photo(photo bigint) RETURNS integer LANGUAGE sql
BEGIN ATOMIC
    UPDATE ft.photos SET likes = likes + 1 WHERE id = photo RETURNING likes;
END;
CREATE FUNCTION ft.photo_count() RETURNS bigint LANGUAGE sql STABLE RETURN (SELECT count(*) FROM ft.photos);
CREATE FUNCTION ft.caption_of(p ft.photos) RETURNS text LANGUAGE sql IMMUTABLE RETURN upper(p.caption);
CREATE FUNCTION ft.shout(t text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN t || '!'; END $$;
CREATE PROCEDURE ft.forget(photo bigint) LANGUAGE sql BEGIN ATOMIC DELETE FROM ft.photos WHERE id = photo; END;
CREATE VIEW ft.summary AS SELECT ft.photo_count() AS photos, ft.shout('hi') AS greeting;
-- A trigger calling a function of the template: the copy calls the shard's.
CREATE FUNCTION ft.tidy() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.caption := btrim(NEW.caption); RETURN NEW; END $$;
CREATE TRIGGER tidy BEFORE INSERT OR UPDATE OF caption ON ft.photos FOR EACH ROW EXECUTE FUNCTION ft.tidy();
INSERT INTO ft.photos VALUES (1, 'template row');
SELECT create_shard('fshard1', 6601, template => 'ft');
SET search_path = pg_catalog;
SELECT p.oid::regprocedure AS copied, p.prokind FROM pg_proc p WHERE p.pronamespace = 'fshard1'::regnamespace
   AND p.proname <> 'next_id' ORDER BY 1::text;
SELECT pg_get_functiondef('fshard1.like_photo(bigint)'::regprocedure) ~ 'fshard1\.photos' AS on_the_shard,
       pg_get_functiondef('fshard1.like_photo(bigint)'::regprocedure) ~ 'ft\.' AS on_the_template;
RESET search_path;
INSERT INTO fshard1.photos (id, caption) VALUES (5, '  sunset ');
SELECT tgfoid::regprocedure AS trigger_calls FROM pg_trigger WHERE tgrelid = 'fshard1.photos'::regclass AND NOT tgisinternal;
SELECT fshard1.like_photo(5) AS likes, fshard1.like_photo(1) AS none_there;
SELECT (SELECT likes FROM ft.photos WHERE id = 1) AS template_likes, fshard1.caption_of(p) AS caption FROM fshard1.photos p;
SELECT * FROM fshard1.summary;
CALL fshard1.forget(5);
SELECT count(*) AS left_in_shard, (SELECT count(*) FROM ft.photos) AS left_in_template FROM fshard1.photos;
SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('fshard1'),
                                                snowflake_id_node.fingerprint('ft'), 'the shard', 'the template') AS difference;
-- A shard whose function differs from its template's: the fingerprint names it.
CREATE OR REPLACE FUNCTION fshard1.shout(t text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN t || '?'; END $$;
SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('fshard1'),
                                                snowflake_id_node.fingerprint('ft'), 'the shard', 'the template') IS NOT NULL AS differs;
-- Again: nothing changes (idempotent); many shards at once.
SELECT create_shard('fshard1', 6601, template => 'ft');
SELECT create_shards('fshard', 6602, 2, template => 'ft');
SELECT fshard6603.like_photo(1) IS NULL AS nothing_to_like;
\set VERBOSITY terse
-- A body given as text that names the template: its copy would use the template's table.
CREATE SCHEMA ft_bad;
CREATE TABLE ft_bad.t (id bigint PRIMARY KEY);
CREATE FUNCTION ft_bad.n() RETURNS bigint LANGUAGE plpgsql AS $$ BEGIN RETURN (SELECT count(*) FROM ft_bad.t); END $$;
SELECT create_shard('fshard9', 6609, template => 'ft_bad');
DROP FUNCTION ft_bad.n();
-- A default or a trigger calling the template's function: its copy would call the template's.
CREATE FUNCTION ft_bad.code() RETURNS text LANGUAGE sql RETURN 'c';
ALTER TABLE ft_bad.t ADD COLUMN code text DEFAULT ft_bad.code();
SELECT create_shard('fshard9', 6609, template => 'ft_bad');
ALTER TABLE ft_bad.t DROP COLUMN code;
DROP FUNCTION ft_bad.code();
-- A trigger whose WHEN condition calls the template's function (0A000, nothing made).
CREATE FUNCTION ft_bad.yes(bigint) RETURNS boolean LANGUAGE sql IMMUTABLE RETURN true;
CREATE FUNCTION ft_bad.nop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER w BEFORE INSERT ON ft_bad.t FOR EACH ROW WHEN (ft_bad.yes(NEW.id)) EXECUTE FUNCTION ft_bad.nop();
SELECT create_shard('fshard9', 6609, template => 'ft_bad');
DROP TRIGGER w ON ft_bad.t;
DROP FUNCTION ft_bad.yes(bigint), ft_bad.nop();
-- A body reading a view of the template (the views are made after the functions).
CREATE VIEW ft_bad.v AS SELECT id FROM ft_bad.t;
CREATE FUNCTION ft_bad.vn() RETURNS bigint LANGUAGE sql RETURN (SELECT count(*) FROM ft_bad.v);
SELECT create_shard('fshard9', 6609, template => 'ft_bad');
DROP FUNCTION ft_bad.vn();
\set VERBOSITY sqlstate
-- Another role's function in the template, or called by a template function's body (42501).
CREATE ROLE snowflake_reg_fmal;
CREATE SCHEMA fm AUTHORIZATION snowflake_reg_fmal;
SET ROLE snowflake_reg_fmal;
CREATE FUNCTION fm.f(bigint) RETURNS bigint LANGUAGE sql IMMUTABLE RETURN $1;
RESET ROLE;
CREATE FUNCTION ft_bad.calls_other() RETURNS bigint LANGUAGE sql RETURN fm.f(1);
SELECT create_shard('fshard9', 6609, template => 'ft_bad');
DROP FUNCTION ft_bad.calls_other();
CREATE FUNCTION ft_bad.mine() RETURNS int LANGUAGE sql RETURN 1;
ALTER FUNCTION ft_bad.mine() OWNER TO snowflake_reg_fmal;
SELECT create_shard('fshard9', 6609, template => 'ft_bad');
DROP FUNCTION ft_bad.mine();
-- A function named as the shard's own next_id() (0A000).
CREATE FUNCTION ft_bad.next_id() RETURNS bigint LANGUAGE sql RETURN 1;
\set VERBOSITY terse
SELECT create_shard('fshard9', 6609, template => 'ft_bad');
\set VERBOSITY sqlstate
DROP FUNCTION ft_bad.next_id();
-- A template schema another role owns (it could rename it and put another in its place
-- while create_shard runs), or where another role may create (42501).
ALTER SCHEMA ft_bad OWNER TO snowflake_reg_fmal;
SELECT create_shard('fshard9', 6609, template => 'ft_bad');
ALTER SCHEMA ft_bad OWNER TO CURRENT_USER;
GRANT CREATE ON SCHEMA ft_bad TO snowflake_reg_fmal;
SELECT create_shard('fshard9', 6609, template => 'ft_bad');
REVOKE CREATE ON SCHEMA ft_bad FROM snowflake_reg_fmal;
-- A shard schema that exists already, where another role may create, or holding another
-- role's function of a template function's name (which the copy would skip and the views
-- call): 42501, nothing made.
CREATE SCHEMA fshard8;
GRANT CREATE ON SCHEMA fshard8 TO snowflake_reg_fmal;
SELECT create_shard('fshard8', 6608, template => 'ft');
REVOKE CREATE ON SCHEMA fshard8 FROM snowflake_reg_fmal;
CREATE FUNCTION fshard8.photo_count() RETURNS bigint LANGUAGE sql RETURN 42;
ALTER FUNCTION fshard8.photo_count() OWNER TO snowflake_reg_fmal;
SELECT create_shard('fshard8', 6608, template => 'ft');
SELECT count(*) AS tables_made FROM pg_tables WHERE schemaname = 'fshard8';
DROP SCHEMA fshard8 CASCADE;
-- A text body is not analysed when its copy is made (as pg_dump restores functions):
-- analysing it would run her domain's check on the constant, as the caller.
CREATE TABLE public.fm_ran (who name);
GRANT INSERT ON public.fm_ran TO PUBLIC;
SET ROLE snowflake_reg_fmal;
CREATE FUNCTION fm.chk(text) RETURNS boolean LANGUAGE plpgsql VOLATILE
AS $f$ BEGIN INSERT INTO public.fm_ran VALUES (current_user); RETURN true; END $f$;
CREATE DOMAIN fm.d AS text CHECK (fm.chk(VALUE));
RESET ROLE;
CREATE FUNCTION ft_bad.first() RETURNS text LANGUAGE sql AS $f$ SELECT ('{x}'::fm.d[])[1]::text $f$;
TRUNCATE public.fm_ran;
SELECT create_shard('fshard10', 6610, template => 'ft_bad');
SELECT count(*) AS her_check_ran FROM public.fm_ran;
SELECT drop_shard('fshard10', cascade => true);
DROP FUNCTION ft_bad.first();
DROP TABLE public.fm_ran;
-- A function PUBLIC may not run in the template may not be run in the shard either.
CREATE FUNCTION ft_bad.whoami() RETURNS text LANGUAGE sql SECURITY DEFINER RETURN current_user;
REVOKE EXECUTE ON FUNCTION ft_bad.whoami() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ft_bad.whoami() TO snowflake_reg_fmal;
SELECT create_shard('fshard9', 6609, template => 'ft_bad');
SELECT has_function_privilege('public', 'fshard9.whoami()', 'EXECUTE') AS public_may,
       has_function_privilege('snowflake_reg_fmal', 'fshard9.whoami()', 'EXECUTE') AS grantee_may;
SELECT to_regclass('fshard9.v') IS NOT NULL AS made;
RESET client_min_messages;
SET client_min_messages = warning;
SELECT drop_shard(schema_name, cascade => true) FROM snowflake_id_shards WHERE shard IN (6601, 6602, 6603, 6609);
DROP SCHEMA ft, ft_bad, fm CASCADE;
DROP ROLE snowflake_reg_fmal;
