-- The node side of snowflake_id_router's protocol, in the internal schema snowflake_id_node
-- (docs/cluster-design.md). Nothing here is for applications: the schema is on no one's
-- search_path, and only its owner (the superuser who created the extension) may use it; the
-- router calls it over its own connections as a superuser.
--
-- The files of sql/node/, in the order they load (src/sql/files.rs): objects.sql (the schema
-- and the move table, made once), this file (identity, connect strings, shard locks, move
-- records), shape.sql (what a shard's schema is made of), grants.sql, move_source.sql (the
-- source's steps and the fence), move_target.sql (the target's steps), repair.sql (undo,
-- repair, leftovers), remote.sql (the router's connections), status.sql, guard.sql, ddl.sql
-- (alter_shards on a node). Every function is CREATE OR REPLACE, so that a migration
-- includes its file whole.
--
-- Moves. Every step the router takes on a node is one call of one function, one transaction
-- that checks its preconditions, does its work and records it in snowflake_id_node.move (one
-- row per move and node, key '<router8>/<move id>'). What a move makes on a node (marker
-- table, publication, slot, subscription, fence triggers, the target's copies) is named by
-- its record, so whoever removes it later removes exactly that.
--
-- Proof of life: the mover's session on each node holds a session-level owner-only lock
-- (lock_class(), shard) for every shard it moves (snowflake_id_node.own_lock: an advisory
-- lock in a key space no other role can reach, pg_locks.objsubid 3). A record whose locks nobody holds belongs
-- to a mover that is gone; only then may another session (a repair) undo or complete it,
-- and every step function here refuses unless the calling session holds them.
--
-- The fence: statement triggers calling snowflake_id_node.fence() on the source's tables.
-- It refuses every write (40001) while the record is 'fenced' and the mover is alive, or
-- once the record is 'sealed' (the decision point: from there the move is completed, never
-- undone). A mover that dies before the seal leaves a fence that lets writes through.
-- The move table is not dumped: a dump taken mid-move restores inert triggers, no state.

CREATE OR REPLACE FUNCTION snowflake_id_node.conninfo(connstr text, OUT keyword text, OUT value text, OUT secret boolean)
RETURNS SETOF record
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'conninfo_wrapper';
COMMENT ON FUNCTION snowflake_id_node.conninfo(text) IS
  'The options libpq reads from a connect string (PQconninfoParse: key=value or URI), with whether libpq treats each as secret; 22023 if libpq refuses it.';

-- What a node is, whatever connect string reaches it: the cluster's system identifier and
-- the database's OID. A promoted physical standby keeps both.
CREATE OR REPLACE FUNCTION snowflake_id_node.identity() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN (SELECT c.system_identifier::text FROM pg_control_system() c) || '/'
    || (SELECT d.oid::text FROM pg_database d WHERE d.datname = current_database());
COMMENT ON FUNCTION snowflake_id_node.identity() IS
  'This database''s identity: <system identifier>/<database OID>, the same through any connect string and on a promoted standby.';

-- The mark the router gave this node (table node_mark), NULL before it has one. With
-- identity(), it tells apart nodes that share a system identifier: copies of one initdb, the
-- two halves of a split, a node and its promoted standby once the router gives it its own.
CREATE OR REPLACE FUNCTION snowflake_id_node.node_mark() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN (SELECT m.mark FROM snowflake_id_node.node_mark m);
COMMENT ON FUNCTION snowflake_id_node.node_mark() IS
  'The identity mark the router gave this node (NULL before it has one).';

-- Whether a node identity (as the router records it: system identifier/database OID, then
-- '/' and its mark when it has one) is this node's: the same database, and the same mark
-- unless one side has none (a node registered before marks, told apart as it was then).
CREATE OR REPLACE FUNCTION snowflake_id_node.is_self(peer text) RETURNS boolean
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN split_part(peer, '/', 1) || '/' || split_part(peer, '/', 2) = snowflake_id_node.identity()
   AND (split_part(peer, '/', 3) = '' OR snowflake_id_node.node_mark() IS NULL
        OR split_part(peer, '/', 3) = snowflake_id_node.node_mark()::text);
COMMENT ON FUNCTION snowflake_id_node.is_self(text) IS
  'Whether a node identity (system identifier/database OID[/mark]) is this node''s.';

-- Gives this node the mark new_mark, if its mark is still expected (NULL: none): a compare
-- and set, so two routers (or two names of one server added at once) cannot both give it
-- one; 40001 otherwise. Not on a standby (25006, as any write).
CREATE OR REPLACE FUNCTION snowflake_id_node.set_node_mark(new_mark uuid, expected uuid) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    current_mark uuid;
BEGIN
    IF new_mark IS NULL THEN
        RAISE EXCEPTION 'set_node_mark: new_mark must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    LOCK TABLE snowflake_id_node.node_mark IN EXCLUSIVE MODE;
    current_mark := snowflake_id_node.node_mark();
    IF current_mark IS DISTINCT FROM expected THEN
        RAISE EXCEPTION 'the identity mark of this node is %, not %', coalesce(current_mark::text, 'none'),
            coalesce(expected::text, 'none') USING ERRCODE = 'serialization_failure',
            HINT = 'Another router call gave it one meanwhile: run the command again.';
    END IF;
    INSERT INTO snowflake_id_node.node_mark (mark) VALUES (new_mark)
        ON CONFLICT (one) DO UPDATE SET mark = excluded.mark;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.set_node_mark(uuid, uuid) IS
  'Gives this node the identity mark new_mark if its mark is still expected (NULL: none); 40001 otherwise.';

-- The lock class of shard locks ('SFID' as a 32-bit integer), on nodes and routers: owner-only
-- advisory locks (snowflake_id_node.own_lock, pg_locks.objsubid 3).
CREATE OR REPLACE FUNCTION snowflake_id_node.lock_class() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN 1397114180;
COMMENT ON FUNCTION snowflake_id_node.lock_class() IS
  'Advisory lock class of the shard locks (key 2: the shard) that movers hold on nodes and routers.';


-- (C, src/pg/own_lock.rs; here, before the SQL function that names it.)
CREATE OR REPLACE FUNCTION snowflake_id_node.own_locks_held(class integer, keys integer[])
RETURNS boolean LANGUAGE c VOLATILE STRICT PARALLEL RESTRICTED AS 'MODULE_PATHNAME', 'own_locks_held_wrapper';
COMMENT ON FUNCTION snowflake_id_node.own_locks_held(integer, integer[]) IS
  'Whether this session holds the owner-only advisory lock (class, key) exclusively for every key (read from its own lock table, not pg_locks); NULL for a NULL key.';

-- True when this session holds the shard locks of all shards.
CREATE OR REPLACE FUNCTION snowflake_id_node.holds(shards integer[]) RETURNS boolean
LANGUAGE sql STABLE CALLED ON NULL INPUT PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
RETURN shards IS NOT NULL AND coalesce(snowflake_id_node.own_locks_held(snowflake_id_node.lock_class(), shards), false);
COMMENT ON FUNCTION snowflake_id_node.holds(integer[]) IS 'True when this session holds the shard locks of all shards.';

-- True when some session holds the shard lock of one of the shards: a mover (or repair) lives.
CREATE OR REPLACE FUNCTION snowflake_id_node.alive(shards integer[]) RETURNS boolean
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN EXISTS (SELECT FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted
                  AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                  AND l.classid = snowflake_id_node.lock_class()::oid AND l.objsubid = 3
                  AND l.objid::bigint = ANY (shards::bigint[]));
COMMENT ON FUNCTION snowflake_id_node.alive(integer[]) IS
  'True when some session holds the shard lock of one of the shards (its mover or a repair is alive).';

-- Takes the shard locks (session level) for this session, waiting up to wait for a session
-- that holds one (a mover whose router just died ends within seconds); then 55P03 naming
-- the shard and the session holding it. All or none: on refusal the locks taken by this
-- call are released.
CREATE OR REPLACE FUNCTION snowflake_id_node.lock_shards(shards integer[], wait interval DEFAULT interval '0')
RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    deadline timestamptz := snowflake_id_node.monotonic() + wait;
    s integer;
    taken integer[] := '{}';
    holder text;
    -- The ones this session holds already, read once (pg_locks is every lock of the server,
    -- and a batch has a hundred shards).
    held bigint[] := ARRAY(SELECT l.objid::bigint FROM pg_locks l
                            WHERE l.locktype = 'advisory' AND l.granted AND l.pid = pg_backend_pid()
                              AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                              AND l.classid = snowflake_id_node.lock_class()::oid AND l.objsubid = 3
                              AND l.objid::bigint = ANY (shards::bigint[]));
BEGIN
    FOREACH s IN ARRAY shards LOOP
        CONTINUE WHEN s = ANY (taken) OR s = ANY (held);
        WHILE NOT snowflake_id_node.own_lock(snowflake_id_node.lock_class(), s, true, false, false) LOOP
            IF snowflake_id_node.monotonic() >= deadline THEN
                PERFORM snowflake_id_node.own_unlock(snowflake_id_node.lock_class(), t, true, false) FROM unnest(taken) t;
                SELECT format('pid %s, %s', a.pid, coalesce(nullif(a.application_name, ''), a.usename::text)) INTO holder
                  FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                 WHERE l.locktype = 'advisory' AND l.granted AND l.classid = snowflake_id_node.lock_class()::oid
                   AND l.objsubid = 3 AND l.objid::bigint = s
                   AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                 LIMIT 1;
                RAISE EXCEPTION 'shard % is being moved or repaired by another session on this node (%)', s,
                    coalesce(holder, 'gone since') USING ERRCODE = 'lock_not_available';
            END IF;
            PERFORM snowflake_id_node.sleep(0.01);
        END LOOP;
        taken := taken || s;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.lock_shards(integer[], interval) IS
  'Takes the shard locks of shards for this session (all or none), waiting up to wait; 55P03 when another session holds one.';

CREATE OR REPLACE FUNCTION snowflake_id_node.unlock_shards(shards integer[]) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    s integer;
BEGIN
    FOREACH s IN ARRAY shards LOOP
        WHILE snowflake_id_node.holds(ARRAY[s]) LOOP
            PERFORM snowflake_id_node.own_unlock(snowflake_id_node.lock_class(), s, true, false);
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.unlock_shards(integer[]) IS 'Releases this session''s shard locks of shards.';

-- The record of a move on this node, for a step function: 55000 unless it exists with one
-- of the states given and this session holds its shard locks.
CREATE OR REPLACE FUNCTION snowflake_id_node.record(key text, states text[]) RETURNS snowflake_id_node.move
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    m snowflake_id_node.move;
BEGIN
    SELECT * INTO m FROM snowflake_id_node.move r WHERE r.key = record.key FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'move % has no record on this node', key USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF NOT m.state = ANY (states) THEN
        RAISE EXCEPTION 'move % is % on this node, not %', key, m.state, array_to_string(states, ' or ')
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF NOT snowflake_id_node.holds(m.shards) THEN
        RAISE EXCEPTION 'this session does not hold the shard locks of move % (shards %)', key, m.shards
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN m;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.record(text, text[]) IS
  'The record of move key, locked; 55000 unless in one of states and this session holds its shard locks.';
