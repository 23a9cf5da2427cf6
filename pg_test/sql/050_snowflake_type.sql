-- The snowflake type does what bigint does. Every function, aggregate and operator of
-- pg_catalog that takes bigint, called with snowflake in its bigint positions (all of them,
-- and each alone), and common-type forms (COALESCE, GREATEST, CASE, UNION, ARRAY, IN,
-- BETWEEN) and casts with every numeric type, resolve as with bigint: to the same C function
-- (operators, functions; an aggregate's transition function) with the same result type
-- (snowflake read as bigint), or to the same error. The documented exceptions
-- (docs/applications.md): what bigint does by converting itself implicitly to numeric, real,
-- double precision or oid raises 42883/42846 with snowflake (cast to bigint first), casts to
-- oid's alias types (regclass, ...) and to bytea (PostgreSQL 18's int8 -> bytea), and the cast
-- to json, which writes a string.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN EXECUTE q; RETURN 'no error';
EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE || ': ' || SQLERRM; END $$;
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.impl(f oid) RETURNS text LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN p.prokind = 'a' THEN 'agg:' || (SELECT t.prosrc FROM pg_aggregate a JOIN pg_proc t ON t.oid = a.aggtransfn WHERE a.aggfnoid = p.oid)
              WHEN p.prolang = 12 THEN p.prosrc ELSE p.oid::regprocedure::text END
    FROM pg_proc p WHERE p.oid = f $$;
-- What an expression resolves to: the implementations it calls (named fname, if given) and
-- its type, or its error.
CREATE FUNCTION pg_temp.resolve(expr text, fname name) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text; typ text;
BEGIN
  EXECUTE format('CREATE TEMP VIEW resolved AS SELECT %s AS x', expr);
  SELECT string_agg(DISTINCT CASE m[1] WHEN 'opno' THEN (SELECT pg_temp.impl(oprcode) FROM pg_operator WHERE oid = m[2]::oid)
                                       ELSE pg_temp.impl(m[2]::oid) END, ',')
    INTO r
    FROM pg_rewrite w, regexp_matches(w.ev_action::text, ':(funcid|opno|aggfnoid) (\d+)', 'g') m
   WHERE w.ev_class = 'resolved'::regclass
     AND (fname IS NULL
          OR CASE m[1] WHEN 'opno' THEN (SELECT oprname FROM pg_operator WHERE oid = m[2]::oid) = fname
                       ELSE (SELECT proname FROM pg_proc WHERE oid = m[2]::oid) = fname END);
  SELECT replace(format_type(atttypid, atttypmod), 'snowflake', 'bigint') INTO typ FROM pg_attribute
   WHERE attrelid = 'resolved'::regclass AND attname = 'x';
  DROP VIEW resolved;
  RETURN coalesce(r, '-') || ' -> ' || typ;
EXCEPTION WHEN OTHERS THEN RETURN 'ERROR ' || SQLSTATE || ' ' || SQLERRM;
END $$;
CREATE TEMP TABLE calls (what text, is_cast boolean, b text, s text);
CREATE FUNCTION pg_temp.call(tmpl text, fname name, is_cast boolean DEFAULT false) RETURNS void LANGUAGE sql AS $$
  INSERT INTO calls VALUES (replace(tmpl, 'X', 'snowflake'), is_cast,
    pg_temp.resolve(replace(tmpl, 'X', 'NULL::bigint'), fname),
    pg_temp.resolve(replace(tmpl, 'X', 'NULL::snowflake'), fname)) $$;
DO $$
DECLARE p record; t oid; args text[]; k int; n int; v text; tmpl text;
BEGIN
  FOR p IN SELECT pr.proname, pr.proargtypes::oid[] AS types FROM pg_proc pr
            WHERE pr.pronamespace = 'pg_catalog'::regnamespace AND 'bigint'::regtype = ANY(pr.proargtypes::oid[])
              AND pr.prokind IN ('f', 'a') AND pr.prorettype <> 'void'::regtype
              AND NOT EXISTS (SELECT FROM unnest(pr.proargtypes::oid[]) x JOIN pg_type y ON y.oid = x WHERE y.typtype = 'p')
  LOOP
    n := (SELECT count(*) FROM unnest(p.types) x WHERE x = 'bigint'::regtype);
    FOR k IN 0 .. CASE WHEN n > 1 THEN n ELSE 0 END LOOP
      args := '{}';
      FOR i IN 1 .. cardinality(p.types) LOOP
        t := p.types[i];
        args := args || CASE WHEN t = 'bigint'::regtype
                               AND (k = 0 OR k = (SELECT count(*) FROM unnest(p.types[1:i]) x WHERE x = 'bigint'::regtype))
                             THEN 'X' ELSE format('NULL::%s', format_type(t, NULL)) END;
      END LOOP;
      PERFORM pg_temp.call(format('%I(%s)', p.proname, array_to_string(args, ', ')), p.proname);
    END LOOP;
  END LOOP;
  FOR p IN SELECT o.oprname, o.oprleft, o.oprright FROM pg_operator o
            WHERE o.oprnamespace = 'pg_catalog'::regnamespace AND 'bigint'::regtype IN (o.oprleft, o.oprright)
  LOOP
    PERFORM pg_temp.call(format('%s %s %s',
      CASE p.oprleft WHEN 0 THEN '' WHEN 'bigint'::regtype THEN 'X' ELSE format('NULL::%s', format_type(p.oprleft, NULL)) END, p.oprname,
      CASE p.oprright WHEN 'bigint'::regtype THEN 'X' ELSE format('NULL::%s', format_type(p.oprright, NULL)) END), p.oprname);
  END LOOP;
  FOREACH v IN ARRAY ARRAY['1::smallint', '1', '1::bigint', '1.5', '1.5::real', '1.5::float8', '''1''', '1::oid', '1::money'] LOOP
    FOREACH tmpl IN ARRAY ARRAY['COALESCE(X, %1$s)', 'COALESCE(%1$s, X)', 'GREATEST(X, %1$s)', 'LEAST(%1$s, X)',
                                'NULLIF(X, %1$s)', 'CASE WHEN random() < 0.5 THEN X ELSE %1$s END', 'X IN (%1$s, %1$s)',
                                'X BETWEEN %1$s AND %1$s', 'ARRAY[X, %1$s]', '(SELECT X UNION ALL SELECT %1$s)',
                                'X = ANY(ARRAY[%1$s])', 'X = %1$s', '%1$s < X', 'X + %1$s', '%1$s * X', 'X / %1$s', 'X %% %1$s',
                                'power(X, %1$s)', 'mod(X, %1$s)', 'div(X, %1$s)'] LOOP
      PERFORM pg_temp.call(format(tmpl, v), NULL);
    END LOOP;
  END LOOP;
  FOREACH v IN ARRAY ARRAY['smallint', 'integer', 'bigint', 'numeric', 'numeric(30,2)', 'real', 'double precision', 'oid', 'regclass',
                           'regtype', 'money', 'text', 'varchar', '"char"', 'bit(64)', 'boolean', 'json', 'jsonb', 'bytea'] LOOP
    PERFORM pg_temp.call(format('X::%s', v), NULL, true);
  END LOOP;
  FOREACH tmpl IN ARRAY ARRAY['-X', '@X', 'abs(X)', 'sum(X)', 'avg(X)', 'count(X)', 'max(X)', 'min(X)', 'array_agg(X)',
                              'X + X', 'X - X', 'X * X', 'X / X', 'X %% X', 'X & X', 'X | X', 'X # X', 'X << 2', 'X >> 2',
                              'X + ''1''', 'to_char(X, ''999'')', 'to_hex(X)', 'generate_series(X, X)', 'generate_series(X, 10)',
                              'int8range(X, X)', 'format(''%%s'', X)', 'numeric(X)', 'float8(X)', 'int4(X)', 'int2(X)',
                              'to_json(X)', 'to_jsonb(X)', 'sqrt(X)', 'round(X)', 'gcd(X, X)', 'lcm(X, 2)', 'X = ''5''',
                              'greatest(X, 1, 2::bigint)', 'bit_and(X)', 'stddev(X)',
                              'percentile_disc(0.5) WITHIN GROUP (ORDER BY X)', 'mode() WITHIN GROUP (ORDER BY X)'] LOOP
    PERFORM pg_temp.call(format(tmpl), NULL);
  END LOOP;
END $$;
-- Every difference, unless it is one of the documented exceptions: none.
SELECT DISTINCT what, b AS with_bigint, s AS with_snowflake FROM calls
 WHERE b IS DISTINCT FROM s
   AND NOT (b LIKE 'ERROR %' AND s LIKE 'ERROR %' AND left(b, 11) = left(s, 11))
   AND NOT (NOT is_cast AND s ~ '^ERROR (42883|42846)'
            AND (b ~ '(int8_numeric|i8tod|i8tof|i8tooid)' OR b ~ '-> (numeric|real|double precision|oid)(\[\])?$'))
   AND what NOT IN ('snowflake::json', 'snowflake::regclass', 'snowflake::regtype', 'snowflake::bytea')
 ORDER BY 1;
SELECT count(*) > 500 AS enough_calls FROM calls;
RESET client_min_messages;

-- The review's cases, on a bigint column changed to snowflake: casts as on bigint; with
-- numeric, real or double precision, the documented error, and bigint's result through ::bigint.
\set VERBOSITY sqlstate
CREATE TABLE posts (id bigint PRIMARY KEY);
INSERT INTO posts VALUES (4000000000000979520), (123);
CREATE TABLE posts_bigint AS SELECT * FROM posts;
ALTER TABLE posts ALTER COLUMN id TYPE snowflake;
SELECT id::float8 AS float8, id::real AS real, id::numeric AS numeric, id::oid AS oid, id::int2 AS int2,
       id::int AS int, id::money::numeric AS money, id::bit(64) AS bit
  FROM posts WHERE id = 123;
SELECT pg_temp.err($$SELECT id::int2 FROM posts WHERE id > 123$$) AS int2_range;
SELECT id / 2.5 FROM posts;
SELECT power(id, 2) FROM posts;
SELECT COALESCE(id, 1.5) FROM posts;
SELECT GREATEST(id, 0.5) FROM posts;
SELECT (SELECT array_agg(id::bigint / 2.5 ORDER BY id) FROM posts) = (SELECT array_agg(id / 2.5 ORDER BY id) FROM posts_bigint) AS same_quotient,
       (SELECT array_agg(power(id::bigint, 2) ORDER BY id) FROM posts) = (SELECT array_agg(power(id, 2) ORDER BY id) FROM posts_bigint) AS same_power,
       (SELECT array_agg(COALESCE(id::bigint, 1.5) ORDER BY id) FROM posts) = (SELECT array_agg(COALESCE(id, 1.5) ORDER BY id) FROM posts_bigint) AS same_coalesce,
       (SELECT array_agg(GREATEST(id::bigint, 0.5) ORDER BY id) FROM posts) = (SELECT array_agg(GREATEST(id, 0.5) ORDER BY id) FROM posts_bigint) AS same_greatest;
-- Everyday uses give bigint's results.
SELECT (SELECT row(sum(id), avg(id), count(id), max(id)::bigint, min(id)::bigint, bit_or(id), to_char(max(id), '9999999999999999999'),
               array_agg(id ORDER BY id USING >)::bigint[], int8range(min(id), max(id)), jsonb_agg(id::bigint ORDER BY id))::text FROM posts)
     = (SELECT row(sum(id), avg(id), count(id), max(id), min(id), bit_or(id), to_char(max(id), '9999999999999999999'),
               array_agg(id ORDER BY id USING >), int8range(min(id), max(id)), jsonb_agg(id ORDER BY id))::text FROM posts_bigint) AS aggregates_alike,
       (SELECT array_agg(g) FROM posts, generate_series(id, id + 2) g WHERE id = 123) AS series,
       (SELECT id - 100 FROM posts WHERE id = 123) AS minus, (SELECT -id FROM posts WHERE id = 123) AS negated,
       (SELECT id % 10 + id / 10 * 10 FROM posts WHERE id = 123) AS arithmetic,
       (SELECT pg_typeof(id + id) FROM posts WHERE id = 123) AS sum_type;
-- smallint: comparisons resolve (the type's own operators, in its index families) and use the index.
CREATE TABLE smalls (x smallint);
INSERT INTO smalls VALUES (123), (5);
SELECT count(*) FROM posts WHERE id = 123::smallint;
SELECT count(*) FROM posts WHERE 123::smallint = id;
SELECT id FROM posts WHERE id BETWEEN 100::smallint AND 200::smallint;
SELECT pg_typeof(COALESCE(id, 1::smallint)), pg_typeof(GREATEST(1::smallint, id)) FROM posts WHERE id = 123;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM posts WHERE id = 123::smallint;
RESET enable_seqscan;
SET enable_hashjoin = off; SET enable_nestloop = off;
SELECT p.id FROM posts p JOIN smalls s ON p.id = s.x ORDER BY 1;
SELECT x FROM smalls WHERE x IN (SELECT id FROM posts) ORDER BY 1;
RESET enable_hashjoin; RESET enable_nestloop;
-- Assignment: snowflake values into smallint, integer, numeric, real, double precision, oid and
-- money columns and PL/pgSQL variables, as bigint's.
CREATE TABLE targets (i2 smallint, i4 integer, n numeric, r real, d double precision, o oid, m money);
INSERT INTO targets SELECT id, id, id, id, id, id, id FROM posts WHERE id = 123;
SELECT i2, i4, n, r, d, o, m::numeric AS m FROM targets;
\set VERBOSITY default
DO $$ DECLARE n numeric; d double precision; i integer;
BEGIN SELECT id, id, id INTO n, d, i FROM posts WHERE id = 123; RAISE NOTICE '% % %', n, d, i; END $$;
DROP TABLE posts, posts_bigint, smalls, targets;
