-- What snowflake_id_router 0.4.0 changes in the router's tables and types, made once: by the
-- upgrade from 0.3.0 (its migration includes this file first) and by the fresh install
-- (after router/sql/0*.sql, the tables as of 0.3.0). scripts/build-sql says how.

-- == A move's state: an ordered type ==
--
-- The lifecycle of a move (docs/cluster-design.md, "A move, step by step"), in order: the
-- way forward, planned to done, then the way back, undoing and undone, which a move takes
-- from any state before the seal. The decisions on a state are the functions below, each
-- the one definition of its rule; record_move (32_move.sql) is the one place that changes
-- a state, and refuses a transition these rules do not allow.
CREATE TYPE snowflake_id_router.move_state AS ENUM (
    'planned',    -- recorded; the nodes reached, their identities checked
    'checking',   -- source_check, target_check: nothing made yet
    'preparing',  -- the copies made on the target, the source prepared
    'copying',    -- published, rows copied, subscribed
    'fencing',    -- writes fenced on the source; the target catching up
    'sealing',    -- the rows compared; the seal sent (it may have committed)
    'sealed',     -- the source sealed (the nodes' records say so): completed from here on
    'flipped',    -- the map points at the target
    'kept',       -- the old copy kept current by reverse replication (revert_window)
    'cleaning',   -- every router routes by the flip; the old copy being dropped
    'done',
    'undoing',    -- the undo left something on a node (the error says what)
    'undone');
COMMENT ON TYPE snowflake_id_router.move_state IS
  'The state of a move (snowflake_id_router.move), in the order of its lifecycle: planned to done, then undoing and undone.';

-- 0.3.0 wrote its states as text; 'catching up' and 'flipping' were allowed but never
-- written (they name test breakpoints): were one there, it is the state before it.
DROP INDEX snowflake_id_router.move_shards_idx;
ALTER TABLE snowflake_id_router.move DROP CONSTRAINT move_state_check;
ALTER TABLE snowflake_id_router.move ALTER COLUMN state DROP DEFAULT;
ALTER TABLE snowflake_id_router.move ALTER COLUMN state TYPE snowflake_id_router.move_state
    USING (CASE state WHEN 'catching up' THEN 'fencing' WHEN 'flipping' THEN 'sealed' ELSE state END)::snowflake_id_router.move_state;
ALTER TABLE snowflake_id_router.move ALTER COLUMN state SET DEFAULT 'planned';

-- Finished: nothing is left to do for the move (nor to repair).
CREATE OR REPLACE FUNCTION snowflake_id_router.move_finished(state snowflake_id_router.move_state) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN state IN ('done', 'undone');
COMMENT ON FUNCTION snowflake_id_router.move_finished(snowflake_id_router.move_state) IS
  'Whether a move in this state is finished (done or undone).';

-- Before the seal: a failure undoes the move (unless the source's record says it is sealed).
CREATE OR REPLACE FUNCTION snowflake_id_router.move_before_seal(state snowflake_id_router.move_state) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN state < 'sealed' OR state = 'undoing';
COMMENT ON FUNCTION snowflake_id_router.move_before_seal(snowflake_id_router.move_state) IS
  'Whether a move in this state is before its seal: undone on a failure, unless its source turns out sealed.';

-- The seal may have committed and the map is not flipped yet: the target's copy may be the
-- one to keep, and the flip may run.
CREATE OR REPLACE FUNCTION snowflake_id_router.move_may_be_sealed(state snowflake_id_router.move_state) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN state BETWEEN 'sealing' AND 'sealed';
COMMENT ON FUNCTION snowflake_id_router.move_may_be_sealed(snowflake_id_router.move_state) IS
  'Whether a move in this state may be sealed and is not flipped: sealing or sealed.';

-- Past the flip: the map points at the target.
CREATE OR REPLACE FUNCTION snowflake_id_router.move_flipped(state snowflake_id_router.move_state) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN state BETWEEN 'flipped' AND 'done';
COMMENT ON FUNCTION snowflake_id_router.move_flipped(snowflake_id_router.move_state) IS
  'Whether a move in this state is past its flip: flipped, kept, cleaning or done.';

-- Something may have been made on a node: a failure has something to undo there.
CREATE OR REPLACE FUNCTION snowflake_id_router.move_made(state snowflake_id_router.move_state) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN state >= 'preparing';
COMMENT ON FUNCTION snowflake_id_router.move_made(snowflake_id_router.move_state) IS
  'Whether a move in this state may have made something on a node (from preparing on).';

-- The transitions a move may take: forward one step at a time up to sealing (and from
-- fencing back to copying, a fence lifted to be tried again); to sealed,
-- undoing or undone from before the seal; the flip from sealing or sealed; kept after the
-- flip; cleaning after the flip or kept, done after cleaning. A state recorded again (a
-- repair) is no transition.
CREATE OR REPLACE FUNCTION snowflake_id_router.move_may_go(from_state snowflake_id_router.move_state,
                                                           to_state snowflake_id_router.move_state) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN CASE
    WHEN to_state = from_state THEN NOT snowflake_id_router.move_finished(from_state)
    -- (A fence lifted before the seal, to be tried again: cut_over, fence_lifted.)
    WHEN from_state = 'fencing' AND to_state = 'copying' THEN true
    WHEN to_state BETWEEN 'checking' AND 'sealing'
        THEN array_position(enum_range(NULL::snowflake_id_router.move_state), to_state)
             = array_position(enum_range(NULL::snowflake_id_router.move_state), from_state) + 1
    WHEN to_state IN ('sealed', 'undoing', 'undone') THEN snowflake_id_router.move_before_seal(from_state)
    WHEN to_state = 'flipped' THEN snowflake_id_router.move_may_be_sealed(from_state)
    WHEN to_state = 'kept' THEN from_state = 'flipped'
    WHEN to_state = 'cleaning' THEN from_state IN ('flipped', 'kept')
    WHEN to_state = 'done' THEN from_state = 'cleaning'
    ELSE false END;
COMMENT ON FUNCTION snowflake_id_router.move_may_go(snowflake_id_router.move_state, snowflake_id_router.move_state) IS
  'Whether a move may go from one state to another (record_move refuses any other transition).';

CREATE INDEX move_shards_idx ON snowflake_id_router.move USING gin (shards)
    WHERE NOT snowflake_id_router.move_finished(state);

-- == A rebalance is held by its call ==
--
-- The statement (CALL rebalance(), drain_node()) that runs a rebalance: its session holds
-- the rebalance only while it still runs that statement (call_alive, 41_rebalance.sql), so a
-- session that ran a step and then idles, or keeps a pipeline open, holds nothing.
ALTER TABLE snowflake_id_router.rebalance ADD COLUMN call_start timestamptz;
COMMENT ON COLUMN snowflake_id_router.rebalance.call_start IS
  'The start of the statement that runs it (statement_timestamp() of its session): it holds the rebalance while it runs.';

-- == Settings verify_moves (whether a move compares its copies' content before the seal)
-- == switch_lag (how far behind the source a target may be when its move fences) and
-- == fence_attempts (how often a move fences before it gives up on its target catching up)
-- == revert_window (how long a move keeps its old copy, kept current, to be reverted) ==
ALTER TABLE snowflake_id_router.setting DROP CONSTRAINT setting_name_check, DROP CONSTRAINT setting_check,
    ADD CONSTRAINT setting_name_check
        CHECK (name IN ('lock_timeout', 'copy_timeout', 'cutover_timeout', 'cleanup_timeout', 'status_timeout',
                        'schema_change_timeout', 'self_connstr', 'verify_moves', 'switch_lag', 'fence_attempts',
                        'revert_window')),
    -- A timeout of 0 would mean no timeout at all.
    ADD CONSTRAINT setting_check
        CHECK (CASE name WHEN 'self_connstr' THEN true WHEN 'verify_moves' THEN value IN ('on', 'off')
                         WHEN 'switch_lag' THEN pg_catalog.pg_size_bytes(value) >= 0
                         WHEN 'fence_attempts' THEN CASE WHEN value ~ '^\s*[0-9]{1,2}\s*$' THEN value::integer BETWEEN 1 AND 10 ELSE false END
                         -- (0: no window, the old copy dropped at once)
                         WHEN 'revert_window' THEN value::interval >= interval '0' AND value::interval <= interval '30 days'
                         ELSE value::interval > interval '0' AND value::interval <= interval '1 day' END);

-- == What a move's fence waited for: the target's lag (move_history) ==
ALTER TABLE snowflake_id_router.move ADD COLUMN fence_lag bigint, ADD COLUMN fence_retries integer;
COMMENT ON COLUMN snowflake_id_router.move.fence_lag IS
  'Bytes of the source''s WAL its target had not confirmed when the fence was set (switch_lag bounds it).';
COMMENT ON COLUMN snowflake_id_router.move.fence_retries IS
  'How often the fence was lifted (the target not caught up within cutover_timeout) or the fence gate given back (the target behind again) before the fence that held.';

-- == Who completes a move: its owner, and the time by which a sealed move completes ==
-- (docs/cluster-design.md, "From the seal": a mover frozen after its seal is taken over.)
ALTER TABLE snowflake_id_router.move ADD COLUMN owner text, ADD COLUMN complete_by timestamptz, ADD COLUMN taken_over timestamptz;
COMMENT ON COLUMN snowflake_id_router.move.owner IS
  'The session that drives the move (session_token()): every change to the record compares it; a repair takes it over.';
COMMENT ON COLUMN snowflake_id_router.move.complete_by IS
  'Set with the seal (snowflake_id_node.monotonic() + completion_bound()): past it, repair_moves() takes the move over from a mover still alive.';
COMMENT ON COLUMN snowflake_id_router.move.taken_over IS
  'When repair_moves() took the move over from its mover, alive but stalled past complete_by (NULL: never).';

-- == A node split through its streaming standby (44_split.sql) ==
--
-- One row per split, each step recorded (through the loopback connection) before it runs:
-- planned (the standby checked; on the node, the shards' fence and seal), sealed (the node
-- refuses the shards' writes; the standby replaying past seal_lsn), promoting, promoted
-- (the standby promoted, not yet registered), registered (new_node registered, the move
-- record move made, sealed: the move's own completion flips the shards to it), done; undone
-- when it failed before the seal. A split that is not done nor undone is taken up by
-- split_node(node, ...) or repair_moves().
CREATE TABLE snowflake_id_router.split (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    node text NOT NULL,
    new_node text NOT NULL,
    standby text NOT NULL,              -- the standby's connect string (normalised), new_node's
    shards integer[] NOT NULL CHECK (cardinality(shards) > 0),
    schemas text[],
    move bigint NOT NULL UNIQUE,        -- the id of the move record it becomes (reserved)
    node_identity text NOT NULL,        -- the node's (and its standby's until promoted)
    new_identity text NOT NULL,         -- the promoted standby's: a mark of its own
    max_lag bigint NOT NULL,            -- bytes the standby may be behind when the split fences
    bounds text,                        -- the sequences' bounds, read before the seal (split_bounds)
    seal_lsn pg_lsn,                    -- the node's WAL insert position after the seal
    state text NOT NULL DEFAULT 'planned'
        CHECK (state IN ('planned', 'sealed', 'promoting', 'promoted', 'registered', 'done', 'undone')),
    started timestamptz NOT NULL DEFAULT clock_timestamp(),
    fenced timestamptz,
    promoted timestamptz,
    ended timestamptz,
    error text
);
COMMENT ON TABLE snowflake_id_router.split IS
  'Splits of a node through its streaming standby (split_node), one row each, recorded step by step.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.split', '');
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.split_id_seq', '');

-- == A move's revert window (setting revert_window; docs/cluster.md, "Keeping a move's old copy") ==
ALTER TABLE snowflake_id_router.move ADD COLUMN revert_until timestamptz;
COMMENT ON COLUMN snowflake_id_router.move.revert_until IS
  'The end of the move''s revert window (revert_window after the flip), recorded before its reverse replication is made; NULL: none.';
