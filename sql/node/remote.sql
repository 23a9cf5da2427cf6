-- The router's private machinery, written in C (src/pg/node/remote.rs, own_lock.rs, as_owner.rs,
-- hold_cancel.rs, time.rs), in the internal schema snowflake_id_node and closed to PUBLIC:
-- only the extension's owner (the superuser who created it) and code running with its
-- rights (the router's SECURITY DEFINER functions) may call these. docs/security.md says
-- what each guarantees; docs/cluster-design.md how the router uses them.
--
-- Connections (remote_*): a registry of this backend's, in place of dblink's session-wide
-- names. A connection belongs to the role that opened it; every other role finds none of
-- that name. It is closed with the subtransaction that opened it if that aborts, and at the
-- end of the top-level transaction unless kept (remote_keep, superuser sessions only). Its
-- session starts with the router's settings (search_path and the rest, in the startup
-- packet, above what the peer's database or role set). Every wait is interruptible and
-- bounded by the monotonic clock; a cancel sent to a frozen peer is waited for 1 s at most.

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_open(name text, connstr text, options text, peer text, timeout double precision)
RETURNS integer LANGUAGE c VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_open_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_open(text, text, text, text, double precision) IS
  'Opens connection name (this role''s) by connstr, its own libpq options being options, within timeout seconds; peer names it in messages. Returns the peer''s backend pid. 42710 if open already.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_close(name text)
RETURNS boolean LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_close_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_close(text) IS 'Closes this role''s connection name; whether it was open.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_close_prefixed(prefix text)
RETURNS integer LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_close_prefixed_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_close_prefixed(text) IS 'Closes this role''s connections whose names start with prefix; how many.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_names()
RETURNS text[] LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_names_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_names() IS 'The names of this role''s open connections, sorted.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_connstr(name text)
RETURNS text LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_connstr_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_connstr(text) IS 'The connect string this role''s connection name was opened with (NULL: not open).';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_pid(name text)
RETURNS integer LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_pid_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_pid(text) IS 'The peer''s backend pid of this role''s connection name.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_keep(name text, keep boolean)
RETURNS void LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_keep_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_keep(text, boolean) IS
  'Marks connection name to outlive the transaction (keep) or not; only a superuser''s session keeps any (42501).';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_send(name text, sql text)
RETURNS void LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_send_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_send(text, text) IS 'Sends sql on connection name without waiting for it.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_busy(name text)
RETURNS boolean LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_busy_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_busy(text) IS 'Whether what was sent on connection name still runs.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_cancel(name text)
RETURNS boolean LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_cancel_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_cancel(text) IS
  'Asks the peer to cancel what runs on connection name, waiting 1 s at most; whether the request was taken.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_receive(name text, timeout double precision, what text)
RETURNS text LANGUAGE c VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_receive_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_receive(text, double precision, text) IS
  'Waits up to timeout seconds for what was sent on connection name: the first column of its first row; a remote error raised again with its SQLSTATE (message after "what: "); 57014 "what did not finish in time" after cancelling it.';

CREATE OR REPLACE FUNCTION snowflake_id_node.remote_result(name text, timeout double precision, what text)
RETURNS text[] LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'remote_result_wrapper';
COMMENT ON FUNCTION snowflake_id_node.remote_result(text, double precision, text) IS
  'As remote_receive, but a remote error is returned: {value, sqlstate, message}.';

-- Locks only the owner can take: advisory locks whose pg_locks.objsubid is 3, a key space
-- no pg_advisory_* function reaches (they use 1 and 2).
CREATE OR REPLACE FUNCTION snowflake_id_node.own_lock(class integer, key integer, session boolean, shared boolean, wait boolean)
RETURNS boolean LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'own_lock_wrapper';
COMMENT ON FUNCTION snowflake_id_node.own_lock(integer, integer, boolean, boolean, boolean) IS
  'Takes the owner-only advisory lock (class, key) (pg_locks.objsubid 3) for the session or transaction, shared or exclusive; without wait false if taken by another session, with it waits under lock_timeout.';

CREATE OR REPLACE FUNCTION snowflake_id_node.own_unlock(class integer, key integer, session boolean, shared boolean)
RETURNS boolean LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'own_unlock_wrapper';
COMMENT ON FUNCTION snowflake_id_node.own_unlock(integer, integer, boolean, boolean) IS
  'Releases one hold of the owner-only advisory lock (class, key); whether this session held it.';

-- The clock of deadlines: monotonic, so a wall clock stepped back stretches no wait.
CREATE OR REPLACE FUNCTION snowflake_id_node.monotonic()
RETURNS timestamptz LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'monotonic_wrapper';
COMMENT ON FUNCTION snowflake_id_node.monotonic() IS
  'The host''s monotonic clock, as 2000-01-01 plus the time since its boot (the same in every backend): for deadlines, not a time of day.';

CREATE OR REPLACE FUNCTION snowflake_id_node.sleep(seconds double precision)
RETURNS void LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'sleep_wrapper';
COMMENT ON FUNCTION snowflake_id_node.sleep(double precision) IS
  'Sleeps seconds by the monotonic clock, interruptibly (pg_sleep sleeps to an end read from the wall clock).';

-- Queries on other roles' tables: as their owner, under restricted-operation rules.
CREATE OR REPLACE FUNCTION snowflake_id_node.as_owner(role oid, query text)
RETURNS text LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'as_owner_wrapper';
COMMENT ON FUNCTION snowflake_id_node.as_owner(oid, text) IS
  'Runs query as role with SECURITY_RESTRICTED_OPERATION, search_path pg_catalog, pg_temp and row_security off (as VACUUM and REINDEX run a table owner''s code): its first column, first row, as text.';

-- The part of a move that must not stop half-way (its seal's commit to its flip): a query
-- run with query cancels held off (src/pg/hold_cancel.rs).
CREATE OR REPLACE FUNCTION snowflake_id_node.hold_cancel(query text)
RETURNS text LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'hold_cancel_wrapper';
COMMENT ON FUNCTION snowflake_id_node.hold_cancel(text) IS
  'Runs query with query cancels (cancel requests, statement_timeout) held off until it ends: one that arrives meanwhile is taken right after; a terminate is not held off. Its first column, first row, as text.';

-- A table's rows as count(*) counts them, without planning a query on it (planning runs its
-- owner's index expressions): a sequential scan at the statement's snapshot.
CREATE OR REPLACE FUNCTION snowflake_id_node.count_rows(rel oid)
RETURNS bigint LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'count_rows_wrapper';
COMMENT ON FUNCTION snowflake_id_node.count_rows(oid) IS
  'The rows of table rel visible to the statement''s snapshot, counted by a sequential scan with no planner and nothing of its owner''s run.';

-- Whether the caller's transaction can outlive the statement running now (src/pg/xact.rs):
-- what the router's SECURITY DEFINER functions lock or write there would outlive them.
CREATE OR REPLACE FUNCTION snowflake_id_node.in_transaction_block()
RETURNS boolean LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'in_transaction_block_wrapper';
COMMENT ON FUNCTION snowflake_id_node.in_transaction_block() IS
  'Whether this transaction may stay open after the statement running now: a transaction block, a pipeline, or a subtransaction of a transaction no procedure began (a procedure''s own transactions are not blocks).';

REVOKE ALL ON FUNCTION snowflake_id_node.remote_open(text, text, text, text, double precision),
    snowflake_id_node.remote_close(text), snowflake_id_node.remote_close_prefixed(text),
    snowflake_id_node.remote_names(), snowflake_id_node.remote_connstr(text), snowflake_id_node.remote_pid(text),
    snowflake_id_node.remote_keep(text, boolean), snowflake_id_node.remote_send(text, text),
    snowflake_id_node.remote_busy(text), snowflake_id_node.remote_cancel(text),
    snowflake_id_node.remote_receive(text, double precision, text),
    snowflake_id_node.remote_result(text, double precision, text),
    snowflake_id_node.own_lock(integer, integer, boolean, boolean, boolean),
    snowflake_id_node.own_unlock(integer, integer, boolean, boolean),
    snowflake_id_node.own_locks_held(integer, integer[]),
    snowflake_id_node.monotonic(), snowflake_id_node.sleep(double precision),
    snowflake_id_node.as_owner(oid, text), snowflake_id_node.count_rows(oid),
    snowflake_id_node.hold_cancel(text), snowflake_id_node.in_transaction_block() FROM PUBLIC;
