#!/usr/bin/env bash
# Growing a cluster and emptying a node under write load (docs/cluster.md, runbook). A router
# and two data nodes set up with 0.2.0 as released (snowflake_id and snowflake_id_router),
# 500 shards holding rows on each, then both extensions updated to the current version
# (through each release since); a third node (current) added. Four client sessions write through the router (reliability/router_client.py:
# inserts on every 8th shard, updates of their own rows) throughout, while:
#   CALL rebalance(parallel_moves => 3)
#                           three batches moving at once, refusing a second one (55P03),
#                           stopped half-way by rebalance_stop() from another session, then
#   CALL rebalance()        resumed (same rebalance), one batch at a time, to the end:
#                           333/333/334 shards;
#   CALL drain_node(a, parallel_moves => 2)
#                           one of its workers' sessions terminated with two batches moving:
#                           the drain fails (its other batch ends first), then
#   CALL drain_node(a, parallel_moves => 2)
#                           resumed, its session terminated with two batches moving (their
#                           loopback workers end with it), then
#   CALL drain_node(a)      resumed to the end, one batch at a time: no shard left on node_a;
#   remove_node(a)          refused (55000) before the drain, done after.
# Afterwards (reliability/router_check.py): every acknowledged write is present exactly
# once, on the node the map names (node_a, removed, holds none); no ID twice; each moved
# shard's IDs made after its move are above all its IDs from before; and no node holds a
# replication slot, publication, subscription, fence, marker or move record
# (router_invariants, scripts/router_cluster.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
ROUTER_NODES=(node_a node_b node_c)
work=$(mktemp -d); chmod 755 "$work"
trap 'touch "$work"/client{1,2,3,4}.log.stop; router_cluster_down; rm -rf "$work"' EXIT
N=${REBALANCE_SHARDS:-500}   # shards made on each of the first two nodes
extdir=$("$PG_CONFIG" --sharedir)/extension
for f in "$here"/../released/*.sql; do install -m 644 "$f" "$extdir/"; done

# A node with snowflake_id 0.2.0 as released and N shards from FIRST on, each with 3 rows,
# made in the ORDER given (asc or desc: shards made over time, not in their numbers' order).
# The tables are made by the DDL create_shard(..., template => 'tpl') runs (LIKE ... INCLUDING
# ALL, the key defaulting to the shard's next_id()), in a loop: 0.2.0's installer takes
# 40-90 ms a shard with a template.
node_020() {
  local range="$2 .. $2 + $N - 1"; [[ $3 == desc ]] && range="REVERSE $2 + $N - 1 .. $2"
  node_start "$1"
  on "$1" -c "CREATE EXTENSION snowflake_id VERSION '0.2.0'" -f "$here/../router/examples/node.sql" \
    -c "SELECT count(create_shard('shard_' || s, s)) FROM generate_series($2, $2 + $N - 1) s" \
    -c "DO \$\$ BEGIN FOR s IN $range LOOP
          EXECUTE format('CREATE TABLE shard_%s.posts (LIKE tpl.posts INCLUDING ALL)', s);
          EXECUTE format('ALTER TABLE shard_%s.posts ALTER COLUMN id SET DEFAULT shard_%s.next_id()', s, s);
          EXECUTE format('INSERT INTO shard_%s.posts (user_id, body) SELECT g, ''preload'' FROM generate_series(1, 3) g', s);
        END LOOP; END \$\$" >/dev/null
}
t0=$SECONDS
node_020 node_a 0 asc & a=$!
node_020 node_b 4096 desc & b=$!
wait "$a" && wait "$b"
cluster_start sfrouter "$ROUTER_PORT"
on router -c "CREATE EXTENSION snowflake_id VERSION '0.2.0'" -c "CREATE EXTENSION snowflake_id_router VERSION '0.2.0' CASCADE" \
  -c "SELECT add_node('node_a', '$(node_connstr node_a)'), add_node('node_b', '$(node_connstr node_b)')" \
  -c "SELECT assign_shards(0, 4096, 'node_a'), assign_shards(4096, 4096, 'node_b')" \
  -f "$here/../router/examples/router.sql" >/dev/null
# To the current version: the nodes, then the router (which needs its own version's
# snowflake_id where it runs).
for n in node_a node_b router; do on "$n" -c "ALTER EXTENSION snowflake_id UPDATE"; done
on router -c "ALTER EXTENSION snowflake_id_router UPDATE"
node_start node_c
on node_c -c "CREATE EXTENSION snowflake_id" -f "$here/../router/examples/node.sql" >/dev/null
on router -c "SELECT add_node('node_c', '$(node_connstr node_c)')" >/dev/null
echo "set up with 0.2.0 ($((2 * N)) shards with rows on two nodes), updated to $(on router -c "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id_router'"), node_c added: $((SECONDS - t0)) s"

# sqlstate SQL: the SQLSTATE of SQL run on the router (empty if it succeeds).
sqlstate() { on router -v VERBOSITY=sqlstate -c "$1" 2>&1 | sed -nE 's/.*ERROR:  ([0-9A-Z]{5}).*/\1/p'; }
[[ $(sqlstate "SELECT remove_node('node_a')") == 55000 ]] || fail "remove_node of a node holding shards was not refused with 55000"
[[ $(sqlstate "SELECT remove_node('node_x')") == 42704 ]] || fail "remove_node of an unknown node was not refused with 42704"
[[ $(sqlstate "SELECT remove_node(NULL)") == 22004 ]] || fail "remove_node(NULL) was not refused with 22004"
[[ $(sqlstate "CALL drain_node('node_x')") == 42704 ]] || fail "drain_node of an unknown node was not refused with 42704"
[[ $(sqlstate "CALL rebalance('by_size')") == 22023 ]] || fail "an unknown strategy was not refused with 22023"
[[ $(sqlstate "BEGIN; CALL rebalance()") == 2D000 ]] || fail "rebalance() inside a transaction block was not refused with 2D000"
[[ $(on router -c "SELECT sum(cardinality(shards)) FROM rebalance_plan()") == $((2 * N / 3)) ]] \
  || fail "rebalance_plan() does not plan $((2 * N / 3)) moves: $(on router -c "SELECT * FROM rebalance_plan()")"
[[ $(on router -c "SELECT count(*) FROM rebalance_status") == 0 ]] || fail "a refused or planned rebalance left a record"

shards=$(on router -c "SELECT string_agg(s::text, ',') FROM (SELECT generate_series(0, $N - 1, 8) UNION ALL
                        SELECT generate_series(4096, 4096 + $N - 1, 8)) g(s)")
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
pids=()
start_writers "$dsn" 600 "$shards"
sleep 4

# status_of COLUMNS: columns of the newest rebalance_status row, space-separated.
status_of() { on router -F ' ' -c "SELECT $1 FROM rebalance_status ORDER BY id DESC LIMIT 1"; }
# wait_for PID LOG SQL: polls SQL on the router (a boolean) for up to 120 s while PID (a
# CALL writing LOG) runs.
wait_for() {
  local _; for _ in $(seq 1200); do
    [[ $(on router -c "$3") == t ]] && return 0
    kill -0 "$1" 2>/dev/null || fail "it ended before: $(cat "$2")"
    sleep 0.1
  done
  fail "waited 120 s for: $3"
}
# leftovers: what moves left on the nodes (snowflake_id_node.leftovers()), one node a line.
leftovers() {
  local n; for n in node_a node_b node_c; do on "$n" -c "SELECT '$n: ' || string_agg(x, '; ') FROM snowflake_id_node.leftovers() x"; done
}

# The rebalance, stopped half-way from another session, then resumed.
t_rebalance=$(date +%s.%N)
on router -c "SET client_min_messages = notice" -c "CALL rebalance(parallel_moves => 3)" >"$work/rebalance1.log" 2>&1 & mover=$!
wait_for "$mover" "$work/rebalance1.log" "SELECT batches_moving = 3 FROM rebalance_status WHERE state = 'running'"
wait_for "$mover" "$work/rebalance1.log" "SELECT shards_done * 2 >= shards AND shards > 0 FROM rebalance_status WHERE state = 'running'"
[[ $(sqlstate "CALL drain_node('node_b')") == 55P03 ]] || fail "a second rebalance or drain was not refused with 55P03 while one runs"
on router -c "SELECT rebalance_stop()" >/dev/null
wait "$mover" || fail "the stopped rebalance failed: $(cat "$work/rebalance1.log")"
read -r id state done planned <<<"$(status_of "id, state, shards_done, shards")"
echo "rebalance $id: $state after $done of $planned shards"
[[ $state == stopped && $done -gt 0 && $done -lt $planned ]] || fail "rebalance_stop did not stop it half-way: $state, $done of $planned"
left=$(leftovers); [[ -z $left ]] || fail "the stopped rebalance left: $left"
[[ $(on router -c "SELECT count(*) FROM snowflake_id_router.move WHERE state NOT IN ('done', 'undone')") == 0 ]] \
  || fail "the stopped rebalance left a move unfinished"
on router -c "SET client_min_messages = notice" -c "CALL rebalance()" >"$work/rebalance2.log" 2>&1 \
  || fail "the resumed rebalance failed: $(cat "$work/rebalance2.log")"
grep -q "rebalance $id resumed" "$work/rebalance2.log" || fail "the second CALL rebalance() did not resume rebalance $id: $(cat "$work/rebalance2.log")"
read -r id2 state done planned <<<"$(status_of "id, state, shards_done, shards")"
[[ $id2 == "$id" && $state == done && $done == "$planned" ]] || fail "the resumed rebalance: id $id2, $state, $done of $planned"
rebalance_secs=$(python3 -c "print(round($(date +%s.%N) - $t_rebalance, 1))")
read -r counts even <<<"$(on router -F ' ' -c "SELECT string_agg(node || ':' || n, ',' ORDER BY node), max(n) - min(n) <= 1 AND sum(n) = 2 * $N
                                                FROM (SELECT node, count(*) n FROM shard_status WHERE mapped GROUP BY node) x")"
echo "rebalance: $planned shards moved in $rebalance_secs s (with the stop and the resume): $counts"
[[ $even == t && $counts == node_a:*,node_b:*,node_c:* ]] || fail "the rebalance did not spread the $((2 * N)) shards evenly: $counts"

# The drain: a worker's session terminated, then the caller's, each with two batches moving;
# then resumed; then the node removed.
t_drain=$(date +%s.%N)
on router -c "SET client_min_messages = notice" -c "CALL drain_node('node_a', parallel_moves => 2)" >"$work/drain0.log" 2>&1 & mover=$!
wait_for "$mover" "$work/drain0.log" "SELECT shards_done > 0 AND batches_moving = 2 FROM rebalance_status WHERE kind = 'drain' AND state = 'running'"
on router -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'snowflake\_id\_router rebalance % worker 1'" >/dev/null
if wait "$mover"; then fail "drain_node survived the termination of a worker's session"; fi
read -r id0 state <<<"$(status_of "id, state")"
echo "a worker's session terminated: drain $id0 $state: $(grep -m1 -o 'ERROR:  .*' "$work/drain0.log" | cut -c8- | cut -c1-160)"
[[ $state == failed ]] || fail "rebalance_status shows the drain whose worker was terminated as $state: $(cat "$work/drain0.log")"
on router -c "SET client_min_messages = notice" -c "CALL drain_node('node_a', parallel_moves => 2)" >"$work/drain1.log" 2>&1 & mover=$!
wait_for "$mover" "$work/drain1.log" "SELECT shards_done > 0 AND batches_moving = 2 FROM rebalance_status WHERE kind = 'drain' AND state = 'running'"
on router -c "SELECT pg_terminate_backend(pid) FROM rebalance_status WHERE kind = 'drain' AND state = 'running'" >/dev/null
if wait "$mover"; then fail "drain_node survived the termination of its session"; fi
read -r id state <<<"$(status_of "id, state")"
[[ $state == interrupted ]] || fail "rebalance_status shows the terminated drain as $state"
on router -c "SET client_min_messages = notice" -c "CALL drain_node('node_a')" >"$work/drain2.log" 2>&1 \
  || fail "the resumed drain failed: $(cat "$work/drain2.log")"
grep -q "drain $id resumed" "$work/drain2.log" || fail "the second CALL drain_node did not resume drain $id: $(cat "$work/drain2.log")"
[[ $(on router -c "SELECT count(*) FROM shard_map WHERE node = 'node_a'") == 0 ]] || fail "node_a still holds shards after the drain"
on router -c "SELECT remove_node('node_a')" >/dev/null
read -r state done <<<"$(status_of "state, shards_done")"
echo "drain: $done shards moved in $(python3 -c "print(round($(date +%s.%N) - $t_drain, 1))") s (with the termination and the resume), node_a removed"
[[ $state == done ]] || fail "the drain ended $state"

sleep 4
touch "$work"/client{1,2,3,4}.log.stop
wait_writers

# Nothing left by moves, every shard served once where the map says, every write there
# once, and the new IDs of each moved shard above its old ones.
on router -F ' ' -c "SELECT s, extract(epoch FROM b.started), extract(epoch FROM b.ended)
                       FROM snowflake_id_router.rebalance_batch b, unnest(b.shards) s
                      WHERE b.state = 'done' AND s = ANY ('{$shards}'::integer[])" >"$work/moves"
router_invariants "$work" "$work"/client*.log
