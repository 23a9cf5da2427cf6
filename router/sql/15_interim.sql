-- INTERIM, until the lead's connect_node, connect_self and setting(name) land on main
-- (router/sql/10_dblink.sql there): delete this file then.
CREATE OR REPLACE FUNCTION snowflake_id_router.connect_node(conn text, node text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    connstr text;
BEGIN
    SELECT n.connstr INTO connstr FROM snowflake_id_router.node n WHERE n.name = connect_node.node;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM snowflake_id_router.connect(conn, 'keepalives=1 keepalives_idle=5 keepalives_interval=2 keepalives_count=3 connect_timeout=10 ' || connstr);
END
$$;
COMMENT ON FUNCTION snowflake_id_router.connect_node(text, text) IS 'INTERIM: opens dblink connection conn to node.';
CREATE OR REPLACE FUNCTION snowflake_id_router.connect_self(conn text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_router.connect(conn, snowflake_id_router.self_connstr() || ' connect_timeout=10');
    IF snowflake_id_router.fetch(conn, 'SELECT snowflake_id_node.identity()') IS DISTINCT FROM snowflake_id_node.identity() THEN
        PERFORM snowflake_id_router.disconnect(conn);
        RAISE EXCEPTION 'the loopback connection reaches another database' USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.connect_self(text) IS 'INTERIM: opens the loopback connection.';
CREATE OR REPLACE FUNCTION snowflake_id_router.setting(name text) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN coalesce((SELECT s.value FROM snowflake_id_router.setting s WHERE s.name = setting.name),
                CASE setting.name WHEN 'lock_timeout' THEN '2 s' WHEN 'copy_timeout' THEN '60 s'
                                  WHEN 'cutover_timeout' THEN '5 s' WHEN 'cleanup_timeout' THEN '10 s' END);
COMMENT ON FUNCTION snowflake_id_router.setting(text) IS 'INTERIM: a router setting.';
