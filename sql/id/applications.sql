-- IDs in applications: the text form and masks, the snowflake type's casts and operators.
-- The functions are written in Rust (src/sql/applications.rs) and declared by cargo pgrx;
-- each one's description is its COMMENT here, and nowhere else. (The snowflake type:
-- sql/id/snowflake_type.sql; convert_column: sql/installer/convert.sql.) Every statement can run again,
-- so an upgrade script includes this file as it is.

COMMENT ON FUNCTION id_to_text(bigint) IS 'The 13-character Crockford base32 text form of an ID (TSID''s alphabet); sorts like the ID.';
COMMENT ON FUNCTION id_from_text(text) IS 'The ID of a 13-character base32 text form; case-insensitive, I and L read as 1, O as 0.';
COMMENT ON FUNCTION id_mask(bigint, text) IS 'The masked public form of an ID under a key (32 hex digits): a keyed permutation of 0 to 2^63-1.';
COMMENT ON FUNCTION id_unmask(bigint, text) IS 'The ID a masked public ID stands for, under the key that masked it.';
COMMENT ON FUNCTION id_mask(bigint) IS 'The masked public form of an ID under the server''s key, read from the file snowflake_id.mask_key_file names.';
COMMENT ON FUNCTION id_unmask(bigint) IS 'The ID a masked public ID stands for, under the server''s key, read from the file snowflake_id.mask_key_file names.';

-- The snowflake type's casts and operators (sql/id/snowflake_type.sql makes them; the casts of
-- sql/id/snowflake_casts.sql are described there).
COMMENT ON CAST (snowflake AS bigint) IS 'A snowflake as a bigint, the same 8 bytes (implicit).';
COMMENT ON CAST (bigint AS snowflake) IS 'A bigint as a snowflake, the same 8 bytes (on assignment: INSERT, UPDATE, DEFAULT next_id(...)).';
COMMENT ON CAST (integer AS snowflake) IS 'An integer as a snowflake (implicit, so that COALESCE(id, 0) stays snowflake).';
-- Each operator says what its function says ("snowflake equal to bigint (bigint's
-- comparison)"): the description is written once, on the function.
DO $$
DECLARE
    op oid;
BEGIN
    FOR op IN SELECT d.objid FROM pg_catalog.pg_depend d
               WHERE d.classid = 'pg_catalog.pg_operator'::regclass
                 AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.deptype = 'e'
                 AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'snowflake_id')
    LOOP
        EXECUTE format('COMMENT ON OPERATOR %s IS %L', op::regoperator,
                       obj_description((SELECT o.oprcode FROM pg_catalog.pg_operator o WHERE o.oid = op), 'pg_proc'));
    END LOOP;
END
$$;
