-- Time partitioning by ID range (docs/applications.md's recipe): month partitions bounded by
-- make_id(month start), so that a time filter on the key prunes partitions.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
\set VERBOSITY sqlstate
-- The partitions a plan reads (scan node lines of EXPLAIN), and run-time pruning.
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
CREATE TABLE events_2024_01 PARTITION OF events FOR VALUES FROM (make_id('2024-01-01+00')) TO (make_id('2024-02-01+00'));
CREATE TABLE events_2024_02 PARTITION OF events FOR VALUES FROM (make_id('2024-02-01+00')) TO (make_id('2024-03-01+00'));
CREATE TABLE events_2024_03 PARTITION OF events FOR VALUES FROM (make_id('2024-03-01+00')) TO (make_id('2024-04-01+00'));
-- Everything from April 2024 on (next_id's IDs of today land here).
CREATE TABLE events_rest PARTITION OF events FOR VALUES FROM (make_id('2024-04-01+00')) TO (MAXVALUE);
INSERT INTO events (id, body)
SELECT make_id(timestamptz '2024-01-01+00' + g * interval '1 hour', g % 8192), 'then'
  FROM generate_series(0, 24 * 91 - 1) g;
INSERT INTO events (body) VALUES ('now');
SELECT tableoid::regclass AS partition, count(*), min(id_timestamp(id)) AT TIME ZONE 'UTC' AS first
  FROM events WHERE body = 'then' GROUP BY 1 ORDER BY 1;
SELECT tableoid::regclass AS partition FROM events WHERE body = 'now';
-- A constant time filter prunes at planning time.
SELECT pg_temp.scanned($$SELECT count(*) FROM events WHERE id >= make_id('2024-02-10+00') AND id < make_id('2024-03-01+00')$$);
SELECT pg_temp.scanned($$SELECT count(*) FROM events WHERE id >= make_id('2024-03-15+00')$$);
SELECT pg_temp.scanned($$SELECT count(*) FROM events$$);
SELECT count(*) FROM events WHERE id >= make_id('2024-02-10+00') AND id < make_id('2024-03-01+00');
-- A time given at run time (a parameter, or now() - interval) prunes at execution.
PREPARE since(timestamptz) AS SELECT count(*) FROM events WHERE id >= make_id($1);
SET plan_cache_mode = force_generic_plan;
SELECT pg_temp.scanned($$EXECUTE since('2024-03-15+00')$$);
EXECUTE since('2024-03-15+00');
RESET plan_cache_mode;
DEALLOCATE since;
DROP TABLE events;
DROP SEQUENCE events_seq;
