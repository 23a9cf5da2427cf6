-- What a move onto PostgreSQL 15 may leave its superuser apply worker to run of a table's
-- code (docs/security.md): PostgreSQL's own IMMUTABLE functions and the copy's own
-- functions and sequences; everything else named (snowflake_id_node.row_code,
-- untrusted_call, apply_refusal). (The moves themselves: reliability/t_hostile_owner.sh.)
\set VERBOSITY sqlstate
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
RESET client_min_messages;
CREATE ROLE apply_code_owner;
CREATE SCHEMA ac_own;
CREATE SEQUENCE ac_own.s;
CREATE SEQUENCE public.ac_victim;
CREATE FUNCTION ac_own.f(integer) RETURNS boolean LANGUAGE sql IMMUTABLE RETURN $1 > 0;
CREATE FUNCTION public.ac_g(integer) RETURNS boolean LANGUAGE sql IMMUTABLE RETURN $1 > 0;
CREATE DOMAIN public.ac_dom AS integer CHECK (VALUE > 0 AND pg_catalog.pg_notify('x', 'y') IS NULL);
CREATE DOMAIN public.ac_cast AS integer CHECK (VALUE > 0 AND pg_catalog.setval('public.ac_victim', 1) > 0);
CREATE DOMAIN public.ac_plain AS text DEFAULT 'x' CHECK (VALUE <> '');
CREATE TABLE ac_own.t (
    a integer CHECK (a > 0 AND lower('X') = 'x' AND a IN (1, 2, 3) AND coalesce(a, 0) <> greatest(a, 5)),
    b bigint DEFAULT nextval('ac_own.s'),
    c integer CHECK (ac_own.f(c)),
    d bigint DEFAULT nextval('public.ac_victim'),
    e text CHECK (e::regclass IS NOT NULL),
    f integer CHECK (public.ac_g(f)),
    g integer CHECK (CASE WHEN current_setting('is_superuser') = 'on' THEN setval('public.ac_victim', 1) > 0 ELSE true END),
    h integer GENERATED ALWAYS AS (a * 2) STORED,
    i public.ac_dom,
    j text CHECK (j::text::regclass IS NOT NULL),
    k text CHECK (k::regproc IS NOT NULL),   -- (a CoerceViaIO: regprocin, no cast function)
    l integer CHECK (l::public.ac_cast IS NOT NULL AND (ARRAY[l])[1] > 0),   -- (a cast to a domain)
    m public.ac_plain DEFAULT 'y'
);
CREATE INDEX ON ac_own.t (lower(e)) WHERE a > 1;
SELECT c.what, snowflake_id_node.untrusted_call(c.expr, ARRAY['ac_own'::regnamespace::oid]) AS calls
  FROM snowflake_id_node.row_code('ac_own.t') c ORDER BY c.what COLLATE "C", c.expr COLLATE "C";
-- A superuser's table runs its own code; another role's, its first code not allowed.
SELECT snowflake_id_node.apply_refusal('{ac_own}', snowflake_id_node.grants('{ac_own}')) AS superusers_table;
ALTER TABLE ac_own.t OWNER TO apply_code_owner;
SELECT snowflake_id_node.apply_refusal('{ac_own}', snowflake_id_node.grants('{ac_own}')) AS refused;
SET client_min_messages = warning;
DROP SCHEMA ac_own CASCADE;
DROP DOMAIN public.ac_dom, public.ac_cast, public.ac_plain;
DROP SEQUENCE public.ac_victim;
DROP FUNCTION public.ac_g(integer);
DROP ROLE apply_code_owner;
RESET client_min_messages;
