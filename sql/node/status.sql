-- What snowflake_id_router's views node_status and shard_status, and its rebalancer, read on
-- a data node, in few queries however many shards it holds. Two limits shape it:
--   * cost: each shard is reached by index lookups (its schema by name, the schema's
--     relations through pg_depend), never by a join whose plan could scan a catalog once
--     per shard, so the work grows with the shards and not with their square;
--   * locks: a table's size, a sequence's value and a count each lock the relation until
--     the transaction ends, and a node's lock table holds max_locks_per_transaction x
--     max_connections of them (6,400 by default), fewer than thousands of shards need (about
--     six a shard). node_stats takes none; shard_stats answers for at most `count` shards a
--     call, from the first above `after`, and the router asks again for the next ones.
-- Rows are the statistics system's estimate (pg_stat_get_live_tuples), bytes the sizes on
-- disk: counting every row of every shard would read the whole node. Internal, like the
-- rest of snowflake_id_node.

-- The node: its replication settings, the shards it serves and their rows, the database's
-- size, the moves running on it and what moves left (snowflake_id_node.leftovers(): move
-- records, slots, publications, subscriptions, fences, markers), the WAL the slots hold
-- and the lag of its standbys. Slot and WAL figures read the WAL position of a primary, or the
-- replayed one on a standby. It takes no relation lock.
CREATE OR REPLACE FUNCTION snowflake_id_node.node_stats(
    OUT wal_level text, OUT in_recovery boolean,
    OUT shards integer, OUT rows bigint, OUT bytes bigint,
    OUT moves_running integer, OUT leftovers text[],
    OUT slot_wal_bytes bigint, OUT free_slots integer, OUT free_wal_senders integer,
    OUT standbys integer, OUT sync_standbys integer, OUT standby_lag_bytes bigint)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH here AS (
        SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END AS lsn),
    shard_tables AS (
        -- One hash over pg_class (no index leads with relnamespace), no lock taken.
        SELECT sum(pg_stat_get_live_tuples(c.oid)) AS rows
          FROM pg_class c
         WHERE c.relkind IN ('r', 'p')
           AND c.relnamespace IN (SELECT n.oid FROM @extschema@.snowflake_id_shards s
                                   JOIN pg_namespace n ON n.nspname = s.schema_name)),
    -- A move's record here, and whether its mover lives (holds the shard locks); what a
    -- running move uses is not left over: its record, and what is named for it
    -- (sfid_<router>_<move>, its key being <router>/<move>), or, while any move runs, a
    -- subscription's table-sync slot (pg_<subscription>_sync_<table>_<system>).
    running AS (
        SELECT m.key, 'sfid_' || replace(m.key, '/', '_') AS name
          FROM snowflake_id_node.move m WHERE snowflake_id_node.alive(m.shards)),
    senders AS (
        SELECT r.sync_state, r.replay_lsn FROM pg_stat_replication r
          JOIN pg_stat_activity a ON a.pid = r.pid
         WHERE a.datid IS NULL)                      -- physical: a logical walsender has a database
    SELECT current_setting('wal_level'), pg_is_in_recovery(),
           (SELECT count(*) FROM @extschema@.snowflake_id_shards)::integer,
           coalesce((SELECT rows FROM shard_tables), 0)::bigint, pg_database_size(current_database()),
           (SELECT count(*) FROM running)::integer,
           ARRAY(SELECT x FROM snowflake_id_node.leftovers() x
                  WHERE NOT EXISTS (SELECT FROM running r
                                     WHERE x ~ (r.name || '(?![0-9])') OR x LIKE 'move record ' || r.key || ' %'
                                        OR x ~ '^replication slot pg_[0-9]+_sync_')
                  ORDER BY 1),
           (SELECT max(pg_wal_lsn_diff((SELECT lsn FROM here), r.restart_lsn))::bigint FROM pg_replication_slots r),
           current_setting('max_replication_slots')::integer - (SELECT count(*) FROM pg_replication_slots)::integer,
           current_setting('max_wal_senders')::integer
               - (SELECT count(*) FROM pg_stat_activity a WHERE a.backend_type = 'walsender')::integer,
           (SELECT count(*) FROM senders)::integer,
           (SELECT count(*) FROM senders WHERE sync_state IN ('sync', 'quorum'))::integer,
           (SELECT max(pg_wal_lsn_diff((SELECT lsn FROM here), replay_lsn))::bigint FROM senders);
END;
COMMENT ON FUNCTION snowflake_id_node.node_stats() IS
  'This node for snowflake_id_router''s node_status: replication settings, shards served and their rows (estimated), the database''s size, moves running and what moves left, WAL held by slots, standby lag; no relation lock.';

-- The shards this node serves, in order: all a by_shard_count plan needs, without a lock.
CREATE OR REPLACE FUNCTION snowflake_id_node.served_shards() RETURNS integer[]
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN ARRAY(SELECT s.shard FROM @extschema@.snowflake_id_shards s ORDER BY s.shard);
COMMENT ON FUNCTION snowflake_id_node.served_shards() IS
  'The shards this node serves, in order, for snowflake_id_router''s rebalancer.';

-- The shards this node serves, at most count of them from the first above after, in shard
-- order: each one's tables, their rows (estimated) and bytes, the newest ID its sequence
-- issued (next_id keeps the newest ID in it), the time in it and how far that is ahead of
-- this node's clock (after a failover to a standby whose clock is behind, or a move to such
-- a node, next_id issues IDs above the newest until the clock catches up), and, when recent,
-- how many rows hold an ID made in the last minute: those of the bigint columns of its plain
-- tables (partitions included) defaulting to the shard's next_id() (or to its sequence),
-- counted by the index of each such column, so the work grows with the rows written in that
-- minute, not with the table.
CREATE OR REPLACE FUNCTION snowflake_id_node.shard_stats(recent boolean, after integer, count integer)
RETURNS TABLE (shard integer, schema_name text, tables integer, rows bigint, bytes bigint,
               newest_id bigint, newest_at timestamptz, ahead_of_clock interval, ids_last_minute bigint)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s record;
    nsp oid;
    fn oid;
    col record;
    n bigint;
BEGIN
    FOR s IN SELECT x.shard, x.schema_name, x.sequence FROM @extschema@.snowflake_id_shards x
              WHERE x.shard > after ORDER BY x.shard LIMIT count LOOP
        shard := s.shard;
        schema_name := s.schema_name;
        nsp := to_regnamespace(quote_ident(s.schema_name));
        SELECT count(c.oid)::integer, coalesce(sum(pg_stat_get_live_tuples(c.oid)), 0)::bigint,
               coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
          INTO tables, rows, bytes
          FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
         WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = nsp AND d.classid = 'pg_class'::regclass
           AND c.relkind IN ('r', 'p');
        -- A sequence dropped by hand leaves its OID in the registry: no newest ID then.
        newest_id := CASE WHEN EXISTS (SELECT FROM pg_class q WHERE q.oid = s.sequence AND q.relkind = 'S')
                          THEN pg_sequence_last_value(s.sequence) END;
        newest_at := @extschema@.id_timestamp(newest_id);
        ahead_of_clock := newest_at - clock_timestamp();
        ids_last_minute := NULL;
        IF recent THEN
            ids_last_minute := 0;
            -- Once, before the query: a lookup by name there ran once per row.
            fn := snowflake_id_internal.shard_function(nsp);
            FOR col IN
                SELECT c.oid::regclass AS rel, a.attname, c.relowner AS owner
                  FROM (SELECT d.objid FROM pg_depend d
                         WHERE d.refclassid = 'pg_proc'::regclass AND d.classid = 'pg_attrdef'::regclass
                           AND d.refobjid = fn
                        UNION
                        SELECT d.objid FROM pg_depend d
                         WHERE d.refclassid = 'pg_class'::regclass AND d.classid = 'pg_attrdef'::regclass
                           AND d.refobjid = s.sequence) dep
                  JOIN pg_attrdef ad ON ad.oid = dep.objid
                  JOIN pg_class c ON c.oid = ad.adrelid AND c.relkind = 'r'
                  JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum AND a.atttypid = 'bigint'::regtype
            LOOP
                -- Each plain table on its own (ONLY: an inheritance child may be a foreign
                -- table), a bigint column against a bigint: pg_catalog's operator and the
                -- column's index. Run as the table's owner under restricted-operation rules:
                -- planning it folds what the owner's index expressions call.
                -- (An owner who may not read its own table there is not asked: unknown.)
                IF has_schema_privilege(col.owner, nsp, 'USAGE') AND has_table_privilege(col.owner, col.rel, 'SELECT') THEN
                    n := snowflake_id_node.as_owner(col.owner, format('SELECT count(*)::text FROM ONLY %s WHERE %I >= %s',
                             col.rel, col.attname, @extschema@.make_id(clock_timestamp() - interval '1 minute', s.shard, 0)));
                ELSE
                    n := NULL;
                END IF;
                ids_last_minute := ids_last_minute + n;
            END LOOP;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.shard_stats(boolean, integer, integer) IS
  'At most count shards this node serves, from the first above after, for snowflake_id_router''s shard_status and rebalancer: tables, rows (estimated), bytes, newest ID, its time and lead over the clock, and (recent) rows with an ID made in the last minute (counted as each table''s owner).';

-- The template each of these shards here was made from (snowflake_id_shard.template, NULL
-- where none is recorded), as a JSON object by shard: a rebalance moves each batch's shards
-- with their own templates.
CREATE OR REPLACE FUNCTION snowflake_id_node.shard_templates(shards integer[]) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN (SELECT coalesce(json_object_agg(s.shard, s.template), '{}')::text
          FROM @extschema@.snowflake_id_shard s WHERE s.shard = ANY (shards));
COMMENT ON FUNCTION snowflake_id_node.shard_templates(integer[]) IS
  'The template each of these shards was made from ({"shard": template or null}), for snowflake_id_router''s rebalancer.';

REVOKE ALL ON FUNCTION snowflake_id_node.node_stats(), snowflake_id_node.served_shards(),
    snowflake_id_node.shard_stats(boolean, integer, integer), snowflake_id_node.shard_templates(integer[]) FROM PUBLIC;
