-- The node side of alter_shards and template_status (schema snowflake_id_node): the
-- fingerprint of a schema's tables, the one-statement check, the per-node change.
-- (Through routers and several nodes: reliability/t_alter_shards.sh.)
-- A database of its own: the node's change covers every shard there is.
SELECT current_database() AS regress_db \gset
CREATE DATABASE node_ddl_reg;
\c node_ddl_reg
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
RESET client_min_messages;
-- Each refusal as SQLSTATE: message.
CREATE FUNCTION pg_temp.refusal(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
CREATE SCHEMA ftpl;
CREATE TABLE ftpl.users (id bigint PRIMARY KEY, name text NOT NULL COLLATE "C");
CREATE TABLE ftpl.posts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id bigint NOT NULL CHECK (user_id > 0),
    body text NOT NULL DEFAULT '',
    score integer GENERATED ALWAYS AS (length(body)) STORED,
    UNIQUE (user_id, body)
);
CREATE INDEX posts_by_user ON ftpl.posts (user_id, id) WHERE user_id > 1;
SELECT count(create_shard('fshard' || s, s, template => 'ftpl')) FROM generate_series(1, 3) s;
-- One line per table, column, constraint and index, the schema's own name as %I; the
-- bigint primary key's default (the shard's next_id(), an identity in the template) is
-- create_shard's, not the layout's.
SELECT unnest(snowflake_id_node.fingerprint('ftpl'));
SELECT s, snowflake_id_node.fingerprint('fshard' || s) = snowflake_id_node.fingerprint('ftpl') AS same_as_template
  FROM generate_series(1, 3) s;
-- The first difference, said for both sides.
ALTER TABLE fshard2.posts ADD COLUMN note text DEFAULT 'n/a';
CREATE INDEX ON fshard3.posts (body);
SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('fshard2'), snowflake_id_node.fingerprint('ftpl'),
                                                'shard 2', 'the template') AS shard2,
       snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('ftpl'), snowflake_id_node.fingerprint('fshard3'),
                                                'the template', 'shard 3') AS shard3;
ALTER TABLE fshard2.posts ALTER COLUMN note SET DEFAULT 'none';
ALTER TABLE ftpl.posts ADD COLUMN note text DEFAULT 'n/a';
SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('fshard2'), snowflake_id_node.fingerprint('ftpl'),
                                                'shard 2', 'the template') AS shard2;
-- A reference to the schema's own objects reads alike in every shard; a name that merely
-- ends in the schema's name does not.
ALTER TABLE ftpl.posts ADD FOREIGN KEY (user_id) REFERENCES ftpl.users (id);
ALTER TABLE fshard1.posts ADD COLUMN note text DEFAULT 'n/a', ADD FOREIGN KEY (user_id) REFERENCES fshard1.users (id);
SELECT l FROM unnest(snowflake_id_node.fingerprint('fshard1')) l WHERE l LIKE 'constraint%FOREIGN%';
SELECT snowflake_id_node.fingerprint('fshard1') = snowflake_id_node.fingerprint('ftpl') AS shard1_same;
CREATE SCHEMA xftpl;
CREATE TABLE xftpl.users (id bigint PRIMARY KEY);
ALTER TABLE fshard1.posts DROP CONSTRAINT posts_user_id_fkey, ADD FOREIGN KEY (user_id) REFERENCES xftpl.users (id);
SELECT l FROM unnest(snowflake_id_node.fingerprint('fshard1')) l WHERE l LIKE 'constraint%FOREIGN%';
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.fingerprint('nosuchschema')$q$);

-- The statement alter_shards runs: exactly one schema change that runs in a transaction.
SELECT snowflake_id_node.ddl_statement('ALTER TABLE s.posts ADD COLUMN note text');
SELECT snowflake_id_node.ddl_statement('CREATE INDEX ON s.posts (note)');
SELECT snowflake_id_node.ddl_statement('COMMENT ON TABLE s.posts IS ''x''');
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.ddl_statement('CREATE INDEX CONCURRENTLY ON s.posts (note)')$q$);
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.ddl_statement('DROP INDEX CONCURRENTLY s.posts_note_idx')$q$);
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.ddl_statement('VACUUM s.posts')$q$);
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.ddl_statement('UPDATE s.posts SET note = ''''')$q$);
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.ddl_statement('DO $$BEGIN DROP TABLE s.posts; END$$')$q$);
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.ddl_statement('COMMIT')$q$);
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.ddl_statement('ALTER TABLE s.a ADD b int; DROP TABLE s.c')$q$);
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.ddl_statement(' -- nothing')$q$);
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.ddl_statement('ALTER TABLE s.posts ADD')$q$);
-- %I is the schema, quoted; %% a percent sign; nothing else.
SELECT snowflake_id_node.ddl_for('ALTER TABLE %I.posts ADD note text DEFAULT ''100%%'' CHECK (note <> %I.f())', 'Odd "Name"');
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.ddl_for('ALTER TABLE %I.posts ADD note text DEFAULT ''100%''', 's')$q$);
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.ddl_for('ALTER TABLE %s.posts ADD note text', 's')$q$);
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.ddl_for('ALTER TABLE posts ADD note text', 's')$q$);
-- Each %I a name standing alone, as PostgreSQL's scanner reads the statement: inside a
-- string constant, a dollar quote, a quoted name or a comment, or joined to other text, a
-- name holding a quote would end it (42601, before anything runs).
SELECT snowflake_id_node.ddl_for($q$COMMENT ON TABLE %I.posts IS 'posts'$q$, 'a''b"c');
SELECT pg_temp.refusal(format('SELECT snowflake_id_node.ddl_for(%L, %L)', t, 'x'))
  FROM (VALUES ($q$COMMENT ON TABLE %I.posts IS 'posts of %I'$q$),
               ($q$COMMENT ON TABLE %I.posts IS E'posts of %I'$q$),
               ($q$COMMENT ON TABLE %I.posts IS U&'posts of %I'$q$),
               ('CREATE FUNCTION %I.n() RETURNS bigint LANGUAGE sql AS $f$ SELECT count(*) FROM %I.posts $f$'),
               ($q$ALTER TABLE %I.posts ADD note text -- %I$q$),
               ($q$ALTER TABLE %I.posts ADD note text /* %I */$q$),
               ($q$ALTER TABLE "x%I".posts ADD note text$q$),
               ($q$ALTER TABLE U&%I.posts ADD note text$q$),
               ($q$ALTER TABLE %Ix.posts ADD note text$q$),
               ($q$ALTER TABLE %I"x".posts ADD note text$q$)) v(t);
-- A statement that runs a query on every shard is refused like any other non-schema-change.
SELECT pg_temp.refusal(format('SELECT snowflake_id_node.ddl_for(%L, %L)', t, 'x'))
  FROM (VALUES ('CREATE TABLE %I.copy AS SELECT * FROM %I.posts'), ('SELECT * INTO %I.copy FROM %I.posts'),
               ('CREATE MATERIALIZED VIEW %I.counts AS SELECT count(*) FROM %I.posts'),
               ('REFRESH MATERIALIZED VIEW %I.counts')) v(t);
-- A materialized view made WITH NO DATA runs no query (each shard's is refreshed by its own
-- work, create_shard's and a move's copies are refreshed): accepted.
SELECT snowflake_id_node.ddl_for('CREATE MATERIALIZED VIEW %I.counts AS SELECT count(*) FROM %I.posts WITH NO DATA', 'x');

-- The check before any node changes: tried on the template and undone.
SELECT snowflake_id_node.schema_change_check('r/1', 'ALTER TABLE %I.posts ADD COLUMN likes integer NOT NULL DEFAULT 0', 'ftpl', '1s');
SELECT count(*) AS tried_and_undone FROM pg_attribute WHERE attrelid = 'ftpl.posts'::regclass AND attname = 'likes';
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.schema_change_check('r/1', 'ALTER TABLE %I.posts ADD COLUMN note text', 'ftpl', '1s')$q$);         -- on the template
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.schema_change_check('r/1', 'ALTER TABLE %I.posts ADD COLUMN x int', 'notpl', '1s')$q$);
-- The lock table's room: a change on thousands of shards holds all its locks to commit.
SELECT snowflake_id_node.lock_room(3, 100) IS NULL AS fits,
       snowflake_id_node.lock_room(3, 1000000) LIKE 'the change takes about 3000000 locks here (3 per schema, 1000000 schemas)%' AS refused;

-- The change: the template and every shard in one transaction, recorded; again, nothing.
SELECT snowflake_id_node.schema_change_apply('r/1', 'ALTER TABLE %I.posts ADD COLUMN likes integer NOT NULL DEFAULT 0', 'ftpl', '1s') AS schemas;
SELECT snowflake_id_node.schema_change_apply('r/1', 'ALTER TABLE %I.posts ADD COLUMN likes integer NOT NULL DEFAULT 0', 'ftpl', '1s') AS again;
SELECT snowflake_id_node.schema_change_check('r/1', 'ALTER TABLE %I.posts ADD COLUMN likes integer NOT NULL DEFAULT 0', 'ftpl', '1s');
SELECT key, ddl, template, schemas FROM snowflake_id_node.schema_change;
SELECT n.nspname, count(a.attname) AS has_likes FROM pg_namespace n
  LEFT JOIN pg_attribute a ON a.attrelid = format('%I.posts', n.nspname)::regclass AND a.attname = 'likes'
 WHERE n.nspname IN ('ftpl', 'fshard1', 'fshard2', 'fshard3') GROUP BY 1 ORDER BY 1;
-- A shard it cannot change stops it, by name: the node is left as it was.
ALTER TABLE fshard2.posts RENAME COLUMN body TO text;
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.schema_change_apply('r/2', 'CREATE INDEX ON %I.posts (body)', 'ftpl', '1s')$q$);
SELECT count(*) AS indexes_on_body FROM pg_indexes WHERE indexdef LIKE '%(body)%' AND schemaname IN ('ftpl', 'fshard1');
SELECT count(*) AS recorded FROM snowflake_id_node.schema_change WHERE key = 'r/2';
-- A node holding a move's record refuses any change (its sealed or incoming copies are
-- hidden; changed, they would be kept for good or served without the change).
INSERT INTO snowflake_id_node.move (key, router, role, peer, shards, schemas, state, marker)
VALUES ('r8/7', 'router', 'source', 'peer', '{2}', '{fshard2}', 'sealed', 'm');
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.schema_change_check('r/4', 'ALTER TABLE %I.users ADD COLUMN age integer', 'ftpl', '1s')$q$);
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.schema_change_apply('r/4', 'ALTER TABLE %I.users ADD COLUMN age integer', 'ftpl', '1s')$q$);
SELECT count(*) AS changed FROM pg_attribute WHERE attname = 'age';
DELETE FROM snowflake_id_node.move;
-- A shard's writer waits for the change's locks, the change for a writer's: lock_timeout.
BEGIN;
SELECT snowflake_id_node.schema_change_apply('r/3', 'ALTER TABLE %I.users ADD COLUMN age integer', 'ftpl', '1s');
SELECT count(*) AS locked_to_commit FROM pg_locks
 WHERE pid = pg_backend_pid() AND mode = 'AccessExclusiveLock' AND relation IN ('ftpl.users'::regclass, 'fshard3.users'::regclass);
ROLLBACK;

-- A shard's schema where another role may create: her function of a closer argument type
-- would be what the statement's call resolves to, run as the superuser the change runs as
-- there. Refused (42501, naming it and the CREATE), before any schema changes; nothing of
-- hers ran.
CREATE FUNCTION ftpl.norm(v numeric) RETURNS numeric LANGUAGE sql IMMUTABLE RETURN abs(v);
CREATE FUNCTION fshard1.norm(v numeric) RETURNS numeric LANGUAGE sql IMMUTABLE RETURN abs(v);
CREATE FUNCTION fshard2.norm(v numeric) RETURNS numeric LANGUAGE sql IMMUTABLE RETURN abs(v);
CREATE FUNCTION fshard3.norm(v numeric) RETURNS numeric LANGUAGE sql IMMUTABLE RETURN abs(v);
INSERT INTO fshard2.users VALUES (1, 'a');
CREATE ROLE node_ddl_app;
GRANT USAGE, CREATE ON SCHEMA fshard2 TO node_ddl_app;
CREATE TABLE public.node_ddl_ran (who text);
GRANT INSERT ON public.node_ddl_ran TO node_ddl_app;
SET ROLE node_ddl_app;
CREATE FUNCTION fshard2.norm(v integer) RETURNS numeric LANGUAGE plpgsql VOLATILE AS $$
BEGIN INSERT INTO public.node_ddl_ran VALUES (current_user); RETURN abs(v); END $$;
RESET ROLE;
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.schema_change_apply('r/10', 'ALTER TABLE %I.users ADD CONSTRAINT pos CHECK (%I.norm(length(name)) >= 0)', 'ftpl', '1s')$q$);
SELECT count(*) AS hers_ran FROM public.node_ddl_ran;
DROP FUNCTION fshard2.norm(integer);
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.schema_change_apply('r/10', 'ALTER TABLE %I.users ADD CONSTRAINT pos CHECK (%I.norm(length(name)) >= 0)', 'ftpl', '1s')$q$);
REVOKE CREATE ON SCHEMA fshard2 FROM node_ddl_app;
-- A change that would leave in the template what create_shard does not copy (a CHECK
-- calling one of its functions): refused up front (0A000), on the template, nothing changed.
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.schema_change_check('r/10', 'ALTER TABLE %I.users ADD CONSTRAINT pos CHECK (%I.norm(length(name)) >= 0)', 'ftpl', '1s')$q$);
SELECT count(*) AS made FROM pg_constraint WHERE conname = 'pos';
-- Nor code of a role the template's owner does not trust (42501), which create_shard refuses.
CREATE ROLE node_ddl_mal;
CREATE SCHEMA node_ddl_mal AUTHORIZATION node_ddl_mal;
CREATE FUNCTION node_ddl_mal.ok(v integer) RETURNS boolean LANGUAGE sql IMMUTABLE RETURN true;
ALTER FUNCTION node_ddl_mal.ok(integer) OWNER TO node_ddl_mal;
GRANT USAGE ON SCHEMA node_ddl_mal TO PUBLIC;
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.schema_change_check('r/12', 'ALTER TABLE %I.users ADD CONSTRAINT mal CHECK (node_ddl_mal.ok(length(name)))', 'ftpl', '1s')$q$);
SELECT count(*) AS made FROM pg_constraint WHERE conname = 'mal';
DROP SCHEMA node_ddl_mal CASCADE;
DROP ROLE node_ddl_mal;
-- The schemas themselves are not a change's (drop_shard drops a shard with its record): 0A000.
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.schema_change_check('r/11', 'DROP SCHEMA %I CASCADE', 'ftpl', '1s')$q$);
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.schema_change_apply('r/11', 'ALTER SCHEMA %I RENAME TO gone', 'ftpl', '1s')$q$);
SELECT count(*) AS schemas_left FROM pg_namespace WHERE nspname IN ('ftpl', 'fshard1', 'fshard2', 'fshard3');
DELETE FROM fshard2.users;
DROP FUNCTION ftpl.norm(numeric), fshard1.norm(numeric), fshard2.norm(numeric), fshard3.norm(numeric);
DROP TABLE public.node_ddl_ran;
REVOKE ALL ON SCHEMA fshard2 FROM node_ddl_app;
DROP ROLE node_ddl_app;

-- Only the extension's owner (a superuser) may run any of it.
CREATE ROLE node_ddl_user;
SET ROLE node_ddl_user;
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.fingerprint('ftpl')$q$);
SELECT pg_temp.refusal($q$SELECT snowflake_id_node.schema_change_apply('r/9', 'DROP TABLE %I.posts', 'ftpl', '1s')$q$);
RESET ROLE;
DROP ROLE node_ddl_user;
SELECT count(*) AS functions_without_comment FROM pg_proc WHERE pronamespace = 'snowflake_id_node'::regnamespace
   AND obj_description(oid, 'pg_proc') IS NULL;
\c :regress_db
DROP DATABASE node_ddl_reg;
