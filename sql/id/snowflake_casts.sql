-- The snowflake type's casts to other types and from smallint, and its comparisons with
-- smallint, as of 0.3.0 (made once: a later release changes them in its own
-- sql/migrations/V-objects.sql).
--
-- snowflake -> bigint is the only implicit cast from snowflake (sql/id/snowflake_type.sql): every
-- bigint function and operator accepts a snowflake and resolves to the same int8 function it
-- does for bigint. bigint also converts itself implicitly to numeric, real, double precision
-- and oid; a second such path from snowflake would make `id + id`, `sum(id)` or `abs(id)`
-- ambiguous, or resolve them to their double precision versions (preferred in the numeric
-- category), which round IDs. So mixing a snowflake with those types (`id / 2.5`,
-- `COALESCE(id, 1.5)`, `power(id, 2)`) needs `id::bigint`; pg_test/sql/050_snowflake_type.sql
-- checks that every other use of bigint resolves alike. The casts to every type bigint casts
-- to are on assignment (INSERT, UPDATE, PL/pgSQL) and explicit, by bigint's own C functions.
--
-- Every cast function takes exactly the cast's source type (bigint's C function declared
-- under snowflake): a cast whose function takes bigint needs the binary cast snowflake ->
-- bigint to exist when it is made, which pg_upgrade does not ensure: it restores an
-- extension's members one by one, casts sorted by name ("snowflake int4" before "snowflake
-- int8"), and no dependency orders one cast after another.

CREATE FUNCTION snowflake(smallint) RETURNS snowflake LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int28';
COMMENT ON FUNCTION snowflake(smallint) IS 'A smallint as a snowflake (the cast).';
CREATE CAST (smallint AS snowflake) WITH FUNCTION snowflake(smallint) AS IMPLICIT;
COMMENT ON CAST (smallint AS snowflake) IS 'A smallint as a snowflake (implicit, so that COALESCE(id, 1::smallint) stays snowflake).';
CREATE FUNCTION snowflake_to_int2(snowflake) RETURNS smallint LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int82';
COMMENT ON FUNCTION snowflake_to_int2(snowflake) IS 'The cast from snowflake to smallint (bigint''s).';
CREATE CAST (snowflake AS smallint) WITH FUNCTION snowflake_to_int2(snowflake) AS ASSIGNMENT;
COMMENT ON CAST (snowflake AS smallint) IS 'A snowflake as a smallint, by bigint''s own conversion (on assignment).';
CREATE FUNCTION snowflake_to_int4(snowflake) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int84';
COMMENT ON FUNCTION snowflake_to_int4(snowflake) IS 'The cast from snowflake to integer (bigint''s).';
CREATE CAST (snowflake AS integer) WITH FUNCTION snowflake_to_int4(snowflake) AS ASSIGNMENT;
COMMENT ON CAST (snowflake AS integer) IS 'A snowflake as an integer, by bigint''s own conversion (on assignment).';
CREATE FUNCTION snowflake_to_numeric(snowflake) RETURNS numeric LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'int8_numeric';
COMMENT ON FUNCTION snowflake_to_numeric(snowflake) IS 'The cast from snowflake to numeric (bigint''s).';
CREATE CAST (snowflake AS numeric) WITH FUNCTION snowflake_to_numeric(snowflake) AS ASSIGNMENT;
COMMENT ON CAST (snowflake AS numeric) IS 'A snowflake as a numeric, by bigint''s own conversion (on assignment: not implicit, see this file''s header).';
CREATE FUNCTION snowflake_to_float4(snowflake) RETURNS real LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'i8tof';
COMMENT ON FUNCTION snowflake_to_float4(snowflake) IS 'The cast from snowflake to real (bigint''s).';
CREATE CAST (snowflake AS real) WITH FUNCTION snowflake_to_float4(snowflake) AS ASSIGNMENT;
COMMENT ON CAST (snowflake AS real) IS 'A snowflake as a real, by bigint''s own conversion (on assignment).';
CREATE FUNCTION snowflake_to_float8(snowflake) RETURNS double precision LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'i8tod';
COMMENT ON FUNCTION snowflake_to_float8(snowflake) IS 'The cast from snowflake to double precision (bigint''s).';
CREATE CAST (snowflake AS double precision) WITH FUNCTION snowflake_to_float8(snowflake) AS ASSIGNMENT;
COMMENT ON CAST (snowflake AS double precision) IS 'A snowflake as a double precision, by bigint''s own conversion (on assignment).';
CREATE FUNCTION snowflake_to_oid(snowflake) RETURNS oid LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'i8tooid';
COMMENT ON FUNCTION snowflake_to_oid(snowflake) IS 'The cast from snowflake to oid (bigint''s).';
CREATE CAST (snowflake AS oid) WITH FUNCTION snowflake_to_oid(snowflake) AS ASSIGNMENT;
COMMENT ON CAST (snowflake AS oid) IS 'A snowflake as an oid, by bigint''s own conversion (on assignment).';
CREATE FUNCTION snowflake_to_money(snowflake) RETURNS money LANGUAGE internal STABLE STRICT PARALLEL SAFE AS 'int8_cash';
COMMENT ON FUNCTION snowflake_to_money(snowflake) IS 'The cast from snowflake to money (bigint''s).';
CREATE CAST (snowflake AS money) WITH FUNCTION snowflake_to_money(snowflake) AS ASSIGNMENT;
COMMENT ON CAST (snowflake AS money) IS 'A snowflake as money, by bigint''s own conversion (on assignment).';
CREATE FUNCTION snowflake_to_bit(snowflake, integer) RETURNS bit LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE AS 'bitfromint8';
COMMENT ON FUNCTION snowflake_to_bit(snowflake, integer) IS 'The cast from snowflake to bit(n) (bigint''s).';
CREATE CAST (snowflake AS bit) WITH FUNCTION snowflake_to_bit(snowflake, integer);
COMMENT ON CAST (snowflake AS bit) IS 'A snowflake as bit(n), by bigint''s own conversion (explicit).';


CREATE FUNCTION snowflake_to_json(snowflake) RETURNS json
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'id_to_json_wrapper';
COMMENT ON FUNCTION snowflake_to_json(snowflake) IS 'The cast from snowflake to json: id_to_json.';
CREATE CAST (snowflake AS json) WITH FUNCTION snowflake_to_json(snowflake);
COMMENT ON CAST (snowflake AS json) IS 'A snowflake as a JSON string, exact in JavaScript: what the json and jsonb builders write for it.';

-- snowflake vs smallint
CREATE FUNCTION snowflake_int2_eq(snowflake, smallint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int82eq';
COMMENT ON FUNCTION snowflake_int2_eq(snowflake, smallint) IS 'snowflake equal to smallint (bigint''s comparison).';
CREATE FUNCTION snowflake_int2_ne(snowflake, smallint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int82ne';
COMMENT ON FUNCTION snowflake_int2_ne(snowflake, smallint) IS 'snowflake not equal to smallint (bigint''s comparison).';
CREATE FUNCTION snowflake_int2_lt(snowflake, smallint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int82lt';
COMMENT ON FUNCTION snowflake_int2_lt(snowflake, smallint) IS 'snowflake less than smallint (bigint''s comparison).';
CREATE FUNCTION snowflake_int2_le(snowflake, smallint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int82le';
COMMENT ON FUNCTION snowflake_int2_le(snowflake, smallint) IS 'snowflake less than or equal to smallint (bigint''s comparison).';
CREATE FUNCTION snowflake_int2_gt(snowflake, smallint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int82gt';
COMMENT ON FUNCTION snowflake_int2_gt(snowflake, smallint) IS 'snowflake greater than smallint (bigint''s comparison).';
CREATE FUNCTION snowflake_int2_ge(snowflake, smallint) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int82ge';
COMMENT ON FUNCTION snowflake_int2_ge(snowflake, smallint) IS 'snowflake greater than or equal to smallint (bigint''s comparison).';
CREATE OPERATOR = (LEFTARG = snowflake, RIGHTARG = smallint, FUNCTION = snowflake_int2_eq, COMMUTATOR = =, NEGATOR = <>,
    RESTRICT = eqsel, JOIN = eqjoinsel, MERGES);
CREATE OPERATOR <> (LEFTARG = snowflake, RIGHTARG = smallint, FUNCTION = snowflake_int2_ne, COMMUTATOR = <>, NEGATOR = =,
    RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = snowflake, RIGHTARG = smallint, FUNCTION = snowflake_int2_lt, COMMUTATOR = >, NEGATOR = >=,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = snowflake, RIGHTARG = smallint, FUNCTION = snowflake_int2_le, COMMUTATOR = >=, NEGATOR = >,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = snowflake, RIGHTARG = smallint, FUNCTION = snowflake_int2_gt, COMMUTATOR = <, NEGATOR = <=,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = snowflake, RIGHTARG = smallint, FUNCTION = snowflake_int2_ge, COMMUTATOR = <=, NEGATOR = <,
    RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE FUNCTION snowflake_int2_cmp(snowflake, smallint) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'btint82cmp';
COMMENT ON FUNCTION snowflake_int2_cmp(snowflake, smallint) IS 'Three-way comparison of snowflake and smallint for btree (bigint''s).';

-- smallint vs snowflake
CREATE FUNCTION int2_snowflake_eq(smallint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int28eq';
COMMENT ON FUNCTION int2_snowflake_eq(smallint, snowflake) IS 'smallint equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int2_snowflake_ne(smallint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int28ne';
COMMENT ON FUNCTION int2_snowflake_ne(smallint, snowflake) IS 'smallint not equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int2_snowflake_lt(smallint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int28lt';
COMMENT ON FUNCTION int2_snowflake_lt(smallint, snowflake) IS 'smallint less than snowflake (bigint''s comparison).';
CREATE FUNCTION int2_snowflake_le(smallint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int28le';
COMMENT ON FUNCTION int2_snowflake_le(smallint, snowflake) IS 'smallint less than or equal to snowflake (bigint''s comparison).';
CREATE FUNCTION int2_snowflake_gt(smallint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int28gt';
COMMENT ON FUNCTION int2_snowflake_gt(smallint, snowflake) IS 'smallint greater than snowflake (bigint''s comparison).';
CREATE FUNCTION int2_snowflake_ge(smallint, snowflake) RETURNS boolean LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'int28ge';
COMMENT ON FUNCTION int2_snowflake_ge(smallint, snowflake) IS 'smallint greater than or equal to snowflake (bigint''s comparison).';
CREATE OPERATOR = (LEFTARG = smallint, RIGHTARG = snowflake, FUNCTION = int2_snowflake_eq, COMMUTATOR = =, NEGATOR = <>,
    RESTRICT = eqsel, JOIN = eqjoinsel, MERGES);
CREATE OPERATOR <> (LEFTARG = smallint, RIGHTARG = snowflake, FUNCTION = int2_snowflake_ne, COMMUTATOR = <>, NEGATOR = =,
    RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = smallint, RIGHTARG = snowflake, FUNCTION = int2_snowflake_lt, COMMUTATOR = >, NEGATOR = >=,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = smallint, RIGHTARG = snowflake, FUNCTION = int2_snowflake_le, COMMUTATOR = >=, NEGATOR = >,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = smallint, RIGHTARG = snowflake, FUNCTION = int2_snowflake_gt, COMMUTATOR = <, NEGATOR = <=,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = smallint, RIGHTARG = snowflake, FUNCTION = int2_snowflake_ge, COMMUTATOR = <=, NEGATOR = <,
    RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE FUNCTION int2_snowflake_cmp(smallint, snowflake) RETURNS integer LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'btint28cmp';
COMMENT ON FUNCTION int2_snowflake_cmp(smallint, snowflake) IS 'Three-way comparison of smallint and snowflake for btree (bigint''s).';

-- smallint beside snowflake, and smallint's own operators with smallint, integer and bigint,
-- as integer's above.
ALTER OPERATOR FAMILY snowflake_ops USING btree ADD
    OPERATOR 1 < (snowflake, smallint),
    OPERATOR 2 <= (snowflake, smallint),
    OPERATOR 3 = (snowflake, smallint),
    OPERATOR 4 >= (snowflake, smallint),
    OPERATOR 5 > (snowflake, smallint),
    FUNCTION 1 (snowflake, smallint) snowflake_int2_cmp(snowflake, smallint),
    OPERATOR 1 < (smallint, snowflake),
    OPERATOR 2 <= (smallint, snowflake),
    OPERATOR 3 = (smallint, snowflake),
    OPERATOR 4 >= (smallint, snowflake),
    OPERATOR 5 > (smallint, snowflake),
    FUNCTION 1 (smallint, snowflake) int2_snowflake_cmp(smallint, snowflake),
    OPERATOR 1 < (smallint, smallint), OPERATOR 2 <= (smallint, smallint), OPERATOR 3 = (smallint, smallint),
    OPERATOR 4 >= (smallint, smallint), OPERATOR 5 > (smallint, smallint),
    FUNCTION 1 (smallint, smallint) btint2cmp(smallint, smallint),
    OPERATOR 1 < (smallint, integer), OPERATOR 2 <= (smallint, integer), OPERATOR 3 = (smallint, integer),
    OPERATOR 4 >= (smallint, integer), OPERATOR 5 > (smallint, integer),
    FUNCTION 1 (smallint, integer) btint24cmp(smallint, integer),
    OPERATOR 1 < (integer, smallint), OPERATOR 2 <= (integer, smallint), OPERATOR 3 = (integer, smallint),
    OPERATOR 4 >= (integer, smallint), OPERATOR 5 > (integer, smallint),
    FUNCTION 1 (integer, smallint) btint42cmp(integer, smallint),
    OPERATOR 1 < (smallint, bigint), OPERATOR 2 <= (smallint, bigint), OPERATOR 3 = (smallint, bigint),
    OPERATOR 4 >= (smallint, bigint), OPERATOR 5 > (smallint, bigint),
    FUNCTION 1 (smallint, bigint) btint28cmp(smallint, bigint),
    OPERATOR 1 < (bigint, smallint), OPERATOR 2 <= (bigint, smallint), OPERATOR 3 = (bigint, smallint),
    OPERATOR 4 >= (bigint, smallint), OPERATOR 5 > (bigint, smallint),
    FUNCTION 1 (bigint, smallint) btint82cmp(bigint, smallint);
