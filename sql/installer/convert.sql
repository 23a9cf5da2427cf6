-- convert_column: adopting a table whose bigint key comes from bigserial or an identity.
--
-- In place and in one transaction: the table is locked ACCESS EXCLUSIVE (as ALTER TABLE
-- would), the sequence is moved up to the largest value the column holds (rows inserted
-- with explicit IDs can be above the sequence's last_value), and the column's default
-- becomes next_id(shard, <sequence>), whose IDs are all above the sequence's newest value.
-- The column keeps its type, values, constraints and the foreign keys pointing at it.
--
-- A bigserial column keeps its sequence (still OWNED BY the column). An identity column's
-- sequence is part of the identity and goes with it (DROP IDENTITY), so a new sequence of
-- the same name takes its place, OWNED BY the column; roles that may INSERT into the table
-- get USAGE on it, as next_id needs (an identity needed no grant). ALWAYS becomes an
-- ordinary default: an explicit ID is then accepted.
--
-- Runs with the caller's rights (SECURITY INVOKER): only the table's owner can convert it.
-- search_path is pinned; every name is quoted.
CREATE OR REPLACE FUNCTION convert_column(tbl regclass, col name, shard integer) RETURNS regclass
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel record;
    att record;
    seq regclass;
    dep "char";
    others text;
    newest bigint;
    highest bigint;
BEGIN
    -- A shard outside the layout: make_id's own error (22003, naming the valid range).
    PERFORM @extschema@.make_id(clock_timestamp(), shard, 0);
    SELECT c.relkind, c.relowner, c.relacl INTO rel FROM pg_class c WHERE c.oid = tbl;
    IF rel.relkind IS DISTINCT FROM 'r' THEN
        RAISE EXCEPTION '% is not an ordinary table', tbl
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'convert_column converts a column of a table (not a view, sequence, partitioned table or foreign table).';
    END IF;
    IF NOT pg_has_role(current_user, rel.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', tbl USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- No insert may slip in between reading the largest ID and the new default.
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);

    SELECT a.attnum, a.atttypid, a.attidentity INTO att
      FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column % of table % does not exist', quote_ident(col), tbl
            USING ERRCODE = 'undefined_column';
    END IF;
    IF att.atttypid NOT IN ('bigint'::regtype, '@extschema@.snowflake'::regtype) THEN
        RAISE EXCEPTION 'column % of table % is %, not bigint: IDs need 64 bits',
                quote_ident(col), tbl, format_type(att.atttypid, NULL)
            USING ERRCODE = 'datatype_mismatch',
                  HINT = format('ALTER TABLE %s ALTER COLUMN %I TYPE bigint first (it rewrites the table and the columns of foreign keys pointing at it must follow).', tbl, col);
    END IF;
    -- The sequence the column owns: 'a' for serial/bigserial (OWNED BY), 'i' for an identity.
    SELECT d.objid::regclass, d.deptype INTO seq, dep
      FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
     WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
       AND d.refobjid = tbl AND d.refobjsubid = att.attnum AND d.deptype IN ('a', 'i');
    IF seq IS NULL THEN
        RAISE EXCEPTION 'column % of table % has no sequence of its own', quote_ident(col), tbl
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'convert_column converts a bigserial or identity column (one whose sequence is OWNED BY it).';
    END IF;
    -- Another column's default drawing from the same sequence would keep drawing small
    -- numbers from a sequence that now holds IDs, or collide with them.
    SELECT string_agg(format('%s.%I', ad.adrelid::regclass, a.attname), ', ' ORDER BY 1) INTO others
      FROM pg_depend d
      JOIN pg_attrdef ad ON d.classid = 'pg_attrdef'::regclass AND ad.oid = d.objid
      JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
     WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = seq
       AND (ad.adrelid, ad.adnum) <> (tbl, att.attnum);
    IF others IS NOT NULL THEN
        RAISE EXCEPTION 'sequence % is shared: the default of % also uses it', seq, others
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Give the other columns their own sequence first.';
    END IF;

    EXECUTE format('SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM %s', seq) INTO newest;
    EXECUTE format('SELECT max(%I) FROM %s', col, tbl) INTO highest;
    highest := greatest(newest, highest, 0);
    -- Refuse a table that could take no insert afterwards: no ID of this shard above it (the
    -- last ID of the shard: the horizon's time and the largest counter, those of the largest ID).
    IF highest >= @extschema@.make_id(@extschema@.id_timestamp(9223372036854775807), shard,
                                      @extschema@.id_sequence(9223372036854775807)) THEN
        RAISE EXCEPTION 'column % of table % holds %: no snowflake ID of shard % is above it', quote_ident(col), tbl, highest, shard
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;

    IF dep = 'i' THEN
        seq := snowflake_id_internal.identity_to_sequence(tbl, col, seq, rel.relowner::regrole, rel.relacl);
    ELSE
        -- A serial's sequence may be AS integer (serial widened to bigint): IDs need bigint.
        EXECUTE format('ALTER SEQUENCE %s AS bigint MAXVALUE 9223372036854775807 NO CYCLE', seq);
    END IF;
    IF highest > 0 THEN
        PERFORM setval(seq, highest, true);
    END IF;
    EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %I.next_id(%s, %L::regclass)',
                   tbl, col, '@extschema@', shard, seq);
    RETURN seq;
END
$$;
COMMENT ON FUNCTION convert_column(regclass, name, integer) IS
  'Turns a bigserial or identity key (bigint, or changed to snowflake) into DEFAULT next_id(shard, its sequence), in place; every new ID is above every existing one. Returns the sequence.';

-- convert_column's identity column made a bigserial: the identity dropped, a sequence of
-- the same name made in its place, owned by the table's owner and OWNED BY the column, usable
-- by whoever may INSERT (on the table, acl, or on some of its columns). Returns it.
CREATE OR REPLACE FUNCTION snowflake_id_internal.identity_to_sequence(tbl regclass, col name, seq regclass,
                                                                      owner regrole, acl aclitem[])
RETURNS regclass
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    seq_schema name;
    seq_name name;
    grantee text;
BEGIN
    SELECT n.nspname, c.relname INTO seq_schema, seq_name
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = seq;
    EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', tbl, col);
    -- Owned by the table's owner (OWNED BY requires it), whoever converts.
    EXECUTE format('CREATE SEQUENCE %I.%I AS bigint', seq_schema, seq_name);
    seq := format('%I.%I', seq_schema, seq_name)::regclass;
    EXECUTE format('ALTER SEQUENCE %s OWNER TO %s', seq, owner);
    EXECUTE format('ALTER SEQUENCE %s OWNED BY %s.%I', seq, tbl, col);
    -- Whoever may INSERT: on the table, or on some of its columns.
    FOR grantee IN
        SELECT DISTINCT CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END
          FROM (SELECT (aclexplode(acl)).*
                UNION ALL
                SELECT (aclexplode(a.attacl)).* FROM pg_attribute a
                 WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped AND a.attacl IS NOT NULL) x
          LEFT JOIN pg_roles r ON r.oid = x.grantee
         WHERE x.privilege_type = 'INSERT' AND x.grantee <> owner::oid
    LOOP
        EXECUTE format('GRANT USAGE ON SEQUENCE %s TO %s', seq, grantee);
    END LOOP;
    RETURN seq;
END
$$;
COMMENT ON FUNCTION snowflake_id_internal.identity_to_sequence(regclass, name, regclass, regrole, aclitem[]) IS
  'convert_column''s identity column given a sequence of its own in place of its identity.';
