-- The extension installs cleanly, and its SQL surface is exactly as documented:
-- names, signatures, volatility, strictness, parallel safety and a comment on each.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
SELECT p.proname, pg_get_function_arguments(p.oid) AS arguments,
       pg_get_function_result(p.oid) AS result,
       p.provolatile AS vol, p.proisstrict AS strict, p.proparallel AS par
  FROM pg_proc p
 WHERE p.proname IN ('next_id', 'id_timestamp', 'id_shard', 'id_sequence', 'id_decode', 'make_id',
                     'id_fields', 'uuid_timestamp', 'ulid_timestamp', 'objectid_timestamp')
   AND p.pronamespace = 'public'::regnamespace
 ORDER BY 1, 2;
-- Every function the extension owns has a comment, so \df+ explains it.
SELECT count(*) AS functions_without_comment
  FROM pg_depend d JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake_id')
   AND obj_description(p.oid, 'pg_proc') IS NULL;
-- No shared_preload_libraries needed.
SHOW shared_preload_libraries;
SHOW snowflake_id.max_lead;
