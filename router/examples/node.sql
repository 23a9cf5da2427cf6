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

-- Newest posts of a user on this node, from every shard held here (as snowflake_id_shards
-- lists them). Over thousands of shards, one UNION ALL takes far longer to plan than to run
-- (docs/cluster.md#fan-out-over-thousands-of-shards): each session prepares it once for the
-- shards listed, with a generic plan, and runs that plan; a change to the list (a shard
-- made, dropped or moved) names a new statement.
CREATE FUNCTION user_feed(for_user bigint, lim integer) RETURNS TABLE (id bigint, user_id bigint, body text)
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
DECLARE shards text; prepared text;
BEGIN
    SELECT string_agg(quote_ident(schema_name), ',' ORDER BY shard) INTO shards FROM snowflake_id_shards;
    IF shards IS NULL THEN
        RETURN;
    END IF;
    prepared := 'user_feed_' || md5(shards);
    IF NOT EXISTS (SELECT FROM pg_prepared_statements p WHERE p.name = prepared) THEN
        FOR shards IN SELECT p.name FROM pg_prepared_statements p WHERE p.name LIKE 'user\_feed\_%' LOOP
            EXECUTE format('DEALLOCATE %I', shards);
        END LOOP;
        SELECT string_agg(format('(SELECT id, user_id, body FROM %I.posts WHERE user_id = $1 ORDER BY id DESC LIMIT $2)',
                                 schema_name), ' UNION ALL ' ORDER BY shard)
          INTO shards FROM snowflake_id_shards;
        EXECUTE format('PREPARE %I(bigint, integer) AS %s', prepared, shards);
    END IF;
    RETURN QUERY EXECUTE format('EXECUTE %I(%L, %L)', prepared, for_user, lim);
END $$;
