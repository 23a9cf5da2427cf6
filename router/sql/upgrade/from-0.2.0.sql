-- What 0.3.0 changes in the router's tables and drops of 0.2.0's objects, before the
-- functions (router/sql/[1-9]*.sql, all CREATE OR REPLACE) are loaded again.

-- The router now reads node identities and parses connect strings through snowflake_id
-- 0.3.0's snowflake_id_node schema.
DO $$
BEGIN
    IF to_regprocedure('snowflake_id_node.conninfo(text)') IS NULL THEN
        RAISE EXCEPTION 'snowflake_id_router 0.3.0 needs snowflake_id 0.3.0'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'ALTER EXTENSION snowflake_id UPDATE first.';
    END IF;
END
$$;

-- Settings: session settings no longer steer the router (snowflake_id_router.setting).
DROP FUNCTION snowflake_id_router.setting(text, text);
DROP FUNCTION snowflake_id_router.self_connstr();

-- Node identities, recorded when each node is next reached.
ALTER TABLE snowflake_id_router.node ADD COLUMN identity text UNIQUE;
COMMENT ON TABLE snowflake_id_router.node IS
  'Data nodes: name, libpq connect string (normalised, no secret) and identity (system identifier/database OID; NULL until first reached, for nodes added by 0.2.0).';

-- Connect strings as libpq reads them, each value quoted (0.2.0 stored them as given, and
-- let secrets through in some syntaxes): none may keep a secret. (conn_value is 0.2.0's,
-- the same as 0.3.0's.)
DO $$
DECLARE
    n record;
    secret text;
    normal text;
BEGIN
    FOR n IN SELECT * FROM snowflake_id_router.node ORDER BY name LOOP
        SELECT string_agg(c.keyword, ', ') FILTER (WHERE c.secret),
               string_agg(c.keyword || '=' || snowflake_id_router.conn_value(c.value), ' ')
          INTO secret, normal FROM snowflake_id_node.conninfo(n.connstr) c;
        IF secret IS NOT NULL THEN
            RAISE EXCEPTION 'the connect string of node % holds a secret (%)', quote_literal(n.name), secret
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = 'Connect strings are readable by every role (pg_foreign_server.srvoptions).',
                      HINT = 'Remove it (UPDATE snowflake_id_router.node SET connstr = ...) and put the password in ~/.pgpass of the router''s server user, then update again.';
        END IF;
        UPDATE snowflake_id_router.node SET connstr = normal WHERE name = n.name AND connstr <> normal;
    END LOOP;
END
$$;

-- 0.2.0's move machinery, replaced by the recorded moves of router/sql/3x_*.sql.
DROP FUNCTION snowflake_id_router.clean_move(integer, text, text, text, boolean);

-- Connections: the router's own registry (snowflake_id_node.remote_*), not dblink.
DROP FUNCTION snowflake_id_router.dblink_schema();
