REVOKE ALL ON FUNCTION add_node(text, text), assign_shards(integer, integer, text),
    move_shard(integer, text, text) FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_router FROM PUBLIC;
REVOKE ALL ON shard_map FROM PUBLIC;
REVOKE ALL ON FUNCTION rebalance_plan(text, integer, text), rebalance_stop(), alter_node(text, text),
    remove_node(text) FROM PUBLIC;
REVOKE ALL ON PROCEDURE rebalance(text, integer, text), drain_node(text, text, integer, text) FROM PUBLIC;
REVOKE ALL ON ALL PROCEDURES IN SCHEMA snowflake_id_router FROM PUBLIC;
REVOKE ALL ON node_status, shard_status, rebalance_status FROM PUBLIC;
