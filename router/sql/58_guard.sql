-- == The router's server: no user mapping but the extension's ==
--
-- PL/Proxy connects to a node as the user its caller's user mapping names, with no password
-- of the mapping's own: libpq then finds one where the router's server user keeps its own
-- (~/.pgpass, docs/security.md) or needs none (trust, peer). PostgreSQL lets any role with
-- USAGE on a server make its own mapping, so every role that may route could name the
-- nodes' superuser and route as it. The extension's mapping (FOR PUBLIC, no options) is all
-- routing needs: PL/Proxy then connects as the calling role. A mapping on the server made or
-- changed by anyone but a superuser is refused (42501), whatever it holds.

CREATE OR REPLACE FUNCTION snowflake_id_router.guard_user_mapping() RETURNS event_trigger
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- Not SECURITY DEFINER: current_user is the role that ran the command.
    IF (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user) THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT FROM pg_event_trigger_ddl_commands() c
                 JOIN pg_user_mappings m ON c.classid = 'pg_user_mapping'::regclass AND m.umid = c.objid
                WHERE m.srvname = 'snowflake_id') THEN
        RAISE EXCEPTION 'only a superuser may make or change a user mapping of server snowflake_id'
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Routing needs none but the extension''s own (FOR PUBLIC, no options): PL/Proxy then connects to the nodes as the calling role.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.guard_user_mapping() IS
  'Event trigger (ddl_command_end): refuses (42501) a user mapping of server snowflake_id made or changed by a non-superuser.';
REVOKE ALL ON FUNCTION snowflake_id_router.guard_user_mapping() FROM PUBLIC;

-- Made once (the block lets a migration load this file again); ALWAYS: in a session whose
-- session_replication_role is replica too.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger WHERE evtname = 'snowflake_id_router_guard_user_mapping') THEN
        CREATE EVENT TRIGGER snowflake_id_router_guard_user_mapping ON ddl_command_end
            WHEN TAG IN ('CREATE USER MAPPING', 'ALTER USER MAPPING')
            EXECUTE FUNCTION snowflake_id_router.guard_user_mapping();
        ALTER EVENT TRIGGER snowflake_id_router_guard_user_mapping ENABLE ALWAYS;
    END IF;
END
$$;
