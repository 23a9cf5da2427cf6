-- The revert window's setting, its states and finish_move's refusals, on a router with no
-- node. (A move that keeps its old copy, under load, killed and repaired:
-- reliability/t_move_revert.sh.)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id_router CASCADE;
RESET client_min_messages;
\set VERBOSITY sqlstate
-- 0 by default: nothing kept.
SELECT snowflake_id_router.setting('revert_window');
-- 0 to 30 days.
INSERT INTO snowflake_id_router.setting VALUES ('revert_window', '-1 s');
INSERT INTO snowflake_id_router.setting VALUES ('revert_window', '31 days');
INSERT INTO snowflake_id_router.setting VALUES ('revert_window', 'soon');
INSERT INTO snowflake_id_router.setting VALUES ('revert_window', '0');
UPDATE snowflake_id_router.setting SET value = '30 days' WHERE name = 'revert_window';
SELECT snowflake_id_router.setting('revert_window');
DELETE FROM snowflake_id_router.setting WHERE name = 'revert_window';
-- kept: after the flip only; cleaning from it; never finished.
SELECT f, t, snowflake_id_router.move_may_go(f, t)
  FROM (VALUES ('flipped'::snowflake_id_router.move_state, 'kept'::snowflake_id_router.move_state), ('sealed', 'kept'), ('cleaning', 'kept'), ('kept', 'kept'), ('kept', 'cleaning'),
               ('kept', 'done'), ('kept', 'undone')) x(f, t);
SELECT snowflake_id_router.move_flipped('kept'), snowflake_id_router.move_finished('kept');
-- finish_move: NULL, an unknown move, a move that keeps nothing.
SELECT finish_move(NULL);
SELECT finish_move(-1);
INSERT INTO snowflake_id_router.move (shards, source, target, source_identity, target_identity, template, state)
VALUES ('{8100}', 'reg_a', 'reg_b', 'x', 'y', 'tpl', 'done');
SELECT finish_move(max(id)) FROM snowflake_id_router.move;
UPDATE snowflake_id_router.move SET state = 'flipped' WHERE shards = '{8100}';
SELECT finish_move(max(id)) FROM snowflake_id_router.move;
DELETE FROM snowflake_id_router.move WHERE shards = '{8100}';
-- Superuser only, unless granted.
SELECT has_function_privilege('public', 'finish_move(bigint)', 'EXECUTE');
