#!/usr/bin/env bash
# Applications that route by shard themselves (docs/app-routing.md), under moves: four
# writers, two through the SQLAlchemy router and two through the Django router of
# clients/python/, each with its own connections to the nodes and a map read from the router
# by a role with no other right there, insert, update and read back posts by ID while
# move_shard, move_shards, drain_node and rebalance move their shards, and two moves are held
# at their fence and once sealed. Then: every write a client saw acknowledged is present
# exactly once, on the node the map names, with its last acknowledged body, and no ID twice
# (router_invariants, reliability/router_check.py); every read by ID, and every fan-out of a
# client's posts over all shards, returned the last acknowledged bodies; no error reached an
# application; the nodes told stale clients with SF001 (counted), the fences 40001 (counted),
# and the clients found the shards' new nodes.
# Runs with clients/.venv (clients/venv.sh makes it, once).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
venv=$here/../clients/.venv
bash "$here/../clients/venv.sh"
work=$(mktemp -d); chmod 755 "$work"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; router_cluster_down; rm -rf "$work"' EXIT
SHARDS_PER_NODE=4 router_cluster_up >/dev/null 2>&1
on router -c "CREATE ROLE app_reader LOGIN"
router_dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT dbname=postgres user=app_reader"
shards=$(on router -c "SELECT string_agg(x::text, ',' ORDER BY x) FROM generate_series(0, 3) s, LATERAL (VALUES (s), (s + 2731), (s + 5462)) v(x)")

logs=()
for c in 1 2 3 4; do
  kind=$([[ $c -le 2 ]] && echo sqlalchemy || echo django)
  "$venv/bin/python" "$here/app_router_client.py" "$kind" "$router_dsn" "$c" 120 "$shards" "$work/client$c.log" \
    >"$work/client$c.out" 2>"$work/client$c.err" & pids+=($!)
  logs+=("$work/client$c.log")
done
sleep 3
on router -c "SELECT move_shard(0, 'node_b')" >/dev/null
on router -c "SELECT move_shards('{2731,2732}', 'node_c')" >/dev/null
on router -c "CALL drain_node('node_a')" >/dev/null
on router -c "CALL rebalance()" >/dev/null
on router -c "SELECT move_shard(5462, 'node_a')" >/dev/null
# Two moves held (the router's test breakpoints) for 2 s: at the fence (writes there get 40001,
# retried on the same node) and once sealed, before the target serves and the map flips
# (both nodes answer SF001, and a reloaded map still names the source: the clients back off).
for step in fenced sealed; do
  shard=$(on router -c "SELECT shard FROM shard_map WHERE node <> 'node_b' AND shard IN ($shards) ORDER BY shard LIMIT 1")
  on router -c "INSERT INTO snowflake_id_router.breakpoint (step) VALUES ('$step')"
  on router -c "SELECT move_shard($shard, 'node_b')" >/dev/null & mover=$!
  for i in $(seq 600); do
    [[ -z $(on router -c "SELECT reached FROM snowflake_id_router.breakpoint") ]] || break
    kill -0 "$mover" 2>/dev/null || fail "the move held at $step ended before it got there"
    sleep 0.05
  done
  sleep 2
  on router -c "DELETE FROM snowflake_id_router.breakpoint"
  wait "$mover"
done
moves=$(on router -c "SELECT count(*) FROM move_history WHERE outcome = 'done'")
sleep 2
apps_stop
read -r inserts updates reads fan_outs sf001 retried loads <<<"$("$venv/bin/python" -c '
import json, sys
r = [json.loads(open(p).read()) for p in sys.argv[1:]]
s = lambda k: sum(x[k] for x in r)
print(s("inserts"), s("updates"), s("reads"), s("fan_outs"), sum(x["retried"].get("SF001", 0) for x in r),
      sum(v for x in r for k, v in x["retried"].items() if k != "SF001"), s("map_loads"))' "$work"/client*.out)"
echo "app routing: $moves moves; $inserts inserts, $updates updates, $reads reads and $fan_outs fan-outs checked by 2 SQLAlchemy and 2 Django clients;" \
     "SF001 seen $sf001 times ($loads map loads), 40001/40P01 retried $retried times; no error reached an application"
((moves >= 7)) || fail "only $moves moves done"
((sf001 > 0)) || fail "no client was told a shard moved (SF001): the test did not test it"
((retried > 0)) || fail "no client met a fence (40001): the test did not test it"
((inserts > 60 && reads > 60 && fan_outs > 2)) || fail "too little work: $inserts inserts, $reads reads, $fan_outs fan-outs"
