-- Issue 10's adversarial cases that one session can replay: what create_shard trusts, how
-- long next_id remembers its checks, names at PostgreSQL's length limit.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
\set VERBOSITY sqlstate

-- 1. create_shard never runs a schema owner's code, and adopts only a real sequence.
CREATE ROLE mallory_reg LOGIN;
CREATE SCHEMA mal5 AUTHORIZATION mallory_reg;
SET ROLE mallory_reg;
CREATE FUNCTION mal5.f() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        ALTER ROLE mallory_reg SUPERUSER;
    END IF;
    RETURN 4611686018427387904;  -- above 2^42: the old create_shard took it for IDs and adopted the view
END $$;
CREATE VIEW mal5.table_id_seq AS SELECT mal5.f() AS last_value;
RESET ROLE;
SELECT create_shard('mal5', 5);
SELECT rolsuper AS mallory_became_superuser FROM pg_roles WHERE rolname = 'mallory_reg';
SELECT count(*) AS shards_registered FROM snowflake_id_shards WHERE schema_name = 'mal5';
-- A plain table bearing the name is no sequence either.
CREATE SCHEMA tab6;
CREATE TABLE tab6.table_id_seq (last_value bigint);
SELECT create_shard('tab6', 6);
-- A schema another role owns is adopted with a warning that says so; the adopted sequence
-- and the function are checked the same way.
\set VERBOSITY terse
CREATE SCHEMA mal7 AUTHORIZATION mallory_reg;
SELECT create_shard('mal7', 7);
\set VERBOSITY sqlstate
SELECT schema_name, shard FROM snowflake_id_shards WHERE schema_name = 'mal7';

-- 2. A rolled-back GRANT does not keep working (nor one rolled back to a savepoint).
CREATE ROLE alice_reg;
CREATE SEQUENCE sg;
BEGIN;
GRANT USAGE ON SEQUENCE sg TO alice_reg;
SET ROLE alice_reg;
SELECT next_id(1, 'sg') > 0 AS issued_inside;
ROLLBACK;
SET ROLE alice_reg;
SELECT next_id(1, 'sg');
SELECT nextval('sg');
RESET ROLE;
BEGIN;
SAVEPOINT a;
GRANT USAGE ON SEQUENCE sg TO alice_reg;
SET ROLE alice_reg;
SELECT next_id(1, 'sg') > 0 AS issued_inside;
ROLLBACK TO a;
SET ROLE alice_reg;
SELECT next_id(1, 'sg');
ROLLBACK;
-- A REVOKE of this very transaction is seen by its next statement.
GRANT USAGE ON SEQUENCE sg TO alice_reg;
BEGIN;
SET ROLE alice_reg;
SELECT next_id(1, 'sg') > 0 AS issued_before_revoke;
RESET ROLE;
REVOKE USAGE ON SEQUENCE sg FROM alice_reg;
SET ROLE alice_reg;
SELECT next_id(1, 'sg');
ROLLBACK;
-- ... and a committed grant keeps working across transactions.
SET ROLE alice_reg;
SELECT next_id(1, 'sg') > 0 AS granted;
SELECT next_id(1, 'sg') > 0 AS still_granted;
RESET ROLE;

-- 4. Names longer than 63 bytes would be truncated into one schema: refused, nothing made.
SELECT create_shard(repeat('x', 63) || 'AAA', 50);
SELECT create_shard(repeat('x', 63) || 'BBB', 51);
SELECT create_shards(repeat('y', 62), 52, 20);
SELECT count(*) AS made FROM pg_namespace WHERE nspname LIKE 'xxx%' OR nspname LIKE 'yyy%';
SELECT count(*) AS registered FROM snowflake_id_shards WHERE shard BETWEEN 50 AND 71;
-- Exactly 63 bytes (multibyte characters count as bytes) is fine.
SELECT create_shard(repeat('é', 31) || 'z', 60);
SELECT octet_length(schema_name) AS bytes, shard FROM snowflake_id_shards WHERE shard = 60;
SELECT create_shard(repeat('é', 32), 61);

-- Temporary and system schemas cannot be shards: their objects vanish with a session.
SELECT create_shard('pg_temp_3', 62);
SELECT create_shard('pg_catalog', 63);
SELECT create_shard('information_schema', 64);
SELECT create_shard('', 65);

-- A sequence whose range cannot hold IDs is refused with next_id's own error (2200H).
CREATE SCHEMA int71;
CREATE SEQUENCE int71.table_id_seq AS integer;
SELECT create_shard('int71', 71);
SELECT count(*) AS registered FROM snowflake_id_shards WHERE shard = 71;
DROP SCHEMA int71 CASCADE;
-- Every role may read the list of shards (as it may read pg_namespace).
SET ROLE alice_reg;
SELECT count(*) >= 0 AS readable FROM snowflake_id_shards;
RESET ROLE;
-- drop_shard cleans up a shard whose sequence (and function) were dropped by hand.
SELECT create_shard('hand70', 70);
DROP SEQUENCE hand70.table_id_seq CASCADE;
SELECT drop_shard('hand70');
SELECT count(*) AS left_over FROM snowflake_id_shards WHERE shard = 70;
SELECT to_regnamespace('hand70') IS NULL AS schema_dropped;

-- Another session's temporary sequence is refused before its buffers are touched (0A000).
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT dblink_connect('other', format('dbname=%s host=%s port=%s', current_database(),
       current_setting('unix_socket_directories'), current_setting('port')));
SELECT dblink_exec('other', 'CREATE TEMPORARY SEQUENCE their_temp');
SELECT format('%I.their_temp', n.nspname) AS their_temp
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = 'their_temp' \gset
\set VERBOSITY terse
SELECT next_id(1, :'their_temp');
\set VERBOSITY sqlstate
SELECT dblink_disconnect('other');

-- make_id of infinity names infinity.
\set VERBOSITY default
SELECT make_id('infinity');
SELECT make_id('-infinity');
\set VERBOSITY sqlstate

-- Clean up the roles (their grants first).
SELECT drop_shard('mal7', cascade => true);
DROP SCHEMA mal5, mal7, tab6 CASCADE;
REVOKE ALL ON SEQUENCE sg FROM alice_reg;
DROP ROLE alice_reg, mallory_reg;
