-- create_shard(..., template => ...) in a database whose encoding is not UTF-8 (found by the
-- adversarial pass of issue 19, item 11): the template walk reads names and policies
-- through Rust Strings, which must be UTF-8, so a template table named café in a LATIN1
-- database, or a policy with a byte above 127 in a SQL_ASCII one, raised XX000 (`datums
-- converted to &str should be valid UTF-8`) and no shard could be made from it. Each
-- template here is copied whole. (Fails on dd19a96.)
\set regress_db :DBNAME
CREATE DATABASE snowflake_tpl_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
CREATE DATABASE snowflake_tpl_sql_ascii ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;

\c snowflake_tpl_latin1
\set VERBOSITY sqlstate
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
CREATE SCHEMA tpl;
DO $$ BEGIN   -- tpl."café" (é is one byte, 0xe9, in LATIN1), with a column "noté"
    EXECUTE format('CREATE TABLE tpl.%I (id bigint PRIMARY KEY, %I text)',
                   convert_from('\x636166e9', 'LATIN1'), convert_from('\x6e6f74e9', 'LATIN1'));
END $$;
SELECT create_shard('s1', 1, template => 'tpl');
SELECT encode(convert_to(c.relname::text, 'UTF8'), 'hex') AS utf8_of_copy, count(a.attname) AS columns
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
 WHERE c.relnamespace = to_regnamespace('s1') AND c.relkind = 'r' GROUP BY 1;

\c snowflake_tpl_sql_ascii
\set VERBOSITY sqlstate
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
CREATE SCHEMA tpl;
CREATE TABLE tpl.notes (id bigint PRIMARY KEY, body text);
ALTER TABLE tpl.notes ENABLE ROW LEVEL SECURITY;
DO $$ BEGIN   -- a policy named "p" || 0xe9, whose expression holds the byte too
    EXECUTE format('CREATE POLICY %I ON tpl.notes USING (body <> %L)', 'p' || chr(233), chr(233));
END $$;
SELECT create_shard('s1', 1, template => 'tpl');
SELECT encode(convert_to(polname::text, 'SQL_ASCII'), 'hex') AS policy_of_copy FROM pg_policy WHERE polrelid = to_regclass('s1.notes');

\c :regress_db
DROP DATABASE snowflake_tpl_latin1;
DROP DATABASE snowflake_tpl_sql_ascii;
