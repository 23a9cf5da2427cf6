REVOKE ALL ON FUNCTION add_node(text, text), assign_shards(integer, integer, text),
    move_shard(integer, text, text) FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_router FROM PUBLIC;
REVOKE ALL ON shard_map FROM PUBLIC;
REVOKE ALL ON FUNCTION alter_shards(text, text, boolean), abandon_schema_change(bigint),
    template_status(text, boolean), add_router(text, text), remove_router(text) FROM PUBLIC;
REVOKE ALL ON schema_change_status, router_status FROM PUBLIC;
