-- Superuser only, unless granted: these run as the extension's owner (SECURITY DEFINER).
REVOKE ALL ON FUNCTION add_node(text, text), assign_shards(integer, integer, text),
    move_shard(integer, text, text), move_shards(integer[], text, text), repair_moves() FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_router FROM PUBLIC;
REVOKE ALL ON shard_map, move_history FROM PUBLIC;
