-- After a restore of bench/shards.sh's `many` database: every shard listed, with its two
-- tables, and its own generated next_id() issuing an ID of its shard (one line).
CREATE FUNCTION pg_temp.shard_of_next_id(schema_name text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE id bigint;
BEGIN
    EXECUTE format('SELECT %I.next_id()', schema_name) INTO id;
    RETURN id_shard(id);
END $$;
SELECT format('%s shards, %s with both tables, %s issuing IDs of their own shard',
              count(*),
              count(*) FILTER (WHERE to_regclass(format('%I.posts', schema_name)) IS NOT NULL
                                 AND to_regclass(format('%I.likes', schema_name)) IS NOT NULL),
              count(*) FILTER (WHERE pg_temp.shard_of_next_id(schema_name) = shard))
  FROM snowflake_id_shards;
