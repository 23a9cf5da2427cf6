-- A moving shard's objects that live outside its schema (a type, a domain, a trigger's or a
-- default's or a check's function, an operator, a collation, a sequence, a text search
-- configuration) are guarded as its schema is (sql/node/guard.sql, used()): a change of one
-- between the fence and the flip would change the shard with no DDL on its schema, so it is
-- refused (55000) but by the mover, and goes through once the move is over. (Issue 33.)
\set VERBOSITY sqlstate
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
CREATE EXTENSION IF NOT EXISTS dblink;
RESET client_min_messages;
SELECT current_database() AS db \gset
CREATE TYPE public.gu_mood AS ENUM ('sad', 'ok');
CREATE TYPE public.gu_pair AS (a integer, b integer);
CREATE DOMAIN public.gu_body AS text CHECK (VALUE <> '');
CREATE COLLATION public.gu_coll FROM "C";
CREATE SEQUENCE public.gu_seq;
CREATE FUNCTION public.gu_stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE FUNCTION public.gu_default() RETURNS integer LANGUAGE sql IMMUTABLE RETURN 1;
CREATE FUNCTION public.gu_ok(integer) RETURNS boolean LANGUAGE sql IMMUTABLE RETURN $1 >= 0;
CREATE FUNCTION public.gu_neg(integer) RETURNS integer LANGUAGE sql IMMUTABLE RETURN -$1;
CREATE OPERATOR public.~~~ (RIGHTARG = integer, FUNCTION = public.gu_neg);
CREATE TEXT SEARCH CONFIGURATION public.gu_ts (COPY = pg_catalog.simple);
CREATE TABLE public.gu_unused (id bigint);
CREATE SCHEMA gutpl;
CREATE TABLE gutpl.posts (id bigint PRIMARY KEY, user_id bigint NOT NULL,
    mood public.gu_mood, pair public.gu_pair, body public.gu_body COLLATE public.gu_coll,
    n integer DEFAULT public.gu_default() CHECK (public.gu_ok(n)), s bigint DEFAULT nextval('public.gu_seq'));
CREATE INDEX ON gutpl.posts ((~~~ n));
CREATE INDEX ON gutpl.posts (to_tsvector('public.gu_ts', body::text));
CREATE TRIGGER stamp BEFORE INSERT ON gutpl.posts FOR EACH ROW EXECUTE FUNCTION public.gu_stamp();
SELECT create_shard('gu_7101', 7101, template => 'gutpl');
CREATE FUNCTION pg_temp.refused(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
CREATE TABLE pg_temp.changes (q text);
INSERT INTO pg_temp.changes VALUES
    ($$ALTER TYPE public.gu_mood ADD VALUE 'glad'$$),
    ($$ALTER TYPE public.gu_mood RENAME VALUE 'ok' TO 'fine'$$),
    ($$ALTER TYPE public.gu_pair RENAME ATTRIBUTE b TO c$$),
    ($$ALTER TYPE public.gu_pair OWNER TO CURRENT_USER$$),
    ($$ALTER DOMAIN public.gu_body ADD CONSTRAINT short CHECK (length(VALUE) < 100)$$),
    ($$ALTER DOMAIN public.gu_body SET DEFAULT 'x'$$),
    ($$ALTER DOMAIN public.gu_body DROP CONSTRAINT gu_body_check$$),
    ($$CREATE OR REPLACE FUNCTION public.gu_stamp() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END'$$),
    ($$CREATE OR REPLACE FUNCTION public.gu_default() RETURNS integer LANGUAGE sql IMMUTABLE RETURN 2$$),
    ($$ALTER FUNCTION public.gu_ok(integer) RENAME TO gu_ok2$$),
    ($$ALTER FUNCTION public.gu_neg(integer) SET search_path = public$$),
    ($$ALTER OPERATOR public.~~~ (NONE, integer) OWNER TO CURRENT_USER$$),
    ($$ALTER COLLATION public.gu_coll RENAME TO gu_coll2$$),
    ($$ALTER TEXT SEARCH CONFIGURATION public.gu_ts DROP MAPPING FOR asciiword$$),
    ($$ALTER SEQUENCE public.gu_seq RESTART 100$$);

-- A mover (a dblink session of this server) fences the shard.
SELECT dblink_connect('mover', format('host=%s port=%s dbname=%s', current_setting('unix_socket_directories'), current_setting('port'), :'db'));
SELECT * FROM dblink('mover', $$SELECT concat(snowflake_id_node.lock_shards('{7101}'),
    snowflake_id_node.prepare_source('test/g', 'a router', 'a target', '{7101}', '{gu_7101}'),
    snowflake_id_node.publish('test/g'), snowflake_id_node.set_fence('test/g', '1000', '1 h'))$$) AS t(x text);
SELECT q, pg_temp.refused(q) FROM pg_temp.changes;
SELECT pg_temp.refused($$ALTER TABLE public.gu_unused ADD COLUMN x text$$) AS elsewhere;   -- (DDL elsewhere goes on)
-- The mover's own changes pass.
SELECT dblink_exec('mover', $$ALTER TYPE public.gu_pair OWNER TO CURRENT_USER$$) AS the_mover_may;
-- Once the move is undone, each goes through.
SELECT * FROM dblink('mover', $$SELECT concat(snowflake_id_node.undo('test/g', '1 s', 0),
                                              snowflake_id_node.unlock_shards('{7101}'))$$) AS t(x text);
SELECT dblink_disconnect('mover');
SELECT q, pg_temp.refused(q) FROM pg_temp.changes;
SET client_min_messages = warning;
SELECT drop_shard('gu_7101', cascade => true);
SET client_min_messages = warning;
DROP SCHEMA gutpl CASCADE;
DROP TABLE public.gu_unused;
DROP FUNCTION public.gu_stamp(), public.gu_default(), public.gu_ok2(integer);
DROP OPERATOR public.~~~ (NONE, integer);
DROP FUNCTION public.gu_neg(integer);
DROP TYPE public.gu_mood, public.gu_pair;
DROP DOMAIN public.gu_body;
DROP COLLATION public.gu_coll2;
DROP TEXT SEARCH CONFIGURATION public.gu_ts;
DROP SEQUENCE public.gu_seq;
