-- On the router (after CREATE EXTENSION snowflake_id_router CASCADE): each function runs
-- its namesake on the node that holds the shard.
-- A write routed by shard: the ID is made on the data node, by the shard's own next_id().
CREATE FUNCTION insert_post(shard integer, user_id bigint, body text) RETURNS bigint
LANGUAGE plproxy AS $$ CLUSTER 'snowflake_id'; RUN ON shard; $$;

-- A read or an update by ID: the ID names its shard.
CREATE FUNCTION update_post(post_id bigint, body text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'snowflake_id'; RUN ON id_shard(post_id); $$;
CREATE FUNCTION get_post(post_id bigint) RETURNS TABLE (id bigint, user_id bigint, body text, edits integer)
LANGUAGE plproxy AS $$ CLUSTER 'snowflake_id'; RUN ON id_shard(post_id); $$;

-- A fan-out read: every node answers; the router merges in ID (= time) order.
CREATE FUNCTION user_feed(for_user bigint, lim integer) RETURNS TABLE (id bigint, user_id bigint, body text)
LANGUAGE plproxy AS $$ CLUSTER 'snowflake_id'; RUN ON ALL; $$;
-- SELECT * FROM user_feed(42, 20) ORDER BY id DESC LIMIT 20;
