-- pg_upgrade restores an extension's members one by one, casts sorted by name, and records
-- no dependency of one cast on another (issue 19, item 3): a cast whose function needs a
-- binary coercion from or to snowflake (a function taking or returning bigint) fails to
-- restore when it comes before the cast snowflake <-> bigint, and then pg_upgrade fails.
-- So every cast of the extension with a function takes exactly the cast's source type and
-- returns exactly its target type. (reliability/pg_upgrade.sh runs pg_upgrade itself, once
-- per CI run, between two versions; this holds the cause on every version.)
CREATE EXTENSION IF NOT EXISTS snowflake_id;
SELECT count(*) > 10 AS casts_with_functions
  FROM pg_cast c JOIN pg_depend d ON d.classid = 'pg_cast'::regclass AND d.objid = c.oid
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake_id')
   AND c.castmethod = 'f';
SELECT format_type(c.castsource, NULL) AS source, format_type(c.casttarget, NULL) AS target,
       c.castfunc::regprocedure AS function, format_type(p.prorettype, NULL) AS returns
  FROM pg_cast c JOIN pg_depend d ON d.classid = 'pg_cast'::regclass AND d.objid = c.oid
  JOIN pg_proc p ON p.oid = c.castfunc
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake_id')
   AND (p.proargtypes[0] <> c.castsource OR p.prorettype <> c.casttarget)
 ORDER BY 1, 2;
