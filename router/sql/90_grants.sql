-- Superuser only, unless granted: these run as the extension's owner (SECURITY DEFINER).
REVOKE ALL ON FUNCTION add_node(text, text), assign_shards(integer, integer, text),
    move_shard(integer, text, text), move_shards(integer[], text, text), repair_moves(), finish_move(bigint) FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_router FROM PUBLIC;
REVOKE ALL ON shard_map, move_history FROM PUBLIC;
REVOKE ALL ON FUNCTION rebalance_plan(text, integer, text), rebalance_stop(), alter_node(text, text),
    remove_node(text), split_plan(text, integer, text), split_node(text, text, text, integer, text, text) FROM PUBLIC;
REVOKE ALL ON PROCEDURE rebalance_start(text, integer, text, text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION rebalance_wait(interval), maintenance_start(interval), maintenance_stop() FROM PUBLIC;
REVOKE ALL ON PROCEDURE rebalance(text, integer, text, integer), drain_node(text, text, integer, text, integer) FROM PUBLIC;
REVOKE ALL ON ALL PROCEDURES IN SCHEMA snowflake_id_router FROM PUBLIC;
REVOKE ALL ON node_status, shard_status, rebalance_status FROM PUBLIC;
REVOKE ALL ON FUNCTION alter_shards(text, text, boolean), abandon_schema_change(bigint),
    template_status(text, boolean), add_router(text, text), remove_router(text), verify_shard(integer, text) FROM PUBLIC;
REVOKE ALL ON schema_change_status, router_status FROM PUBLIC;

-- What an application role with no other right may read: the shard map (app_map); USAGE on
-- the internal schema reaches nothing else, every other function in it being closed above
-- and no table of it granted.
GRANT USAGE ON SCHEMA snowflake_id_router TO PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_id_router.app_map() TO PUBLIC;
-- rebalance_status calls call_alive for its state: a role granted SELECT on the view (as
-- docs/cluster.md says suffices) runs it. It answers only for a (pid, start time) pair, which
-- whoever does not see that session's start time cannot name.
GRANT EXECUTE ON FUNCTION snowflake_id_router.call_alive(integer, timestamptz, timestamptz) TO PUBLIC;
