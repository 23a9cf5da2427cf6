-- What 0.3.0 changes in the router's tables and drops of 0.2.0's objects, before the
-- functions (router/sql/[1-9]*.sql, all CREATE OR REPLACE) are loaded again.
-- 0.2.0's move machinery, replaced by the recorded moves of router/sql/3x_*.sql.
DROP FUNCTION snowflake_id_router.clean_move(integer, text, text, text, boolean);
