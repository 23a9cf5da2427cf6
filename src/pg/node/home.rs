//! Whether a database is safe for the router's superuser sessions: the one check every
//! connection the router opens passes before anything of that database is called, and the
//! background worker before its first step.
//!
//! The router's sessions run as a superuser and call the extension's functions by name
//! (`snowflake_id_node.*`, `snowflake_id_router.*`). A name proves nothing that another role
//! can make: the owner of a schema that holds the extension (`public`, which PostgreSQL 15
//! gives the database's owner) may drop it with everything in it (`DROP SCHEMA … CASCADE`
//! drops the extension) and make a schema and functions of the same names; a role that may
//! create objects in one may put in it an overload or an operator that a call resolves to.
//! So the check is of who can change those schemas, not of what they hold now: each schema
//! of snowflake_id and snowflake_id_router (its own and those they made) is owned by a
//! superuser, no other role is a member of its owner, and none but superusers may create in
//! it. Only a superuser can make that untrue, which is why a check at connection time holds
//! for the connection's life. Everything in it is pg_catalog's: nothing of the database is
//! called before it passes. The session's search_path is pinned (remote::SESSION_OPTIONS, the
//! worker's first statement), and every name here is qualified all the same.

/// One row, one text column: `absent` when the database has no schema snowflake_id_node made
/// by the extension snowflake_id, `ok` when every schema of the extensions can be changed by
/// superusers only, else who else can, and how.
pub const CHECK: &str = "
WITH ext AS (
  SELECT e.oid, e.extnamespace FROM pg_catalog.pg_extension e
   WHERE e.extname OPERATOR(pg_catalog.=) ANY ('{snowflake_id,snowflake_id_router}'::pg_catalog.name[])
), member AS (
  SELECT d.objid FROM pg_catalog.pg_depend d JOIN ext ON ext.oid OPERATOR(pg_catalog.=) d.refobjid
   WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
     AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
     AND d.deptype OPERATOR(pg_catalog.=) 'e'
), s AS (
  SELECT n.oid, n.nspname, n.nspowner,
         EXISTS (SELECT FROM pg_catalog.aclexplode(n.nspacl) a
                  WHERE a.grantee OPERATOR(pg_catalog.=) 0 AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE') AS open
    FROM pg_catalog.pg_namespace n
   WHERE n.oid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT extnamespace FROM ext UNION ALL SELECT objid FROM member))
), other AS (
  SELECT s.nspname, 'every role (PUBLIC) can create objects in schema ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(s.nspname) AS what
    FROM s WHERE s.open
  UNION ALL
  SELECT s.nspname, pg_catalog.format(CASE WHEN pg_catalog.pg_has_role(r.oid, s.nspowner, 'MEMBER')
                                           THEN 'role %I can drop schema %I' ELSE 'role %I can create objects in schema %I' END,
                                      r.rolname, s.nspname)
    FROM s, pg_catalog.pg_roles r
   WHERE NOT r.rolsuper AND r.rolname OPERATOR(pg_catalog.<>) 'pg_database_owner'
     AND (pg_catalog.pg_has_role(r.oid, s.nspowner, 'MEMBER')
          OR (NOT s.open AND pg_catalog.has_schema_privilege(r.oid, s.oid, 'CREATE')))
)
SELECT CASE WHEN NOT EXISTS (SELECT FROM member JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) member.objid
                              WHERE n.nspname OPERATOR(pg_catalog.=) 'snowflake_id_node') THEN 'absent'
            ELSE COALESCE((SELECT pg_catalog.left(pg_catalog.string_agg(what, ', ' ORDER BY nspname, what), 2000)
                                        FROM other), 'ok') END";

/// Why the router uses nothing of `peer`'s database, given `CHECK`'s answer there; None if
/// it may.
pub fn refusal(peer: &str, verdict: Option<&str>) -> Option<(String, String, String)> {
    match verdict {
        Some("ok") => None,
        None | Some("absent") => Some((
            format!("{peer} does not run snowflake_id 0.3.0 or later"),
            "Its database has no schema snowflake_id_node made by the extension snowflake_id.".into(),
            "There: ALTER EXTENSION snowflake_id UPDATE (or CREATE EXTENSION snowflake_id).".into(),
        )),
        Some(who) => Some((
            format!("{peer}: roles that are not superusers can change the schemas of snowflake_id there"),
            format!(
                "{who}. The router's sessions there are a superuser's and call the extension's functions \
                 by name: such a role could drop the extension (DROP SCHEMA ... CASCADE) and make \
                 functions of those names, or add ones a call would resolve to, for them to run."
            ),
            "There, as a superuser: give the schema to a superuser (ALTER SCHEMA public OWNER TO \
             postgres: other roles keep what was granted to them) and keep CREATE on it to superusers \
             (REVOKE CREATE ON SCHEMA public FROM PUBLIC); or install snowflake_id in a schema of its \
             own that only a superuser owns."
                .into(),
        )),
    }
}
