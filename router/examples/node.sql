-- On every data node (after CREATE EXTENSION snowflake_id): the shard layout, declared once,
-- and the functions the router's PL/Proxy functions of the same names call.
CREATE SCHEMA tpl;
CREATE TABLE tpl.posts (
    id bigint PRIMARY KEY,          -- create_shard(..., template => 'tpl') defaults it to the shard's next_id()
    user_id bigint NOT NULL,
    body text NOT NULL,
    edits integer NOT NULL DEFAULT 0
);
CREATE INDEX ON tpl.posts (user_id, id);

-- The posts table of a shard held here. 40001 when it is not here: a router session that
-- has not yet seen a move sent the call; retrying reaches the shard's new node.
CREATE FUNCTION posts_of(shard integer) RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE t text;
BEGIN
    SELECT format('%I.posts', schema_name) INTO t FROM snowflake_id_shards s WHERE s.shard = posts_of.shard;
    IF t IS NULL THEN
        RAISE EXCEPTION 'shard % is not on this node', shard USING ERRCODE = 'serialization_failure';
    END IF;
    RETURN t;
END $$;

CREATE FUNCTION insert_post(shard integer, user_id bigint, body text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE id bigint;
BEGIN
    EXECUTE format('INSERT INTO %s (user_id, body) VALUES ($1, $2) RETURNING id', posts_of(shard))
       INTO id USING user_id, body;
    RETURN id;
END $$;

CREATE FUNCTION update_post(post_id bigint, body text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
    EXECUTE format('UPDATE %s SET body = $2, edits = edits + 1 WHERE id = $1', posts_of(id_shard(post_id)))
       USING post_id, body;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n = 1;
END $$;

CREATE FUNCTION get_post(post_id bigint) RETURNS TABLE (id bigint, user_id bigint, body text, edits integer)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY EXECUTE format('SELECT id, user_id, body, edits FROM %s WHERE id = $1', posts_of(id_shard(post_id)))
       USING post_id;
END $$;

-- Newest posts of a user on this node, from every shard held here.
CREATE FUNCTION user_feed(for_user bigint, lim integer) RETURNS TABLE (id bigint, user_id bigint, body text)
LANGUAGE plpgsql STABLE AS $$
DECLARE q text;
BEGIN
    SELECT string_agg(format('(SELECT id, user_id, body FROM %I.posts WHERE user_id = $1 ORDER BY id DESC LIMIT $2)',
                             schema_name), ' UNION ALL ')
      INTO q FROM snowflake_id_shards;
    IF q IS NOT NULL THEN
        RETURN QUERY EXECUTE q USING for_user, lim;
    END IF;
END $$;
