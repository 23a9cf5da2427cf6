-- The node side of moves on one server (docs/cluster-design.md): what a move refuses to
-- carry, the fence and its proof of life, the seal, what the node serves, and who may call
-- what. (Moves between servers, interrupted and not: reliability/t_cluster_*.sh.)
\set VERBOSITY sqlstate
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
CREATE EXTENSION IF NOT EXISTS dblink;
RESET client_min_messages;
SELECT current_database() AS db \gset
CREATE SCHEMA mvtpl;
CREATE TABLE mvtpl.posts (id bigint PRIMARY KEY, user_id bigint NOT NULL, body text NOT NULL, edits integer NOT NULL DEFAULT 0);
CREATE INDEX ON mvtpl.posts (user_id, id);
CREATE TABLE mvtpl.counters (id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text);
SELECT count(create_shard('mv_' || s, s, template => 'mvtpl')) FROM generate_series(7001, 7003) s;
CREATE FUNCTION pg_temp.refused(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- A shard and a fresh copy of it from the same template have the same fingerprint, whatever
-- their names; a difference is named.
SELECT snowflake_id_node.fingerprint('mv_7001') = snowflake_id_node.fingerprint('mv_7002') AS same_layout;
SELECT unnest(snowflake_id_node.fingerprint('mv_7001'));
ALTER TABLE mv_7002.posts ALTER COLUMN edits TYPE smallint;
SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('mv_7001'), snowflake_id_node.fingerprint('mv_7002'),
                                                'the shard', 'the copy') AS narrowed;
ALTER TABLE mv_7002.posts ALTER COLUMN edits TYPE integer;
ALTER TABLE mv_7002.posts DROP CONSTRAINT posts_pkey;
SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('mv_7001'), snowflake_id_node.fingerprint('mv_7002'),
                                                'the shard', 'the copy') AS no_primary_key;
ALTER TABLE mv_7002.posts ADD PRIMARY KEY (id);
ALTER TABLE mv_7002.posts ENABLE ROW LEVEL SECURITY;
CREATE POLICY own ON mv_7002.posts USING (user_id = 1);
SELECT l FROM unnest(snowflake_id_node.fingerprint('mv_7002')) l WHERE l ~ '^(policy|table posts)';
DROP POLICY own ON mv_7002.posts;
ALTER TABLE mv_7002.posts DISABLE ROW LEVEL SECURITY;
-- A foreign key inside the shard: its copy, made from the template (LIKE copies no foreign
-- key), would lack it, so the move refuses.
ALTER TABLE mv_7002.posts ADD FOREIGN KEY (edits) REFERENCES mv_7002.counters;
SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('mv_7002'), snowflake_id_node.fingerprint('mv_7001'),
                                                'the shard', 'the copy') AS in_shard_foreign_key;
ALTER TABLE mv_7002.posts DROP CONSTRAINT posts_edits_fkey;
SELECT snowflake_id_node.fingerprint('mv_7001') = snowflake_id_node.fingerprint('mv_7002') AS same_again;

-- What a move would not carry, or would drop with the source's copy, is refused by name.
SELECT snowflake_id_node.refusal('{mv_7001}') AS clean;
CREATE UNLOGGED TABLE mv_7003.scratch (id bigint PRIMARY KEY);
SELECT snowflake_id_node.refusal('{mv_7003}');
DROP TABLE mv_7003.scratch;
-- A view or a materialized view moves: the target's copy, made from its template, has it
-- (the fingerprint compares it; the target refreshes a materialized view at activation).
CREATE MATERIALIZED VIEW mv_7003.totals AS SELECT count(*) FROM mv_7003.posts;
SELECT snowflake_id_node.refusal('{mv_7003}');
DROP MATERIALIZED VIEW mv_7003.totals;
CREATE VIEW mv_7003.recent AS SELECT * FROM mv_7003.posts;
SELECT snowflake_id_node.refusal('{mv_7003}');
DROP VIEW mv_7003.recent;
CREATE FUNCTION mv_7003.touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER touch BEFORE UPDATE ON mv_7003.posts FOR EACH ROW EXECUTE FUNCTION mv_7003.touch();
-- An ordinary trigger moves (it does not fire for the rows a move copies); one enabled
-- ALWAYS would fire again on the target.
SELECT snowflake_id_node.refusal('{mv_7003}') AS ordinary_trigger;
ALTER TABLE mv_7003.posts ENABLE ALWAYS TRIGGER touch;
SELECT snowflake_id_node.refusal('{mv_7003}');
DROP FUNCTION mv_7003.touch() CASCADE;
CREATE TABLE mv_7003.nokey (v text);
SELECT snowflake_id_node.refusal('{mv_7003}');
DROP TABLE mv_7003.nokey;
-- A partitioned table moves with its partitions in the shard, each copied and replicated as
-- a table; the fingerprint both sides compare holds its key and each partition's bounds.
CREATE TABLE mv_7003.parted (id bigint PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE mv_7003.parted_1 PARTITION OF mv_7003.parted FOR VALUES FROM (0) TO (100);
CREATE TABLE mv_7003.parted_rest PARTITION OF mv_7003.parted DEFAULT;
SELECT snowflake_id_node.refusal('{mv_7003}') AS partitioned_table;
SELECT l AS fingerprint FROM unnest(snowflake_id_node.fingerprint('mv_7003')) l WHERE l LIKE 'table parted%';
-- A partition across the shard's edge: the old copy's drop would take the partition outside
-- along, and a partition of a table outside would arrive as no partition of it.
CREATE TABLE mv_7001.parted_2 PARTITION OF mv_7003.parted FOR VALUES FROM (100) TO (200);
SELECT snowflake_id_node.refusal('{mv_7003}');
SELECT snowflake_id_node.refusal('{mv_7001}');
DROP TABLE mv_7003.parted;
-- Outside the shard: a view over it, a foreign key to it, a function reading it, a column
-- of its row type. DROP SCHEMA ... CASCADE would take each along.
CREATE VIEW public.mv_feed AS SELECT id FROM mv_7003.posts UNION ALL SELECT id FROM mv_7001.posts;
SELECT snowflake_id_node.refusal('{mv_7003}');
DROP VIEW public.mv_feed;
CREATE TABLE public.mv_likes (post bigint REFERENCES mv_7003.posts);
SELECT snowflake_id_node.refusal('{mv_7003}');
DROP TABLE public.mv_likes;
CREATE FUNCTION public.mv_count() RETURNS bigint LANGUAGE sql BEGIN ATOMIC SELECT count(*) FROM mv_7003.posts; END;
SELECT snowflake_id_node.refusal('{mv_7003}');
DROP FUNCTION public.mv_count();
CREATE TABLE public.mv_saved (p mv_7003.posts);
SELECT snowflake_id_node.refusal('{mv_7003}');
DROP TABLE public.mv_saved;
-- A column holding OIDs, which name objects of this node (large objects, say: a move
-- copies rows, not large objects), whatever type wraps them: the lo extension's lo (a
-- domain over oid), an array, a composite type, a domain over an array. Named by table and
-- column.
CREATE DOMAIN public.lo AS pg_catalog.oid;   -- (as the lo extension makes it)
CREATE TYPE public.mv_attachment AS (name text, data public.lo);
CREATE DOMAIN public.mv_blobs AS oid[];
CREATE TABLE mv_7003.files (id bigint PRIMARY KEY, name text, raw oid);
SELECT snowflake_id_node.refusal('{mv_7003}');
ALTER TABLE mv_7003.files DROP COLUMN raw, ADD COLUMN content public.lo;
SELECT snowflake_id_node.refusal('{mv_7003}');
ALTER TABLE mv_7003.files DROP COLUMN content, ADD COLUMN parts oid[];
SELECT snowflake_id_node.refusal('{mv_7003}');
ALTER TABLE mv_7003.files DROP COLUMN parts, ADD COLUMN attached public.mv_attachment;
SELECT snowflake_id_node.refusal('{mv_7003}');
ALTER TABLE mv_7003.files DROP COLUMN attached, ADD COLUMN many public.mv_blobs;
SELECT snowflake_id_node.refusal('{mv_7003}');
ALTER TABLE mv_7003.files DROP COLUMN many;
SELECT snowflake_id_node.refusal('{mv_7003}') AS no_oids_left;
DROP TABLE mv_7003.files;
DROP TYPE public.mv_attachment;
DROP DOMAIN public.mv_blobs;
DROP DOMAIN public.lo;
SELECT snowflake_id_node.refusal('{mv_7003}') AS clean_again;

-- Owners and privileges go to the copies by role name, whatever the name: upper case, a
-- quote, a space, letters outside ASCII, aclitem's own punctuation. A grant of a grantor
-- other than the owner is given as that grantor.
CREATE ROLE "Reader";
CREATE ROLE "we""ird";
CREATE ROLE "with space";
CREATE ROLE "ünï";
CREATE ROLE "Ünï Owner";
CREATE ROLE "a=r/b,c";
SELECT create_shard('mv_7005', 7005, template => 'mvtpl');
GRANT USAGE ON SCHEMA mv_7005 TO "we""ird", "Reader", "with space";
GRANT SELECT ON mv_7005.posts TO "Reader" WITH GRANT OPTION;
SET ROLE "Reader";
GRANT SELECT ON mv_7005.posts TO "with space";
RESET ROLE;
GRANT UPDATE (body) ON mv_7005.posts TO "ünï";
ALTER TABLE mv_7005.counters OWNER TO "Ünï Owner";
GRANT EXECUTE ON FUNCTION mv_7005.next_id() TO "we""ird";
GRANT USAGE ON SEQUENCE mv_7005.table_id_seq TO "a=r/b,c";
SELECT r AS role_names FROM unnest(snowflake_id_node.roles('{mv_7005}')) r WHERE r <> current_user;
-- (grants() as lines, each object's privileges sorted, the schema's name as %I)
CREATE FUNCTION pg_temp.grant_lines(s text) RETURNS SETOF text LANGUAGE sql AS $$
    SELECT format('%s %s%s owner %s: %s', g.kind, replace(g.object, s, '%I'), ' ' || g.col, g.owner,
                  (SELECT string_agg(x::text, ' ' ORDER BY x::text) FROM unnest(g.acl::aclitem[]) x))
      FROM json_to_recordset(snowflake_id_node.grants(ARRAY[s])::json)
           AS g(kind text, object text, col text, owned boolean, owner text, acl text)
$$;
-- A copy made as a move's target makes it (on one server: named mv_7006), then gets them.
SELECT snowflake_id_node.lock_shards('{7006}');
SELECT snowflake_id_node.target_check('a router', 'a source', '{7006}', '{mv_7006}', snowflake_id_node.roles('{mv_7005}'), 'mvtpl');
SELECT snowflake_id_node.prepare_target('test/9', 'a router', 'a source', '{7006}', '{mv_7006}', 'mvtpl');
SELECT snowflake_id_node.set_grants('test/9', replace(snowflake_id_node.grants('{mv_7005}'), 'mv_7005', 'mv_7006'));
SELECT replace(l, ' postgres=arwdDxtm/postgres', ' postgres=arwdDxt/postgres') AS copy_grants   -- (MAINTAIN: from 17)
  FROM pg_temp.grant_lines('mv_7006') l ORDER BY 1;
SELECT count(*) AS differing FROM ((SELECT pg_temp.grant_lines('mv_7006') EXCEPT ALL SELECT pg_temp.grant_lines('mv_7005'))
                                   UNION ALL (SELECT pg_temp.grant_lines('mv_7005') EXCEPT ALL SELECT pg_temp.grant_lines('mv_7006'))) x;
SELECT snowflake_id_node.undo('test/9', '1 s', 0);
SELECT snowflake_id_node.unlock_shards('{7006}');
SELECT to_regnamespace('mv_7006') IS NULL AS undone;
-- Until they serve, a target's copies take rows from their move alone (copy_rows and the
-- subscription write as a replica): every other write, by any path and role, is refused
-- (55000), and so is every DDL command that touches them, whatever its kind (a rule, a
-- trigger, a policy; one elsewhere that depends on them), by any session but the mover's;
-- the mover's own writes as a replica pass. (Issue 33, F4: a write there was lost on undo.)
SELECT dblink_connect('mover', format('host=%s port=%s dbname=%s', current_setting('unix_socket_directories'), current_setting('port'), :'db'));
SELECT * FROM dblink('mover', $$SELECT concat(snowflake_id_node.lock_shards('{7006}'),
    snowflake_id_node.prepare_target('test/10', 'a router', 'a source', '{7006}', '{mv_7006}', 'mvtpl'))$$) AS t(x text);
CREATE ROLE mv_writer;
GRANT USAGE ON SCHEMA mv_7006 TO mv_writer;         -- (a target's privileges are set again at the fence)
GRANT ALL ON ALL TABLES IN SCHEMA mv_7006 TO mv_writer;
CREATE TABLE public.mv_side (user_id bigint, body text);
SET ROLE mv_writer;
SELECT pg_temp.refused($$INSERT INTO mv_7006.posts (id, user_id, body) VALUES (1, 1, 'direct')$$);
SELECT pg_temp.refused($$UPDATE mv_7006.posts SET body = 'direct'$$);
SELECT pg_temp.refused($$DELETE FROM mv_7006.posts$$);
SELECT pg_temp.refused($$TRUNCATE mv_7006.posts$$);
RESET ROLE;
SELECT pg_temp.refused($$INSERT INTO mv_7006.posts (id, user_id, body) VALUES (1, 1, 'the owner''s')$$);
SELECT pg_temp.refused($$COPY mv_7006.posts (id, user_id, body) FROM PROGRAM 'echo 2,1,copied' WITH (FORMAT csv)$$);
SELECT pg_temp.refused($$CREATE RULE swallow AS ON INSERT TO mv_7006.posts DO INSTEAD NOTHING$$);
SELECT pg_temp.refused($$CREATE RULE into_copy AS ON INSERT TO public.mv_side DO INSTEAD INSERT INTO mv_7006.posts (id, user_id, body) VALUES (3, NEW.user_id, NEW.body)$$);
SELECT pg_temp.refused($$CREATE TRIGGER late BEFORE INSERT ON mv_7006.posts FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()$$);
SELECT pg_temp.refused($$CREATE POLICY late ON mv_7006.posts USING (true)$$);
SELECT pg_temp.refused($$ALTER TRIGGER sfid_test_10 ON mv_7006.posts RENAME TO gone$$);
SELECT pg_temp.refused($$DROP TRIGGER sfid_test_10 ON mv_7006.posts$$);
SELECT pg_temp.refused($$CREATE VIEW public.mv_late_view AS SELECT id FROM mv_7006.posts$$);
SELECT pg_temp.refused($$CREATE STATISTICS public.mv_late_stats ON user_id, id FROM mv_7006.posts$$);
SELECT pg_temp.refused($$COMMENT ON TRIGGER sfid_test_10 ON mv_7006.posts IS 'late'$$);
SELECT pg_temp.refused($$CREATE TABLE public.mv_other (id bigint)$$) AS elsewhere;   -- (DDL elsewhere goes on)
DROP TABLE public.mv_other;
SELECT count(*) AS rules_triggers_policies FROM (SELECT FROM pg_rules WHERE schemaname = 'mv_7006' UNION ALL
    SELECT FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid WHERE c.relnamespace = 'mv_7006'::regnamespace AND g.tgname <> 'sfid_test_10'
    UNION ALL SELECT FROM pg_policies WHERE schemaname = 'mv_7006') x;
SELECT dblink_exec('mover', 'SET session_replication_role = replica');
SELECT * FROM dblink('mover', $$WITH x AS (INSERT INTO mv_7006.posts (id, user_id, body) VALUES (4, 1, 'the move''s') RETURNING id)
    SELECT count(*)::text FROM x$$) AS t(rows_written_as_a_replica text);
SELECT dblink_exec('mover', 'RESET session_replication_role');
SELECT * FROM dblink('mover', $$SELECT concat(snowflake_id_node.undo('test/10', '1 s', 0), snowflake_id_node.unlock_shards('{7006}'))$$) AS t(x text);
SELECT dblink_disconnect('mover');
DROP TABLE public.mv_side;
DROP ROLE mv_writer;
-- A role missing on the target is named, quoted.
SELECT pg_temp.refused($$SELECT snowflake_id_node.target_check('a router', 'a source', '{7006}', '{mv_7006}', '{"Nobody \"here\""}', 'mvtpl')$$);
SELECT drop_shard('mv_7005', cascade => true);
DROP ROLE "Reader", "we""ird", "with space", "ünï", "Ünï Owner", "a=r/b,c";

-- The fence. The mover's session (here a dblink session of this server) holds the shard's
-- lock: while it lives, a fenced shard refuses every write with 40001; once it is gone, the
-- fence lets writes through (no one has to act); once sealed, it refuses them whatever
-- becomes of the mover.
SELECT dblink_connect('mover', format('host=%s port=%s dbname=%s', current_setting('unix_socket_directories'), current_setting('port'), :'db'));
SELECT * FROM dblink('mover', $$SELECT snowflake_id_node.lock_shards('{7001}')::text$$) AS t(x text);
SELECT regexp_replace(pg_temp.refused($$SELECT snowflake_id_node.lock_shards('{7001}')$$), 'pid [0-9]+', 'pid N');  -- 55P03
SELECT * FROM dblink('mover', $$SELECT concat(
    snowflake_id_node.prepare_source('test/1', 'a router', 'a target', '{7001}', '{mv_7001}'),
    snowflake_id_node.publish('test/1'))$$) AS t(x text);
CREATE ROLE mv_app;
GRANT USAGE ON SCHEMA mv_7001 TO mv_app;
GRANT INSERT ON mv_7001.posts TO mv_app;
GRANT USAGE, UPDATE ON SEQUENCE mv_7001.table_id_seq TO mv_app;
SELECT pg_temp.refused($$SELECT snowflake_id_node.set_fence('test/1', '1000', '1 h')$$);  -- 55000: only the locks' holder steps
SELECT * FROM dblink('mover', $$SELECT snowflake_id_node.set_fence('test/1', '1000', '1 h')::text$$) AS t(x text);
-- Fenced: schema and privilege changes are refused as writes are (sql/node/guard.sql), but
-- the mover's (it holds the shard's locks).
SELECT pg_temp.refused($$GRANT SELECT ON mv_7001.posts TO mv_app$$);                       -- 55000
SELECT pg_temp.refused($$COMMENT ON TABLE mv_7001.posts IS 'fenced'$$);                    -- 55000
SELECT pg_temp.refused($$ALTER TABLE mv_7001.posts ADD COLUMN fenced text$$);              -- 55000
SELECT pg_temp.refused($$DROP INDEX mv_7001.posts_user_id_id_idx$$);                       -- 55000
SET ROLE mv_app;
SELECT pg_temp.refused($$INSERT INTO mv_7001.posts (user_id, body) VALUES (1, 'fenced')$$);   -- 40001
RESET ROLE;
SELECT pg_temp.refused($$TRUNCATE mv_7001.posts$$);                                      -- 40001
SELECT dblink_disconnect('mover');
DO $$ BEGIN   -- (the mover's backend ends a moment after its connection closes)
    FOR i IN 1 .. 1000 LOOP EXIT WHEN NOT snowflake_id_node.alive('{7001}'); PERFORM pg_sleep(0.01); END LOOP;
END $$;
SET ROLE mv_app;
SELECT pg_temp.refused($$INSERT INTO mv_7001.posts (user_id, body) VALUES (1, 'mover gone')$$);  -- passes
RESET ROLE;
-- A repair takes the locks and undoes it: fence, publication, marker and record go.
SELECT dblink_connect('mover', format('host=%s port=%s dbname=%s', current_setting('unix_socket_directories'), current_setting('port'), :'db'));
SELECT * FROM dblink('mover', $$SELECT concat(snowflake_id_node.lock_shards('{7001}'),
                                              snowflake_id_node.undo('test/1', '1 s', 0))$$) AS t(x text);
SELECT * FROM snowflake_id_node.leftovers();
-- Sealed: the decision point. The copy leaves snowflake_id_shards; writes are refused with
-- the mover gone; an undo is refused (the move must be completed).
SELECT * FROM dblink('mover', $$SELECT concat(
    snowflake_id_node.prepare_source('test/2', 'a router', 'a target', '{7001}', '{mv_7001}'),
    snowflake_id_node.publish('test/2'), snowflake_id_node.set_fence('test/2', '1000', '1 h'), snowflake_id_node.mark('test/2'))$$) AS t(x text);
-- The seal comes only after its check, in the same transaction (55000 otherwise); the check
-- returns the rows and privileges the copy must match.
SELECT * FROM dblink('mover', $$SELECT snowflake_id_node.seal('test/2')$$) AS t(x text);      -- 55000
SELECT * FROM dblink('mover', $$SELECT concat(
    snowflake_id_node.seal_check('test/2', ARRAY[snowflake_id_node.fingerprint('mv_7001')::text], '1000')::json->>'rows',
    snowflake_id_node.seal('test/2'))$$) AS t(x text);
SELECT * FROM dblink('mover', $$SELECT snowflake_id_node.undo('test/2', '1 s', 0)::text$$) AS t(x text);     -- 55000
SELECT dblink_disconnect('mover');
DO $$ BEGIN
    FOR i IN 1 .. 1000 LOOP EXIT WHEN NOT snowflake_id_node.alive('{7001}'); PERFORM pg_sleep(0.01); END LOOP;
END $$;
SELECT pg_temp.refused($$INSERT INTO mv_7001.posts (user_id, body) VALUES (1, 'sealed')$$);      -- 40001
-- Sealed, nothing may change it, its fence least of all (55000).
SELECT pg_temp.refused($$DROP TRIGGER sfid_test_2 ON mv_7001.posts$$);
SELECT pg_temp.refused($$CREATE RULE swallow AS ON INSERT TO mv_7001.posts DO INSTEAD NOTHING$$);
-- (a rule made with the guard off, a superuser's choice: its drop too, which PostgreSQL
-- reports with no schema)
ALTER EVENT TRIGGER snowflake_id_guard_ddl DISABLE;
CREATE RULE kept AS ON UPDATE TO mv_7001.posts DO ALSO NOTHING;
ALTER EVENT TRIGGER snowflake_id_guard_ddl ENABLE ALWAYS;
SELECT pg_temp.refused($$DROP RULE kept ON mv_7001.posts$$);
ALTER EVENT TRIGGER snowflake_id_guard_drop DISABLE;
DROP RULE kept ON mv_7001.posts;
ALTER EVENT TRIGGER snowflake_id_guard_drop ENABLE ALWAYS;
SELECT shard FROM snowflake_id_shards WHERE shard BETWEEN 7001 AND 7003 ORDER BY 1;             -- 7001 is not served
-- A seal checks the schema against the copy's under its locks: DDL since is refused.
SELECT dblink_connect('mover', format('host=%s port=%s dbname=%s', current_setting('unix_socket_directories'), current_setting('port'), :'db'));
SELECT * FROM dblink('mover', $$SELECT concat(snowflake_id_node.lock_shards('{7002}'),
    snowflake_id_node.prepare_source('test/3', 'a router', 'a target', '{7002}', '{mv_7002}'),
    snowflake_id_node.publish('test/3'), snowflake_id_node.set_fence('test/3', '1000', '1 h'))$$) AS t(x text);
ALTER TABLE mv_7002.posts ADD COLUMN visibility text NOT NULL DEFAULT 'private';         -- 55000: fenced
-- With the guard disabled (a superuser's choice), the seal still sees the change under its locks.
ALTER EVENT TRIGGER snowflake_id_guard_ddl DISABLE;
ALTER TABLE mv_7002.posts ADD COLUMN visibility text NOT NULL DEFAULT 'private';
ALTER EVENT TRIGGER snowflake_id_guard_ddl ENABLE ALWAYS;
-- A move with a copy gives its target's fingerprints: none (a split's seal: no copy) is
-- refused (22004).
SELECT * FROM dblink('mover', $$SELECT snowflake_id_node.seal_check('test/3', NULL, '1000')$$) AS t(x text);
\set VERBOSITY default
SELECT * FROM dblink('mover', $$SELECT snowflake_id_node.seal_check('test/3', ARRAY[snowflake_id_node.fingerprint('mv_7001')::text], '1000')$$)
    AS t(x text);
\set VERBOSITY sqlstate
SELECT * FROM dblink('mover', $$SELECT snowflake_id_node.undo('test/3', '1 s', 0)::text$$) AS t(x text);
-- The sealed copy is dropped only as it was sealed, and never with something outside
-- that depends on it: a view made since (the guard refuses it; disabled, a superuser's
-- choice, it does not) keeps it (and the view).
SELECT * FROM dblink('mover', $$SELECT snowflake_id_node.lock_shards('{7001}')::text$$) AS t(x text);
SELECT pg_temp.refused($$CREATE VIEW public.mv_late AS SELECT id FROM mv_7001.posts$$);
ALTER EVENT TRIGGER snowflake_id_guard_ddl DISABLE;
CREATE VIEW public.mv_late AS SELECT id FROM mv_7001.posts;
ALTER EVENT TRIGGER snowflake_id_guard_ddl ENABLE ALWAYS;
SELECT * FROM dblink('mover', $$SELECT snowflake_id_node.drop_copy('test/2', '1000', '1 s')::text$$) AS t(x text);  -- 55000
DROP VIEW public.mv_late;
SELECT * FROM dblink('mover', $$SELECT snowflake_id_node.drop_copy('test/2', '1000', '1 s')::text$$) AS t(x text);
SELECT dblink_disconnect('mover');
SELECT to_regnamespace('mv_7001') IS NULL AS dropped, count(*) AS left_over FROM snowflake_id_node.leftovers();
-- A sealed copy of several shards is dropped a few schemas per transaction: between two,
-- its record names a schema already gone. That is the move's own state, not a change of
-- it: DDL elsewhere on the node goes on, and the rest of the copy stays guarded.
SELECT create_shard('mv_7007', 7007, template => 'mvtpl'), create_shard('mv_7008', 7008, template => 'mvtpl');
SELECT dblink_connect('mover', format('host=%s port=%s dbname=%s', current_setting('unix_socket_directories'), current_setting('port'), :'db'));
SELECT * FROM dblink('mover', $$SELECT concat(snowflake_id_node.lock_shards('{7007,7008}'),
    snowflake_id_node.prepare_source('test/4', 'a router', 'a target', '{7007,7008}', '{mv_7007,mv_7008}'),
    snowflake_id_node.publish('test/4'), snowflake_id_node.set_fence('test/4', '1000', '1 h'), snowflake_id_node.mark('test/4'),
    snowflake_id_node.seal_check('test/4', ARRAY[snowflake_id_node.fingerprint('mv_7007')::text,
                                                 snowflake_id_node.fingerprint('mv_7008')::text], '1000')::json->>'rows',
    snowflake_id_node.seal('test/4'))$$) AS t(x text);
SELECT dblink_exec('mover', $$SELECT snowflake_id_node.drop_schemas('{mv_7007}');
    UPDATE snowflake_id_node.move SET dropped = 1 WHERE key = 'test/4'$$);     -- what drop_copy's first transaction leaves
SELECT dblink_disconnect('mover');
DO $$ BEGIN
    FOR i IN 1 .. 1000 LOOP EXIT WHEN NOT snowflake_id_node.alive('{7007,7008}'); PERFORM pg_sleep(0.01); END LOOP;
END $$;
COMMENT ON TABLE mv_7003.posts IS 'another shard''s';                                   -- passes
SELECT pg_temp.refused($$COMMENT ON TABLE mv_7008.posts IS 'sealed'$$);                  -- 55000
SELECT pg_temp.refused($$ALTER TABLE mv_7008.posts SET SCHEMA public$$);                 -- 55000
SELECT * FROM dblink(format('host=%s port=%s dbname=%s', current_setting('unix_socket_directories'), current_setting('port'), :'db'),
    $$SELECT concat(snowflake_id_node.lock_shards('{7007,7008}'), snowflake_id_node.drop_copy('test/4', '1000', '1 s'))$$) AS t(x text);
SELECT to_regnamespace('mv_7008') IS NULL AS dropped, count(*) AS left_over FROM snowflake_id_node.leftovers();

-- The indexes a large table's copy builds after its rows (defer_indexes): only those made
-- again exactly by their definition; every other index is left as it is.
CREATE TABLE mv_7003.wide (id bigint PRIMARY KEY, user_id bigint, code text UNIQUE, body text, n integer,
                           ref text CONSTRAINT wide_ref UNIQUE NULLS NOT DISTINCT WITH (fillfactor = 80) DEFERRABLE);
CREATE TABLE mv_7003.refs (code text REFERENCES mv_7003.wide (code));
CREATE TABLE mv_7003.grouped (id bigint PRIMARY KEY, v integer);
CREATE VIEW mv_7003.latest AS SELECT id, v FROM mv_7003.grouped GROUP BY id;   -- (v: by the key)
CREATE INDEX wide_user ON mv_7003.wide (user_id, id);
CREATE UNIQUE INDEX wide_body ON mv_7003.wide (lower(body)) WHERE n > 0;
CREATE INDEX wide_n ON mv_7003.wide (n) WITH (fillfactor = 70);
CREATE INDEX wide_commented ON mv_7003.wide (body);
COMMENT ON INDEX mv_7003.wide_commented IS 'kept';
CREATE INDEX wide_stats ON mv_7003.wide ((n + 1));
ALTER INDEX mv_7003.wide_stats ALTER COLUMN 1 SET STATISTICS 500;
CREATE INDEX wide_clustered ON mv_7003.wide (user_id);
CLUSTER mv_7003.wide USING wide_clustered;
CREATE TEMP TABLE mv_indexes AS
SELECT pg_get_indexdef(indexrelid) AS def FROM pg_index WHERE indrelid = 'mv_7003.wide'::regclass;
CREATE TEMP TABLE mv_print AS SELECT snowflake_id_node.fingerprint('mv_7003') AS print;
BEGIN;
SELECT unnest(snowflake_id_node.defer_indexes('mv_7003.wide'::regclass)) AS deferred ORDER BY 1;
SELECT snowflake_id_node.defer_indexes('mv_7003.grouped'::regclass) AS key_a_view_needs;
SELECT c.relname AS left_in_place FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = 'mv_7003.wide'::regclass ORDER BY 1;
ROLLBACK;
-- Made again from what it returns, they are what they were.
DO $$ DECLARE d text; BEGIN
    FOREACH d IN ARRAY snowflake_id_node.defer_indexes('mv_7003.wide'::regclass) LOOP EXECUTE d; END LOOP;
END $$;
SELECT count(*) AS differing FROM ((SELECT def FROM mv_indexes EXCEPT SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'mv_7003.wide'::regclass)
                                   UNION ALL (SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'mv_7003.wide'::regclass EXCEPT SELECT def FROM mv_indexes)) x;
SELECT obj_description('mv_7003.wide_commented'::regclass, 'pg_class') AS comment_kept;
SELECT print = snowflake_id_node.fingerprint('mv_7003') AS same_layout FROM mv_print;
SELECT count(*) AS constraints FROM pg_constraint WHERE conrelid = 'mv_7003.wide'::regclass AND contype IN ('p', 'u');

-- Internal: no one but the owner calls the node side.
SET ROLE mv_app;
SELECT pg_temp.refused($$SELECT snowflake_id_node.fingerprint('mv_7002')$$);   -- 42501
SELECT pg_temp.refused($$SELECT * FROM snowflake_id_node.move$$);              -- 42501
RESET ROLE;
SELECT count(*) AS callable_by_others FROM pg_proc p
 WHERE p.pronamespace = 'snowflake_id_node'::regnamespace AND has_function_privilege('mv_app', p.oid, 'EXECUTE');

DROP OWNED BY mv_app;
DROP ROLE mv_app;
SELECT drop_shard('mv_' || s, cascade => true) FROM generate_series(7002, 7003) s;
DROP SCHEMA mvtpl CASCADE;

-- A move's commit, activation and flip run with query cancels held off
-- (snowflake_id_node.hold_cancel): a cancel (statement_timeout here) that comes while its
-- query runs is taken right after it ends; the hold is given back on every path.
CREATE TEMP TABLE hc_began AS SELECT clock_timestamp() AS t;
SET statement_timeout = '100ms';
SELECT snowflake_id_node.hold_cancel('SELECT pg_sleep(0.4)::text');             -- 57014, after the sleep
RESET statement_timeout;
SELECT clock_timestamp() - t >= interval '0.4 s' AS held_to_its_end FROM hc_began;
-- Given back after a return and after an error a block caught: a cancel is taken at once.
SELECT snowflake_id_node.hold_cancel('SELECT 1::text') AS returned;
DO $$ BEGIN PERFORM snowflake_id_node.hold_cancel('SELECT (1 / 0)::text'); EXCEPTION WHEN division_by_zero THEN NULL; END $$;
SET statement_timeout = '100ms';
SELECT pg_sleep(2);                                                               -- 57014 at 100 ms
RESET statement_timeout;
-- An error caught inside the query does not end the hold: what follows it is held too.
CREATE FUNCTION pg_temp.caught_then_sleep() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        PERFORM 1 / 0;
    EXCEPTION WHEN division_by_zero THEN
        NULL;
    END;
    PERFORM pg_sleep(0.4);
    RETURN 'slept';
END
$$;
UPDATE hc_began SET t = clock_timestamp();
SET statement_timeout = '100ms';
SELECT snowflake_id_node.hold_cancel('SELECT pg_temp.caught_then_sleep()');     -- 57014, after the sleep
RESET statement_timeout;
SELECT clock_timestamp() - t >= interval '0.4 s' AS held_past_a_caught_error FROM hc_began;
