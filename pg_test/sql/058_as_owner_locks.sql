-- A table owner's code run by a privileged operation (snowflake_id_node.as_owner: as the
-- owner, under restricted-operation rules) keeps no session-level advisory lock: what it
-- took for the session and still holds when the query ends is released and the operation
-- refused (42501), also when the owner's code fails; the caller's own session locks stay.
-- (Issue 33: a session lock would outlive the call in the router's session.)
\set VERBOSITY sqlstate
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
DROP ROLE IF EXISTS aol_owner;
RESET client_min_messages;
CREATE ROLE aol_owner;
CREATE SCHEMA aol AUTHORIZATION aol_owner;
SET ROLE aol_owner;
-- The owner's functions: one takes a session lock in an index expression, one in a
-- column's default; one takes it and fails; one takes and gives back; one takes a
-- transaction-level lock.
CREATE FUNCTION aol.k(integer) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN PERFORM pg_catalog.pg_advisory_lock(7301); RETURN $1; END $$;
CREATE FUNCTION aol.d() RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM pg_catalog.pg_advisory_lock_shared(7302); PERFORM pg_catalog.pg_advisory_lock(73, 3); RETURN 0; END $$;
CREATE FUNCTION aol.fail() RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM pg_catalog.pg_advisory_lock(7303); RAISE EXCEPTION 'owner code fails' USING ERRCODE = 'P0042'; END $$;
CREATE FUNCTION aol.tidy() RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM pg_catalog.pg_advisory_lock(7304); PERFORM pg_catalog.pg_advisory_unlock(7304); RETURN 0; END $$;
CREATE FUNCTION aol.xact() RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM pg_catalog.pg_advisory_xact_lock(7305); RETURN 0; END $$;
CREATE FUNCTION aol.unlock_all() RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM pg_catalog.pg_advisory_unlock_all(); RETURN 0; END $$;
CREATE TABLE aol.posts (id bigint PRIMARY KEY, n integer DEFAULT aol.d());
CREATE INDEX ON aol.posts ((id + aol.k(0)));
RESET ROLE;
SELECT pg_advisory_unlock_all();   -- (what CREATE INDEX took, folding k(0), as the owner)
CREATE VIEW pg_temp.my_advisory AS
    SELECT coalesce(string_agg(format('%s/%s/%s %s', l.classid, l.objid, l.objsubid, l.mode), ', ' ORDER BY l.objid, l.mode), 'none') AS held
      FROM pg_locks l WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid();
SELECT 'aol_owner'::regrole::oid AS owner \gset
-- The index expression (its constant folded by the planner, run on every row written) and
-- the default take session locks: released, refused.
SELECT held FROM pg_temp.my_advisory;
SELECT snowflake_id_node.as_owner(:owner, 'SELECT count(*)::text FROM aol.posts WHERE id + aol.k(0) >= 0');
SELECT held FROM pg_temp.my_advisory;
SELECT snowflake_id_node.as_owner(:owner, 'WITH i AS (INSERT INTO aol.posts (id) VALUES (1) RETURNING n) SELECT n::text FROM i');
SELECT held FROM pg_temp.my_advisory;
SELECT count(*) AS rows_kept FROM aol.posts;
-- The owner's code takes one and fails: released, its own error raised.
SELECT snowflake_id_node.as_owner(:owner, 'SELECT aol.fail()::text');
SELECT held FROM pg_temp.my_advisory;
-- Caught by the caller: released all the same.
DO $$
BEGIN
    PERFORM snowflake_id_node.as_owner('aol_owner'::regrole, 'SELECT aol.fail()::text');
EXCEPTION WHEN SQLSTATE 'P0042' THEN
    RAISE NOTICE 'caught %', SQLSTATE;
END
$$;
SELECT held FROM pg_temp.my_advisory;
-- A lock the caller holds for its session stays held, once, whatever the owner's code
-- took of it on top.
SELECT pg_advisory_lock(7301);
\set VERBOSITY terse
SELECT snowflake_id_node.as_owner(:owner, 'SELECT aol.k(5)::text');
\set VERBOSITY sqlstate
SELECT held FROM pg_temp.my_advisory;
SELECT pg_advisory_unlock(7301);
SELECT held FROM pg_temp.my_advisory;
-- Given back by the owner's code itself, or a transaction-level lock (which ends with the
-- caller's transaction, as the row and table locks the owner's code takes do): allowed.
SELECT snowflake_id_node.as_owner(:owner, 'SELECT aol.tidy()::text');
BEGIN;
SELECT snowflake_id_node.as_owner(:owner, 'SELECT aol.xact()::text');
SELECT held FROM pg_temp.my_advisory;
COMMIT;
SELECT held FROM pg_temp.my_advisory;
-- The owner's code releases the caller's own session locks (a move's proof of life, say):
-- the operation is refused (42501), not carried on as if they were held.
SELECT pg_advisory_lock(7306);
SELECT snowflake_id_node.as_owner(:owner, 'SELECT aol.unlock_all()::text');
SELECT held FROM pg_temp.my_advisory;
DROP SCHEMA aol CASCADE;
DROP ROLE aol_owner;
