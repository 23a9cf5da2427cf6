-- The snowflake type: a bigint whose JSON form is a string.
--
-- An ID near 4 x 10^18 is past JavaScript's 2^53: JSON.parse rounds a JSON number that large,
-- and json_agg(t), row_to_json(t) and to_jsonb(t) write bigint columns as JSON numbers. A
-- column of type snowflake stores the same 8 bytes as bigint, with bigint's own text and
-- binary I/O, comparison and hash functions (PostgreSQL's internal int8 functions, declared
-- here under this type), so it sorts, indexes, joins, COPYs and dumps exactly like bigint.
-- What differs is its JSON: PostgreSQL's json and jsonb builders use a user type's cast to
-- json, and this one writes the ID as a string.
--
-- Casts here: snowflake -> bigint implicit (every bigint function and operator accepts it);
-- bigint -> snowflake on assignment (INSERT, UPDATE, DEFAULT next_id(...)) and explicitly;
-- integer -> snowflake implicit (so COALESCE(id, 0) stays snowflake); the others in
-- sql/id/snowflake_casts.sql. In the numeric type category, so UNION/CASE/COALESCE with bigint
-- resolve to bigint. Comparisons with bigint and integer values and columns are operators of
-- the type's own btree and hash families (which also hold bigint's own, for merge and hash
-- joins), so `WHERE id = 123` and joins to bigint columns use the index and resolve without
-- ambiguity.

CREATE TYPE snowflake;
CREATE FUNCTION snowflake_in(cstring) RETURNS snowflake LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int8in';
CREATE FUNCTION snowflake_out(snowflake) RETURNS cstring LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int8out';
CREATE FUNCTION snowflake_recv(internal) RETURNS snowflake LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int8recv';
CREATE FUNCTION snowflake_send(snowflake) RETURNS bytea LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int8send';
CREATE TYPE snowflake (
    INPUT = snowflake_in, OUTPUT = snowflake_out, RECEIVE = snowflake_recv, SEND = snowflake_send,
    LIKE = bigint, CATEGORY = 'N'
);
COMMENT ON TYPE snowflake IS 'A 64-bit ID stored, compared and indexed like bigint, written to JSON as a string (exact in JavaScript).';
COMMENT ON FUNCTION snowflake_in(cstring) IS 'Text input of snowflake (bigint''s).';
COMMENT ON FUNCTION snowflake_out(snowflake) IS 'Text output of snowflake (bigint''s).';
COMMENT ON FUNCTION snowflake_recv(internal) IS 'Binary input of snowflake (bigint''s: 8 bytes, network order).';
COMMENT ON FUNCTION snowflake_send(snowflake) IS 'Binary output of snowflake (bigint''s: 8 bytes, network order).';

CREATE CAST (snowflake AS bigint) WITHOUT FUNCTION AS IMPLICIT;
CREATE CAST (bigint AS snowflake) WITHOUT FUNCTION AS ASSIGNMENT;
CREATE FUNCTION snowflake(integer) RETURNS snowflake LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int48';
COMMENT ON FUNCTION snowflake(integer) IS 'An integer as a snowflake (the cast).';
CREATE CAST (integer AS snowflake) WITH FUNCTION snowflake(integer) AS IMPLICIT;
-- snowflake vs snowflake
CREATE FUNCTION snowflake_eq(snowflake, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8eq';
COMMENT ON FUNCTION snowflake_eq(snowflake, snowflake) IS 'snowflake equal to snowflake (bigint''s comparison).';
CREATE FUNCTION snowflake_ne(snowflake, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8ne';
COMMENT ON FUNCTION snowflake_ne(snowflake, snowflake) IS 'snowflake not equal to snowflake (bigint''s comparison).';
CREATE FUNCTION snowflake_lt(snowflake, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8lt';
COMMENT ON FUNCTION snowflake_lt(snowflake, snowflake) IS 'snowflake less than snowflake (bigint''s comparison).';
CREATE FUNCTION snowflake_le(snowflake, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8le';
COMMENT ON FUNCTION snowflake_le(snowflake, snowflake) IS 'snowflake less than or equal to snowflake (bigint''s comparison).';
CREATE FUNCTION snowflake_gt(snowflake, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8gt';
COMMENT ON FUNCTION snowflake_gt(snowflake, snowflake) IS 'snowflake greater than snowflake (bigint''s comparison).';
CREATE FUNCTION snowflake_ge(snowflake, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8ge';
COMMENT ON FUNCTION snowflake_ge(snowflake, snowflake) IS 'snowflake greater than or equal to snowflake (bigint''s comparison).';
CREATE OPERATOR = (LEFTARG = snowflake, RIGHTARG = snowflake, FUNCTION = snowflake_eq, COMMUTATOR = =, NEGATOR = <>,
    RESTRICT = eqsel, JOIN = eqjoinsel, HASHES, MERGES);
CREATE OPERATOR <> (LEFTARG = snowflake, RIGHTARG = snowflake, FUNCTION = snowflake_ne, COMMUTATOR = <>, NEGATOR = =,
    RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = snowflake, RIGHTARG = snowflake, FUNCTION = snowflake_lt, COMMUTATOR = >, NEGATOR = >=,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = snowflake, RIGHTARG = snowflake, FUNCTION = snowflake_le, COMMUTATOR = >=, NEGATOR = >,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = snowflake, RIGHTARG = snowflake, FUNCTION = snowflake_gt, COMMUTATOR = <, NEGATOR = <=,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = snowflake, RIGHTARG = snowflake, FUNCTION = snowflake_ge, COMMUTATOR = <=, NEGATOR = <,
    RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE FUNCTION snowflake_cmp(snowflake, snowflake) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'btint8cmp';
COMMENT ON FUNCTION snowflake_cmp(snowflake, snowflake) IS 'Three-way comparison of snowflake and snowflake for btree (bigint''s).';

-- snowflake vs bigint
CREATE FUNCTION snowflake_int8_eq(snowflake, bigint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8eq';
COMMENT ON FUNCTION snowflake_int8_eq(snowflake, bigint) IS 'snowflake equal to bigint (bigint''s comparison).';
CREATE FUNCTION snowflake_int8_ne(snowflake, bigint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8ne';
COMMENT ON FUNCTION snowflake_int8_ne(snowflake, bigint) IS 'snowflake not equal to bigint (bigint''s comparison).';
CREATE FUNCTION snowflake_int8_lt(snowflake, bigint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8lt';
COMMENT ON FUNCTION snowflake_int8_lt(snowflake, bigint) IS 'snowflake less than bigint (bigint''s comparison).';
CREATE FUNCTION snowflake_int8_le(snowflake, bigint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8le';
COMMENT ON FUNCTION snowflake_int8_le(snowflake, bigint) IS 'snowflake less than or equal to bigint (bigint''s comparison).';
CREATE FUNCTION snowflake_int8_gt(snowflake, bigint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8gt';
COMMENT ON FUNCTION snowflake_int8_gt(snowflake, bigint) IS 'snowflake greater than bigint (bigint''s comparison).';
CREATE FUNCTION snowflake_int8_ge(snowflake, bigint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8ge';
COMMENT ON FUNCTION snowflake_int8_ge(snowflake, bigint) IS 'snowflake greater than or equal to bigint (bigint''s comparison).';
CREATE OPERATOR = (LEFTARG = snowflake, RIGHTARG = bigint, FUNCTION = snowflake_int8_eq, COMMUTATOR = =, NEGATOR = <>,
    RESTRICT = eqsel, JOIN = eqjoinsel, HASHES, MERGES);
CREATE OPERATOR <> (LEFTARG = snowflake, RIGHTARG = bigint, FUNCTION = snowflake_int8_ne, COMMUTATOR = <>, NEGATOR = =,
    RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = snowflake, RIGHTARG = bigint, FUNCTION = snowflake_int8_lt, COMMUTATOR = >, NEGATOR = >=,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = snowflake, RIGHTARG = bigint, FUNCTION = snowflake_int8_le, COMMUTATOR = >=, NEGATOR = >,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = snowflake, RIGHTARG = bigint, FUNCTION = snowflake_int8_gt, COMMUTATOR = <, NEGATOR = <=,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = snowflake, RIGHTARG = bigint, FUNCTION = snowflake_int8_ge, COMMUTATOR = <=, NEGATOR = <,
    RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE FUNCTION snowflake_int8_cmp(snowflake, bigint) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'btint8cmp';
COMMENT ON FUNCTION snowflake_int8_cmp(snowflake, bigint) IS 'Three-way comparison of snowflake and bigint for btree (bigint''s).';

-- bigint vs snowflake
CREATE FUNCTION int8_snowflake_eq(bigint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8eq';
COMMENT ON FUNCTION int8_snowflake_eq(bigint, snowflake) IS 'bigint equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int8_snowflake_ne(bigint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8ne';
COMMENT ON FUNCTION int8_snowflake_ne(bigint, snowflake) IS 'bigint not equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int8_snowflake_lt(bigint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8lt';
COMMENT ON FUNCTION int8_snowflake_lt(bigint, snowflake) IS 'bigint less than snowflake (bigint''s comparison).';
CREATE FUNCTION int8_snowflake_le(bigint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8le';
COMMENT ON FUNCTION int8_snowflake_le(bigint, snowflake) IS 'bigint less than or equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int8_snowflake_gt(bigint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8gt';
COMMENT ON FUNCTION int8_snowflake_gt(bigint, snowflake) IS 'bigint greater than snowflake (bigint''s comparison).';
CREATE FUNCTION int8_snowflake_ge(bigint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int8ge';
COMMENT ON FUNCTION int8_snowflake_ge(bigint, snowflake) IS 'bigint greater than or equal to snowflake (bigint''s comparison).';
CREATE OPERATOR = (LEFTARG = bigint, RIGHTARG = snowflake, FUNCTION = int8_snowflake_eq, COMMUTATOR = =, NEGATOR = <>,
    RESTRICT = eqsel, JOIN = eqjoinsel, HASHES, MERGES);
CREATE OPERATOR <> (LEFTARG = bigint, RIGHTARG = snowflake, FUNCTION = int8_snowflake_ne, COMMUTATOR = <>, NEGATOR = =,
    RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = bigint, RIGHTARG = snowflake, FUNCTION = int8_snowflake_lt, COMMUTATOR = >, NEGATOR = >=,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = bigint, RIGHTARG = snowflake, FUNCTION = int8_snowflake_le, COMMUTATOR = >=, NEGATOR = >,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = bigint, RIGHTARG = snowflake, FUNCTION = int8_snowflake_gt, COMMUTATOR = <, NEGATOR = <=,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = bigint, RIGHTARG = snowflake, FUNCTION = int8_snowflake_ge, COMMUTATOR = <=, NEGATOR = <,
    RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE FUNCTION int8_snowflake_cmp(bigint, snowflake) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'btint8cmp';
COMMENT ON FUNCTION int8_snowflake_cmp(bigint, snowflake) IS 'Three-way comparison of bigint and snowflake for btree (bigint''s).';

-- snowflake vs integer
CREATE FUNCTION snowflake_int4_eq(snowflake, integer) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int84eq';
COMMENT ON FUNCTION snowflake_int4_eq(snowflake, integer) IS 'snowflake equal to integer (bigint''s comparison).';
CREATE FUNCTION snowflake_int4_ne(snowflake, integer) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int84ne';
COMMENT ON FUNCTION snowflake_int4_ne(snowflake, integer) IS 'snowflake not equal to integer (bigint''s comparison).';
CREATE FUNCTION snowflake_int4_lt(snowflake, integer) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int84lt';
COMMENT ON FUNCTION snowflake_int4_lt(snowflake, integer) IS 'snowflake less than integer (bigint''s comparison).';
CREATE FUNCTION snowflake_int4_le(snowflake, integer) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int84le';
COMMENT ON FUNCTION snowflake_int4_le(snowflake, integer) IS 'snowflake less than or equal to integer (bigint''s comparison).';
CREATE FUNCTION snowflake_int4_gt(snowflake, integer) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int84gt';
COMMENT ON FUNCTION snowflake_int4_gt(snowflake, integer) IS 'snowflake greater than integer (bigint''s comparison).';
CREATE FUNCTION snowflake_int4_ge(snowflake, integer) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int84ge';
COMMENT ON FUNCTION snowflake_int4_ge(snowflake, integer) IS 'snowflake greater than or equal to integer (bigint''s comparison).';
CREATE OPERATOR = (LEFTARG = snowflake, RIGHTARG = integer, FUNCTION = snowflake_int4_eq, COMMUTATOR = =, NEGATOR = <>,
    RESTRICT = eqsel, JOIN = eqjoinsel, MERGES);
CREATE OPERATOR <> (LEFTARG = snowflake, RIGHTARG = integer, FUNCTION = snowflake_int4_ne, COMMUTATOR = <>, NEGATOR = =,
    RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = snowflake, RIGHTARG = integer, FUNCTION = snowflake_int4_lt, COMMUTATOR = >, NEGATOR = >=,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = snowflake, RIGHTARG = integer, FUNCTION = snowflake_int4_le, COMMUTATOR = >=, NEGATOR = >,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = snowflake, RIGHTARG = integer, FUNCTION = snowflake_int4_gt, COMMUTATOR = <, NEGATOR = <=,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = snowflake, RIGHTARG = integer, FUNCTION = snowflake_int4_ge, COMMUTATOR = <=, NEGATOR = <,
    RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE FUNCTION snowflake_int4_cmp(snowflake, integer) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'btint84cmp';
COMMENT ON FUNCTION snowflake_int4_cmp(snowflake, integer) IS 'Three-way comparison of snowflake and integer for btree (bigint''s).';

-- integer vs snowflake
CREATE FUNCTION int4_snowflake_eq(integer, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int48eq';
COMMENT ON FUNCTION int4_snowflake_eq(integer, snowflake) IS 'integer equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int4_snowflake_ne(integer, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int48ne';
COMMENT ON FUNCTION int4_snowflake_ne(integer, snowflake) IS 'integer not equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int4_snowflake_lt(integer, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int48lt';
COMMENT ON FUNCTION int4_snowflake_lt(integer, snowflake) IS 'integer less than snowflake (bigint''s comparison).';
CREATE FUNCTION int4_snowflake_le(integer, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int48le';
COMMENT ON FUNCTION int4_snowflake_le(integer, snowflake) IS 'integer less than or equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int4_snowflake_gt(integer, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int48gt';
COMMENT ON FUNCTION int4_snowflake_gt(integer, snowflake) IS 'integer greater than snowflake (bigint''s comparison).';
CREATE FUNCTION int4_snowflake_ge(integer, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int48ge';
COMMENT ON FUNCTION int4_snowflake_ge(integer, snowflake) IS 'integer greater than or equal to snowflake (bigint''s comparison).';
CREATE OPERATOR = (LEFTARG = integer, RIGHTARG = snowflake, FUNCTION = int4_snowflake_eq, COMMUTATOR = =, NEGATOR = <>,
    RESTRICT = eqsel, JOIN = eqjoinsel, MERGES);
CREATE OPERATOR <> (LEFTARG = integer, RIGHTARG = snowflake, FUNCTION = int4_snowflake_ne, COMMUTATOR = <>, NEGATOR = =,
    RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = integer, RIGHTARG = snowflake, FUNCTION = int4_snowflake_lt, COMMUTATOR = >, NEGATOR = >=,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = integer, RIGHTARG = snowflake, FUNCTION = int4_snowflake_le, COMMUTATOR = >=, NEGATOR = >,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = integer, RIGHTARG = snowflake, FUNCTION = int4_snowflake_gt, COMMUTATOR = <, NEGATOR = <=,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = integer, RIGHTARG = snowflake, FUNCTION = int4_snowflake_ge, COMMUTATOR = <=, NEGATOR = <,
    RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE FUNCTION int4_snowflake_cmp(integer, snowflake) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'btint48cmp';
COMMENT ON FUNCTION int4_snowflake_cmp(integer, snowflake) IS 'Three-way comparison of integer and snowflake for btree (bigint''s).';

CREATE FUNCTION snowflake_sortsupport(internal) RETURNS void LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'btint8sortsupport';
COMMENT ON FUNCTION snowflake_sortsupport(internal) IS 'Sort support for snowflake (bigint''s).';
CREATE FUNCTION snowflake_hash(snowflake) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'hashint8';
COMMENT ON FUNCTION snowflake_hash(snowflake) IS 'Hash of a snowflake (bigint''s, so it joins with bigint by hash).';
CREATE FUNCTION snowflake_hash_extended(snowflake, bigint) RETURNS bigint LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'hashint8extended';
COMMENT ON FUNCTION snowflake_hash_extended(snowflake, bigint) IS 'Seeded 64-bit hash of a snowflake (bigint''s).';

CREATE OPERATOR FAMILY snowflake_ops USING btree;
CREATE OPERATOR CLASS snowflake_ops DEFAULT FOR TYPE snowflake USING btree FAMILY snowflake_ops AS
    OPERATOR 1 < , OPERATOR 2 <= , OPERATOR 3 = , OPERATOR 4 >= , OPERATOR 5 > ,
    FUNCTION 1 snowflake_cmp(snowflake, snowflake),
    FUNCTION 2 snowflake_sortsupport(internal);
ALTER OPERATOR FAMILY snowflake_ops USING btree ADD
    OPERATOR 1 < (snowflake, bigint),
    OPERATOR 2 <= (snowflake, bigint),
    OPERATOR 3 = (snowflake, bigint),
    OPERATOR 4 >= (snowflake, bigint),
    OPERATOR 5 > (snowflake, bigint),
    FUNCTION 1 (snowflake, bigint) snowflake_int8_cmp(snowflake, bigint),
    OPERATOR 1 < (bigint, snowflake),
    OPERATOR 2 <= (bigint, snowflake),
    OPERATOR 3 = (bigint, snowflake),
    OPERATOR 4 >= (bigint, snowflake),
    OPERATOR 5 > (bigint, snowflake),
    FUNCTION 1 (bigint, snowflake) int8_snowflake_cmp(bigint, snowflake),
    OPERATOR 1 < (snowflake, integer),
    OPERATOR 2 <= (snowflake, integer),
    OPERATOR 3 = (snowflake, integer),
    OPERATOR 4 >= (snowflake, integer),
    OPERATOR 5 > (snowflake, integer),
    FUNCTION 1 (snowflake, integer) snowflake_int4_cmp(snowflake, integer),
    OPERATOR 1 < (integer, snowflake),
    OPERATOR 2 <= (integer, snowflake),
    OPERATOR 3 = (integer, snowflake),
    OPERATOR 4 >= (integer, snowflake),
    OPERATOR 5 > (integer, snowflake),
    FUNCTION 1 (integer, snowflake) int4_snowflake_cmp(integer, snowflake),
    OPERATOR 1 < (bigint, bigint), OPERATOR 2 <= (bigint, bigint), OPERATOR 3 = (bigint, bigint),
    OPERATOR 4 >= (bigint, bigint), OPERATOR 5 > (bigint, bigint),
    FUNCTION 1 (bigint, bigint) btint8cmp(bigint, bigint),
    -- integer's own operators, and integer with bigint: a merge join or a sort of the integer
    -- side of `snowflake = integer` looks them up in this family (else XX000 "missing
    -- operator 1(23,23)"), as integer_ops holds them for bigint and integer.
    OPERATOR 1 < (integer, integer), OPERATOR 2 <= (integer, integer), OPERATOR 3 = (integer, integer),
    OPERATOR 4 >= (integer, integer), OPERATOR 5 > (integer, integer),
    FUNCTION 1 (integer, integer) btint4cmp(integer, integer),
    OPERATOR 1 < (integer, bigint), OPERATOR 2 <= (integer, bigint), OPERATOR 3 = (integer, bigint),
    OPERATOR 4 >= (integer, bigint), OPERATOR 5 > (integer, bigint),
    FUNCTION 1 (integer, bigint) btint48cmp(integer, bigint),
    OPERATOR 1 < (bigint, integer), OPERATOR 2 <= (bigint, integer), OPERATOR 3 = (bigint, integer),
    OPERATOR 4 >= (bigint, integer), OPERATOR 5 > (bigint, integer),
    FUNCTION 1 (bigint, integer) btint84cmp(bigint, integer);

CREATE OPERATOR FAMILY snowflake_ops USING hash;
CREATE OPERATOR CLASS snowflake_ops DEFAULT FOR TYPE snowflake USING hash FAMILY snowflake_ops AS
    OPERATOR 1 = ,
    FUNCTION 1 snowflake_hash(snowflake),
    FUNCTION 2 snowflake_hash_extended(snowflake, bigint);
ALTER OPERATOR FAMILY snowflake_ops USING hash ADD
    OPERATOR 1 = (snowflake, bigint),
    OPERATOR 1 = (bigint, snowflake),
    OPERATOR 1 = (bigint, bigint),
    FUNCTION 1 (bigint, bigint) hashint8(bigint),
    FUNCTION 2 (bigint, bigint) hashint8extended(bigint, bigint);

-- min() and max() keep the type (and so the JSON form), and use the index like bigint's.
CREATE FUNCTION snowflake_larger(snowflake, snowflake) RETURNS snowflake LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int8larger';
COMMENT ON FUNCTION snowflake_larger(snowflake, snowflake) IS 'The larger of two snowflakes.';
CREATE FUNCTION snowflake_smaller(snowflake, snowflake) RETURNS snowflake LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int8smaller';
COMMENT ON FUNCTION snowflake_smaller(snowflake, snowflake) IS 'The smaller of two snowflakes.';
CREATE AGGREGATE max(snowflake) (SFUNC = snowflake_larger, STYPE = snowflake, COMBINEFUNC = snowflake_larger, SORTOP = >, PARALLEL = SAFE);
CREATE AGGREGATE min(snowflake) (SFUNC = snowflake_smaller, STYPE = snowflake, COMBINEFUNC = snowflake_smaller, SORTOP = <, PARALLEL = SAFE);
COMMENT ON AGGREGATE max(snowflake) IS 'Largest snowflake ID.';
COMMENT ON AGGREGATE min(snowflake) IS 'Smallest snowflake ID.';

-- The JSON form: a string (src/sql/applications.rs). to_json, to_jsonb, row_to_json, json_agg, jsonb_agg and
-- json_build_object all use this cast for snowflake values.
CREATE FUNCTION id_to_json(id bigint) RETURNS json
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'id_to_json_wrapper';
COMMENT ON FUNCTION id_to_json(bigint) IS 'An ID as a JSON string ("4000000000000000000"), exact in JavaScript; the cast from snowflake to json.';
