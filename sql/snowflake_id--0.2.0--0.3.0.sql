-- snowflake_id 0.2.0 -> 0.3.0, in place: ALTER EXTENSION snowflake_id UPDATE TO '0.3.0'.
--
-- Each section carries one part of 0.3.0 to a 0.2.0 installation, in the same words as the
-- fresh install. reliability/t_upgrade.sh installs 0.2.0 (and 0.1.0) as released, runs the
-- chain and requires the result to equal a fresh 0.3.0 install (reliability/surface.sql).
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.3.0'" to load this file. \quit

-- == The node side of snowflake_id_router (sql/node.sql) ==
-- The node side of snowflake_id_router's protocol, in the internal schema snowflake_id_node
-- (docs/cluster-design.md). Nothing here is for applications: the schema is on no one's
-- search_path, and only its owner (the superuser who created the extension) may use it; the
-- router calls it over dblink as a superuser. Every object is CREATE OR REPLACE, so that the
-- upgrade script loads this same text.

CREATE SCHEMA snowflake_id_node;
COMMENT ON SCHEMA snowflake_id_node IS
  'Internals of snowflake_id: the node side of snowflake_id_router''s protocol (moves, identity, connect strings).';
REVOKE ALL ON SCHEMA snowflake_id_node FROM PUBLIC;

CREATE OR REPLACE FUNCTION snowflake_id_node.conninfo(connstr text, OUT keyword text, OUT value text, OUT secret boolean)
RETURNS SETOF record
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'conninfo_wrapper';
COMMENT ON FUNCTION snowflake_id_node.conninfo(text) IS
  'The options libpq reads from a connect string (PQconninfoParse: key=value or URI), with whether libpq treats each as secret; 22023 if libpq refuses it.';

-- What a node is, whatever connect string reaches it: the cluster's system identifier and
-- the database's OID. A promoted physical standby keeps both.
CREATE OR REPLACE FUNCTION snowflake_id_node.identity() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN (SELECT c.system_identifier::text FROM pg_control_system() c) || '/'
    || (SELECT d.oid::text FROM pg_database d WHERE d.datname = current_database());
COMMENT ON FUNCTION snowflake_id_node.identity() IS
  'This database''s identity: <system identifier>/<database OID>, the same through any connect string and on a promoted standby.';

-- The fingerprint of a schema's layout, compared wherever two layouts must agree: a
-- template on every node (the router's template_status), a shard and its copy on another
-- node (moves refuse to start when they differ, naming the first difference). It is a
-- sorted list of lines, one per table, column, constraint and index, each as PostgreSQL
-- prints it with search_path = pg_catalog, the schema's own name standing as %I, so that a
-- template and a shard made from it (create_shard(..., template => ...)) read alike:
--   table posts: table
--   column posts.edits: integer NOT NULL DEFAULT 0, position 4
--   constraint on posts: PRIMARY KEY (id)
--   index on posts: CREATE INDEX ON %I.posts USING btree (user_id, id)
-- Not in it: names of constraints and indexes (LIKE ... INCLUDING ALL makes its own),
-- the default and identity of a bigint primary key column (create_shard sets it to the
-- shard's next_id()), NOT NULL constraints as such (PostgreSQL 18 lists them as
-- constraints, 15 does not: the column says NOT NULL), storage parameters, triggers
-- (a move fences writes with triggers of its own), and what create_shard makes besides
-- the tables (next_id(), table_id_seq).

CREATE OR REPLACE FUNCTION snowflake_id_node.fingerprint(schema_name text) RETURNS text[]
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    nsp oid := to_regnamespace(quote_ident(schema_name));
    -- The schema's own name, qualifying a name (not ending a longer one): a regular
    -- expression with every character but letters, digits and _ escaped.
    own text := '(^|[^[:alnum:]_$"])' || regexp_replace(quote_ident(schema_name), '([^[:alnum:]_])', '\\\1', 'g') || '\.';
    lines text[];
BEGIN
    IF nsp IS NULL THEN
        RAISE EXCEPTION 'schema % does not exist', quote_ident(schema_name) USING ERRCODE = 'invalid_schema_name';
    END IF;
    WITH rel AS (
        -- (A move's marker table comes and goes with the move.)
        SELECT c.oid, c.relname, c.relkind, c.relpersistence FROM pg_class c
         WHERE c.relnamespace = nsp AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
           AND c.relname <> 'snowflake_id_move_marker'),
    pk AS (
        SELECT i.indrelid, a.attnum FROM rel JOIN pg_index i ON i.indrelid = rel.oid AND i.indisprimary
          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
         WHERE a.atttypid = 'bigint'::regtype),
    line AS (
        SELECT format('table %s: %s%s', quote_ident(rel.relname),
                   CASE rel.relpersistence WHEN 'u' THEN 'unlogged ' WHEN 't' THEN 'temporary ' ELSE '' END,
                   CASE rel.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'partitioned table' WHEN 'v' THEN 'view'
                        WHEN 'm' THEN 'materialized view' ELSE 'foreign table' END) AS l
          FROM rel
        UNION ALL
        SELECT format('column %s.%s: %s%s%s%s, position %s', quote_ident(rel.relname), quote_ident(a.attname),
                   format_type(a.atttypid, a.atttypmod),
                   CASE WHEN a.attcollation <> t.typcollation THEN ' COLLATE ' || a.attcollation::regcollation::text END,
                   CASE WHEN a.attnotnull THEN ' NOT NULL' END,
                   CASE WHEN pk.attnum IS NOT NULL THEN NULL
                        WHEN a.attgenerated = 's' THEN ' GENERATED ALWAYS AS ' || pg_get_expr(d.adbin, d.adrelid) || ' STORED'
                        WHEN a.attidentity = 'a' THEN ' GENERATED ALWAYS AS IDENTITY'
                        WHEN a.attidentity = 'd' THEN ' GENERATED BY DEFAULT AS IDENTITY'
                        ELSE ' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid) END,
                   rank() OVER (PARTITION BY a.attrelid ORDER BY a.attnum))
          FROM rel JOIN pg_attribute a ON a.attrelid = rel.oid AND a.attnum > 0 AND NOT a.attisdropped
          JOIN pg_type t ON t.oid = a.atttypid
          LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
          LEFT JOIN pk ON pk.indrelid = a.attrelid AND pk.attnum = a.attnum
        UNION ALL
        SELECT format('constraint on %s: %s', quote_ident(rel.relname), pg_get_constraintdef(k.oid))
          FROM rel JOIN pg_constraint k ON k.conrelid = rel.oid AND k.contype <> 'n'
        UNION ALL
        -- pg_get_indexdef without the index's name: CREATE [UNIQUE] INDEX ON ...
        SELECT format('index on %s: %s%s', quote_ident(rel.relname),
                   overlay(pg_get_indexdef(i.indexrelid)
                           PLACING '' FROM position(' INDEX ' IN pg_get_indexdef(i.indexrelid)) + 7
                           FOR length(quote_ident(x.relname)) + 1),
                   CASE WHEN NOT i.indisvalid THEN ' (invalid)' END)
          FROM rel JOIN pg_index i ON i.indrelid = rel.oid JOIN pg_class x ON x.oid = i.indexrelid)
    SELECT array_agg(regexp_replace(l, own, '\1%I.', 'g') ORDER BY l COLLATE "C") INTO lines FROM line;
    RETURN coalesce(lines, '{}');
END
$$;
COMMENT ON FUNCTION snowflake_id_node.fingerprint(text) IS
  'The layout of a schema''s tables as sorted lines (tables, columns, constraints, indexes; its own name as %I): equal for a template and the shards made from it.';

-- The first line where two fingerprints differ, said with the labels of both sides:
--   column posts.note: (text DEFAULT 'x'::text, position 5) in shard_7 on node 'a', (absent) in template tpl on node 'b'
-- NULL when they are equal.
CREATE OR REPLACE FUNCTION snowflake_id_node.fingerprint_difference(a text[], b text[], a_label text, b_label text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    first text;
    k text;  -- what the line is about: a table or column by name, a constraint or index by its definition
BEGIN
    SELECT l INTO first FROM (SELECT unnest(a) EXCEPT ALL SELECT unnest(b)
                              UNION ALL (SELECT unnest(b) EXCEPT ALL SELECT unnest(a))) x(l)
     ORDER BY l COLLATE "C" LIMIT 1;
    IF first IS NULL THEN
        RETURN NULL;
    END IF;
    k := CASE WHEN first ~ '^(table|column) ' THEN split_part(first, ': ', 1) ELSE first END;
    RETURN format('%s: (%s) in %s, (%s) in %s', k,
        coalesce((SELECT CASE WHEN l = k THEN 'present' ELSE substr(l, length(k) + 3) END
                    FROM unnest(a) l WHERE l = k OR starts_with(l, k || ': ') LIMIT 1), 'absent'), a_label,
        coalesce((SELECT CASE WHEN l = k THEN 'present' ELSE substr(l, length(k) + 3) END
                    FROM unnest(b) l WHERE l = k OR starts_with(l, k || ': ') LIMIT 1), 'absent'), b_label);
END
$$;
COMMENT ON FUNCTION snowflake_id_node.fingerprint_difference(text[], text[], text, text) IS
  'The first difference between two fingerprints, with a label for each side; NULL when equal.';

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_id_node FROM PUBLIC;

-- == alter_shards on the node (sql/node_ddl.sql) ==
-- The node side of alter_shards (snowflake_id_router): one statement applied to the
-- template schema and to every shard's schema of this node in one transaction, so the node
-- is all-old or all-new, and recorded in that transaction under the router's key for the
-- change, so that a run resumed after an interruption knows this node is done.
--
-- The statement is the router's text with %I standing for the schema (quoted, as format()
-- quotes it) and %% for a percent sign; no other % is accepted. It runs with search_path =
-- pg_catalog, pg_temp: names outside pg_catalog are written qualified (%I.posts).

-- The statement for one schema, parsed (not run) by PostgreSQL's parser: its command tag,
-- or an error when it is not exactly one schema change that can run in a transaction block.
CREATE OR REPLACE FUNCTION snowflake_id_node.ddl_statement(ddl text) RETURNS text
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ddl_statement_wrapper';
COMMENT ON FUNCTION snowflake_id_node.ddl_statement(text) IS
  'Command tag of a statement alter_shards may run on every shard (one schema change that can run in a transaction block); an error otherwise.';

-- The statement for one schema: %I replaced by the schema's name, quoted.
CREATE OR REPLACE FUNCTION snowflake_id_node.ddl_for(ddl text, schema_name text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
    -- format()'s reading, left to right: %% is a percent sign, %I the schema.
    IF strpos(regexp_replace(ddl, '%[%I]', '', 'g'), '%') > 0 THEN
        RAISE EXCEPTION 'alter_shards: the statement holds a %% other than %%I (the schema) and %%%% (a percent sign)'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Write a percent sign in a literal as %%, e.g. DEFAULT ''100%%''.';
    END IF;
    SELECT count(*) INTO n FROM regexp_matches(ddl, '%[%I]', 'g') m WHERE m[1] = '%I';
    IF n = 0 THEN
        RAISE EXCEPTION 'alter_shards: the statement does not name the schema: write %%I where it goes, e.g. ALTER TABLE %%I.posts ...'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN format(ddl, VARIADIC array_fill(schema_name, ARRAY[n]));
END
$$;
COMMENT ON FUNCTION snowflake_id_node.ddl_for(text, text) IS
  'An alter_shards statement for one schema: %I becomes the schema''s name, quoted; %% a percent sign.';

-- What each change did here, keyed by the router's name for it ('<router8>/<change id>').
-- Dumped with the database: a restored node still knows the changes it has.
CREATE TABLE snowflake_id_node.schema_change (
    key text PRIMARY KEY,
    ddl text NOT NULL,
    template text NOT NULL,
    schemas integer NOT NULL,
    applied timestamptz NOT NULL
);
COMMENT ON TABLE snowflake_id_node.schema_change IS
  'Changes alter_shards applied on this node, each in the transaction that applied it.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_node.schema_change', '');

-- The room a change needs in the lock table: every schema's objects stay locked until the
-- node's one transaction commits. per_schema locks were counted on the template; NULL
-- when they fit, else the error to raise (53400) with the max_locks_per_transaction
-- that would fit them.
CREATE OR REPLACE FUNCTION snowflake_id_node.lock_room(per_schema integer, schemas integer) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- The lock table holds max_locks_per_transaction for each process that can take locks.
    slots bigint := current_setting('max_connections')::bigint
        + coalesce(current_setting('autovacuum_worker_slots', true), current_setting('autovacuum_max_workers'))::bigint
        + current_setting('max_worker_processes')::bigint + current_setting('max_wal_senders')::bigint
        + current_setting('max_prepared_transactions')::bigint + 1;
    capacity bigint := current_setting('max_locks_per_transaction')::bigint * slots;
    in_use bigint := (SELECT count(*) FROM pg_locks WHERE NOT fastpath);
    needed bigint := per_schema::bigint * schemas;
BEGIN
    IF needed <= capacity - in_use THEN
        RETURN NULL;
    END IF;
    RETURN format('the change takes about %s locks here (%s per schema, %s schemas) in one transaction, and the lock table has room for %s more (max_locks_per_transaction = %s, for %s processes; %s in use)',
        needed, per_schema, schemas, capacity - in_use, current_setting('max_locks_per_transaction'), slots, in_use)
        || format(E'\nHINT: Set max_locks_per_transaction to at least %s on this node and restart it.',
                  ceil((needed + in_use) * 1.2 / slots));
END
$$;
COMMENT ON FUNCTION snowflake_id_node.lock_room(integer, integer) IS
  'NULL when a change taking per_schema locks on each of schemas fits in the lock table; otherwise why not.';

-- Up front, on every node before any applies: the change is tried on the template and
-- undone, which checks it here (it parses, its objects exist, it is allowed) and counts
-- the locks it takes per schema. 'applied' when this node has the change already, 'ready'
-- when it can take it; an error (the change's own, or 53400) otherwise.
CREATE OR REPLACE FUNCTION snowflake_id_node.schema_change_check(key text, ddl text, template text, lock_timeout text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    per_schema integer;
    too_many text;
BEGIN
    PERFORM set_config('lock_timeout', lock_timeout, true);
    -- One change at a time on a node: a session of an interrupted run may still be applying.
    PERFORM pg_advisory_xact_lock(hashtext('snowflake_id_node.schema_change'), 0);
    IF EXISTS (SELECT FROM snowflake_id_node.schema_change c WHERE c.key = schema_change_check.key) THEN
        RETURN 'applied';
    END IF;
    PERFORM snowflake_id_node.ddl_statement(snowflake_id_node.ddl_for(ddl, template));
    IF to_regnamespace(quote_ident(template)) IS NULL THEN
        RAISE EXCEPTION 'template schema % does not exist', quote_ident(template) USING ERRCODE = 'invalid_schema_name';
    END IF;
    BEGIN
        per_schema := (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid());
        EXECUTE snowflake_id_node.ddl_for(ddl, template);
        per_schema := (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid()) - per_schema;
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

-- The change itself: template, then every shard's schema (in shard order), one
-- transaction, recorded in it. Returns the number of schemas changed (that of the record,
-- when this node had the change already). Each statement waits at most lock_timeout for
-- its locks; writers to a shard wait until the node's transaction commits.
CREATE OR REPLACE FUNCTION snowflake_id_node.schema_change_apply(key text, ddl text, template text, lock_timeout text) RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    done integer;
    per_schema integer;
    too_many text;
    schemas integer := 1;
    at text := template;  -- the schema being changed
    st text;
    msg text;
    det text;
    hnt text;
BEGIN
    PERFORM set_config('lock_timeout', lock_timeout, true);
    PERFORM pg_advisory_xact_lock(hashtext('snowflake_id_node.schema_change'), 0);
    SELECT c.schemas INTO done FROM snowflake_id_node.schema_change c WHERE c.key = schema_change_apply.key;
    IF FOUND THEN
        RETURN done;
    END IF;
    PERFORM snowflake_id_node.ddl_statement(snowflake_id_node.ddl_for(ddl, template));
    IF to_regnamespace(quote_ident(template)) IS NULL THEN
        RAISE EXCEPTION 'template schema % does not exist', quote_ident(template) USING ERRCODE = 'invalid_schema_name';
    END IF;
    -- One block for the whole change (a block per schema would be a subtransaction per
    -- schema, thousands of them): an error names the schema it stopped at.
    BEGIN
        per_schema := (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid());
        EXECUTE snowflake_id_node.ddl_for(ddl, template);
        per_schema := (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid()) - per_schema;
        too_many := snowflake_id_node.lock_room(greatest(per_schema, 1), (SELECT count(*) FROM @extschema@.snowflake_id_shard)::integer);
        IF too_many IS NOT NULL THEN
            RAISE EXCEPTION '%', split_part(too_many, E'\nHINT: ', 1)
                USING ERRCODE = 'configuration_limit_exceeded', HINT = split_part(too_many, E'\nHINT: ', 2);
        END IF;
        FOR at IN SELECT s.schema_name FROM @extschema@.snowflake_id_shard s ORDER BY s.shard LOOP
            EXECUTE snowflake_id_node.ddl_for(ddl, at);
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

-- The shards of this node whose tables differ from the template's (template_status with
-- shards => true): how many there are, and the first one's first difference.
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
    FOR s IN SELECT x.schema_name FROM @extschema@.snowflake_id_shard x ORDER BY x.shard LOOP
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
