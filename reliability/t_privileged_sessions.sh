#!/usr/bin/env bash
# every version: the rules privileged code relies on change by version (restricted operations, search_path in maintenance commands since 17, dblink and libpq)
# Class 1 of issue 33, as a class: a SECURITY DEFINER function shares its session with its
# caller, so nothing it opens may outlive it on any exit path, and nothing it leaves may be
# usable by the caller (docs/security.md, "The router"; docs/cluster.md, who may call what).
# Every SECURITY DEFINER function and procedure of both extensions is read from the catalog
# (the test fails on one its table of calls does not cover). Each call of the table runs as a
# role granted only what docs/cluster.md says it needs, in a session of its own:
#   normal      as documented
#   tx          the same inside BEGIN ... COMMIT, checked before the COMMIT: refused with
#               25001 (the rows of refused_in_tx: what they write or lock in the router's
#               tables would be held as long as the caller keeps the transaction open), or,
#               seen from another session while the transaction stays open, the caller's
#               backend holds no lock but its own transaction's ids and the ACCESS SHARE
#               locks reading any view takes (no owner-only lock, no table lock that stops a
#               move, no row), and its settings are as before the call
#   pipe        the same as the first Execute of an extended-protocol pipeline that sends
#               no Sync (psql 18's \startpipeline, \flushrequest, \getresults: the
#               transaction stays open, the backend active, so no idle timeout ends it),
#               checked before the pipeline ends: as tx, the caller's backend holds no lock
#               but its transaction's ids and ACCESS SHARE (skipped, and said so, where psql
#               has no pipelines)
#   error       failing after it has connected somewhere (a database without snowflake_id,
#               the router itself, a move refused by its target, a node that now reaches
#               another database)
#   t1 .. t500  statement_timeout of 1, 5, 20, 100 and 500 ms
#   cancel1, cancel3      pg_cancel_backend from another session at its 1st, 3rd remote wait
#   terminate2            pg_terminate_backend at its 2nd remote wait
# After each, in the caller's session (still open): no session the router opened for it is
# left on the router or any node (reliability/owner_sessions.sh), it can call no
# snowflake_id_node function (42501 for every one) and reaches no connection through dblink,
# and its settings, prepared statements, cursors and advisory locks are as before the call;
# after a termination, no session the router opened for it is left 2 s later.
# Then a role granted the documented rebalance set forges steps of a drain another session
# runs (42501) and starts a rebalance beside it (55P03): one rebalance at a time.
# Then a move waits for the schema-change lock inside BEGIN: no lock and the caller's
# lock_timeout left.
# Then a superuser session that keeps its node connections (keep_connections) calls a
# SECURITY DEFINER function of another role, granted the registry's functions: that role
# reaches none of the kept connections.
# ONLY_ROWS="move_shard node_status" and ONLY_VARIANTS="cancel1 terminate2" run a part.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
bg=()
trap 'kill "${bg[@]}" 2>/dev/null || true; router_cluster_down; rm -rf "$work"' EXIT
SHARDS_PER_NODE=2 router_cluster_up >/dev/null 2>&1
on_all() { local n; for n in "${ROUTER_NODES[@]}"; do on "$n" "$@"; done; }
served_by() { on router -c "SELECT node FROM shard_map WHERE shard = $1"; }
for n in "${ROUTER_NODES[@]}"; do
  on "$n" -c "SELECT count(*) FROM (SELECT insert_post(shard, 1, 'row') FROM snowflake_id_shards, generate_series(1, 20)) x" >/dev/null
done
router_db() { echo "host=$SF_TMP/sfrouter port=$ROUTER_PORT dbname=$1 user=postgres"; }
node_db() { echo "host=$(node_dir "$1") port=$(node_port "$1") dbname=$2 user=postgres"; }

# What a call may meet: a database with snowflake_id (extra) and one without (plain) on
# node_c, a follower router database, a template not the shards' (tpl_narrow: a move naming
# it is refused, 22023, once it has reached both nodes).
on node_c -c "CREATE DATABASE extra" -c "CREATE DATABASE plain"
psql -X -q -At -v ON_ERROR_STOP=1 -d "$(node_db node_c extra)" -c "CREATE EXTENSION snowflake_id"
on router -c "CREATE DATABASE follower" -c "CREATE EXTENSION dblink"
psql -X -q -At -v ON_ERROR_STOP=1 -d "$(router_db follower)" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id_router CASCADE"
on_all -c "CREATE SCHEMA tpl_narrow" \
  -c "CREATE TABLE tpl_narrow.posts (id bigint PRIMARY KEY, user_id bigint NOT NULL, body varchar(3) NOT NULL, edits smallint NOT NULL DEFAULT 0)" \
  -c "CREATE INDEX ON tpl_narrow.posts (user_id, id)"

# In every database a call runs in: what the caller can reach (public.sfid_probe: 'ok', or
# each thing reached) and what its session holds (public.sfid_session), both run as the
# caller. Every function of snowflake_id_node is called with NULL arguments: the refusal
# (42501) comes before anything runs.
probe_sql=$(cat <<'SQL'
CREATE FUNCTION public.sfid_probe() RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f record;
    reached text[] := '{}';
    c text;
BEGIN
    FOR f IN SELECT p.oid::regprocedure AS sig, p.prokind,
                    format('%I.%I(%s)', n.nspname, p.proname,
                           (SELECT string_agg('NULL::' || format_type(t, NULL), ', ' ORDER BY o)
                              FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY a(t, o))) AS call
               FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = 'snowflake_id_node' LOOP
        BEGIN
            EXECUTE CASE WHEN f.prokind = 'p' THEN 'CALL ' ELSE 'SELECT ' END || f.call;
            reached := reached || f.sig::text;
        EXCEPTION WHEN insufficient_privilege THEN
            NULL;
        WHEN OTHERS THEN
            reached := reached || format('%s (%s, not 42501)', f.sig, SQLSTATE);
        END;
    END LOOP;
    IF to_regproc('public.dblink_get_connections') IS NOT NULL THEN
        EXECUTE 'SELECT public.dblink_get_connections()::text' INTO c;
        IF c IS NOT NULL THEN
            reached := reached || ('dblink connections ' || c);
        END IF;
        FOREACH c IN ARRAY ARRAY['sfid:self', 'snowflake_id_router_self', 'snowflake_id_router_add',
                                 'snowflake_id_router_status', 'snowflake_id_router_node_1'] LOOP
            BEGIN
                EXECUTE format('SELECT public.dblink_exec(%L, %L)', c, 'SELECT 1');
                reached := reached || ('dblink ' || c);
            EXCEPTION WHEN OTHERS THEN
                NULL;
            END;
        END LOOP;
    END IF;
    RETURN coalesce(nullif(array_to_string(reached, '; '), ''), 'ok');
END
$$;
CREATE FUNCTION public.sfid_session() RETURNS text LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT concat_ws(' | ',
        'settings: ' || (SELECT string_agg(name || '=' || setting, ', ' ORDER BY name) FROM pg_settings
                          WHERE source = 'session' AND name NOT IN ('statement_timeout')),
        'keep_connections: ' || current_setting('snowflake_id_router.keep_connections', true),
        'prepared: ' || (SELECT string_agg(name, ', ' ORDER BY name) FROM pg_prepared_statements),
        'cursors: ' || (SELECT string_agg(name, ', ' ORDER BY name) FROM pg_cursors),
        'advisory locks: ' || (SELECT string_agg(format('%s %s/%s/%s', mode, classid, objid, objsubid), ', ' ORDER BY 1)
                                 FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'))
$$;
SQL
)
on router -c "$probe_sql"; on node_a -c "$probe_sql"; on node_b -c "$probe_sql"

# == The table of calls ==
# One row per call: the SECURITY DEFINER functions it reaches (as regprocedure prints them
# on the router), the grants docs/cluster.md lists for it (ROLE: the caller), the call, its
# failing form, the SQLSTATEs each must end with (a pattern; a timeout, cancel or
# termination may end either anyhow), what to do first as a superuser (bash), the
# variants that apply and where it runs.
rows=() covers=() grants=() normal=() normal_state=() error=() error_state=() before=() variants=() server=()
all_variants="normal tx pipe error t1 t5 t20 t100 t500 cancel1 cancel3 terminate2"
local_variants="normal tx pipe error t1 cancel1"     # calls that reach no other server
psql_major=$(psql --version | sed -E 's/^[^0-9]*([0-9]+).*/\1/')
if (( psql_major < 18 )); then
  echo "  pipe variant: skipped (psql $psql_major has no \\startpipeline; it needs psql 18)"
  no_pipe=1
fi
# The calls that write or lock the router's tables, which no call can give back before it
# returns: inside a transaction block they refuse (25001). The others give back all they
# took (the moves, repair_moves: their owner-only locks) or take nothing that lasts.
refused_in_tx="add_node assign_shards alter_node remove_node rebalance_stop add_router remove_router abandon_schema_change split_node"
row() {
  rows+=("$1"); covers+=("$2"); grants+=("$3"); normal+=("$4"); normal_state+=("$5"); error+=("$6"); error_state+=("$7")
  before+=("${8:-:}"); variants+=("${9:-$all_variants}"); server+=("${10:-router}")
}
rebalance_grants="GRANT USAGE ON SCHEMA snowflake_id_router TO ROLE;
  GRANT EXECUTE ON PROCEDURE snowflake_id_router.run_rebalance(text, text, integer, text, integer) TO ROLE;
  GRANT EXECUTE ON FUNCTION snowflake_id_router.require_primary(text) TO ROLE;
  DO \$\$ DECLARE f regprocedure; BEGIN
    FOR f IN SELECT p.oid FROM pg_proc p WHERE p.pronamespace = 'snowflake_id_router'::regnamespace AND p.proname LIKE 'rebalance\_%' LOOP
      EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO ROLE', f);
    END LOOP; END \$\$;"
repoint_c="UPDATE snowflake_id_router.node SET connstr = (SELECT connstr FROM snowflake_id_router.node WHERE name = 'node_a') WHERE name = 'node_c'"
c_connstr=$(on router -c "SELECT connstr FROM snowflake_id_router.node WHERE name = 'node_c'")
restore_c="UPDATE snowflake_id_router.node SET connstr = \$\$$c_connstr\$\$ WHERE name = 'node_c'"
# (node_c reaching node_a's database: each status call and repair meets it after connecting.)
broken_c() { on router -c "$repoint_c" >/dev/null; }
other_than() { local s; s=$(served_by "$1"); for n in node_a node_b node_c; do [[ $n != "$s" ]] && { echo "$n"; return; }; done; }
no_node() { on router -c "SELECT remove_node(name) FROM snowflake_id_router.node WHERE name IN ('extra', 'plain')" >/dev/null; }
has_node() { no_node; on router -c "SELECT add_node('extra', '$(node_db node_c extra)')" >/dev/null 2>&1; }
no_router() { on router -c "SELECT remove_router(name) FROM snowflake_id_router.router" >/dev/null 2>&1 || true; }
has_router() { no_router; on router -c "SELECT add_router('f', '$(router_db follower)')" >/dev/null 2>&1; }
ghost_router() {
  no_router
  on router -c "INSERT INTO snowflake_id_router.router (name, connstr, identity) VALUES ('ghost', \$\$$(node_db node_a postgres)\$\$, '0/0')"
}
c_serves() { on node_c -c "SELECT count(*) FROM snowflake_id_shards"; }
# (untemplated: the shards as made before 0.4.0, no template recorded, so that a rebalance's
# template, tpl_narrow in the error variants, is the one their copies are made from.)
untemplated() { local n; for n in "${ROUTER_NODES[@]}"; do on "$n" -c "UPDATE snowflake_id_shard SET template = NULL" >/dev/null; done; }
unbalanced() { [[ $(c_serves) != 0 ]] && on router -c "CALL drain_node('node_c')" >/dev/null 2>&1; untemplated; true; }
c_full() { [[ $(c_serves) == 0 ]] && on router -c "CALL rebalance()" >/dev/null 2>&1; untemplated; true; }

row add_node "add_node(text,text) snowflake_id_router.require_primary(text) snowflake_id_node.identity()" \
  "GRANT EXECUTE ON FUNCTION add_node(text, text) TO ROLE" \
  "SELECT add_node('extra', '$(node_db node_c extra)')" 00000 \
  "SELECT add_node('plain', '$(node_db node_c plain)')" 55000 no_node
row assign_shards "assign_shards(integer,integer,text) snowflake_id_router.sync_cluster()" \
  "GRANT EXECUTE ON FUNCTION assign_shards(integer, integer, text) TO ROLE" \
  "SELECT assign_shards(100, 1, 'node_a')" 00000 "SELECT assign_shards(100, 1, 'node_b')" 55000 : "$local_variants"
row move_shard "move_shard(integer,text,text)" \
  "GRANT EXECUTE ON FUNCTION move_shard(integer, text, text) TO ROLE" \
  "SELECT move_shard(0, '{other:0}')" 00000 "SELECT move_shard(0, '{other:0}', 'tpl_narrow')" 22023
row move_shards "move_shards(integer[],text,text)" \
  "GRANT EXECUTE ON FUNCTION move_shards(integer[], text, text) TO ROLE" \
  "SELECT move_shards('{2731,2732}', '{other:2731}')" 00000 "SELECT move_shards('{2731,2732}', '{other:2731}', 'tpl_narrow')" 22023
row repair_moves "repair_moves()" "GRANT EXECUTE ON FUNCTION repair_moves() TO ROLE" \
  "SELECT count(*) FROM repair_moves()" 00000 "SELECT count(*) FROM repair_moves()" 00000 "{broken}"
row node_status "snowflake_id_router.node_status()" \
  "GRANT SELECT ON node_status TO ROLE; GRANT EXECUTE ON FUNCTION snowflake_id_router.node_status() TO ROLE" \
  "SELECT count(*) FROM node_status" 00000 "SELECT count(*) FROM node_status" 00000 "{broken}"
row shard_status "snowflake_id_router.shard_status()" \
  "GRANT SELECT ON shard_status TO ROLE; GRANT EXECUTE ON FUNCTION snowflake_id_router.shard_status() TO ROLE" \
  "SELECT count(*) FROM shard_status" 00000 "SELECT count(*) FROM shard_status" 00000 "{broken}"
row template_status "template_status(text,boolean)" "GRANT EXECUTE ON FUNCTION template_status(text, boolean) TO ROLE" \
  "SELECT count(*) FROM template_status('tpl', true)" 00000 "SELECT count(*) FROM template_status('tpl', true)" 00000 "{broken}"
row rebalance_plan "rebalance_plan(text,integer,text)" "GRANT EXECUTE ON FUNCTION rebalance_plan(text, integer, text) TO ROLE" \
  "SELECT count(*) FROM rebalance_plan('by_disk_size')" 00000 "SELECT count(*) FROM rebalance_plan('by_shard_count')" '*' "{broken}"
row alter_node "alter_node(text,text)" "GRANT EXECUTE ON FUNCTION alter_node(text, text) TO ROLE" \
  "SELECT alter_node('node_b', '$(node_connstr node_b)')" 00000 "SELECT alter_node('node_b', '$(node_connstr node_a)')" 55000
row remove_node "remove_node(text)" "GRANT EXECUTE ON FUNCTION remove_node(text) TO ROLE" \
  "SELECT remove_node('extra')" 00000 "SELECT remove_node('node_a')" 55000 has_node "$local_variants"
row rebalance "snowflake_id_router.rebalance_begin(text,text,integer,text,integer) snowflake_id_router.rebalance_next(integer,boolean) snowflake_id_router.rebalance_move(integer,integer) snowflake_id_router.rebalance_failed(integer,integer,text,text)" \
  "GRANT EXECUTE ON PROCEDURE rebalance(text, integer, text, integer) TO ROLE; $rebalance_grants" \
  "CALL rebalance()" 00000 "CALL rebalance(template => 'tpl_narrow')" 55000 unbalanced
row drain_node "snowflake_id_router.rebalance_begin(text,text,integer,text,integer) snowflake_id_router.rebalance_next(integer,boolean) snowflake_id_router.rebalance_move(integer,integer) snowflake_id_router.rebalance_failed(integer,integer,text,text)" \
  "GRANT EXECUTE ON PROCEDURE drain_node(text, text, integer, text, integer) TO ROLE; $rebalance_grants" \
  "CALL drain_node('node_c')" 00000 "CALL drain_node('node_c', template => 'tpl_narrow')" 55000 c_full
# The steps the procedures run, called directly, as the grants let a role do: refused
# (25000), they run only in the procedure's own transactions.
row rebalance_steps "snowflake_id_router.rebalance_begin(text,text,integer,text,integer) snowflake_id_router.rebalance_next(integer,boolean) snowflake_id_router.rebalance_move(integer,integer) snowflake_id_router.rebalance_failed(integer,integer,text,text)" \
  "$rebalance_grants" \
  "DO \$\$ DECLARE r integer; b integer; BEGIN r := snowflake_id_router.rebalance_begin('node_c', 'by_shard_count', 32, 'tpl', 1);
     LOOP b := snowflake_id_router.rebalance_next(r, false); EXIT WHEN b IS NULL; PERFORM snowflake_id_router.rebalance_move(r, b); END LOOP; END \$\$" 25000 \
  "DO \$\$ DECLARE r integer; b integer; BEGIN r := snowflake_id_router.rebalance_begin('node_c', 'by_shard_count', 32, 'tpl_narrow', 1);
     b := snowflake_id_router.rebalance_next(r, false); PERFORM snowflake_id_router.rebalance_move(r, b); END \$\$" 25000 c_full
row call_alive "snowflake_id_router.call_alive(integer,timestamp with time zone,timestamp with time zone)" \
  "GRANT USAGE ON SCHEMA snowflake_id_router TO ROLE; GRANT EXECUTE ON FUNCTION snowflake_id_router.call_alive(integer, timestamptz, timestamptz) TO ROLE" \
  "SELECT snowflake_id_router.call_alive(pg_backend_pid(), now(), statement_timestamp())" 00000 \
  "SELECT snowflake_id_router.call_alive(1, 'infinity', 'infinity')" 00000 : "$local_variants"
row rebalance_stop "rebalance_stop()" "GRANT EXECUTE ON FUNCTION rebalance_stop() TO ROLE" \
  "SELECT rebalance_stop()" 00000 "SELECT rebalance_stop()" 00000 : "$local_variants"
# (Whatever state the newest rebalance is in: 55000, caught, for failed or interrupted.)
row rebalance_wait "rebalance_wait(interval)" "GRANT EXECUTE ON FUNCTION rebalance_wait(interval) TO ROLE" \
  "DO \$\$ BEGIN PERFORM rebalance_wait('1 s'); EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL; END \$\$" 00000 \
  "DO \$\$ BEGIN PERFORM rebalance_wait('0 s'); EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL; END \$\$" 00000 : "$local_variants"
row add_router "add_router(text,text)" "GRANT EXECUTE ON FUNCTION add_router(text, text) TO ROLE" \
  "SELECT add_router('f', '$(router_db follower)')" 00000 "SELECT add_router('me', '$(router_db postgres)')" 55000 no_router \
  "normal tx pipe error t5 t100 cancel1 terminate2"
row remove_router "remove_router(text)" "GRANT EXECUTE ON FUNCTION remove_router(text) TO ROLE" \
  "SELECT remove_router('f')" 00000 "SELECT remove_router('ghost')" 00000 "{has_router|ghost_router}" \
  "normal tx pipe error t20 cancel1 terminate2"
row alter_shards "alter_shards(text,text,boolean)" "GRANT EXECUTE ON FUNCTION alter_shards(text, text, boolean) TO ROLE" \
  "SELECT count(*) FROM alter_shards('COMMENT ON TABLE %I.posts IS ''x''')" 42501 \
  "SELECT count(*) FROM alter_shards('COMMENT ON TABLE %I.posts IS ''x''')" 42501 : "$local_variants"
row abandon_schema_change "abandon_schema_change(bigint)" "GRANT EXECUTE ON FUNCTION abandon_schema_change(bigint) TO ROLE" \
  "SELECT abandon_schema_change(0)" 55000 "SELECT abandon_schema_change(0)" 55000 : "$local_variants"
# The shard map for applications: every role's, with no grant.
row app_map "snowflake_id_router.app_map()" "SELECT 'nothing granted to ROLE'" \
  "SELECT count(*) FROM snowflake_id_router.app_map()" 00000 \
  "SELECT count(*) FROM snowflake_id_router.app_map()" 00000 : "$local_variants"
# The map a node keeps for applications: every role's, with no grant, on a node.
row node_app_map "app_map()" "SELECT 'nothing granted to ROLE'" \
  "SELECT count(*) FROM app_map()" 00000 "SELECT count(*) FROM app_map()" 00000 : "normal tx error t1" node_a
# A shard's copies compared on demand (reaches the nodes; an unknown node is 42704).
row verify_shard "verify_shard(integer,text)" "GRANT EXECUTE ON FUNCTION verify_shard(integer, text) TO ROLE" \
  "SELECT count(*) FROM verify_shard(0)" 00000 "SELECT count(*) FROM verify_shard(0, 'ghost')" 42704
# A move's revert window ended on demand: an unknown move (42704) and one that keeps
# nothing (55000; move ids start at 1 and this test's cluster has moved shards by then).
row finish_move "finish_move(bigint)" "GRANT EXECUTE ON FUNCTION finish_move(bigint) TO ROLE" \
  "SELECT finish_move(9223372036854775807)" 42704 "SELECT finish_move(1)" 55000 : "$local_variants"
# A split's plan (asks the node), and a split refused after it has connected to the node
# and to what it was told is its standby (another node; the router itself).
row split_plan "split_plan(text,integer,text)" "GRANT EXECUTE ON FUNCTION split_plan(text, integer, text) TO ROLE" \
  "SELECT count(*) FROM unnest(split_plan('node_a', 1))" 00000 "SELECT count(*) FROM unnest(split_plan('node_c'))" '*' "{broken}"
row split_node "split_node(text,text,text,integer,text,text)" \
  "GRANT EXECUTE ON FUNCTION split_node(text, text, text, integer, text, text) TO ROLE" \
  "SELECT split_node('node_a', 'half', '$(node_connstr node_b)', 1)" 55000 \
  "SELECT split_node('node_a', 'half', '$(router_db postgres)', 1)" 55000
# The fence trigger runs for a writer on a node while its shard is fenced (held there).
row fence "snowflake_id_node.fence()" \
  "GRANT USAGE ON SCHEMA shard_1 TO ROLE; GRANT INSERT ON shard_1.posts TO ROLE; GRANT USAGE ON SEQUENCE shard_1.table_id_seq TO ROLE" \
  "INSERT INTO shard_1.posts (user_id, body) VALUES (1, 'x')" 40001 \
  "INSERT INTO shard_1.posts (user_id, body) VALUES (1, 'x')" 40001 : "normal tx error" node_a
# The guard's event triggers run for a role's DDL on a node while its shard is fenced (shard 1,
# on node_b after the fence's row, held moving back to node_a; its
# DROP path is exercised by pg_test/sql/047_node_moves.sql and t_move_objects.sh).
row guard "snowflake_id_node.guard_ddl() snowflake_id_node.guard_drop()" \
  "GRANT USAGE, CREATE ON SCHEMA shard_1 TO ROLE" \
  "CREATE TABLE shard_1.guard_probe (a int)" 55000 \
  "CREATE TABLE shard_1.guard_probe (a int)" 55000 : "normal tx error" node_b

# The background rebalance (docs/cluster.md, in the background): the call returns once a
# worker running as the caller has the rebalance; the next variant first waits for its end.
background_grants="GRANT EXECUTE ON PROCEDURE rebalance_start(text, integer, text, text, integer) TO ROLE;
  GRANT EXECUTE ON FUNCTION snowflake_id_router.background_start(integer, integer), snowflake_id_router.background_step(integer, integer),
    snowflake_id_router.background_failed(integer, integer, text, text), snowflake_id_router.begin_background(text, text, integer, text) TO ROLE; $rebalance_grants"
bg_done() { on router -c "SELECT rebalance_wait()" >/dev/null 2>&1 || true; }
row rebalance_start "snowflake_id_router.rebalance_begin(text,text,integer,text,integer) snowflake_id_router.rebalance_hand_over(integer,integer) snowflake_id_router.rebalance_mine(integer,boolean) snowflake_id_router.rebalance_moving(integer) snowflake_id_router.rebalance_next(integer,boolean) snowflake_id_router.rebalance_move(integer,integer) snowflake_id_router.rebalance_failed(integer,integer,text,text)" \
  "$background_grants" "CALL rebalance_start()" 00000 "CALL rebalance_start('by_size')" 22023 "bg_done; unbalanced" "normal tx error"

echo "every SECURITY DEFINER function of both extensions is in the table"
secdef_sql="SELECT p.oid::regprocedure FROM pg_proc p
              JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
              JOIN pg_extension e ON e.oid = d.refobjid
             WHERE p.prosecdef AND e.extname IN ('snowflake_id', 'snowflake_id_router')"
all_secdef=$( { on router -c "$secdef_sql"; on node_a -c "$secdef_sql"; } | sort -u)
covered=" $(printf '%s ' "${covers[@]}") "
missing=()
while read -r f; do [[ $covered == *" $f "* ]] || missing+=("$f"); done <<<"$all_secdef"
((${#missing[@]} == 0)) || fail "SECURITY DEFINER functions this test's table of calls does not cover: ${missing[*]}"
echo "  $(wc -l <<<"$all_secdef") functions, covered by ${#rows[@]} calls"

# The caller's script for row i, variant v: the call, then what must hold, printed as lines
# CALL <sqlstate>, SESSIONS <n>[ list], PROBE <what it reached>, SESSION <what it holds>.
cat >"$work/check.sh" <<EOF
n=\$(bash $here/owner_sessions.sh 1)
[ "\$n" = 0 ] || n="\$n: \$(bash $here/owner_sessions.sh list | tr '\n' ';')"
echo "SESSIONS \$n"
# (tx) What the caller's backend holds, from another session of its server.
[ -z "\$LOCKS_AT" ] || echo "LOCKS \$(PGOPTIONS='-c client_min_messages=warning' psql -X -q -At \$LOCKS_AT -U postgres -d postgres -c \
  "SELECT coalesce(string_agg(format('%s %s %s/%s/%s', l.locktype, l.mode, coalesce(l.relation::regclass::text, l.classid::text), l.objid, l.objsubid), ', '), 'none')
     FROM pg_locks l WHERE l.pid = \$ME AND l.locktype NOT IN ('virtualxid', 'transactionid')
      AND NOT (l.locktype = 'relation' AND l.mode = 'AccessShareLock')")"
EOF
script() {
  local i=$1 v=$2 sql=$3 at=$4
  echo "SELECT pg_backend_pid() AS me \\gset"
  echo "\\setenv ME :me"
  echo "\\setenv READY $work/ready"
  echo "\\! echo \$ME > $work/me"
  echo "SELECT 'SESSION ' || public.sfid_session();"
  case $v in
    tx) echo "\\setenv LOCKS_AT '$at'"; echo "BEGIN;" ;;
    pipe) echo "\\setenv LOCKS_AT '$at'" ;;
    t[0-9]*) echo "SET statement_timeout = ${v#t};" ;;
    cancel*|terminate*)
      local kind=${v%%[0-9]*}
      echo "\\! rm -f $work/ready; (bash $here/owner_sessions.sh signal $kind ${v#$kind} >$work/signal.log 2>&1 &); while [ ! -e $work/ready ]; do sleep 0.005; done" ;;
  esac
  if [[ $v == pipe ]]; then
    # The call is the pipeline's first Execute; no Sync is sent until the checks are done.
    echo "\\startpipeline"
    echo "/* call */ $sql \\bind \\sendpipeline"
    echo "\\flushrequest"
    echo "\\getresults"
    echo "\\echo CALL :SQLSTATE"
    echo "\\! sh $work/check.sh"
    echo "\\endpipeline"
  else
    echo "/* call */ $sql;"
    echo "\\echo CALL :SQLSTATE"
  fi
  # (a timeout of 1 ms can cancel the RESET itself on a loaded machine: it is tried again)
  [[ $v == t[0-9]* ]] && printf 'RESET statement_timeout;\n%.0s' 1 2 3 4 5
  [[ $v == pipe ]] || echo "\\! sh $work/check.sh"
  echo "SELECT 'PROBE ' || public.sfid_probe();"
  [[ $v == tx ]] && echo "SELECT 'SESSION ' || public.sfid_session();" && echo "COMMIT;" && echo "SELECT 'PROBE ' || public.sfid_probe();"
  echo "SELECT 'SESSION ' || public.sfid_session();"
}
summary=()
run_case() {
  local i=$1 v=$2 name=${rows[$1]} sql want log=$work/case.log b got s
  b=${before[$i]}
  case $b in
    "{broken}") [[ $v == error ]] && broken_c ;;
    "{has_router|ghost_router}") if [[ $v == error ]]; then ghost_router; else has_router; fi ;;
    *) eval "$b" ;;
  esac
  if [[ $v == error ]]; then sql=${error[$i]}; want=${error_state[$i]}; else sql=${normal[$i]}; want=${normal_state[$i]}; fi
  while [[ $sql =~ \{other:([0-9]+)\} ]]; do sql=${sql//"${BASH_REMATCH[0]}"/$(other_than "${BASH_REMATCH[1]}")}; done
  rm -f "$work/signal.log"
  local host=$SF_TMP/sfrouter port=$ROUTER_PORT
  [[ ${server[$i]} == router ]] || { host=$(node_dir "${server[$i]}"); port=$(node_port "${server[$i]}"); }
  script "$i" "$v" "$sql" "-h $host -p $port" | PGOPTIONS="-c client_min_messages=warning" \
    psql -X -q -At -h "$host" -p "$port" -U "c_$name" -d postgres >"$log" 2>&1 || true
  [[ ${before[$i]} == "{broken}" && $v == error ]] && on router -c "$restore_c" >/dev/null
  got=$(sed -n 's/^CALL //p' "$log")
  local sig="" _
  if [[ $v == cancel* || $v == terminate* ]]; then   # the signaller's verdict, once it has one
    for _ in $(seq 100); do grep -q 'signal: ' "$work/signal.log" 2>/dev/null && break; sleep 0.05; done
    sig=$(grep -o 'signal: .*' "$work/signal.log" | head -1 | cut -c9- || true)
    # A call that answered although cancelled swallowed its caller's cancel.
    [[ $v != cancel* || $got != 00000 || $sig == *"ended before"* ]] \
      || fail "$name/$v: cancelled ($sig), the call still answered"
  fi
  if [[ $v == terminate* ]]; then
    s=$(ME=$(cat "$work/me") bash "$here/owner_sessions.sh" 2)
    [[ $s == 0 ]] || fail "$name/$v: $s sessions the router opened for the terminated caller are left 2 s later: $(ME=$(cat "$work/me") bash "$here/owner_sessions.sh" list)"
    [[ -n $got ]] || got=terminated
  else
    [[ -n $got ]] || fail "$name/$v: no outcome: $(cat "$log")"
    case $v in
      normal|tx|pipe) [[ $v == tx && $sql == CALL* ]] && want=2D000   # (a procedure that commits, in a transaction block)
        [[ $v == tx && " $refused_in_tx " == *" $name "* ]] && want=25001
        [[ $got == $want ]] || fail "$name/$v: ended with $got, not $want: $(grep -m1 ERROR "$log" || true)" ;;
      error) [[ $want == '*' || $got == $want ]] || fail "$name/$v: ended with $got, not $want: $(grep -m1 ERROR "$log" || true)" ;;
    esac
    grep '^SESSIONS ' "$log" | grep -qv '^SESSIONS 0$' && fail "$name/$v: the router's sessions for the caller are left: $(grep '^SESSIONS ' "$log")"
    grep -q '^SESSIONS 0$' "$log" || fail "$name/$v: the sessions were not checked: $(cat "$log")"
    if [[ $v == tx || $v == pipe ]]; then
      grep -q '^LOCKS ' "$log" || fail "$name/$v: the caller's locks were not checked: $(cat "$log")"
      grep '^LOCKS ' "$log" | grep -qv '^LOCKS none$' && fail "$name/$v: the call's locks outlive it in the caller's open transaction: $(grep '^LOCKS ' "$log")"
    fi
  fi
  if grep '^PROBE ' "$log" | grep -qv '^PROBE ok$'; then fail "$name/$v: the caller reached: $(grep '^PROBE ' "$log")"; fi
  if [[ $v != terminate* ]]; then
    [[ $(grep -c '^PROBE ok$' "$log") -ge 1 ]] || fail "$name/$v: not probed: $(cat "$log")"
    local first last
    first=$(grep -m1 '^SESSION ' "$log")
    while read -r last; do
      [[ $first == "$last" ]] || fail "$name/$v: the call left the caller's session changed: before '$first', after '$last'"
    done < <(grep '^SESSION ' "$log")
  fi
  summary+=("$v $got${sig:+ ($sig)}")
}

# Each row's role, granted only what the row says, then every variant.
hold_pid=""
for i in "${!rows[@]}"; do
  name=${rows[$i]}; srv=${server[$i]}
  [[ -z ${ONLY_ROWS:-} || " $ONLY_ROWS " == *" $name "* ]] || continue
  if [[ $srv == router ]]; then on router -c "CREATE ROLE c_$name LOGIN" -c "${grants[$i]//ROLE/c_$name}" >/dev/null
  else on_all -c "CREATE ROLE c_$name LOGIN"; on "$srv" -c "${grants[$i]//ROLE/c_$name}" >/dev/null; fi   # (a move carries its grants)
  if [[ $name == fence || $name == guard ]]; then
    # shard 1's move held once fenced, for the writer's (or DDL's) calls on its source
    on router -c "INSERT INTO snowflake_id_router.breakpoint (step) VALUES ('fenced')"
    on router -c "SELECT move_shard(1, '$([[ $name == fence ]] && echo node_b || echo node_a)')" >"$work/held.log" 2>&1 & hold_pid=$!; bg+=($hold_pid)
    for _ in $(seq 400); do
      [[ -n $(on router -c "SELECT pid FROM snowflake_id_router.breakpoint WHERE reached IS NOT NULL") ]] && break
      kill -0 "$hold_pid" 2>/dev/null || break; sleep 0.05
    done
    [[ -n $(on router -c "SELECT pid FROM snowflake_id_router.breakpoint WHERE reached IS NOT NULL") ]] \
      || fail "the move of shard 1 did not reach its fence: $(cat "$work/held.log")"
  fi
  summary=(); t0=$SECONDS
  for v in ${variants[$i]}; do
    [[ $v == pipe && -n ${no_pipe:-} ]] && continue
    [[ -z ${ONLY_VARIANTS:-} || " $ONLY_VARIANTS " == *" $v "* ]] && run_case "$i" "$v"
  done
  if [[ $name == fence || $name == guard ]]; then
    on router -c "DELETE FROM snowflake_id_router.breakpoint"; wait "$hold_pid" || fail "the held move failed: $(cat "$work/held.log")"
  fi
  no_router; no_node   # (what a call cut short may have left registered)
  echo "  $name ($((SECONDS - t0)) s): $(IFS=,; echo "${summary[*]}" | sed 's/,/, /g')"
done
no_router; no_node
on router -c "SELECT count(*) FROM repair_moves()" >/dev/null

echo "a rebalance's steps act only on the rebalance their own session runs"
# forger holds exactly the documented grants of CALL rebalance(); a superuser's drain of
# node_c runs, held at its first batch's move (the move's 'planned' breakpoint). The steps
# called with the drain's id are refused (42501), its record stays running, and forger's
# own rebalance is refused while the drain runs (55P03); released, the drain ends done.
as_forger() {
  printf '%s;\n\\echo STATE :SQLSTATE\n' "$1" | PGOPTIONS="-c client_min_messages=warning" \
    psql -X -q -At -h "$SF_TMP/sfrouter" -p "$ROUTER_PORT" -U forger -d postgres 2>&1 | sed -n 's/^STATE //p'
}
on router -c "CREATE ROLE forger LOGIN" -c "GRANT EXECUTE ON PROCEDURE rebalance(text, integer, text, integer) TO forger; ${rebalance_grants//ROLE/forger}" >/dev/null
c_full
on router -c "INSERT INTO snowflake_id_router.breakpoint (step) VALUES ('planned')"
on router -c "CALL drain_node('node_c', batch_size => 1)" >"$work/drain.log" 2>&1 & drain_pid=$!; bg+=($drain_pid)
for _ in $(seq 400); do
  [[ -n $(on router -c "SELECT pid FROM snowflake_id_router.breakpoint WHERE reached IS NOT NULL") ]] && break
  kill -0 "$drain_pid" 2>/dev/null || break; sleep 0.05
done
rid=$(on router -c "SELECT id FROM snowflake_id_router.rebalance WHERE state = 'running'")
batch=$(on router -c "SELECT min(batch) FROM snowflake_id_router.rebalance_batch WHERE rebalance = $rid AND state = 'moving'")
[[ -n $rid && -n $batch ]] || fail "the drain did not reach its first batch's move: $(cat "$work/drain.log")"
for forged in "SELECT * FROM snowflake_id_router.rebalance_failed($rid, NULL, '57014', 'forged')" \
              "SELECT snowflake_id_router.rebalance_next($rid, false)" \
              "SELECT snowflake_id_router.rebalance_move($rid, $batch)"; do
  got=$(as_forger "$forged")
  [[ $got == 42501 ]] || fail "forger's $forged ended with '$got', not 42501"
done
got=$(as_forger "CALL rebalance(batch_size => 1)")
[[ $got == 55P03 ]] || fail "forger's rebalance beside the running drain ended with '$got', not 55P03"
[[ $(on router -c "SELECT state || ' ' || coalesce(error, '-') FROM snowflake_id_router.rebalance WHERE id = $rid") == "running -" ]] \
  || fail "the drain's record changed: $(on router -c "SELECT state, error FROM snowflake_id_router.rebalance WHERE id = $rid")"
on router -c "DELETE FROM snowflake_id_router.breakpoint"
wait "$drain_pid" || fail "the drain failed: $(cat "$work/drain.log")"
[[ $(on router -c "SELECT state FROM rebalance_status WHERE id = $rid") == done ]] \
  || fail "the drain did not end done: $(on router -c "SELECT state, error FROM rebalance_status WHERE id = $rid")"
[[ $(on router -c "SELECT count(*) FROM snowflake_id_router.rebalance WHERE id > $rid") == 0 ]] \
  || fail "a second rebalance was recorded beside drain $rid"
echo "  rebalance_failed, rebalance_next and rebalance_move of drain $rid from forger's session: 42501; its CALL rebalance(): 55P03; the drain ended done"

echo "a rebalance's steps run only in the procedure that runs it"
# idler holds the documented grants of CALL drain_node(). Its direct call of rebalance_begin
# is refused (25000: a step runs only in the procedure's transactions), and so is the same
# call from its own procedure or a DO block that commits first (so that the step's
# transaction starts after the statement, as run_rebalance's do): a step's caller must be
# run_rebalance. Nothing is recorded.
on router -c "CREATE ROLE idler LOGIN" \
  -c "GRANT EXECUTE ON PROCEDURE drain_node(text, text, integer, text, integer), rebalance(text, integer, text, integer) TO idler; ${rebalance_grants//ROLE/idler}" \
  -c "GRANT EXECUTE ON FUNCTION rebalance_stop() TO idler" >/dev/null
c_full
as_idler() {
  printf '%s;\n\\echo STATE :SQLSTATE\n' "$1" | PGOPTIONS="-c client_min_messages=warning" \
    psql -X -q -At -h "$SF_TMP/sfrouter" -p "$ROUTER_PORT" -U idler -d postgres 2>&1 | sed -n 's/^STATE //p'
}
before=$(on router -c "SELECT coalesce(max(id), 0) FROM snowflake_id_router.rebalance")
got=$(as_idler "SELECT snowflake_id_router.rebalance_begin('node_c', 'by_shard_count', 32, 'tpl', 1)")
[[ $got == 25000 ]] || fail "idler's direct rebalance_begin ended with '$got', not 25000"
on router -c "CREATE PROCEDURE public.idler_begin() LANGUAGE plpgsql AS \$\$ BEGIN COMMIT;
    PERFORM snowflake_id_router.rebalance_begin('node_c', 'by_shard_count', 32, 'tpl', 1); END \$\$" \
  -c "ALTER PROCEDURE public.idler_begin() OWNER TO idler" >/dev/null
got=$(as_idler "CALL public.idler_begin()")
[[ $got == 25000 ]] || fail "idler's own procedure's rebalance_begin ended with '$got', not 25000"
got=$(as_idler "DO \$\$ BEGIN COMMIT; PERFORM snowflake_id_router.rebalance_begin('node_c', 'by_shard_count', 32, 'tpl', 1); END \$\$")
[[ $got == 25000 ]] || fail "idler's DO block's rebalance_begin ended with '$got', not 25000"
[[ $(on router -c "SELECT count(*) FROM snowflake_id_router.rebalance WHERE id > $before") == 0 ]] || fail "idler's refused steps recorded a rebalance"
on router -c "DROP PROCEDURE public.idler_begin()" >/dev/null
echo "  idler's rebalance_begin directly, from its own procedure and from a DO block (each committing first): 25000, nothing recorded"

echo "a move that waited for the schema-change lock leaves nothing of its wait in the caller's transaction"
# A superuser's session holds the schema-change lock (exclusive, as alter_shards does) for
# 2 s; waiter's move, inside BEGIN, waits for it (with a lock_timeout of its own making),
# then moves. Before the COMMIT the caller holds no owner-only lock (the one taken by the
# wait, in a PL/pgSQL block, given back too) and its lock_timeout is its own again.
on router -c "CREATE ROLE waiter LOGIN" -c "GRANT EXECUTE ON FUNCTION move_shard(integer, text, text) TO waiter" >/dev/null
on router -c "BEGIN" -c "SELECT snowflake_id_node.own_lock(snowflake_id_node.lock_class(), -1, false, false, false)" \
  -c "SELECT pg_sleep(2)" -c "COMMIT" >/dev/null & holder=$!; bg+=($holder)
sleep 0.5
out=$(printf "SET lock_timeout = '7s';\nBEGIN;\nSELECT move_shard(0, '%s');\nSELECT 'locks ' || count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory';\nSHOW lock_timeout;\nCOMMIT;\n" "$(other_than 0)" \
  | PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -h "$SF_TMP/sfrouter" -p "$ROUTER_PORT" -U waiter -d postgres 2>&1)
wait "$holder"
[[ $(grep -v '^$' <<<"$out") == "locks 0"$'\n'"7s" ]] || fail "the move's wait for the schema-change lock left in the caller's transaction: $out"
echo "  the move waited for the schema-change lock; then, in the caller's transaction: no owner-only lock, lock_timeout 7s"

echo "a superuser's kept connections, and another role's SECURITY DEFINER function in that session"
# grabber owns a SECURITY DEFINER function and is granted the registry's functions and the
# router's wrappers, as if an administrator had (the worst case): it must still reach none
# of the connections the superuser's session keeps, by name, through dblink or SET ROLE.
on router >/dev/null <<'SQL'
CREATE ROLE grabber;
GRANT USAGE ON SCHEMA snowflake_id_node, snowflake_id_router TO grabber;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA snowflake_id_node TO grabber;
GRANT EXECUTE ON FUNCTION snowflake_id_router.fetch(text, text), snowflake_id_router.node_conn_name(text) TO grabber;
CREATE FUNCTION public.grab() RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c text;
    reached text[] := '{}';
    names text[];
BEGIN
    names := snowflake_id_node.remote_names();
    IF cardinality(names) > 0 THEN
        reached := reached || ('remote_names ' || names::text);
    END IF;
    FOREACH c IN ARRAY ARRAY['sfid:self', snowflake_id_router.node_conn_name('node_a'), snowflake_id_router.node_conn_name('node_b'),
                             snowflake_id_router.node_conn_name('node_c')] LOOP
        BEGIN PERFORM snowflake_id_node.remote_send(c, 'ALTER ROLE grabber SUPERUSER'); reached := reached || ('remote_send ' || c);
        EXCEPTION WHEN OTHERS THEN NULL; END;
        BEGIN PERFORM snowflake_id_router.fetch(c, 'ALTER ROLE grabber SUPERUSER'); reached := reached || ('fetch ' || c);
        EXCEPTION WHEN OTHERS THEN NULL; END;
        BEGIN PERFORM snowflake_id_node.remote_pid(c); reached := reached || ('remote_pid ' || c);
        EXCEPTION WHEN OTHERS THEN NULL; END;
        IF snowflake_id_node.remote_connstr(c) IS NOT NULL THEN reached := reached || ('remote_connstr ' || c); END IF;
        BEGIN PERFORM snowflake_id_node.remote_keep(c, true); reached := reached || ('remote_keep ' || c);
        EXCEPTION WHEN OTHERS THEN NULL; END;
        BEGIN PERFORM public.dblink_exec(c, 'ALTER ROLE grabber SUPERUSER'); reached := reached || ('dblink ' || c);
        EXCEPTION WHEN OTHERS THEN NULL; END;
    END LOOP;
    IF public.dblink_get_connections() IS NOT NULL THEN
        reached := reached || ('dblink connections ' || public.dblink_get_connections()::text);
    END IF;
    RETURN coalesce(nullif(array_to_string(reached, '; '), ''), 'nothing');
END
$$;
ALTER FUNCTION public.grab() OWNER TO grabber;
SQL
target=$(other_than 0)
out=$(on router 2>&1 <<SQL
SET snowflake_id_router.keep_connections = on;
SELECT move_shard(0, '$target');
SELECT 'kept ' || array_length(snowflake_id_node.remote_names(), 1);
SELECT 'grab ' || public.grab();
SET ROLE grabber;
SELECT 'as grabber ' || coalesce(array_length(snowflake_id_node.remote_names(), 1), 0);
RESET ROLE;
SELECT 'kept ' || array_length(snowflake_id_node.remote_names(), 1);
SQL
) || fail "the superuser's session failed: $out"
[[ $(grep -c '^kept 2$' <<<"$out") == 2 ]] || fail "the superuser's session did not keep its two node connections: $out"
grep -q '^grab nothing$' <<<"$out" || fail "another role's SECURITY DEFINER function reached the kept connections: $out"
grep -q '^as grabber 0$' <<<"$out" || fail "SET ROLE reached the kept connections: $out"
[[ $(on router -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'grabber'") == f ]] || fail "grabber became a superuser"
echo "  the superuser's session kept 2 node connections across the move; grabber's function and SET ROLE grabber reached none of them"

router_invariants "$work"
