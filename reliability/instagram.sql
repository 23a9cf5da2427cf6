-- Issue 35's Instagram-shaped shard template, schema ig (reliability/t_instagram.sh,
-- bench/rich_move.sh): users; photos partitioned by ID range, a partition per month with
-- bounds made by make_id (psql variables boundary: where the next month begins, and
-- until_next: its end); likes with a composite key and a foreign key to photos; comments
-- with one; a trigger keeping photos.like_count and one setting photos.updated_at (their
-- functions in the template); a view of recent photos; a materialized view of the top
-- photos; a function of the shard that likes a photo. Then the node functions the router's
-- ig_like, ig_comment and ig_photo run (40001 when the shard is not on the node).
CREATE SCHEMA ig;
CREATE TABLE ig.users (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE ig.photos (id bigint NOT NULL, user_id bigint NOT NULL, like_count integer NOT NULL DEFAULT 0,
                        updated_at timestamptz, PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE ig.photos_this_month PARTITION OF ig.photos FOR VALUES FROM (MINVALUE) TO (:boundary);
CREATE TABLE ig.photos_next_month PARTITION OF ig.photos FOR VALUES FROM (:boundary) TO (:until_next);
CREATE TABLE ig.likes (user_id bigint NOT NULL, photo_id bigint NOT NULL REFERENCES ig.photos (id) ON DELETE CASCADE,
                       PRIMARY KEY (user_id, photo_id));
CREATE INDEX ON ig.likes (photo_id);
CREATE TABLE ig.comments (id bigint PRIMARY KEY, photo_id bigint NOT NULL REFERENCES ig.photos (id) ON DELETE CASCADE,
                          body text NOT NULL);
CREATE FUNCTION ig.count_like() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    EXECUTE format('UPDATE %I.photos SET like_count = like_count + $2 WHERE id = $1', TG_TABLE_SCHEMA)
      USING CASE TG_OP WHEN 'DELETE' THEN OLD.photo_id ELSE NEW.photo_id END, CASE TG_OP WHEN 'DELETE' THEN -1 ELSE 1 END;
    RETURN NULL;
END $f$;
CREATE FUNCTION ig.stamp() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    NEW.updated_at := clock_timestamp();
    RETURN NEW;
END $f$;
CREATE TRIGGER count_like AFTER INSERT OR DELETE ON ig.likes FOR EACH ROW EXECUTE FUNCTION ig.count_like();
CREATE TRIGGER stamp BEFORE UPDATE ON ig.photos FOR EACH ROW EXECUTE FUNCTION ig.stamp();
CREATE FUNCTION ig.like_photo(photo bigint, by_user bigint) RETURNS void LANGUAGE sql
BEGIN ATOMIC
    INSERT INTO ig.likes (user_id, photo_id) VALUES (by_user, photo);
END;
CREATE VIEW ig.recent_photos AS SELECT p.id, p.user_id, p.like_count FROM ig.photos p WHERE p.id >= :boundary;
CREATE MATERIALIZED VIEW ig.top_photos AS SELECT p.id, p.like_count FROM ig.photos p ORDER BY p.like_count DESC, p.id LIMIT 10;
CREATE UNIQUE INDEX top_photos_id ON ig.top_photos (id);
-- What the router's functions run on the shard's node (40001 when it is not here).
CREATE FUNCTION public.ig_schema(shard integer) RETURNS text LANGUAGE plpgsql STABLE AS $f$
DECLARE s text;
BEGIN
    SELECT schema_name INTO s FROM snowflake_id_shards x WHERE x.shard = ig_schema.shard;
    IF s IS NULL THEN
        RAISE EXCEPTION 'shard % is not on this node', shard USING ERRCODE = 'serialization_failure';
    END IF;
    RETURN s;
END $f$;
CREATE FUNCTION public.ig_like(shard integer, photo bigint, by_user bigint) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
    EXECUTE format('SELECT %I.like_photo($1, $2)', ig_schema(shard)) USING photo, by_user;
END $f$;
CREATE FUNCTION public.ig_comment(shard integer, photo bigint, body text) RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE id bigint;
BEGIN
    EXECUTE format('INSERT INTO %I.comments (id, photo_id, body) VALUES (%I.next_id(), $1, $2) RETURNING id', ig_schema(shard), ig_schema(shard))
       INTO id USING photo, body;
    RETURN id;
END $f$;
CREATE FUNCTION public.ig_photo(shard integer, by_user bigint) RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE id bigint;
BEGIN
    EXECUTE format('INSERT INTO %I.photos (id, user_id) VALUES (%I.next_id(), $1) RETURNING id', ig_schema(shard), ig_schema(shard))
       INTO id USING by_user;
    RETURN id;
END $f$;
