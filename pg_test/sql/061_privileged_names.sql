-- What a less privileged role names cannot reach privileged code (issue 33, class 2):
-- the extensions' schema keeps its name (a database owner renaming public and making
-- another), a router background worker parses nothing under its role's search_path, and a
-- table's rows, however large their text, cannot make a content comparison fail.
\set VERBOSITY sqlstate
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id_router CASCADE;
RESET client_min_messages;

-- == The schema of the extensions keeps its name ==
CREATE ROLE pn_dbo LOGIN;
SELECT current_database() AS db, current_user AS su \gset
ALTER DATABASE :"db" OWNER TO pn_dbo;
\c :db pn_dbo
ALTER SCHEMA public RENAME TO public_orig;   -- refused: the database's owner owns public
\c :db :su
ALTER SCHEMA public RENAME TO public_orig;   -- refused for a superuser too
SELECT nspname FROM pg_namespace n JOIN pg_extension e ON e.extnamespace = n.oid WHERE e.extname = 'snowflake_id';
-- Its owner may still change.
ALTER SCHEMA public OWNER TO pn_dbo;
ALTER SCHEMA public OWNER TO pg_database_owner;
-- A schema of the router's own: altered by superusers only.
CREATE SCHEMA pn_router;
SET client_min_messages = warning;
DROP EXTENSION snowflake_id_router CASCADE;
CREATE EXTENSION snowflake_id_router SCHEMA pn_router CASCADE;
RESET client_min_messages;
ALTER SCHEMA pn_router OWNER TO pn_dbo;
\c :db pn_dbo
ALTER SCHEMA pn_router RENAME TO pn_router2;
\c :db :su
ALTER SCHEMA pn_router OWNER TO postgres;
SET client_min_messages = warning;
DROP EXTENSION snowflake_id_router CASCADE;
DROP SCHEMA pn_router;
CREATE EXTENSION snowflake_id_router CASCADE;
RESET client_min_messages;
ALTER DATABASE :"db" OWNER TO postgres;

-- == A background worker parses nothing under its role's search_path ==
-- The role's own float8, and a cast to it that counts its calls (a sequence: not undone
-- when the worker's statement fails).
CREATE SCHEMA pn_s AUTHORIZATION pn_dbo;
SET ROLE pn_dbo;
CREATE SEQUENCE pn_s.ran;
CREATE TYPE pn_s.float8 AS (x integer);
CREATE FUNCTION pn_s.to_float8(integer) RETURNS pn_s.float8 LANGUAGE sql
    AS $$ SELECT ROW(nextval('pn_s.ran')::integer)::pn_s.float8 $$;
CREATE CAST (integer AS pn_s.float8) WITH FUNCTION pn_s.to_float8(integer);
RESET ROLE;
ALTER ROLE pn_dbo SET search_path = pn_s, pg_catalog;
GRANT USAGE ON SCHEMA snowflake_id_router TO pn_dbo;
GRANT EXECUTE ON FUNCTION snowflake_id_router.background_start(integer, integer) TO pn_dbo;
SET ROLE pn_dbo;
SELECT snowflake_id_router.background_start(2, 60) AS worker \gset
RESET ROLE;
SELECT :worker > 0 AS started, set_config('pn.worker', :'worker', false) IS NOT NULL AS noted;
-- The worker ends at its first step (pn_dbo may not run repair_moves()): wait until it
-- has shown and gone (pg_stat_activity is read once a transaction unless cleared; a worker
-- that ended before it was seen is given 10 s to show).
DO $$
DECLARE
    seen boolean := false;
    present boolean;
BEGIN
    FOR i IN 1 .. 800 LOOP
        PERFORM pg_stat_clear_snapshot();
        present := EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = current_setting('pn.worker')::integer);
        seen := seen OR present;
        EXIT WHEN NOT present AND (seen OR i > 200);
        PERFORM pg_sleep(0.05);
    END LOOP;
END
$$;
SELECT count(*) AS workers_left FROM pg_stat_activity
 WHERE backend_type = 'snowflake_id_router background' AND usename = 'pn_dbo';
SELECT is_called AS role_code_ran_in_worker FROM pn_s.ran;
ALTER ROLE pn_dbo RESET search_path;
DROP SCHEMA pn_s CASCADE;

-- == Rows whose text is large: the digest's input stays small ==
-- 900 rows of 1.2 MB text each (a few MB on disk): their text together passes 1 GB, the
-- most one text value holds.
CREATE TABLE pn_big (id bigint PRIMARY KEY, body text);
INSERT INTO pn_big SELECT g, repeat('a', 1200000) FROM generate_series(1, 900) g;
SELECT (snowflake_id_node.chunk_digests('pn_big', '{}', NULL)::json->'0'->>0)::integer AS rows_digested;
DROP TABLE pn_big;
-- A differing chunk's rows are shown cut, with their length and digest.
CREATE TABLE pn_wide (id bigint PRIMARY KEY, body text);
INSERT INTO pn_wide VALUES (1, repeat('a', 100000)), (2, 'short');
SELECT octet_length(r) < 1000 AS rows_shown_cut, r::json->0->>1 LIKE '(1,aaa% ... (100004 bytes, SHA-256 %)' AS first_row,
       r::json->1->>1 AS second_row
  FROM snowflake_id_node.chunk_rows('pn_wide', '{}', 0) r;
DROP TABLE pn_wide;

SET client_min_messages = warning;
DROP EXTENSION snowflake_id_router CASCADE;
DROP EXTENSION plproxy;
DROP EXTENSION IF EXISTS dblink;
RESET client_min_messages;
DROP OWNED BY pn_dbo;
DROP ROLE pn_dbo;
