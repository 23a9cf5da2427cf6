#!/usr/bin/env bash
# What a move refuses, and what no mistake or fault turns into lost data (issue 25, issue 19
# items 7 and 8; docs/cluster.md, "What a move refuses"). A router and three data nodes, no
# load: each case is a mistake or fault, then what must hold. Each refusal comes before
# anything is made (or is undone) with its SQLSTATE and a message naming the object, and
# leaves nothing on any node; the data stays where it was.
#   25.1  a schema of the shard's name already on the target; a node's registry entry
#         pointed at another node's database; a node named 'self' (the loopback
#         connection's name) and one named with 63 bytes reached
#   25.5  a target template without the primary key, or with narrower types; a trigger or an
#         extra index on the shard that the template lacks: refused while preparing, before any row is copied (issue
#         21's template check); owners and privileges carried (an app role works after the
#         move), a role missing on the target refused
#   19.8  identity sequences carried
#   19.7  an unlogged table; a view outside depending on the shard; the row counts compared
#   25.3  DDL during the copy: a table added with rows, a column added
#   20    while a move is fenced, another waits before its heavy steps (the fence gate),
#         opened after the flip and after a failure; a session keeping its node connections
#         from move to move holds no lock between moves and opens a repointed node's again
#   25.4  RUN ON ALL during the copy, and with a stale copy left by an interrupted move
#   25.2  two router databases over the same nodes: a live move of the other router's
#         refused (55P03), a dead one neither taken over nor in the way once repaired
#   25.6  a long transaction on the source: bounded by copy_timeout, blockers named; the mover
#         cancelled or terminated meanwhile: nothing left after the re-run
#   25.7  the source restarted while fenced: undone once it is back, nothing left
#   25.10 no free replication slot on the source: refused at once; no table-sync worker on the
#         target: not needed (the target copies the rows itself); the copy failing on the
#         target (a key already there): reported at once, with its own SQLSTATE
#   25.11 a long reader on the source: the clean-up gives up within lock_timeout, the move is
#         done, a repair finishes; a dump of a fenced source restores writable, and its
#         leftovers are removed by name
#   25.8  a subscription of the move's name in another database of the target: untouched
# Every case ends with nothing left by a move on any node; the end, with router_invariants.
set -euo pipefail
shopt -s extglob
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"; mkdir "$work/dump"; chown postgres: "$work/dump"
bg=()
trap 'kill "${bg[@]}" 2>/dev/null || true; router_cluster_down; rm -rf "$work"' EXIT
SHARDS_PER_NODE=8 router_cluster_up
router8=$(on router -c "SELECT left(md5(snowflake_id_node.identity()), 8)")

# refused SQLSTATE PATTERN SQL: the router refuses SQL with SQLSTATE, the message naming PATTERN.
refused() {
  local code=$1 pat=$2 err; shift 2
  if err=$(on router -v VERBOSITY=verbose -c "$1" 2>&1 >/dev/null); then fail "accepted: $1"; fi
  [[ $err == *"ERROR:  $code:"* ]] || fail "expected $code for $1, got: $err"
  [[ $err == *$pat* ]] || fail "the refusal of $1 does not say '$pat': $err"
  printf '  %s  %s\n' "$1" "$(grep -m1 -o 'ERROR:  .*' <<<"$err" | cut -c8- | cut -c1-160)"
}
# clean WHAT: nothing a move made is left on any node.
clean() {
  local n left
  for n in "${ROUTER_NODES[@]}"; do
    left=$(on "$n" -c "SELECT string_agg(x, '; ') FROM snowflake_id_node.leftovers() x")
    [[ -z $left ]] || fail "$1: left on $n: $left"
  done
}
rows() { on "$1" -c "SELECT count(*) FROM $2"; }
served_by() { on router -c "SELECT node FROM shard_map WHERE shard = $1"; }
on_all() { local n; for n in "${ROUTER_NODES[@]}"; do on "$n" "$@"; done; }
for s in 0 1 2 3 4 5 6 7; do on node_a -c "INSERT INTO shard_$s.posts (user_id, body) SELECT 42, 'row' FROM generate_series(1, 100)"; done

echo "25.1: a move never drops on the target what it did not make"
on node_b -c "CREATE SCHEMA shard_0" -c "CREATE TABLE shard_0.mine AS SELECT generate_series(1, 500) AS n"
refused 42P06 'already has a schema shard_0' "SELECT move_shard(0, 'node_b')"
[[ $(rows node_b shard_0.mine) == 500 && $(served_by 0) == node_a && $(rows node_a shard_0.posts) == 100 ]] || fail "25.1: data moved or lost"
on node_b -c "DROP SCHEMA shard_0 CASCADE"
b_connstr=$(on router -c "SELECT connstr FROM snowflake_id_router.node WHERE name = 'node_b'")
on router -c "UPDATE snowflake_id_router.node SET connstr = (SELECT connstr FROM snowflake_id_router.node WHERE name = 'node_a') WHERE name = 'node_b'"
refused 55000 'now reaches another database' "SELECT move_shard(1, 'node_b')"
on router -c "UPDATE snowflake_id_router.node SET connstr = \$\$$b_connstr\$\$ WHERE name = 'node_b'"
[[ $(rows node_a shard_1.posts) == 100 ]] || fail "25.1: shard 1 lost rows"
clean 25.1

echo "25.5: the target's copy must be the shard, before any row moves"
on node_c -c "CREATE SCHEMA tpl_nopk" -c "CREATE TABLE tpl_nopk.posts (id bigint, user_id bigint NOT NULL, body text NOT NULL, edits integer NOT NULL DEFAULT 0)" \
  -c "CREATE INDEX ON tpl_nopk.posts (user_id, id)" \
  -c "CREATE SCHEMA tpl_narrow" -c "CREATE TABLE tpl_narrow.posts (id bigint PRIMARY KEY, user_id bigint NOT NULL, body varchar(3) NOT NULL, edits smallint NOT NULL DEFAULT 0)" \
  -c "CREATE INDEX ON tpl_narrow.posts (user_id, id)"
# (Refused while preparing, before any row is copied: the seal would catch it too, but only
# after the copy and the fence.)
# (Shard 1 as made before 0.4.0, no template recorded: a move takes the template named.)
on node_a -c "UPDATE snowflake_id_shard SET template = NULL WHERE shard = 1" >/dev/null
refused 55000 'failed while preparing: shard 1 (schema shard_1) differs from its copy: column posts.id: (bigint NOT NULL, position 1)' "SELECT move_shard(1, 'node_c', 'tpl_nopk')"
refused 55000 'failed while preparing: shard 1 (schema shard_1) differs from its copy: column posts.body' "SELECT move_shard(1, 'node_c', 'tpl_narrow')"
# (A trigger the template has moves with the shard: t_move_keys_triggers.)
on node_a -c "CREATE FUNCTION public.audit() RETURNS trigger LANGUAGE plpgsql AS \$\$BEGIN RETURN NEW; END\$\$" \
  -c "CREATE TRIGGER audit AFTER INSERT ON shard_2.posts FOR EACH ROW EXECUTE FUNCTION public.audit()"
refused 55000 'failed while preparing: shard 2 (schema shard_2) differs from its copy: trigger on posts: CREATE TRIGGER audit' "SELECT move_shard(2, 'node_b')"
on node_a -c "DROP FUNCTION public.audit() CASCADE" -c "CREATE INDEX posts_by_body ON shard_2.posts (body)"
refused 55000 'failed while preparing: shard 2 (schema shard_2) differs from its copy: index on posts: CREATE INDEX ON %I.posts USING btree (body)' "SELECT move_shard(2, 'node_b')"
on node_a -c "DROP INDEX shard_2.posts_by_body"
clean 25.5
# Owners and privileges: an application role that connects as itself keeps its rights.
on_all -c "CREATE ROLE app LOGIN" -c "CREATE ROLE shard_owner"
on node_a -c "CREATE ROLE only_here" -c "ALTER TABLE shard_3.posts OWNER TO shard_owner" \
  -c "GRANT USAGE ON SCHEMA shard_3 TO app" -c "GRANT SELECT, INSERT ON shard_3.posts TO app" \
  -c "GRANT UPDATE (body) ON shard_3.posts TO app" -c "GRANT USAGE ON SEQUENCE shard_3.table_id_seq TO app" \
  -c "GRANT SELECT ON shard_3.posts TO only_here"
refused 55000 'role only_here does not exist on this node' "SELECT move_shard(3, 'node_b')"
on node_a -c "REVOKE SELECT ON shard_3.posts FROM only_here"
acl_query="SELECT c.relowner::regrole, array(SELECT x::text FROM unnest(c.relacl) x ORDER BY 1),
                  (SELECT array_agg(a.attname || '=' || a.attacl::text) FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attacl IS NOT NULL)
             FROM pg_class c WHERE c.oid = 'shard_3.posts'::regclass"
before=$(on node_a -c "$acl_query")
on router -c "SELECT move_shard(3, 'node_b')" >/dev/null
after=$(on node_b -c "$acl_query")
[[ $after == "$before" ]] || fail "25.5: the owner and privileges of shard_3.posts were $before on node_a, are $after on node_b"
psql -X -q -At -v ON_ERROR_STOP=1 -h "$(node_dir node_b)" -p "$(node_port node_b)" -U app -d postgres \
  -c "INSERT INTO shard_3.posts (user_id, body) VALUES (1, 'as app')" -c "UPDATE shard_3.posts SET body = 'x' WHERE false" \
  -c "SELECT count(*) FROM shard_3.posts" >/dev/null || fail "25.5: the app role lost its rights on the moved shard"
echo "  owner and privileges carried ($after); the app role writes to the moved shard"
clean 25.5

echo "19.8: every sequence carried, identity ones too"
on_all -c "CREATE SCHEMA tpl2" -c "CREATE TABLE tpl2.posts (LIKE tpl.posts INCLUDING ALL)" \
  -c "CREATE TABLE tpl2.counters (id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text)"
on node_a -c "SELECT create_shard('ident_100', 100, template => 'tpl2')" -c "INSERT INTO ident_100.counters (v) SELECT 'old' FROM generate_series(1, 5)" >/dev/null
on router -c "SELECT move_shard(100, 'node_b', 'tpl2')" >/dev/null
next=$(on node_b -c "INSERT INTO ident_100.counters (v) VALUES ('new') RETURNING id") || fail "19.8: an insert after the move failed (identity not carried)"
[[ $next == 6 ]] || fail "19.8: the identity continued at $next, not 6"
echo "  counters' identity continues at $next on node_b"
clean 19.8

echo "19.7: what a move would not carry, or would drop, is refused; the rows are counted"
on node_a -c "CREATE UNLOGGED TABLE shard_4.scratch (id bigint PRIMARY KEY)" -c "INSERT INTO shard_4.scratch SELECT generate_series(1, 10)"
refused 55000 'unlogged table shard_4.scratch' "SELECT move_shard(4, 'node_b')"
on node_a -c "DROP TABLE shard_4.scratch" -c "CREATE VIEW public.feed4 AS SELECT * FROM shard_4.posts"
refused 55000 'view public.feed4 depends on table shard_4.posts' "SELECT move_shard(4, 'node_b')"
[[ $(rows node_a public.feed4) == 100 ]] || fail "19.7: the view outside lost its rows"
on node_a -c "DROP VIEW public.feed4"
clean 19.7
held 'catching up' "SELECT move_shard(4, 'node_b')"
# (the copy refuses every write but its move's, which writes as a replica: a superuser's as one)
on node_b -c "SET session_replication_role = replica" -c "INSERT INTO shard_4.posts (id, user_id, body) VALUES (1, 0, 'not on the source')"
release
if wait "$mover"; then fail "19.7: a move whose copy holds other rows succeeded"; fi
grep -q "55000: moving shard 4 from node 'node_a' to node 'node_b' failed while comparing the copies: the copy on node 'node_b' does not hold the rows" "$work/mover.log" \
  || fail "19.7: $(cat "$work/mover.log")"
diff4=$(grep -o "does not hold the rows of node 'node_a': table shard_4.posts.*" "$work/mover.log" | cut -d: -f2- | cut -c1-160) \
  || fail "19.7: the refusal does not name the table: $(cat "$work/mover.log")"
echo "  the copy holding another row:$diff4"
[[ $(served_by 4) == node_a && $(rows node_a shard_4.posts) == 100 ]] || fail "19.7: shard 4 is not whole on node_a"
clean 19.7

echo "25.3: DDL during the copy is refused and undone, nothing of it lost"
held subscribed "SELECT move_shard(5, 'node_c')"
on node_a -c "CREATE TABLE shard_5.likes (id bigint PRIMARY KEY)" -c "INSERT INTO shard_5.likes SELECT generate_series(1, 50)"
release
if wait "$mover"; then fail "25.3: a move whose shard gained a table during the copy succeeded"; fi
echo "  a table added with rows: $(grep -m1 -o 'ERROR:  .*' "$work/mover.log" | cut -c8- | cut -c1-200)"
[[ $(served_by 5) == node_a && $(rows node_a shard_5.likes) == 50 ]] || fail "25.3: the new table's rows are not on node_a"
on node_a -c "DROP TABLE shard_5.likes"
clean 25.3
# (the failed move's session then says whether it still holds the fence gate closed)
held 'catching up' "DO \$\$ BEGIN PERFORM move_shard(5, 'node_c'); EXCEPTION WHEN OTHERS THEN
  RAISE EXCEPTION '% (fence gate closed here: %)', SQLERRM, snowflake_id_router.gate_closed_here() USING ERRCODE = SQLSTATE; END \$\$"
echo "20: while a move is fenced, another waits before its heavy steps"
on router -c "SELECT move_shard(1, 'node_b')" -c "SELECT 'fence gate closed here: ' || snowflake_id_router.gate_closed_here()" \
  >"$work/second.log" 2>&1 & second=$!; bg+=($second)
state() { on router -c "SELECT state FROM snowflake_id_router.move WHERE shards = '{1}' AND ended IS NULL"; }
for _ in $(seq 200); do [[ $(state) == preparing ]] && break; sleep 0.05; done
sleep 1
[[ $(state) == preparing && $(on node_b -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_1'") == 0 ]] \
  || fail "20: a second move went on to '$(state)' (copies made on node_b) while another was fenced"
on node_a -c "INSERT INTO shard_1.posts (user_id, body) VALUES (7, 'written while its move waits')" >/dev/null \
  || fail "20: shard 1 refused a write while its move waited at the gate"
# DDL on a fenced shard is refused at once (55000); with the guard disabled (a superuser's
# choice), the seal still sees it under its locks, and the move fails in its fence.
if out=$(on node_a -v VERBOSITY=verbose -c "ALTER TABLE shard_5.posts ADD COLUMN visibility text NOT NULL DEFAULT 'private'" 2>&1); then
  fail "25.3: a column was added to a fenced shard"
fi
[[ $out == *'ERROR:  55000:'*'the shard is being moved'* ]] || fail "25.3: DDL on a fenced shard: $out"
on node_a -c "ALTER EVENT TRIGGER snowflake_id_guard_ddl DISABLE" \
          -c "ALTER TABLE shard_5.posts ADD COLUMN visibility text NOT NULL DEFAULT 'private'" \
          -c "ALTER EVENT TRIGGER snowflake_id_guard_ddl ENABLE ALWAYS"
release
if wait "$mover"; then fail "25.3: a move whose shard gained a column under the fence succeeded"; fi
grep -q "changed during the move: column posts.visibility" "$work/mover.log" || fail "25.3: $(cat "$work/mover.log")"
echo "  a column added: $(grep -m1 -o 'ERROR:  .*' "$work/mover.log" | cut -c8- | cut -c1-200)"
[[ $(served_by 5) == node_a ]] || fail "25.3: shard 5 left node_a"
grep -q "(fence gate closed here: f)" "$work/mover.log" || fail "20: a move failed in its fence and its session kept the gate closed: $(cat "$work/mover.log")"
wait "$second" || fail "20: the move that waited at the gate failed: $(cat "$work/second.log")"
[[ $(served_by 1) == node_b && $(tail -1 "$work/second.log") == 'fence gate closed here: false' ]] \
  || fail "20: after the move that waited at the gate: shard 1 on $(served_by 1); $(cat "$work/second.log")"
echo "  the second move waited, its shard writable and no copy made, then moved; each session opened the gate after its move"
on router -c "SELECT move_shard(1, 'node_a')" >/dev/null
on node_a -c "ALTER TABLE shard_5.posts DROP COLUMN visibility"
clean 25.3

echo "25.4: a fan-out sees each shard once"
feed() { on router -c "SELECT count(*) || ' ' || count(DISTINCT id) FROM user_feed(42, 100000)"; }
full=$(feed)
held subscribed "SELECT move_shard(6, 'node_c')"
sleep 1   # (the copy runs meanwhile)
[[ $(feed) == "$full" ]] || fail "25.4: user_feed during the copy: $(feed), before: $full"
on router -c "SELECT pg_terminate_backend($mpid)" >/dev/null
wait "$mover" || true
release
[[ $(feed) == "$full" ]] || fail "25.4: user_feed with a stale copy left: $(feed), before: $full"
on router -c "SELECT move_shard(6, 'node_c')" >/dev/null
[[ $(feed) == "$full" ]] || fail "25.4: user_feed after the move: $(feed), before: $full"
echo "  user_feed: $full rows (distinct) during the copy, with a stale copy left, and after"
clean 25.4

echo "25.2: two router databases over the same nodes"
on router -c "CREATE DATABASE router2"
r2() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 -h "$SF_TMP/sfrouter" -p "$ROUTER_PORT" -U postgres -d router2 "$@"; }
r2 -c "CREATE EXTENSION snowflake_id_router CASCADE" >/dev/null
for n in "${ROUTER_NODES[@]}"; do r2 -c "SELECT add_node('$n', '$(node_connstr "$n")')" 2>/dev/null >/dev/null; done
on router -c "COPY snowflake_id_router.shard TO STDOUT" | r2 -c "COPY snowflake_id_router.shard FROM STDIN"
held fenced "SELECT move_shard(7, 'node_b')"
err=$(r2 -v VERBOSITY=verbose -c "SELECT move_shard(7, 'node_c')" 2>&1 >/dev/null || true)
[[ $err == *'ERROR:  55P03:'*'shard 7 is being moved or repaired by another session'* ]] || fail "25.2: the other router's live move was not refused: $err"
echo "  the other router, while this one's move lives: $(grep -m1 -o 'ERROR:  .*' <<<"$err" | cut -c8- | cut -c1-160)"
on router -c "SELECT pg_terminate_backend($mpid)" >/dev/null
wait "$mover" || true
release
err=$(r2 -v VERBOSITY=verbose -c "SELECT move_shard(7, 'node_c')" 2>&1 >/dev/null || true)
[[ $err == *'ERROR:  55000:'*"move $router8/"*'of another router'* ]] || fail "25.2: the other router took over a dead move: $err"
echo "  the other router, this one's move dead: $(grep -m1 -o 'ERROR:  .*' <<<"$err" | cut -c8- | cut -c1-200)"
on node_a -c "INSERT INTO shard_7.posts (user_id, body) VALUES (0, 'fence dissolved')" >/dev/null || fail "25.2: the dead fence refuses writes"
on router -c "SELECT count(*) FROM repair_moves()" >/dev/null
r2 -c "SELECT move_shard(7, 'node_c')" >/dev/null
err=$(on router -v VERBOSITY=verbose -c "SELECT move_shard(7, 'node_b')" 2>&1 >/dev/null || true)
[[ $err == *'ERROR:  55000:'*'no schema for shard 7'* ]] || fail "25.2: a router with a stale map moved a shard it does not have: $err"
echo "  this router, its map now stale: $(grep -m1 -o 'ERROR:  .*' <<<"$err" | cut -c8- | cut -c1-160)"
r2 -c "SELECT move_shard(7, 'node_a')" >/dev/null
[[ $(rows node_a shard_7.posts) == 101 ]] || fail "25.2: shard 7 holds $(rows node_a shard_7.posts) rows, not 101"
on router -c "DROP DATABASE router2"
clean 25.2

echo "25.6: a long transaction on the source holds the slot back; every wait is bounded"
on node_a -c "BEGIN" -c "SELECT txid_current()" -c "SELECT pg_sleep(60)" >/dev/null 2>&1 & bg+=($!)
sleep 0.5
on router -c "INSERT INTO snowflake_id_router.setting VALUES ('copy_timeout', '2 s')"
t0=$SECONDS
refused 57014 'Running there: pid' "SELECT move_shard(2, 'node_b')"
((SECONDS - t0 < 20)) || fail "25.6: the move took $((SECONDS - t0)) s with copy_timeout = 2 s"
clean 25.6
on router -c "DELETE FROM snowflake_id_router.setting"
for how in cancel terminate; do
  on router -c "SELECT move_shard(2, 'node_b')" >"$work/mover.log" 2>&1 & mover=$!
  for _ in $(seq 200); do
    [[ $(on router -c "SELECT count(*) FROM move_history WHERE outcome = 'running: copying'") == 1 ]] && break
    sleep 0.05
  done
  sleep 0.5
  t0=$SECONDS
  on router -c "SELECT pg_${how}_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT move_shard(2, ''node_b'')'" >/dev/null
  if wait "$mover"; then fail "25.6: the mover succeeded though its backend got pg_${how}_backend"; fi
  ((SECONDS - t0 < 10)) || fail "25.6: pg_${how}_backend: the mover took $((SECONDS - t0)) s to stop"
  echo "  pg_${how}_backend of the mover while the slot waited: $(grep -m1 -o 'ERROR:  .*\|FATAL:  .*' "$work/mover.log" | cut -c1-180)"
  [[ $how == terminate ]] || clean "25.6 ($how)"
done
kill "${bg[@]}" 2>/dev/null || true
on node_a -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'" >/dev/null
on router -c "SELECT move_shard(2, 'node_b')" >/dev/null   # the terminated move undone first
[[ $(served_by 2) == node_b && $(rows node_b shard_2.posts) == 100 ]] || fail "25.6: shard 2 did not move whole after the re-run"
clean 25.6

echo "25.7: the source restarted while fenced"
held fenced "SELECT move_shard(2736, 'node_c')"
cluster_stop sfnode_b immediate
node_restart node_b
release
if wait "$mover"; then fail "25.7: the move succeeded across its source's restart"; fi
grep -q "everything the move made is removed" "$work/mover.log" || fail "25.7: the error does not say the move was undone: $(cat "$work/mover.log")"
echo "  $(grep -m1 -o 'ERROR:  .*' "$work/mover.log" | cut -c8- | cut -c1-160)"
on node_b -c "INSERT INTO shard_2736.posts (user_id, body) VALUES (0, 'after the restart')" >/dev/null || fail "25.7: shard 2736 refuses writes"
clean 25.7

echo "25.10: refused at once, not after copy_timeout"
free=$(on node_a -c "SELECT current_setting('max_replication_slots')::int - count(*) FROM pg_replication_slots")
on node_a -c "SELECT count(pg_create_physical_replication_slot('filler_' || i)) FROM generate_series(1, $free) i" >/dev/null
refused 55000 'free replication slots' "SELECT move_shard(0, 'node_c')"
on node_a -c "SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots WHERE slot_name LIKE 'filler%'" >/dev/null
# The copy itself failing on the target (a key there already): reported at once, with the
# target's own error, not after copy_timeout.
on router -c "INSERT INTO snowflake_id_router.setting VALUES ('copy_timeout', '20 s')"
held copying "SELECT move_shard(0, 'node_c')"
# (as a replica: the only write, besides its move's, that the copy does not refuse)
on node_c -c "SET session_replication_role = replica" \
  -c "INSERT INTO shard_0.posts (id, user_id, body) VALUES ($(on node_a -c "SELECT min(id) FROM shard_0.posts"), 0, 'already here')"
t0=$SECONDS
release
if wait "$mover"; then fail "25.10: a move whose copy failed on the target succeeded"; fi
((SECONDS - t0 < 10)) || fail "25.10: the copy's failure was reported after $((SECONDS - t0)) s (copy_timeout 20 s), not at once: $(cat "$work/mover.log")"
grep -q "23505: .*duplicate key" "$work/mover.log" || fail "25.10: $(cat "$work/mover.log")"
echo "  the copy failing on the target: $(grep -m1 -o 'ERROR:  .*' "$work/mover.log" | cut -c8- | cut -c1-200)"
on router -c "DELETE FROM snowflake_id_router.setting"
[[ $(served_by 0) == node_a && $(rows node_a shard_0.posts) == 100 ]] || fail "25.10: shard 0 is not whole on node_a"
clean 25.10
# The copy is made by the target itself (copy_rows), not by table-sync workers: the next
# move, onto node_c, runs with none there.
on node_c -c "ALTER SYSTEM SET max_sync_workers_per_subscription = 0" -c "SELECT pg_reload_conf()" >/dev/null

echo "25.11: a long reader on the source does not hold the move; a dump of a fenced source"
on node_a -c "BEGIN" -c "SELECT count(*) FROM shard_0.posts" -c "SELECT pg_sleep(30)" >/dev/null 2>&1 & reader=$!; bg+=($reader)
sleep 0.5
t0=$SECONDS
on router -c "SET client_min_messages = warning" -c "SELECT move_shard(0, 'node_c')" >/dev/null 2>"$work/warn.log"
((SECONDS - t0 < 15)) || fail "25.11: the move waited $((SECONDS - t0)) s behind a reader"
grep -q "done, but its clean-up is not" "$work/warn.log" || fail "25.11: no warning about the clean-up: $(cat "$work/warn.log")"
[[ $(served_by 0) == node_c ]] || fail "25.11: shard 0 is not on node_c"
on node_c -c "ALTER SYSTEM RESET max_sync_workers_per_subscription" -c "SELECT pg_reload_conf()" >/dev/null
echo "  $(grep -m1 -o 'WARNING:  .*' "$work/warn.log" | cut -c10- | cut -c1-200)"
kill "$reader" 2>/dev/null || true
on node_a -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)'" >/dev/null
on router -c "SELECT outcome FROM repair_moves() WHERE move IS NOT NULL" | grep -q completed || fail "25.11: repair_moves did not finish the clean-up"
clean 25.11
held fenced "SELECT move_shard(1, 'node_c')"
sudo -u postgres "$PGBIN/pg_dump" -h "$(node_dir node_a)" -p "$(node_port node_a)" -U postgres -Fc -f "$work/dump/fenced" postgres
on node_c -c "CREATE DATABASE restored"
sudo -u postgres "$PGBIN/pg_restore" -h "$(node_dir node_c)" -p "$(node_port node_c)" -U postgres -d restored "$work/dump/fenced" 2>"$work/restore.log" || true
rq() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 -h "$(node_dir node_c)" -p "$(node_port node_c)" -U postgres -d restored "$@"; }
rq -c "INSERT INTO shard_1.posts (user_id, body) VALUES (0, 'restored')" >/dev/null || fail "25.11: the restored fenced shard refuses writes"
dropped=$(rq -c "SELECT array_to_string(snowflake_id_node.drop_orphans('$router8', '1 s'), ', ')")
[[ $dropped == *publication* && $dropped == *'fence trigger'* ]] || fail "25.11: drop_orphans in the restored database removed only: $dropped"
[[ $(rq -c "SELECT count(*) FROM snowflake_id_node.leftovers()") == 0 ]] || fail "25.11: leftovers in the restored database"
echo "  a dump of the fenced source restores writable; drop_orphans there removed: $dropped"
on router -c "SELECT pg_terminate_backend($mpid)" >/dev/null
wait "$mover" || true
release
on node_c -c "DROP DATABASE restored"
on router -c "SELECT move_shard(1, 'node_c')" >/dev/null
clean 25.11

echo "25.8: the move's names are its router's and database's"
next=$(on router -c "SELECT max(id) + 1 FROM snowflake_id_router.move")
on node_c -c "CREATE DATABASE otherdb"
PGOPTIONS="-c client_min_messages=error" psql -X -q -At -v ON_ERROR_STOP=1 -h "$(node_dir node_c)" -p "$(node_port node_c)" -U postgres -d otherdb \
  -c "CREATE SUBSCRIPTION sfid_${router8}_$next CONNECTION 'dbname=nowhere' PUBLICATION p WITH (connect = false)"
on router -c "SELECT move_shard(2, 'node_c')" >/dev/null
[[ $(on router -c "SELECT max(id) FROM snowflake_id_router.move") == "$next" ]] || fail "25.8: the move did not get id $next"
[[ $(on node_c -c "SELECT count(*) FROM pg_subscription WHERE subname = 'sfid_${router8}_$next'") == 1 ]] || fail "25.8: the other database's subscription is gone"
echo "  move $next onto node_c, whose other database has a subscription sfid_${router8}_$next: done, that one untouched"
PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -h "$(node_dir node_c)" -p "$(node_port node_c)" -U postgres -d otherdb \
  -c "ALTER SUBSCRIPTION sfid_${router8}_$next SET (slot_name = NONE)" -c "DROP SUBSCRIPTION sfid_${router8}_$next"
on node_c -c "DROP DATABASE otherdb"
clean 25.8

echo "25.1: a node named self (what the loopback connection was named after)"
# Another database of node_b's server, registered as node 'self': a move onto it must reach
# it, not the router's own database through the session's loopback connection.
on node_b -c "CREATE DATABASE selfdb" >/dev/null
sq() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 -h "$(node_dir node_b)" -p "$(node_port node_b)" -U postgres -d selfdb "$@"; }
sq -c "CREATE EXTENSION snowflake_id" -f "$here/../router/examples/node.sql" >/dev/null
on router -c "SELECT add_node('self', 'host=$(node_dir node_b) port=$(node_port node_b) dbname=selfdb user=postgres')" >/dev/null 2>&1
on router -c "SELECT move_shard(1, 'self')" >/dev/null 2>"$work/self.log" || fail "25.1: the move onto node 'self' failed: $(cat "$work/self.log")"
[[ $(sq -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_1'") == 1
   && $(on router -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_1'") == 0 ]] \
  || fail "25.1: the move onto node 'self' did not reach selfdb (shard_1 in the router's database: $(on router -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_1'"))"
echo "  shard 1 moved onto node 'self' (node_b's selfdb): $(sq -c "SELECT count(*) FROM shard_1.posts") rows there, none in the router's database"
on router -c "SELECT move_shard(1, 'node_c')" -c "SELECT remove_node('self')" >/dev/null
# The same database under a name of 63 bytes (a connection's name made of a node's name must not cut it).
long=$(printf 'n%.0s' {1..62})9
on router -c "SELECT add_node('$long', 'host=$(node_dir node_b) port=$(node_port node_b) dbname=selfdb user=postgres')" >/dev/null 2>&1
on router -c "SELECT move_shard(1, '$long')" >/dev/null 2>"$work/long.log" || fail "25.1: the move onto a node named with 63 bytes failed: $(cat "$work/long.log")"
[[ $(sq -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_1'") == 1 ]] || fail "25.1: shard 1 is not on the node named with 63 bytes"
echo "  and onto the same database registered under a name of 63 bytes"
on router -c "SELECT move_shard(1, 'node_c')" -c "SELECT remove_node('$long')" >/dev/null
on node_b -c "DROP DATABASE selfdb" >/dev/null
clean 25.1

echo "20: a session that keeps its node connections (a rebalance's) from move to move"
# One router session runs three moves of shard 1 (on node_c); between them, other sessions
# move it and repoint node_b (alter_node). Printed: the node sessions behind its kept
# connections and the advisory locks they hold after each move.
sb=$(node_connstr node_b)
other="PGOPTIONS='-c client_min_messages=warning' psql -X -q -At -v ON_ERROR_STOP=1 -h $SF_TMP/sfrouter -p $ROUTER_PORT -U postgres -d postgres"
kept() { echo "SELECT '$1 ' || snowflake_id_router.fetch(snowflake_id_router.node_conn_name('node_b'), 'SELECT pg_backend_pid()::text') || ' '
  || snowflake_id_router.fetch(snowflake_id_router.node_conn_name('node_c'), 'SELECT pg_backend_pid()::text') || ' '
  || snowflake_id_router.fetch(snowflake_id_router.node_conn_name('node_b'), 'SELECT count(*)::text FROM pg_locks WHERE locktype = ''advisory'' AND pid = pg_backend_pid()')
  || snowflake_id_router.fetch(snowflake_id_router.node_conn_name('node_c'), 'SELECT count(*)::text FROM pg_locks WHERE locktype = ''advisory'' AND pid = pg_backend_pid()');"; }
on router >"$work/keep.log" 2>&1 <<SQL || fail "20: the session keeping its connections failed: $(cat "$work/keep.log")"
SET snowflake_id_router.keep_connections = on;
SELECT move_shard(1, 'node_b');
$(kept first)
\! $other -c "SELECT move_shard(1, 'node_c')"
SELECT move_shard(1, 'node_b');
$(kept second)
\! $other -c "SELECT move_shard(1, 'node_c')" -c "SELECT alter_node('node_b', '$sb connect_timeout=9')"
SELECT move_shard(1, 'node_b');
$(kept third)
SQL
read -r _ b1 c1 l1 < <(grep '^first ' "$work/keep.log"); read -r _ b2 c2 l2 < <(grep '^second ' "$work/keep.log")
read -r _ b3 c3 l3 < <(grep '^third ' "$work/keep.log")
[[ $l1 == 00 && $l2 == 00 && $l3 == 00 ]] || fail "20: kept node sessions hold advisory locks after a move: $(cat "$work/keep.log")"
[[ $b1 == "$b2" && $c1 == "$c2" && $c2 == "$c3" ]] || fail "20: the connections were not kept from move to move: $(cat "$work/keep.log")"
[[ $b3 != "$b2" ]] || fail "20: a connection to node_b opened before alter_node was used after it: $(cat "$work/keep.log")"
[[ $(served_by 1) == node_b ]] || fail "20: shard 1 is on $(served_by 1) after the kept session's moves"
echo "  three moves in one session: the same node sessions (no lock held between moves) while another session moved the shard back; node_b's opened again once repointed"
on router -c "SELECT alter_node('node_b', '$sb')" -c "SELECT move_shard(1, 'node_c')" >/dev/null
# A role that is not a superuser, granted move_shard, keeps none: they are the owner's.
on router -c "CREATE ROLE keep_user LOGIN" -c "GRANT USAGE ON SCHEMA snowflake_id_router TO keep_user" \
  -c "GRANT EXECUTE ON FUNCTION move_shard(integer, text, text) TO keep_user"
left=$(PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 -h "$SF_TMP/sfrouter" -p "$ROUTER_PORT" -U keep_user -d postgres 2>&1 <<SQL
SET snowflake_id_router.keep_connections = on;
SELECT move_shard(1, 'node_b');
SELECT pg_backend_pid() AS me \gset
\setenv ME :me
\! bash $here/owner_sessions.sh
SQL
) || fail "20: keep_user's move failed: $left"
[[ $(tail -1 <<<"$left") == 0 ]] || fail "20: a role that is not a superuser kept the owner's connections: $left"
echo "  a role that is not a superuser keeps none (the router's sessions open for its session after its move: $(tail -1 <<<"$left"))"
on router -c "SELECT move_shard(1, 'node_c')" -c "REVOKE ALL ON FUNCTION move_shard(integer, text, text) FROM keep_user" \
  -c "REVOKE ALL ON SCHEMA snowflake_id_router FROM keep_user" -c "DROP ROLE keep_user" >/dev/null
clean 20

on router -c "SELECT string_agg(format('%s %s->%s %s', move, source, target, outcome), '; ' ORDER BY move) FROM move_history"
router_invariants "$work"
