-- Other people's IDs: decoders and generation by layout name, the time inside UUIDs, ULIDs
-- and ObjectIDs. The functions written in Rust (src/sql/other_ids.rs) are declared by cargo
-- pgrx, save id_decode by layout, a plain fmgr function (it builds its record itself)
-- declared here; each function's description is its COMMENT here, and nowhere else. Every
-- statement can run again, so an upgrade script includes this file as it is.

CREATE OR REPLACE FUNCTION id_decode(id bigint, layout text, OUT ts timestamptz, OUT fields jsonb)
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_decode_layout';
COMMENT ON FUNCTION id_decode(bigint, text) IS 'An ID of a named layout taken apart: its time (exact to the layout''s unit) and its fields by their names in that layout.';
CREATE OR REPLACE FUNCTION id_decode(id bigint, layout text, epoch timestamptz, OUT ts timestamptz, OUT fields jsonb)
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'id_decode_layout';
COMMENT ON FUNCTION id_decode(bigint, text, timestamptz) IS 'An ID of a named layout taken apart, its time counted from a deployment''s own epoch: its time and its fields by name.';

COMMENT ON FUNCTION id_timestamp(bigint, text) IS 'Time an ID of a named layout (instagram, twitter, discord, sonyflake, pgedge, mastodon, tsid) was made, exact to the layout''s unit.';
COMMENT ON FUNCTION id_timestamp(bigint, text, timestamptz) IS 'Time an ID of a named layout was made, counting from a deployment''s own epoch (a whole millisecond) instead of the layout''s.';
COMMENT ON FUNCTION id_fields(bigint, text) IS 'The fields below an ID''s time in a named layout, as a JSON object keyed by their names in that layout (e.g. worker, process, increment).';
COMMENT ON FUNCTION next_id(integer, regclass, text) IS 'Next ID in a named layout (twitter, discord, pgedge or instagram) for a node from a sequence: the same state and guarantees as next_id(shard, seq).';
COMMENT ON FUNCTION next_id(integer, regclass, text, timestamptz) IS 'Next ID in a named layout counting time from a deployment''s own epoch (a whole millisecond), e.g. 2026-01-01 for Twitter''s layout lasts to 2095.';
COMMENT ON FUNCTION uuid_timestamp(uuid) IS 'Time a UUID of version 1 or 6 (100 ns since 1582-10-15, shown to the microsecond) or 7 (milliseconds) was made; other versions raise an error.';
COMMENT ON FUNCTION ulid_timestamp(text) IS 'Time a ULID (26 Crockford base32 characters, any case) was made, exact to the millisecond.';
COMMENT ON FUNCTION objectid_timestamp(text) IS 'Time a MongoDB ObjectID (24 hexadecimal characters) was made, exact to the second.';
