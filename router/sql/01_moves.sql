-- The records of moves (docs/cluster-design.md, "A move, step by step"): one row per move,
-- written step by step through the loopback connection, so each step is committed before
-- the next begins, whatever becomes of the mover's session or transaction. A move whose
-- state is neither done nor undone is finished by repair_moves() (and by the next move of
-- its shards) once its mover is gone. (From 0.4.0 on, state is of the ordered type
-- snowflake_id_router.move_state: router/migrations/0.4.0-objects.sql.)
CREATE TABLE snowflake_id_router.move (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    shards integer[] NOT NULL CHECK (cardinality(shards) > 0),
    source text NOT NULL,
    target text NOT NULL,
    source_identity text NOT NULL,
    target_identity text NOT NULL,
    template text NOT NULL,
    schemas text[],
    state text NOT NULL DEFAULT 'planned' CHECK (state IN ('planned', 'checking', 'preparing', 'copying', 'fencing',
        'catching up', 'sealing', 'sealed', 'flipping', 'flipped', 'cleaning', 'undoing', 'done', 'undone')),
    suboid oid,
    started timestamptz NOT NULL DEFAULT clock_timestamp(),
    fenced timestamptz,
    flipped timestamptz,
    ended timestamptz,
    map_version bigint,         -- the map's version with the flip (snowflake_id_router.map_version())
    rows bigint,
    error text
);
COMMENT ON TABLE snowflake_id_router.move IS
  'Moves of shards between nodes, one row each, recorded step by step (the view move_history shows them).';
CREATE INDEX ON snowflake_id_router.move USING gin (shards) WHERE state NOT IN ('done', 'undone');
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.move', '');
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.move_id_seq', '');

-- Test hook: a mover reaching a step named here waits until the row is gone (it notes
-- when it arrived), so a test can interrupt it at exactly that step. Owner only.
CREATE TABLE snowflake_id_router.breakpoint (
    step text PRIMARY KEY,
    reached timestamptz,
    pid integer
);
COMMENT ON TABLE snowflake_id_router.breakpoint IS
  'Test hook: a mover reaching a step named here notes it (reached, pid) and waits until the row is deleted.';
