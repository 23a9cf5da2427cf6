-- What snowflake_id_router's views node_status and shard_status, and its rebalancer, read on
-- a data node: one call answers for the node, or for every shard it serves, in one pass over
-- the catalog, so that the router sends one query per node however many shards it holds.
-- Rows and bytes are the statistics system's estimates (pg_stat_get_live_tuples) and the
-- relations' sizes on disk (pg_total_relation_size), not counts: counting every row of
-- every shard would read the whole node. Internal, like the rest of snowflake_id_node.

-- The node: its replication settings, the shards it serves, and what moves make on it
-- (replication slots, publications, subscriptions named by the router, and the table-sync
-- slots of subscriptions), with the WAL the slots hold and the lag of its standbys. Slot
-- and WAL figures read the WAL position of a primary, or the replayed one on a standby.
CREATE OR REPLACE FUNCTION snowflake_id_node.node_stats(
    OUT wal_level text, OUT in_recovery boolean,
    OUT shards integer, OUT tables integer, OUT rows bigint, OUT bytes bigint,
    OUT slots text[], OUT publications text[], OUT subscriptions text[],
    OUT slot_wal_bytes bigint, OUT free_slots integer, OUT free_wal_senders integer,
    OUT standbys integer, OUT sync_standbys integer, OUT standby_lag_bytes bigint)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH here AS (
        SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END AS lsn),
    shard_tables AS (
        SELECT count(DISTINCT s.shard) AS shards, count(c.oid) AS tables,
               sum(pg_stat_get_live_tuples(c.oid)) AS rows, sum(pg_total_relation_size(c.oid)) AS bytes
          FROM @extschema@.snowflake_id_shards s
          LEFT JOIN pg_namespace n ON n.nspname = s.schema_name
          LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relkind IN ('r', 'p')),
    -- A router names what a move makes sfid_<router>_<move>; a subscription's table sync
    -- makes slots pg_<subscription oid>_sync_<table oid>_<system identifier>.
    move_slots AS (
        SELECT r.slot_name, r.restart_lsn FROM pg_replication_slots r
         WHERE r.slot_name LIKE 'sfid\_%' OR r.slot_name ~ '^pg_[0-9]+_sync_[0-9]+_[0-9]+$'),
    senders AS (
        SELECT r.sync_state, r.replay_lsn FROM pg_stat_replication r
          JOIN pg_stat_activity a ON a.pid = r.pid
         WHERE a.datid IS NULL)                      -- physical: a logical walsender has a database
    SELECT current_setting('wal_level'), pg_is_in_recovery(),
           (SELECT shards FROM shard_tables)::integer, (SELECT tables FROM shard_tables)::integer,
           coalesce((SELECT rows FROM shard_tables), 0)::bigint, coalesce((SELECT bytes FROM shard_tables), 0)::bigint,
           ARRAY(SELECT slot_name::text FROM move_slots ORDER BY 1),
           ARRAY(SELECT p.pubname::text FROM pg_publication p WHERE p.pubname LIKE 'sfid\_%' ORDER BY 1),
           ARRAY(SELECT s.subname::text FROM pg_subscription s
                  WHERE s.subname LIKE 'sfid\_%'
                    AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
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
  'This node for snowflake_id_router''s node_status: replication settings, shards served (rows estimated, bytes on disk), what moves made here, WAL held by slots, standby lag.';

-- Every shard the node serves: its tables' rows (estimated) and bytes, the newest ID its
-- sequence issued (next_id keeps the newest ID in it), the time in it and how far that is
-- ahead of this node's clock (after a failover to a standby whose clock is behind, or a move
-- to such a node, next_id issues IDs above the newest until the clock catches up), and,
-- when recent, how many rows hold
-- an ID made in the last minute: those of the columns defaulting to the shard's next_id()
-- (or to its sequence), counted by the index of each such column, so the work grows with
-- the rows written in that minute, not with the table.
CREATE OR REPLACE FUNCTION snowflake_id_node.shard_stats(recent boolean)
RETURNS TABLE (shard integer, schema_name text, tables integer, rows bigint, bytes bigint,
               newest_id bigint, newest_at timestamptz, ahead_of_clock interval, ids_last_minute bigint)
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    col record;
    n bigint;
    made_shard integer[] := '{}';
    made bigint[] := '{}';
BEGIN
    IF recent THEN
        FOR col IN
            SELECT DISTINCT s.shard, c.oid::regclass AS rel, a.attname
              FROM @extschema@.snowflake_id_shards s
              JOIN pg_namespace ns ON ns.nspname = s.schema_name
              JOIN pg_proc p ON p.pronamespace = ns.oid AND p.proname = 'next_id' AND p.pronargs = 0
              JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass
                   AND ((d.refclassid = 'pg_proc'::regclass AND d.refobjid = p.oid)
                     OR (d.refclassid = 'pg_class'::regclass AND d.refobjid = s.sequence))
              JOIN pg_attrdef ad ON ad.oid = d.objid
              JOIN pg_class c ON c.oid = ad.adrelid AND c.relkind IN ('r', 'p') AND NOT c.relispartition
              JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum AND a.atttypid = 'bigint'::regtype
             ORDER BY s.shard
        LOOP
            -- A bigint column compared with a bigint: pg_catalog's operator, whoever owns the table.
            EXECUTE format('SELECT count(*) FROM %s WHERE %I >= $1', col.rel, col.attname)
               INTO n USING @extschema@.make_id(clock_timestamp() - interval '1 minute', col.shard);
            made_shard := made_shard || col.shard;
            made := made || n;
        END LOOP;
    END IF;
    RETURN QUERY
    SELECT x.shard, x.schema_name, x.tables, x.rows, x.bytes, x.newest_id,
           @extschema@.id_timestamp(x.newest_id), @extschema@.id_timestamp(x.newest_id) - clock_timestamp(),
           CASE WHEN recent THEN coalesce(m.n, 0) END
      FROM (SELECT s.shard, s.schema_name, count(c.oid)::integer AS tables,
                   coalesce(sum(pg_stat_get_live_tuples(c.oid)), 0)::bigint AS rows,
                   coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS bytes,
                   -- A sequence dropped by hand leaves its OID in the registry: no newest ID then.
                   CASE WHEN q.oid IS NOT NULL THEN pg_sequence_last_value(q.oid::regclass) END AS newest_id
              FROM @extschema@.snowflake_id_shards s
              LEFT JOIN pg_class q ON q.oid = s.sequence AND q.relkind = 'S'
              LEFT JOIN pg_namespace ns ON ns.nspname = s.schema_name
              LEFT JOIN pg_class c ON c.relnamespace = ns.oid AND c.relkind IN ('r', 'p')
             GROUP BY s.shard, s.schema_name, q.oid) x
      LEFT JOIN (SELECT u.shard, sum(u.n)::bigint AS n FROM unnest(made_shard, made) u(shard, n) GROUP BY u.shard) m
        ON m.shard = x.shard
     ORDER BY x.shard;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.shard_stats(boolean) IS
  'Every shard this node serves for snowflake_id_router''s shard_status and rebalancer: tables, rows (estimated), bytes, newest ID, its time and lead over the clock, and (recent) rows with an ID made in the last minute.';

REVOKE ALL ON FUNCTION snowflake_id_node.node_stats(), snowflake_id_node.shard_stats(boolean) FROM PUBLIC;
