-- The SQL surface of an extension (psql variable ext) in the current database, one line per
-- object, in a stable order: what a user sees in \df+, \dv, \dt, \dT, \dC, \do and \dAc.
-- Used by t_upgrade.sh to compare an upgraded installation with a fresh one.
SELECT pg_describe_object(d.classid, d.objid, 0) AS object,
       CASE d.classid
       WHEN 'pg_proc'::regclass THEN (
         SELECT concat_ws(' | ', pg_get_function_arguments(p.oid), pg_get_function_result(p.oid),
                          p.provolatile, p.proisstrict, p.proparallel, p.prosecdef, p.proleakproof,
                          p.prokind, p.procost, p.prorows, p.proconfig::text, l.lanname, p.probin, md5(p.prosrc),
                          md5(coalesce(pg_get_function_sqlbody(p.oid), '')), p.proacl::text)
           FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.oid = d.objid)
       WHEN 'pg_class'::regclass THEN (
         SELECT concat_ws(' | ', c.relkind, c.relacl::text,
                  (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                                     || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
                                     || coalesce(' default ' || pg_get_expr(ad.adbin, ad.adrelid), ''),
                                     ', ' ORDER BY a.attnum)
                     FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
                    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                  (SELECT string_agg(pg_get_constraintdef(k.oid), ', ' ORDER BY k.conname)
                     FROM pg_constraint k WHERE k.conrelid = c.oid),
                  (SELECT string_agg(pg_get_indexdef(i.indexrelid), ', ' ORDER BY 1)
                     FROM pg_index i WHERE i.indrelid = c.oid),
                  (SELECT string_agg(pg_get_triggerdef(t.oid), ', ' ORDER BY 1)
                     FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal),
                  CASE WHEN c.relkind = 'v' THEN md5(pg_get_viewdef(c.oid)) END)
           FROM pg_class c WHERE c.oid = d.objid)
       WHEN 'pg_type'::regclass THEN (
         SELECT concat_ws(' | ', t.typtype, t.typlen, t.typbyval, t.typcategory, t.typispreferred,
                          t.typinput::regproc, t.typoutput::regproc, t.typreceive::regproc, t.typsend::regproc,
                          t.typalign, t.typstorage, format_type(t.typbasetype, t.typtypmod), t.typacl::text)
           FROM pg_type t WHERE t.oid = d.objid)
       WHEN 'pg_cast'::regclass THEN (
         SELECT concat_ws(' | ', c.castfunc::regprocedure, c.castcontext, c.castmethod)
           FROM pg_cast c WHERE c.oid = d.objid)
       WHEN 'pg_operator'::regclass THEN (
         SELECT concat_ws(' | ', o.oprcode::regprocedure, o.oprcom::regoperator, o.oprnegate::regoperator,
                          o.oprrest::regproc, o.oprjoin::regproc, o.oprcanmerge, o.oprcanhash)
           FROM pg_operator o WHERE o.oid = d.objid)
       WHEN 'pg_opclass'::regclass THEN (
         SELECT concat_ws(' | ', pg_describe_object('pg_opfamily'::regclass, c.opcfamily, 0),
                          format_type(c.opcintype, NULL), c.opcdefault, format_type(c.opckeytype, NULL))
           FROM pg_opclass c WHERE c.oid = d.objid)
       WHEN 'pg_opfamily'::regclass THEN (
         SELECT concat_ws(' | ',
                  (SELECT string_agg(concat(a.amopstrategy, ' ', a.amopopr::regoperator, ' ', a.amoppurpose), ', ' ORDER BY 1)
                     FROM pg_amop a WHERE a.amopfamily = d.objid),
                  (SELECT string_agg(concat(p.amprocnum, ' ', format_type(p.amproclefttype, NULL), ' ',
                                            format_type(p.amprocrighttype, NULL), ' ', p.amproc::regprocedure), ', ' ORDER BY 1)
                     FROM pg_amproc p WHERE p.amprocfamily = d.objid)))
       WHEN 'pg_foreign_server'::regclass THEN (
         SELECT concat_ws(' | ', (SELECT w.fdwname FROM pg_foreign_data_wrapper w WHERE w.oid = s.srvfdw), array_length(s.srvoptions, 1), s.srvacl::text)
           FROM pg_foreign_server s WHERE s.oid = d.objid)
       WHEN 'pg_event_trigger'::regclass THEN (
         SELECT concat_ws(' | ', e.evtevent, e.evtfoid::regprocedure, e.evtenabled, e.evttags::text)
           FROM pg_event_trigger e WHERE e.oid = d.objid)
       END AS definition,
       obj_description(d.objid, d.classid::regclass::text) AS comment
  FROM pg_depend d
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = :'ext')
   AND d.deptype = 'e'
 ORDER BY 1, 2;
