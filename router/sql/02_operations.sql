-- Rebalances and drains (rebalance(), drain_node()): one row each, and the batches of its
-- plan. Each runs in its caller's session as a procedure that commits after every batch
-- (with parallel_moves > 1, its batches move in loopback sessions it opens, one each), so
-- these rows show its progress to every session, and outlive the session: a call after an
-- interruption (the session terminated, the router restarted, rebalance_stop(), a failed
-- batch) resumes the unfinished one. A row in state running whose session (pid and
-- session_start, as pg_stat_activity shows them) is gone was interrupted: nothing of the
-- rebalance's stays in its caller's session between its steps, no lock or connection, and
-- no other role can fake a running one.
CREATE TABLE snowflake_id_router.rebalance (
    id integer PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('rebalance', 'drain')),
    node text,                                   -- the node drained (not a reference: history outlives it)
    strategy text NOT NULL CHECK (strategy IN ('by_shard_count', 'by_disk_size')),
    batch_size integer NOT NULL CHECK (batch_size BETWEEN 1 AND @SHARDS@),
    parallel_moves integer NOT NULL DEFAULT 1 CHECK (parallel_moves BETWEEN 1 AND 8),  -- batches moving at once
    template text NOT NULL,
    state text NOT NULL CHECK (state IN ('running', 'stopped', 'failed', 'done', 'abandoned')),
    pid integer,                                 -- the session that runs (or last ran) it
    session_start timestamptz,                   -- that session's backend_start (pids are reused)
    stop_requested timestamptz,                  -- by rebalance_stop(): stop after the current batch
    started timestamptz NOT NULL,
    ended timestamptz,
    error text,
    CHECK ((kind = 'drain') = (node IS NOT NULL))
);
-- At most one unfinished: a new call resumes it, or abandons it for a different operation.
CREATE UNIQUE INDEX rebalance_unfinished ON snowflake_id_router.rebalance ((true))
    WHERE state IN ('running', 'stopped', 'failed');
COMMENT ON TABLE snowflake_id_router.rebalance IS
  'Rebalances and drains: kind, strategy, state, times, error; the view rebalance_status shows them.';

CREATE TABLE snowflake_id_router.rebalance_batch (
    rebalance integer REFERENCES snowflake_id_router.rebalance (id) ON DELETE CASCADE,
    batch integer,
    source text NOT NULL,
    target text NOT NULL,
    shards integer[] NOT NULL,
    bytes bigint,                                -- at planning time (by_disk_size only)
    move bigint,                                 -- its move (move_history), once made (the last: one per template)
    state text NOT NULL CHECK (state IN ('planned', 'moving', 'done', 'failed')),
    started timestamptz,
    ended timestamptz,
    error text,
    PRIMARY KEY (rebalance, batch)
);
COMMENT ON TABLE snowflake_id_router.rebalance_batch IS
  'The batches of each rebalance or drain: shards moved together (one move_shards) from source to target, and how that went.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.rebalance', '');
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.rebalance_batch', '');
