-- The SQL surface of the snowflake_id extension in the current database, one line per
-- object, in a stable order: what a user sees in \df+, \dv, \dt and \dT. Used by
-- t_upgrade.sh to compare an upgraded installation with a fresh one.
SELECT pg_describe_object(d.classid, d.objid, 0) AS object,
       CASE WHEN d.classid = 'pg_proc'::regclass THEN (
         SELECT concat_ws(' | ', pg_get_function_arguments(p.oid), pg_get_function_result(p.oid),
                          p.provolatile, p.proisstrict, p.proparallel, p.prosecdef, p.proleakproof,
                          p.prokind, p.proconfig::text, l.lanname, p.probin, md5(p.prosrc),
                          md5(coalesce(pg_get_function_sqlbody(p.oid), '')), p.proacl::text)
           FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.oid = d.objid)
       WHEN d.classid = 'pg_class'::regclass THEN (
         SELECT concat_ws(' | ', c.relkind, c.relacl::text,
                  (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                                     || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
                                     || coalesce(' default ' || pg_get_expr(ad.adbin, ad.adrelid), ''),
                                     ', ' ORDER BY a.attnum)
                     FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
                    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                  (SELECT string_agg(pg_get_constraintdef(k.oid), ', ' ORDER BY k.conname)
                     FROM pg_constraint k WHERE k.conrelid = c.oid),
                  CASE WHEN c.relkind = 'v' THEN md5(pg_get_viewdef(c.oid)) END)
           FROM pg_class c WHERE c.oid = d.objid)
       END AS definition,
       obj_description(d.objid, d.classid::regclass::text) AS comment
  FROM pg_depend d
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake_id')
   AND d.deptype = 'e'
 ORDER BY 1;
