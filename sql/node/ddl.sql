-- The node side of alter_shards (snowflake_id_router): one statement applied to the
-- template schema and to every shard's schema of this node in one transaction, so the node
-- is all-old or all-new, and recorded in that transaction under the router's key for the
-- change, so that a run resumed after an interruption knows this node is done.
--
-- The statement is the router's text with %I standing for the schema (quoted, as format()
-- quotes it), each a name standing alone, and %% for a percent sign; no other % is accepted.
-- It runs with search_path = pg_catalog, pg_temp: names outside pg_catalog are written
-- qualified (%I.posts). A node with a move record refuses it (no_moves_here).

-- The statement for one schema, parsed (not run) by PostgreSQL's parser: its command tag,
-- or an error when it is not exactly one schema change that can run in a transaction block
-- and runs no query (CREATE TABLE AS, SELECT INTO and materialized views are refused).
CREATE OR REPLACE FUNCTION snowflake_id_node.ddl_statement(ddl text) RETURNS text
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ddl_statement_wrapper';
COMMENT ON FUNCTION snowflake_id_node.ddl_statement(text) IS
  'Command tag of a statement alter_shards may run on every shard (one schema change that can run in a transaction block); an error otherwise.';

-- The template's command tag, as every shard's statement has it: each %I a name standing
-- alone (PostgreSQL's scanner finds a name exactly there, nothing joined to it: in a string
-- constant, a dollar quote or a comment a schema's name holding a quote would end it), %%
-- a percent sign and no other %, and, with a name in each place, one schema change that
-- runs in a transaction block and runs no query (ddl_statement's rules); an error otherwise.
CREATE OR REPLACE FUNCTION snowflake_id_node.ddl_template(ddl text) RETURNS text
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ddl_template_wrapper';
COMMENT ON FUNCTION snowflake_id_node.ddl_template(text) IS
  'Command tag of an alter_shards template (%I for the schema, each a name standing alone; %% a percent sign); an error otherwise.';

-- The statement for one schema: %I replaced by the schema's name, quoted, after the template
-- is checked (ddl_template), and parsed again as this schema's statement: the same one
-- statement, the same command tag, whatever the name.
CREATE OR REPLACE FUNCTION snowflake_id_node.ddl_for(ddl text, schema_name text) RETURNS text
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tag text := snowflake_id_node.ddl_template(ddl);
    n integer := (SELECT count(*) FROM regexp_matches(ddl, '%[%I]', 'g') m WHERE m[1] = '%I');
    statement text;
BEGIN
    -- (the schemas themselves are the catalog's: drop_shard drops a shard, with its record)
    IF tag IN ('CREATE SCHEMA', 'ALTER SCHEMA', 'DROP SCHEMA') THEN
        RAISE EXCEPTION 'alter_shards changes what the shards'' schemas hold, not the schemas: % refused', tag
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'drop_shard drops a shard (its schema and its record); a schema''s privileges are changed with GRANT and REVOKE.';
    END IF;
    statement := format(ddl, VARIADIC array_fill(schema_name, ARRAY[n]));
    IF snowflake_id_node.ddl_statement(statement) IS DISTINCT FROM tag THEN
        RAISE EXCEPTION 'alter_shards: the statement for schema % is not the template''s %', quote_ident(schema_name), tag
            USING ERRCODE = 'syntax_error';
    END IF;
    RETURN statement;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.ddl_for(text, text) IS
  'An alter_shards statement for one schema: %I becomes the schema''s name, quoted; %% a percent sign; checked to be the template''s statement.';


-- The room a change needs in the lock table: every schema's objects stay locked until the
-- node's one transaction commits. per_schema locks were counted on the template; NULL
-- when they fit, else the error to raise (53400) with the max_locks_per_transaction
-- that would fit them.
CREATE OR REPLACE FUNCTION snowflake_id_node.lock_room(per_schema integer, schemas integer) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
AS $$
DECLARE
    t record;
    needed bigint := per_schema::bigint * schemas;
BEGIN
    SELECT * INTO t FROM snowflake_id_node.lock_table();   -- (sql/node/node.sql)
    IF needed <= t.capacity - t.in_use THEN
        RETURN NULL;
    END IF;
    RETURN format('the change takes about %s locks here (%s per schema, %s schemas) in one transaction, and the lock table has room for %s more (max_locks_per_transaction = %s, for %s processes; %s in use)',
        needed, per_schema, schemas, t.capacity - t.in_use, current_setting('max_locks_per_transaction'), t.processes, t.in_use)
        || format(E'\nHINT: Set max_locks_per_transaction to at least %s on this node and restart it.',
                  ceil((needed + t.in_use) * 1.2 / t.processes));
END
$$;
COMMENT ON FUNCTION snowflake_id_node.lock_room(integer, integer) IS
  'NULL when a change taking per_schema locks on each of schemas fits in the lock table; otherwise why not.';

-- The role a schema change runs as in a schema: the owner of its tables, sequences and
-- views, under restricted-operation rules (snowflake_id_node.as_owner). A change re-checks
-- constraints, rebuilds indexes and fills defaults: what the tables' owner defined runs,
-- and must not run as the router's superuser. Run as that owner, the change can do what
-- the owner could do by hand, and what it runs has the owner's rights. A schema whose
-- relations several roles own, one of them not a superuser, is refused (42501): no one role
-- runs the change safely there. A schema without relations: its owner. And the statement
-- names the schema's objects, which PostgreSQL resolves among all the schema holds (a
-- function of a closer argument type than the one meant): everything there, and whoever
-- may create there or owns the schema, must be that role's or a superuser's (42501,
-- naming each that is not), as create_shard requires of a template.
CREATE OR REPLACE FUNCTION snowflake_id_node.change_role(schema_name text) RETURNS oid
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    nsp oid := to_regnamespace(quote_ident(schema_name));
    owners oid[];
    runner oid;
    others text;
BEGIN
    SELECT array_agg(DISTINCT c.relowner ORDER BY c.relowner) INTO owners
      FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
     WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = nsp AND d.classid = 'pg_class'::regclass
       AND d.deptype = 'n' AND c.relkind IN ('r', 'p', 'S', 'v', 'm', 'f');
    IF owners IS NULL THEN
        runner := (SELECT n.nspowner FROM pg_namespace n WHERE n.oid = nsp);
    ELSIF cardinality(owners) = 1 THEN
        runner := owners[1];
    ELSIF EXISTS (SELECT FROM unnest(owners) o WHERE NOT snowflake_id_node.made_by_superuser(o)) THEN
        RAISE EXCEPTION 'the relations of schema % belong to several roles (%): a schema change runs as the owner of a shard''s tables',
            quote_ident(schema_name), (SELECT string_agg(o::regrole::text, ', ') FROM unnest(owners) o)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Give the schema''s tables one owner (ALTER TABLE ... OWNER TO), then call alter_shards again.';
    ELSE
        runner := (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user);
    END IF;
    others := snowflake_id_internal.untrusted_in(nsp, runner);
    IF others IS NOT NULL THEN
        RAISE EXCEPTION 'schema % holds what another role than %, who a schema change runs as there, may change: %',
            quote_ident(schema_name), runner::regrole, others
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Give the schema and what it holds to that role or drop the others'' objects, and revoke CREATE on it from other roles; then call alter_shards again.';
    END IF;
    RETURN runner;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.change_role(text) IS
  'The role alter_shards runs a change as in a schema: its relations'' one owner (42501 for several, one not a superuser, or for anything in the schema of another role).';

-- A schema change never reaches a shard that a move holds on this node: its sealed copy
-- (hidden; the move drops it only while its definition is the one sealed), its incoming
-- copy (hidden; made from the template and compared at the seal) or its source while it is
-- copied (the seal would find it changed and undo the move). Skipping those would leave a
-- shard without the change once its move completes, on a node recorded as having it; so
-- while this node has a move record, whoever's, the change is refused (55000): the move is
-- completed or undone first, then the change called again. The move table is held (SHARE)
-- to the end of the change's transaction: no move records a step here meanwhile (its step
-- waits, bounded by its own lock_timeout). Waits at most the transaction's lock_timeout.
CREATE OR REPLACE FUNCTION snowflake_id_node.no_moves_here() RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    held text;
BEGIN
    LOCK TABLE snowflake_id_node.move IN SHARE MODE;
    SELECT string_agg(format('move %s (%s, %s) of shard(s) %s', m.key, m.role, m.state, array_to_string(m.shards, ', ')),
                      '; ' ORDER BY m.key)
      INTO held FROM (SELECT * FROM snowflake_id_node.move x ORDER BY x.key LIMIT 3) m;
    IF held IS NOT NULL THEN
        RAISE EXCEPTION 'this node has shards in a move: %', held
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'A schema change must not reach a move''s sealed or incoming copy, nor a shard being copied.',
                  HINT = 'Complete or undo the move first (SELECT * FROM repair_moves() on its router once its mover is gone), then call alter_shards again.';
    END IF;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.no_moves_here() IS
  'Refuses (55000) a schema change on this node while it has a move record; holds the move table (SHARE) to the end of the transaction.';

-- The statement ddl (for schema_name) run as change_role(schema_name).
CREATE OR REPLACE FUNCTION snowflake_id_node.change_schema(ddl text, schema_name text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_node.as_owner(snowflake_id_node.change_role(schema_name), snowflake_id_node.ddl_for(ddl, schema_name));
END
$$;
COMMENT ON FUNCTION snowflake_id_node.change_schema(text, text) IS
  'Runs alter_shards'' statement on schema_name as the owner of its tables, under restricted-operation rules.';

-- The template, as a change tried on it left it, still one create_shard copies (and a move's
-- copy is made from): create_shard's own refusal otherwise (0A000, 42809; 42501 for code of
-- a role the template's owner does not trust), read and judged as the role the change runs
-- as there, the one who makes its shards (a CHECK calling a function of the template, whose
-- copies could not refer to the shard's, or one of another role's).
CREATE OR REPLACE FUNCTION snowflake_id_node.template_copyable(template text) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    st text;
    msg text;
BEGIN
    PERFORM snowflake_id_node.as_owner(snowflake_id_node.change_role(template), format(
        'SELECT ''checked''::pg_catalog.text FROM (SELECT snowflake_id_internal.check_template(%L,
             (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(r)), ''[]''::pg_catalog.jsonb)
                FROM snowflake_id_internal.template_read(%s::pg_catalog.oid) r)) OFFSET 0) c',
        template, to_regnamespace(quote_ident(template))::oid));
EXCEPTION WHEN feature_not_supported OR wrong_object_type OR insufficient_privilege THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
    RAISE EXCEPTION 'alter_shards: after this change, create_shard and moves would refuse the template: %', msg
        USING ERRCODE = st, HINT = 'Make such objects in each shard by hand, or leave them out of the template.';
END
$$;
COMMENT ON FUNCTION snowflake_id_node.template_copyable(text) IS
  'alter_shards'' check that a changed template is still one create_shard copies, as the role the change runs as (0A000, 42809, 42501 otherwise).';

-- Up front, on every node before any applies: the change is tried on the template and
-- undone, which checks it here (it parses, its objects exist, it is allowed) and counts
-- the locks it takes per schema. 'applied' when this node has the change already, 'ready'
-- when it can take it; an error (the change's own, or 53400) otherwise.
CREATE OR REPLACE FUNCTION snowflake_id_node.schema_change_check(key text, ddl text, template text, lock_timeout text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
AS $$
DECLARE
    per_schema integer;
    too_many text;
BEGIN
    PERFORM set_config('lock_timeout', lock_timeout, true);
    -- One change at a time on a node: a session of an interrupted run may still be applying.
    PERFORM snowflake_id_node.own_lock(hashtext('snowflake_id_node.schema_change'), 0, false, false, true);
    IF EXISTS (SELECT FROM snowflake_id_node.schema_change c WHERE c.key = schema_change_check.key) THEN
        RETURN 'applied';
    END IF;
    PERFORM snowflake_id_node.ddl_for(ddl, template);
    PERFORM snowflake_id_node.no_moves_here();
    IF to_regnamespace(quote_ident(template)) IS NULL THEN
        RAISE EXCEPTION 'template schema % does not exist', quote_ident(template) USING ERRCODE = 'invalid_schema_name';
    END IF;
    BEGIN
        per_schema := (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid());
        PERFORM snowflake_id_node.change_schema(ddl, template);
        per_schema := (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid()) - per_schema;
        PERFORM snowflake_id_node.template_copyable(template);
        RAISE EXCEPTION USING ERRCODE = 'SFDRY';  -- undoes the try
    EXCEPTION WHEN SQLSTATE 'SFDRY' THEN
    END;
    too_many := snowflake_id_node.lock_room(greatest(per_schema, 1), (SELECT count(*) FROM @extschema@.snowflake_id_shard)::integer + 1);
    IF too_many IS NOT NULL THEN
        RAISE EXCEPTION '%', split_part(too_many, E'\nHINT: ', 1)
            USING ERRCODE = 'configuration_limit_exceeded', HINT = split_part(too_many, E'\nHINT: ', 2);
    END IF;
    RETURN 'ready';
END
$$;
COMMENT ON FUNCTION snowflake_id_node.schema_change_check(text, text, text, text) IS
  'alter_shards'' check before any node changes: tries the change on the template and undoes it, checks the lock table''s room; applied, ready, or an error.';

-- The schemas of this node's shards that alter_shards changes for template, in shard order:
-- those made from it (snowflake_id_shard.template), and those whose template is not known
-- (made without one, or before 0.4.0) whose tables are the template's (the same
-- fingerprint), which are recorded as made from it. A shard of another template, or of none
-- whose tables differ, is left as it is (template_status shows it).
CREATE OR REPLACE FUNCTION snowflake_id_node.template_shards(template text) RETURNS text[]
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tpl text[] := snowflake_id_node.fingerprint(template);
BEGIN
    UPDATE @extschema@.snowflake_id_shard s SET template = template_shards.template
     WHERE s.template IS NULL AND snowflake_id_node.fingerprint(s.schema_name) = tpl;
    RETURN ARRAY(SELECT s.schema_name FROM @extschema@.snowflake_id_shard s
                  WHERE s.template = template_shards.template ORDER BY s.shard);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.template_shards(text) IS
  'The shards alter_shards changes for a template: those made from it, and those of no known template with its tables (recorded so).';

-- The change itself: template, then every shard's schema (in shard order), one
-- transaction, recorded in it. Returns the number of schemas changed (that of the record,
-- when this node had the change already). Each statement waits at most lock_timeout for
-- its locks; writers to a shard wait until the node's transaction commits.
CREATE OR REPLACE FUNCTION snowflake_id_node.schema_change_apply(key text, ddl text, template text, lock_timeout text) RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on
AS $$
DECLARE
    done integer;
    per_schema integer;
    too_many text;
    schemas integer := 1;
    shards text[];        -- the template's shards' schemas
    at text := template;  -- the schema being changed
    st text;
    msg text;
    det text;
    hnt text;
BEGIN
    PERFORM set_config('lock_timeout', lock_timeout, true);
    PERFORM snowflake_id_node.own_lock(hashtext('snowflake_id_node.schema_change'), 0, false, false, true);
    SELECT c.schemas INTO done FROM snowflake_id_node.schema_change c WHERE c.key = schema_change_apply.key;
    IF FOUND THEN
        RETURN done;
    END IF;
    PERFORM snowflake_id_node.ddl_for(ddl, template);
    PERFORM snowflake_id_node.no_moves_here();
    IF to_regnamespace(quote_ident(template)) IS NULL THEN
        RAISE EXCEPTION 'template schema % does not exist', quote_ident(template) USING ERRCODE = 'invalid_schema_name';
    END IF;
    -- The template's shards, as they are before it changes.
    shards := snowflake_id_node.template_shards(template);
    -- One block for the whole change (a block per schema would be a subtransaction per
    -- schema, thousands of them): an error names the schema it stopped at.
    BEGIN
        per_schema := (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid());
        PERFORM snowflake_id_node.change_schema(ddl, template);
        per_schema := (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid()) - per_schema;
        too_many := snowflake_id_node.lock_room(greatest(per_schema, 1), cardinality(shards));
        IF too_many IS NOT NULL THEN
            RAISE EXCEPTION '%', split_part(too_many, E'\nHINT: ', 1)
                USING ERRCODE = 'configuration_limit_exceeded', HINT = split_part(too_many, E'\nHINT: ', 2);
        END IF;
        FOREACH at IN ARRAY shards LOOP
            PERFORM snowflake_id_node.change_schema(ddl, at);
            schemas := schemas + 1;
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        msg := format('schema %s: %s', quote_ident(at), msg);
        CASE WHEN det = '' AND hnt = '' THEN RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg;
             WHEN det = '' THEN RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg, HINT = hnt;
             WHEN hnt = '' THEN RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg, DETAIL = det;
             ELSE RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg, DETAIL = det, HINT = hnt;
        END CASE;
    END;
    INSERT INTO snowflake_id_node.schema_change VALUES (key, ddl, template, schemas, clock_timestamp());
    RETURN schemas;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.schema_change_apply(text, text, text, text) IS
  'alter_shards on this node: the statement on the template and every shard''s schema, in one transaction, recorded under key; idempotent.';

-- The shards of this node made from template (and those whose template is not known)
-- whose tables differ from the template's (template_status with shards => true): how many
-- there are, and the first one's first difference.
CREATE OR REPLACE FUNCTION snowflake_id_node.shards_unlike(template text, OUT checked integer, OUT differing integer, OUT first text)
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tpl text[] := snowflake_id_node.fingerprint(template);
    s record;
    fp text[];
BEGIN
    checked := 0;
    differing := 0;
    FOR s IN SELECT x.schema_name FROM @extschema@.snowflake_id_shard x
              WHERE x.template = shards_unlike.template OR x.template IS NULL ORDER BY x.shard LOOP
        checked := checked + 1;
        fp := snowflake_id_node.fingerprint(s.schema_name);
        IF fp <> tpl THEN
            differing := differing + 1;
            first := coalesce(first, snowflake_id_node.fingerprint_difference(fp, tpl,
                format('shard schema %s', quote_ident(s.schema_name)), format('template %s', quote_ident(template))));
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_node.shards_unlike(text) IS
  'How many shard schemas of this node were checked against the template, how many differ, and the first difference.';

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_node FROM PUBLIC;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_node FROM PUBLIC;
