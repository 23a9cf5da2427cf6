-- create_shard(..., template => ...) refuses (42501) a template whose copies would use or run
-- anything owned by a role that is neither the caller nor a superuser, found transitively
-- from what CREATE TABLE ... (LIKE ... INCLUDING ALL) copies (sql/installer/template_read.sql).
-- mallory may create in the template schemas and owns schema m; each case is one template.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
\set VERBOSITY sqlstate
SET client_min_messages = warning;
CREATE ROLE snowflake_reg_mallory;
CREATE SCHEMA m AUTHORIZATION snowflake_reg_mallory;
CREATE SCHEMA su;
SET ROLE snowflake_reg_mallory;
-- The issue's escalation: an IMMUTABLE function that makes its author superuser when a
-- superuser runs it (ANALYZE of a table with statistics on it, as the table's owner).
CREATE FUNCTION m.escalate() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        ALTER ROLE snowflake_reg_mallory SUPERUSER;
    END IF;
END $$;
CREATE FUNCTION m.f(t text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM m.escalate();
    RETURN t;
END $$;
CREATE FUNCTION m.g(text) RETURNS boolean LANGUAGE sql IMMUTABLE RETURN true;
CREATE FUNCTION m.h() RETURNS integer LANGUAGE sql RETURN 1;
CREATE DOMAIN m.d AS text CHECK (m.g(VALUE));
CREATE FUNCTION m.diff(float8, float8) RETURNS float8 LANGUAGE sql IMMUTABLE RETURN $1 - $2;
CREATE TYPE m.rng AS RANGE (subtype = float8, subtype_diff = m.diff);
CREATE COLLATION m.coll (locale = 'C');
CREATE SEQUENCE m.seq;
CREATE TEXT SEARCH CONFIGURATION m.cfg (COPY = simple);
CREATE FUNCTION m.neq(integer, integer) RETURNS boolean LANGUAGE sql IMMUTABLE RETURN $1 <> $2;
CREATE OPERATOR m.<!> (FUNCTION = m.neq, LEFTARG = integer, RIGHTARG = integer);
CREATE FUNCTION m.cmp(integer, integer) RETURNS integer LANGUAGE sql IMMUTABLE RETURN btint4cmp($1, $2);
RESET ROLE;
-- Objects of the caller's (here a superuser's) that lead to mallory's.
CREATE FUNCTION m.sel(internal, oid, internal, integer) RETURNS float8 LANGUAGE internal STABLE AS 'eqsel';
ALTER FUNCTION m.sel(internal, oid, internal, integer) OWNER TO snowflake_reg_mallory;
CREATE DOMAIN su.d AS text CHECK (m.g(VALUE));
CREATE TYPE su.pair AS (x m.d, y integer);
CREATE FUNCTION su.eq(integer, integer) RETURNS boolean LANGUAGE sql IMMUTABLE RETURN $1 = $2;
CREATE OPERATOR su.=== (FUNCTION = su.eq, LEFTARG = integer, RIGHTARG = integer, RESTRICT = m.sel);
CREATE OPERATOR su.=~= (FUNCTION = su.eq, LEFTARG = integer, RIGHTARG = integer, NEGATOR = OPERATOR(m.<!>));
CREATE FUNCTION su.calls_h() RETURNS integer LANGUAGE sql BEGIN ATOMIC SELECT m.h(); END;
CREATE OPERATOR FAMILY su.fam USING btree;
CREATE OPERATOR CLASS su.cls FOR TYPE integer USING btree FAMILY su.fam AS
    OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >, FUNCTION 1 m.cmp(integer, integer);
CREATE TYPE su.small AS (n integer);
CREATE FUNCTION m.to_small(text) RETURNS su.small LANGUAGE sql IMMUTABLE RETURN ROW(length($1))::su.small;
ALTER FUNCTION m.to_small(text) OWNER TO snowflake_reg_mallory;
CREATE CAST (text AS su.small) WITH FUNCTION m.to_small(text);
-- One template per way in; each is refused with the objects it reaches, and nothing is made.
CREATE FUNCTION pg_temp.try(template text, shard integer) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM create_shard('tshard_' || template, shard, template => template);
    RETURN 'accepted';
EXCEPTION WHEN insufficient_privilege THEN
    RETURN format('%s: %s', SQLSTATE, coalesce(substring(SQLERRM FROM 'trust: (.*)$'), substring(SQLERRM FROM 'as you: (.*)$')))
        || CASE WHEN to_regnamespace('tshard_' || template) IS NULL THEN '' ELSE ' (but a schema was made)' END;
END $$;
CREATE SCHEMA t_stats;      -- extended statistics (LIKE ... INCLUDING STATISTICS copies them)
CREATE TABLE t_stats.posts (id bigint PRIMARY KEY, body text);
CREATE STATISTICS m.st ON (m.f(body)) FROM t_stats.posts;
CREATE SCHEMA t_dom_check;  -- a CHECK through mallory's domain
CREATE TABLE t_dom_check.posts (id bigint PRIMARY KEY, body text CHECK ((body::m.d) IS NOT NULL));
CREATE SCHEMA t_dom_default; -- a DEFAULT through mallory's domain
CREATE TABLE t_dom_default.posts (id bigint PRIMARY KEY, body text DEFAULT ('x'::m.d)::text);
CREATE SCHEMA t_dom_owned;  -- the caller's own domain, whose constraint calls mallory's function
CREATE TABLE t_dom_owned.posts (id bigint PRIMARY KEY, body su.d);
CREATE SCHEMA t_composite;  -- an array of the caller's composite type with a field of mallory's domain
CREATE TABLE t_composite.posts (id bigint PRIMARY KEY, pairs su.pair[]);
CREATE SCHEMA t_range;      -- mallory's range type (its subtype_diff function)
CREATE TABLE t_range.posts (id bigint PRIMARY KEY, span m.rng);
CREATE SCHEMA t_multirange; -- and its multirange
CREATE TABLE t_multirange.posts (id bigint PRIMARY KEY, spans m.rng_multirange);
CREATE SCHEMA t_collation;  -- mallory's collation
CREATE TABLE t_collation.posts (id bigint PRIMARY KEY, body text COLLATE m.coll);
CREATE SCHEMA t_estimator;  -- the caller's operator, with mallory's restriction estimator
CREATE TABLE t_estimator.posts (id bigint PRIMARY KEY, x integer CHECK (x OPERATOR(su.===) 1));
CREATE SCHEMA t_negator;    -- the caller's operator, with mallory's negator (the planner may use it)
CREATE TABLE t_negator.posts (id bigint PRIMARY KEY, x integer);
CREATE INDEX ON t_negator.posts (x) WHERE x OPERATOR(su.=~=) 1;
CREATE SCHEMA t_opclass;    -- an index's operator class with mallory's support function
CREATE TABLE t_opclass.posts (id bigint PRIMARY KEY, x integer);
CREATE INDEX ON t_opclass.posts (x su.cls);
CREATE SCHEMA t_cast;       -- a cast whose function is mallory's
CREATE TABLE t_cast.posts (id bigint PRIMARY KEY, body text CHECK ((body::su.small).n > 0));
CREATE SCHEMA t_sequence;   -- mallory's sequence, which she can setval
CREATE TABLE t_sequence.posts (id bigint PRIMARY KEY, n bigint DEFAULT nextval('m.seq'));
CREATE SCHEMA t_body;       -- the caller's SQL-standard function, whose body calls mallory's
CREATE TABLE t_body.posts (id bigint PRIMARY KEY, n integer DEFAULT su.calls_h());
CREATE SCHEMA t_tsconfig;   -- mallory's text search configuration in an index
CREATE TABLE t_tsconfig.posts (id bigint PRIMARY KEY, body text);
CREATE INDEX ON t_tsconfig.posts USING gin (to_tsvector('m.cfg', body));
CREATE SCHEMA t_generated;  -- a generated column
CREATE TABLE t_generated.posts (id bigint PRIMARY KEY, body text, folded text GENERATED ALWAYS AS (m.f(body)) STORED);
CREATE SCHEMA t_policy;     -- a policy create_shard copies
CREATE TABLE t_policy.posts (id bigint PRIMARY KEY, body text);
CREATE POLICY visible ON t_policy.posts USING (m.g(body));
CREATE SCHEMA t_rowtype;    -- a column of another template table's row type, mallory's table
CREATE TABLE t_rowtype.posts (id bigint PRIMARY KEY, body text);
CREATE TABLE t_rowtype.likes (id bigint PRIMARY KEY, post t_rowtype.posts);
ALTER TABLE t_rowtype.posts OWNER TO snowflake_reg_mallory;
SELECT n.nspname AS template, pg_temp.try(n.nspname, 800 + (row_number() OVER (ORDER BY n.nspname))::integer) AS result
  FROM pg_namespace n WHERE n.nspname LIKE 't\_%' ORDER BY 1;
SELECT count(*) AS shards_made FROM snowflake_id_shards WHERE shard BETWEEN 800 AND 899;
-- The issue's statistics case end to end: refused, so no ANALYZE of a copy ever runs m.f as
-- a superuser (had it been copied, this ANALYZE would make mallory superuser).
SELECT create_shard('tshard_stats', 901, template => 't_stats');
DO $$ BEGIN IF to_regclass('tshard_stats.posts') IS NOT NULL THEN
    INSERT INTO tshard_stats.posts (body) VALUES ('x');
    ANALYZE tshard_stats.posts;
END IF; END $$;
SELECT rolsuper AS mallory_superuser FROM pg_roles WHERE rolname = 'snowflake_reg_mallory';
-- Owned by a role the caller is a member of, mallory's objects are still untrusted (she is a
-- member too, and can change them); owned by the caller (or a superuser), they are trusted.
CREATE ROLE snowflake_reg_group;
GRANT snowflake_reg_group TO CURRENT_USER, snowflake_reg_mallory;
ALTER DOMAIN m.d OWNER TO snowflake_reg_group;
ALTER FUNCTION m.g(text) OWNER TO snowflake_reg_group;
SELECT pg_temp.try('t_dom_check', 902) AS owned_by_a_shared_group;
ALTER DOMAIN m.d OWNER TO CURRENT_USER;
ALTER FUNCTION m.g(text) OWNER TO CURRENT_USER;
SELECT pg_temp.try('t_dom_check', 902) AS owned_by_the_caller;
-- A template whose tables are mallory's is refused to anyone else (42501), whatever code they
-- use: their definitions are hers (a CHECK calling pg_terminate_backend() would run as the
-- shard's owner in a move's apply). Mallory herself makes shards from it.
CREATE SCHEMA t_mallorys AUTHORIZATION snowflake_reg_mallory;
SET ROLE snowflake_reg_mallory;
CREATE TABLE t_mallorys.posts (id bigint PRIMARY KEY, body text DEFAULT upper('x'), CHECK (length(body) < 100));
CREATE INDEX ON t_mallorys.posts (lower(body));
CREATE STATISTICS t_mallorys.st ON id, body FROM t_mallorys.posts;
RESET ROLE;
SELECT create_shard('tshard_mallorys', 903, template => 't_mallorys');
\set VERBOSITY terse
SELECT create_shards('tshard_mallorys', 903, 1, template => 't_mallorys');
\set VERBOSITY sqlstate
SELECT current_database() AS db \gset
GRANT CREATE ON DATABASE :"db" TO snowflake_reg_mallory;
GRANT SELECT, INSERT, UPDATE, DELETE ON snowflake_id_shard TO snowflake_reg_mallory;
SET ROLE snowflake_reg_mallory;
SELECT create_shard('tshard_mallorys', 903, template => 't_mallorys');
RESET ROLE;
REVOKE ALL ON snowflake_id_shard FROM snowflake_reg_mallory;
REVOKE CREATE ON DATABASE :"db" FROM snowflake_reg_mallory;
SELECT pg_get_expr(d.adbin, d.adrelid) AS "default", (SELECT relowner::regrole FROM pg_class WHERE oid = d.adrelid) AS owner
  FROM pg_attrdef d WHERE d.adrelid = 'tshard_mallorys.posts'::regclass ORDER BY 1;
SELECT drop_shard(schema_name, cascade => true) FROM snowflake_id_shards WHERE shard BETWEEN 800 AND 903;
DROP SCHEMA t_stats, t_dom_check, t_dom_default, t_dom_owned, t_composite, t_range, t_multirange, t_collation,
    t_estimator, t_negator, t_opclass, t_cast, t_sequence, t_body, t_tsconfig, t_generated, t_policy, t_rowtype,
    t_mallorys, su, m CASCADE;
DROP ROLE snowflake_reg_group;
DROP ROLE snowflake_reg_mallory;
-- The internal reading, called directly (any role may) with OID 0: no schema, no rows; it
-- raised XX000 ("an oid is a datum": pgrx has no datum for InvalidOid).
SELECT count(*) AS read_of_oid_0 FROM snowflake_id_internal.template_read(0);
RESET client_min_messages;
