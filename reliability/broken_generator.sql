-- Instagram's original PL/pgSQL generator (int shifts fixed): nextval % 1024, the counter
-- that repeats past 1,024 IDs per millisecond. Used only to show that the suite fails.
CREATE OR REPLACE FUNCTION broken_next_id(OUT result bigint) AS $$
DECLARE our_epoch bigint := 1314220021721; seq_id bigint; now_millis bigint; shard_id bigint := 5;
BEGIN
    SELECT nextval('s') % 1024 INTO seq_id;
    SELECT FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) INTO now_millis;
    result := (now_millis - our_epoch) << 23;
    result := result | (shard_id << 10);
    result := result | (seq_id);
END; $$ LANGUAGE plpgsql;
