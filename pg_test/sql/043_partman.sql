-- versions: 15
-- Time partitioning by ID range with Debian's pg_partman 4.7 (postgresql-15-partman): one
-- partition per day of ID time, made ahead by pg_partman, pruned by a time filter on the key.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
\set VERBOSITY sqlstate
CREATE SCHEMA partman;
CREATE EXTENSION pg_partman SCHEMA partman;
CREATE FUNCTION pg_temp.scanned(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    IF line ~ '(Scan|Subplans Removed)' AND line !~ 'Bitmap Index Scan' THEN
      RETURN NEXT substring(line FROM '(Subplans Removed: \d+|on \S+)');
    END IF;
  END LOOP;
END $$;
CREATE SEQUENCE events_seq;
CREATE TABLE events (
    id bigint NOT NULL DEFAULT next_id(1, 'events_seq'),
    body text,
    PRIMARY KEY (id)
) PARTITION BY RANGE (id);
-- One day of ID time is 86400000 ms << 23. pg_partman starts partitions at multiples of the
-- interval: days of ID time, each beginning at 21:07:01.721 UTC (the epoch's time of day).
-- For a live table, start at make_id(now()) instead of a fixed day.
SELECT partman.create_parent('public.events', 'id', 'native', (86400000::bigint << 23)::text,
       p_premake => 3, p_start_partition => make_id('2024-01-01+00')::text);
INSERT INTO events (id, body)
SELECT make_id(timestamptz '2024-01-01+00' + g * interval '1 hour', g % 8192), 'then'
  FROM generate_series(0, 47) g;
-- Maintenance (pg_partman's background worker, or cron) keeps p_premake partitions ahead.
SELECT partman.run_maintenance('public.events');
SELECT c.relname AS partition,
       id_timestamp(substring(pg_get_expr(c.relpartbound, c.oid) FROM '\(''(\d+)''\)')::bigint) AT TIME ZONE 'UTC' AS from_time,
       (SELECT count(*) FROM events e WHERE e.tableoid = c.oid) AS rows
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'events'::regclass ORDER BY 1;
-- A time filter on the key reads only the partitions of that time.
SELECT pg_temp.scanned($$SELECT count(*) FROM events WHERE id >= make_id('2024-01-02 22:00+00') AND id < make_id('2024-01-03 12:00+00')$$);
SELECT count(*) FROM events WHERE id >= make_id('2024-01-02 22:00+00') AND id < make_id('2024-01-03 12:00+00');
DROP TABLE events, partman.template_public_events;
DROP SEQUENCE events_seq;
DROP EXTENSION pg_partman;
DROP SCHEMA partman;
