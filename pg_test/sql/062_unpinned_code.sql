-- Code of the extensions that runs without a search_path of its own resolves its operators,
-- types and functions through its caller's: a path whose first schema the database's owner
-- (or any role with CREATE there) fills could run that role's code as whoever calls it (a
-- superuser running CALL rebalance(), an application calling use_shard). Such code is a
-- known list (procedures that commit, which cannot have a SET clause; use_shard, whose
-- setting must outlive its call; guard_extension_schema, run only under guard_ddl's path),
-- and writes every operator and type schema-qualified. This test holds both: a new
-- function without its own path, or an operator or type left bare in one, fails it.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
CREATE EXTENSION snowflake_id_router CASCADE;
RESET client_min_messages;
CREATE TEMP VIEW unpinned AS
SELECT p.oid::regprocedure AS fn, p.prosrc
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname IN ('snowflake_id', 'snowflake_id_router')
  JOIN pg_language l ON l.oid = p.prolang
 WHERE (l.lanname = 'plpgsql' OR (l.lanname = 'sql' AND p.prosqlbody IS NULL))
   AND NOT EXISTS (SELECT FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%');
SELECT fn FROM unpinned ORDER BY fn::text COLLATE "C";

-- Each body with its comments, string literals, qualified names and PL/pgSQL's own uses of
-- "=" (RAISE ... USING, GET DIAGNOSTICS) taken out: what is left may name no operator (a
-- bare one, or one a keyword stands for: NULLIF, BETWEEN, IN, LIKE, ANY, IS DISTINCT FROM),
-- no type but SQL's keyword types, and no function or relation but qualified ones.
CREATE TEMP VIEW bare AS
SELECT fn, regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(prosrc,
           '--[^\n]*', '', 'g'),
           '''([^'']|'''')*''', '''''', 'g'),
           'OPERATOR\(pg_catalog\.[^)]+\)', ' ', 'g'),
           '(:=|=>|\.\.)', ';', 'g'),
           '\m(ERRCODE|MESSAGE|DETAIL|HINT)\s*=', ' ', 'g'),
           '=\s*(RETURNED_SQLSTATE|MESSAGE_TEXT|PG_EXCEPTION_DETAIL|PG_EXCEPTION_HINT|PG_EXCEPTION_CONTEXT)\M', ' ', 'g') AS code
  FROM unpinned;
SELECT fn, m[1] AS bare_operator
  FROM bare, regexp_matches(code, '([=<>!+*/%^|&~#@-]+|\m(?:NULLIF|BETWEEN|LIKE|ILIKE|SIMILAR|ANY|SOME|DISTINCT\s+FROM)\M|\mIN\s*\()', 'gi') m
 ORDER BY 1, 2;
SELECT fn, m[1] AS bare_type
  FROM bare, regexp_matches(coalesce(substring(code FROM '^\s*?DECLARE(.*?)\mBEGIN\M'), '')
                            || ' ' || array_to_string(ARRAY(SELECT c[1] FROM regexp_matches(code, '::\s*\w+(?:\[\])?', 'g') c), ';'),
                            '(?:::\s*|^\s*\w+\s+)(\w+)(?:\[\])?\s*(?:;|$)', 'gn') m
 WHERE lower(m[1]) NOT IN ('integer', 'bigint', 'smallint', 'boolean', 'record', 'int')
 ORDER BY 1, 2;
SELECT fn, m[1] AS bare_function
  FROM bare, regexp_matches(code, '(?<![.\w])(\w+)\s*\(', 'g') m
 WHERE lower(m[1]) NOT IN ('if', 'elsif', 'while', 'coalesce', 'exists', 'values', 'not', 'and', 'or', 'in', 'then')
 ORDER BY 1, 2;
SELECT fn, m[2] AS bare_relation
  FROM bare, regexp_matches(code, '\m(FROM|JOIN|INTO|UPDATE)\s+(\w+)(?![\w.(])', 'gi') m
 WHERE lower(m[1]) <> 'into' OR m[2] ~ '^pg_'
 ORDER BY 1, 2;

-- And the attack itself, on a node: a schema ahead of pg_catalog on the session's path
-- holding a text equality that records its calls (the database owner's public, say).
CREATE SCHEMA uc_trap;
CREATE TABLE uc_trap.ran (op text);
CREATE FUNCTION uc_trap.teq(text, text) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN INSERT INTO uc_trap.ran VALUES ('text ='); RETURN texteq($1, $2); END $$;
CREATE FUNCTION uc_trap.tne(text, text) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN INSERT INTO uc_trap.ran VALUES ('text <>'); RETURN textne($1, $2); END $$;
CREATE OPERATOR uc_trap.= (LEFTARG = text, RIGHTARG = text, FUNCTION = uc_trap.teq);
CREATE OPERATOR uc_trap.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = uc_trap.tne);
SELECT create_shard('uc_shard', 4711) IS NOT NULL AS made;
BEGIN;
SET LOCAL search_path = uc_trap, pg_catalog, public;
SELECT use_shard(4711);
SHOW search_path;
COMMIT;
SELECT count(*) AS trap_ran FROM uc_trap.ran;
SELECT drop_shard('uc_shard', cascade => true) IS NOT NULL AS dropped;
DROP SCHEMA uc_trap CASCADE;
DROP EXTENSION snowflake_id_router CASCADE;
DROP EXTENSION plproxy;
DROP EXTENSION IF EXISTS dblink;
