REVOKE ALL ON FUNCTION add_node(text, text), assign_shards(integer, integer, text),
    move_shard(integer, text, text) FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_router FROM PUBLIC;
REVOKE ALL ON shard_map FROM PUBLIC;
