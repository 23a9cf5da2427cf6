-- snowflake_id 0.1.0 -> 0.2.0, in place: ALTER EXTENSION snowflake_id UPDATE TO '0.2.0'.
--
-- Each section below carries one part of 0.2.0 to a 0.1.0 installation, in the same words as
-- the fresh install (snowflake_id--0.2.0.sql, generated from src/ by cargo pgrx). The upgrade
-- test (reliability/t_upgrade.sh) installs 0.1.0 as released, runs this script and requires
-- the result to be identical to a fresh 0.2.0 install: every function's signature,
-- volatility, strictness, parallel safety, settings, body and comment, every table and view.
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.2.0'" to load this file. \quit

-- == The installer (create_shard and friends): hardened, shard templates ==

-- == Layouts: other people's IDs ==
-- Decoders taking a layout name, next_id in a named layout, UUID/ULID/ObjectID times
-- (src/sql_layouts.rs), exactly as cargo pgrx generates them.
CREATE  FUNCTION "id_fields"(
	"id" bigint, /* i64 */
	"layout" TEXT /* & str */
) RETURNS jsonb /* Jsonb */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_fields_wrapper';

CREATE  FUNCTION "id_timestamp"(
	"id" bigint, /* i64 */
	"layout" TEXT /* & str */
) RETURNS timestamp with time zone /* TimestampWithTimeZone */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_timestamp_in_wrapper';

CREATE  FUNCTION "id_timestamp"(
	"id" bigint, /* i64 */
	"layout" TEXT, /* & str */
	"epoch" timestamp with time zone /* TimestampWithTimeZone */
) RETURNS timestamp with time zone /* TimestampWithTimeZone */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'id_timestamp_in_epoch_wrapper';

CREATE  FUNCTION "next_id"(
	"node" INT, /* i32 */
	"seq" regclass, /* Regclass */
	"layout" TEXT /* & str */
) RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'next_id_in_wrapper';

CREATE  FUNCTION "next_id"(
	"node" INT, /* i32 */
	"seq" regclass, /* Regclass */
	"layout" TEXT, /* & str */
	"epoch" timestamp with time zone /* TimestampWithTimeZone */
) RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'next_id_in_epoch_wrapper';

CREATE  FUNCTION "uuid_timestamp"(
	"id" uuid /* pgrx :: Uuid */
) RETURNS timestamp with time zone /* TimestampWithTimeZone */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'uuid_timestamp_wrapper';

CREATE  FUNCTION "ulid_timestamp"(
	"ulid" TEXT /* & str */
) RETURNS timestamp with time zone /* TimestampWithTimeZone */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'ulid_timestamp_wrapper';

CREATE  FUNCTION "objectid_timestamp"(
	"objectid" TEXT /* & str */
) RETURNS timestamp with time zone /* TimestampWithTimeZone */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'objectid_timestamp_wrapper';

CREATE FUNCTION id_decode(id bigint, layout text, OUT ts timestamptz, OUT fields jsonb)
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_decode_layout';
CREATE FUNCTION id_decode(id bigint, layout text, epoch timestamptz, OUT ts timestamptz, OUT fields jsonb)
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_decode_layout';
COMMENT ON FUNCTION id_timestamp(bigint, text) IS 'Time an ID of a named layout (instagram, twitter, discord, sonyflake, pgedge, mastodon, tsid) was made, exact to the layout''s unit.';
COMMENT ON FUNCTION id_timestamp(bigint, text, timestamptz) IS 'Time an ID of a named layout was made, counting from a deployment''s own epoch (a whole millisecond) instead of the layout''s.';
COMMENT ON FUNCTION id_fields(bigint, text) IS 'The fields below an ID''s time in a named layout, as a JSON object keyed by their names in that layout (e.g. worker, process, increment).';
COMMENT ON FUNCTION id_decode(bigint, text) IS 'An ID of a named layout taken apart: its time (exact to the layout''s unit) and its fields by their names in that layout.';
COMMENT ON FUNCTION id_decode(bigint, text, timestamptz) IS 'An ID of a named layout taken apart, its time counted from a deployment''s own epoch: its time and its fields by name.';
COMMENT ON FUNCTION next_id(integer, regclass, text) IS 'Next ID in a named layout (twitter, discord, pgedge or instagram) for a node from a sequence: the same state and guarantees as next_id(shard, seq).';
COMMENT ON FUNCTION next_id(integer, regclass, text, timestamptz) IS 'Next ID in a named layout counting time from a deployment''s own epoch (a whole millisecond), e.g. 2026-01-01 for Twitter''s layout lasts to 2095.';
COMMENT ON FUNCTION uuid_timestamp(uuid) IS 'Time a UUID of version 1 or 6 (100 ns since 1582-10-15, shown to the microsecond) or 7 (milliseconds) was made; other versions raise an error.';
COMMENT ON FUNCTION ulid_timestamp(text) IS 'Time a ULID (26 Crockford base32 characters, any case) was made, exact to the millisecond.';
COMMENT ON FUNCTION objectid_timestamp(text) IS 'Time a MongoDB ObjectID (24 hexadecimal characters) was made, exact to the second.';

-- == Applications: text form, masks, JSON, adopting tables ==

-- == Platform ==
