-- IDs in applications: the text form, masks, JSON through the snowflake type.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
\set VERBOSITY sqlstate
-- Errors shown as SQLSTATE and message.
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN EXECUTE q; RETURN 'no error';
EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE || ': ' || SQLERRM; END $$;

-- == The text form: 13 characters of Crockford base32, sorting like the IDs.
SELECT id_to_text(0) AS zero, id_to_text(4000000000000979520) AS id, id_to_text(9223372036854775807) AS largest;
SELECT id_from_text('3F0PTSTESXWJ0') AS back, id_from_text('3f0ptstesxwj0') AS lower_case,
       id_from_text('00000000000IL') AS i_and_l_are_1, id_from_text('0000000000O0o') AS o_is_0;
-- Round trip and order over IDs of every shard and counter across the years.
WITH ids AS (
  SELECT make_id(timestamptz '2011-08-24 21:07:01.721+00' + g * interval '15 hours 7 ms', g % 8192, g % 1024) AS id
    FROM generate_series(0, 20000) g)
SELECT count(*) AS ids,
       bool_and(id_from_text(id_to_text(id)) = id) AS round_trip,
       (SELECT array_agg(id ORDER BY id) FROM ids) = (SELECT array_agg(id ORDER BY id_to_text(id) COLLATE "C") FROM ids) AS text_order_is_id_order
  FROM ids;
-- Bad text: 22P02 naming the character; a negative ID: 22003.
SELECT pg_temp.err($$SELECT id_from_text('3F0PTSTESXWJU')$$);
SELECT pg_temp.err($$SELECT id_from_text('3F0P-STESXWJ0')$$);
SELECT pg_temp.err($$SELECT id_from_text('8000000000000')$$);
SELECT pg_temp.err($$SELECT id_from_text('3F0PTSTESXWJ')$$);
SELECT pg_temp.err($$SELECT id_from_text('')$$);
SELECT pg_temp.err($$SELECT id_to_text(-1)$$);
SELECT id_to_text(NULL) IS NULL AS strict, id_from_text(NULL) IS NULL AS strict;

-- == Masked public IDs: a keyed permutation of 0 .. 2^63-1.
\set key '''000102030405060708090a0b0c0d0e0f'''
SELECT id_mask(4000000000000979520, :key) AS masked,
       id_unmask(id_mask(4000000000000979520, :key), :key) AS unmasked,
       id_mask(4000000000000979520, upper(:key)) = id_mask(4000000000000979520, :key) AS key_case_insensitive;
-- 100,000 consecutive IDs: all distinct, in range, back exactly; neighbours unrelated.
WITH m AS (SELECT g AS id, id_mask(g, :key) AS masked FROM generate_series(4000000000000000000, 4000000000000099999) g)
SELECT count(DISTINCT masked) AS distinct_masks, bool_and(masked >= 0) AS in_range,
       bool_and(id_unmask(masked, :key) = id) AS round_trip,
       round(avg((masked > lag_masked)::int), 1) AS share_increasing
  FROM (SELECT *, lag(masked) OVER (ORDER BY id) AS lag_masked FROM m) x;
SELECT id_mask(0, :key) AS zero, id_mask(9223372036854775807, :key) AS largest;
-- Bad keys: 22023, without echoing the key; a negative ID: 22003.
SELECT pg_temp.err($$SELECT id_mask(1, '0001020304050607')$$);
SELECT pg_temp.err($$SELECT id_mask(1, '000102030405060708090a0b0c0d0e0g')$$);
SELECT pg_temp.err($$SELECT id_unmask(-5, '000102030405060708090a0b0c0d0e0f')$$);
-- The server's key lives in the file snowflake_id.mask_key_file names, never in a setting
-- (reliability/t_mask_key.sh sets one up). Unset here: 55000. The setting comes from the
-- configuration files alone (55P02 in a session); 0.2.0's snowflake_id.mask_key, which held
-- the key and which pg_read_all_settings members could read, is gone (SET: 42602, the prefix
-- is the library's; SHOW: 42704). PARALLEL RESTRICTED: a worker never reads the file afresh.
SELECT pg_temp.err($$SELECT id_mask(1)$$);
SELECT pg_temp.err($$SET snowflake_id.mask_key_file = 'snowflake_id.mask_key'$$);
SELECT pg_temp.err($$SET snowflake_id.mask_key = '000102030405060708090a0b0c0d0e0f'$$);
SELECT pg_temp.err($$SHOW snowflake_id.mask_key$$);
SELECT proname, pg_get_function_arguments(oid) AS args, proparallel FROM pg_proc
 WHERE proname IN ('id_mask', 'id_unmask') ORDER BY 1, 2;
CREATE ROLE apps_plain;

-- == JSON that JavaScript reads exactly: the snowflake type.
CREATE SEQUENCE items_seq;
CREATE TABLE items (id snowflake PRIMARY KEY DEFAULT next_id(3, 'items_seq'), body text);
INSERT INTO items VALUES (4000000000000979520, 'a'), (123, 'b'), (9223372036854775807, 'c');
INSERT INTO items (body) SELECT 'generated' FROM generate_series(1, 1000);
SELECT json_agg(t ORDER BY id) FILTER (WHERE body <> 'generated') AS json_agg FROM items t;
SELECT jsonb_agg(t ORDER BY id) FILTER (WHERE body <> 'generated') AS jsonb_agg FROM items t;
SELECT row_to_json(t) AS row_to_json, to_jsonb(t) AS to_jsonb, to_json(id) AS to_json, id::json AS cast,
       json_build_object('id', id) AS built, jsonb_build_object('id', id) AS jsonb_built,
       id_to_json(id) AS id_to_json
  FROM items t WHERE id = 4000000000000979520;
SELECT json_typeof(to_json(id)) AS json_type, jsonb_typeof(to_jsonb(id)) AS jsonb_type
  FROM items WHERE id = 123;
SELECT json_build_object('max', max(id), 'min', min(id)) AS aggregates, pg_typeof(max(id)) AS max_type FROM items;
-- Every generated ID came from next_id through DEFAULT, and reads back from JSON exactly.
SELECT count(*) AS generated, bool_and(id_shard(id) = 3) AS shard_3,
       bool_and((to_json(id) #>> '{}')::bigint = id) AS json_exact
  FROM items WHERE body = 'generated';
-- It behaves as bigint: comparisons with integer and bigint values, arithmetic, decoders.
SELECT body FROM items WHERE id = 123;
SELECT body FROM items WHERE 123 = id;
SELECT body FROM items WHERE id = 123::bigint;
SELECT body FROM items WHERE id = '123';
SELECT body FROM items WHERE id IN (123, 4000000000000979520) ORDER BY id;
SELECT count(*) FROM items WHERE id BETWEEN 1 AND 200;
SELECT count(*) FROM items WHERE id >= make_id('2020-01-01+00');
SELECT id + 1 AS plus_one, pg_typeof(id + 1) AS type, id::bigint AS as_bigint, id::text AS as_text,
       id_timestamp(id) AS ts, id_to_text(id) AS text_form
  FROM items WHERE id = 4000000000000979520;
SELECT snowflake_send(4000000000000979520::snowflake) = int8send(4000000000000979520) AS same_binary;
-- The primary key index serves comparisons with integer and bigint literals and columns.
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM items WHERE id = 123;
EXPLAIN (COSTS OFF) SELECT * FROM items WHERE id = 123::bigint;
EXPLAIN (COSTS OFF) SELECT * FROM items WHERE id >= make_id('2024-01-01+00');
EXPLAIN (COSTS OFF) SELECT max(id) FROM items;
RESET enable_seqscan;
-- A bigint column referencing it (foreign key), and joins to bigint by hash and by merge.
CREATE TABLE likes (item_id bigint NOT NULL REFERENCES items (id), n int);
INSERT INTO likes SELECT id, 1 FROM items WHERE body <> 'generated';
SELECT pg_temp.err($$INSERT INTO likes VALUES (5, 1)$$);
SET enable_nestloop = off; SET enable_mergejoin = off;
EXPLAIN (COSTS OFF) SELECT * FROM items i JOIN likes l ON l.item_id = i.id;
SELECT count(*) FROM items i JOIN likes l ON l.item_id = i.id;
SET enable_hashjoin = off; SET enable_mergejoin = on;
EXPLAIN (COSTS OFF) SELECT * FROM items i JOIN likes l ON l.item_id = i.id;
SELECT count(*) FROM items i JOIN likes l ON l.item_id = i.id;
RESET enable_nestloop; RESET enable_mergejoin; RESET enable_hashjoin;
-- Mixed with bigint (UNION, CASE, COALESCE) the result is bigint; with integer, snowflake.
SELECT pg_typeof(x) FROM (SELECT id FROM items WHERE id = 123 UNION ALL SELECT 1::bigint) u(x) LIMIT 1;
SELECT pg_typeof(x) FROM (SELECT id FROM items WHERE id = 123 UNION ALL SELECT 1) u(x) LIMIT 1;
SELECT pg_typeof(coalesce(id, 0)) AS with_integer, pg_typeof(coalesce(id, 0::bigint)) AS with_bigint,
       pg_typeof(CASE WHEN id > 5 THEN id ELSE 7::bigint END) AS case_bigint
  FROM items WHERE id = 123;
-- With smallint too (its own operators; 050_snowflake_type has the rest of bigint's uses).
SELECT count(*) FROM items WHERE id = 123::smallint;
-- next_id() inserts directly.
INSERT INTO items VALUES (next_id(3, 'items_seq'), 'explicit next_id') RETURNING id > 4000000000000979520 AS above;
-- COPY in and out, text and binary.
COPY (SELECT id, body FROM items WHERE body <> 'generated' AND body <> 'explicit next_id' ORDER BY id) TO STDOUT;
CREATE TABLE items_copy (LIKE items);
COPY items_copy FROM STDIN;
4000000000000979521	copied
\.
SELECT id, pg_typeof(id) FROM items_copy;
-- An existing bigint key becomes snowflake in place: no table rewrite (the cast is binary),
-- foreign keys from bigint columns kept.
CREATE TABLE parent (id bigint PRIMARY KEY);
CREATE TABLE child (parent_id bigint REFERENCES parent (id));
INSERT INTO parent VALUES (4000000000000979520);
INSERT INTO child VALUES (4000000000000979520);
SELECT pg_relation_filenode('parent') AS filenode \gset
ALTER TABLE parent ALTER COLUMN id TYPE snowflake;
SELECT pg_relation_filenode('parent') = :filenode AS not_rewritten, json_agg(parent) AS json FROM parent;
SELECT pg_temp.err($$INSERT INTO child VALUES (1)$$);
DROP TABLE child, parent;
-- Joins and semi-joins with integer columns plan and run whatever the join method (the
-- family holds integer's operators, which a merge join's sort of the integer side needs).
CREATE TABLE ints (x integer);
INSERT INTO ints VALUES (5), (7), (123);
CREATE TABLE small_ids (id snowflake PRIMARY KEY);
INSERT INTO small_ids VALUES (5), (7), (8);
SET enable_hashjoin = off; SET enable_nestloop = off;
SELECT s.id FROM small_ids s JOIN ints i ON s.id = i.x ORDER BY 1;
SELECT id FROM small_ids WHERE id IN (SELECT x FROM ints) ORDER BY 1;
SELECT x FROM ints WHERE x IN (SELECT id FROM small_ids) ORDER BY 1;
SELECT count(*) FROM small_ids s LEFT JOIN ints i ON i.x = s.id;
RESET enable_hashjoin; RESET enable_nestloop;
SELECT id FROM small_ids WHERE id IN (VALUES (5), (7)) ORDER BY 1;
DROP TABLE ints, small_ids;
-- Explicit casts to integer and numeric work as on bigint (integer's range checked).
SELECT 123::snowflake::integer AS as_int, 4000000000000979520::snowflake::numeric AS as_numeric;
SELECT pg_temp.err($$SELECT 4000000000000979520::snowflake::integer$$);
-- Out of bigint's range: bigint's own error.
SELECT pg_temp.err($$SELECT '9223372036854775808'::snowflake$$);
DROP TABLE likes, items, items_copy;
DROP SEQUENCE items_seq;
DROP ROLE apps_plain;
