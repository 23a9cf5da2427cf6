-- Instagram's layout, the core of snowflake_id: next_id, the decoders and make_id. The
-- functions written in Rust (src/sql/instagram.rs) are declared by cargo pgrx, save next_id's
-- two column-default forms, plain fmgr functions declared here; each function's description
-- is its COMMENT here, and nowhere else. Every statement can run again (CREATE OR REPLACE,
-- COMMENT), so a migration includes this file as it is (scripts/build-sql).

CREATE OR REPLACE FUNCTION next_id(shard integer, seq regclass) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'next_id_wrapper';
COMMENT ON FUNCTION next_id(integer, regclass) IS
  'Next ID for a logical shard (0-8191) from a sequence: ms since 2011-08-24 21:07:01.721 UTC << 23 | shard << 10 | counter; never repeats, strictly increases per sequence.';

CREATE OR REPLACE FUNCTION next_id(seq regclass) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'next_id_continuing_wrapper';
COMMENT ON FUNCTION next_id(regclass) IS
  'Next ID from a shard''s sequence, for the shard of the newest ID it holds (create_shard sets it; or setval(seq, make_id(now(), shard))): next_id(shard, seq) without restating the shard.';

COMMENT ON FUNCTION id_timestamp(bigint) IS 'Time an ID was made, exact to the millisecond.';
COMMENT ON FUNCTION id_shard(bigint) IS 'Logical shard (0-8191) an ID was made for.';
COMMENT ON FUNCTION id_sequence(bigint) IS 'Per-shard counter (0-1023) of an ID within its millisecond.';
COMMENT ON FUNCTION make_id(timestamptz, integer, integer) IS
  'The ID for a time (truncated to its millisecond), shard and counter; make_id(ts) is the smallest ID of that millisecond, for ranges and partition bounds.';

CREATE OR REPLACE FUNCTION id_decode(id bigint, OUT ts timestamptz, OUT shard integer, OUT seq integer)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (@extschema@.id_timestamp(id), @extschema@.id_shard(id), @extschema@.id_sequence(id));
COMMENT ON FUNCTION id_decode(bigint) IS 'An ID taken apart: its time (exact to the millisecond), shard and counter.';
