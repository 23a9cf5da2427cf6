#!/usr/bin/env bash
# versions: 15
# Applications that route by shard themselves in Node and Rust (docs/app-routing.md), under
# moves: four writers, two through the Node client (clients/node/routing.js, node-postgres)
# and two through the Rust client (clients/rust/src/routing.rs, tokio-postgres with
# deadpool-postgres), each with its own pools and a map read from the router by the
# application's role, which has no other right there (one writer of each reads its first map
# from one node instead, and never names the router), insert, update and read back posts by
# ID while move_shard, move_shards, drain_node and rebalance move their shards, and two moves
# are held at their fence and once sealed. Then shards move while the writers are paused and
# the router is stopped (as t_app_no_router.sh does for Python): each writer must meet SF001
# and find the new nodes in the nodes' maps (app_map()), with no router. Then: every write a client saw acknowledged is
# present exactly once, on the node the map names, with its last acknowledged body, and no ID
# twice (router_invariants, reliability/router_check.py); every read by ID, and every fan-out
# of a client's posts over all shards, returned the last acknowledged bodies; no error reached
# an application; the nodes told stale clients with SF001 (counted), the fences 40001
# (counted), and the clients found the shards' new nodes. One test for both clients: one
# cluster and one series of moves (about 35 s) instead of two. The Python clients' twin:
# t_app_routing.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
clients=$here/../clients
bash "$clients/node.sh"
command -v cargo >/dev/null || export PATH="$HOME/.cargo/bin:$PATH"
cargo build --quiet --locked --manifest-path "$clients/rust/Cargo.toml" --target-dir "$clients/rust/target" --bin app_writer
work=$(mktemp -d); chmod 755 "$work"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; router_cluster_down; rm -rf "$work"' EXIT
SHARDS_PER_NODE=4 router_cluster_up >/dev/null 2>&1

# The application's role: on the router only what PUBLIC has (app_map); on the nodes the
# rights on the shards' tables, those made later (a move's copies) by default privileges.
on router -c "CREATE ROLE app LOGIN"
for n in "${ROUTER_NODES[@]}"; do
  on "$n" -c "CREATE ROLE app LOGIN" \
    -c "ALTER DEFAULT PRIVILEGES FOR ROLE postgres GRANT USAGE ON SCHEMAS TO app" \
    -c "ALTER DEFAULT PRIVILEGES FOR ROLE postgres GRANT SELECT, INSERT, UPDATE ON TABLES TO app" \
    -c "ALTER DEFAULT PRIVILEGES FOR ROLE postgres GRANT USAGE ON SEQUENCES TO app" >/dev/null
  on "$n" -At -c "SELECT format('GRANT USAGE ON SCHEMA %1\$I TO app; GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA %1\$I TO app;
                   GRANT USAGE ON ALL SEQUENCES IN SCHEMA %1\$I TO app;', schema_name) FROM snowflake_id_shards" | on "$n" >/dev/null
done
router_connstr="host=$SF_TMP/sfrouter port=$ROUTER_PORT dbname=postgres"
shards=$(on router -c "SELECT string_agg(x::text, ',' ORDER BY x) FROM generate_series(0, 3) s, LATERAL (VALUES (s), (s + 2731), (s + 5462)) v(x)")

one_node="nodes:$(node_connstr node_a)"
logs=()
for c in 1 2 3 4; do
  if ((c <= 2)); then writer=(node "$here/app_node_client.js"); else writer=("$clients/rust/target/debug/app_writer"); fi
  source=$( ((c % 2)) && echo "$one_node" || echo "$router_connstr")
  "${writer[@]}" "$source" app "$c" 120 "$shards" "$work/client$c.log" \
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

# The router stopped: the writers paused, a shard of each node moves, the router stops, the
# writers go on 4 s; each must be told SF001 and read the map again, from the nodes.
counts() { python3 -c '
import json, sys
r = [json.loads(open(p).read()) for p in sys.argv[1:]]
print(" ".join("%d:%d" % (x["retried"].get("SF001", 0), x["map_loads"]) for x in r))' "$@"; }
pause_all() {
  local c i
  for c in 1 2 3 4; do touch "$work/client$c.log.pause"; done
  for i in $(seq 400); do
    [[ -f $work/client1.log.paused && -f $work/client2.log.paused && -f $work/client3.log.paused && -f $work/client4.log.paused ]] && return
    sleep 0.05
  done
  fail "the writers did not pause (or one failed: $(cat "$work"/client*.err))"
}
resume_all() { local c; for c in 1 2 3 4; do rm -f "$work/client$c.log.pause" "$work/client$c.log.paused"; done; }
pause_all
# One shard of the writers' on each node to another node.
on router -c "SELECT DISTINCT ON (node) format('SELECT move_shard(%s, %L);', shard,
                CASE node WHEN 'node_a' THEN 'node_b' WHEN 'node_b' THEN 'node_c' ELSE 'node_a' END)
              FROM shard_map WHERE shard IN ($shards) ORDER BY node, shard" | on router >/dev/null
before=$(counts "$work"/client{1,2,3,4}.log.paused)
cluster_stop sfrouter
resume_all
sleep 4
pause_all
after=$(counts "$work"/client{1,2,3,4}.log.paused)
read -ra b <<<"$before"; read -ra a <<<"$after"
for c in 0 1 2 3; do
  ((${a[$c]%:*} > ${b[$c]%:*} && ${a[$c]#*:} > ${b[$c]#*:})) \
    || fail "writer $((c + 1)) met no SF001 or read no map without the router (before $before, after $after)"
done
echo "without the router: SF001:map loads per writer (node, node, rust, rust) $before -> $after"
cluster_resume sfrouter
resume_all
moves=$(on router -c "SELECT count(*) FROM move_history WHERE outcome = 'done'")
sleep 2
apps_stop
for kind in node rust; do
  read -r inserts updates reads fan_outs sf001 retried loads <<<"$(python3 -c '
import json, sys
r = [x for x in (json.loads(open(p).read()) for p in sys.argv[2:]) if x["kind"] == sys.argv[1]]
s = lambda k: sum(x[k] for x in r)
print(s("inserts"), s("updates"), s("reads"), s("fan_outs"), sum(x["retried"].get("SF001", 0) for x in r),
      sum(v for x in r for k, v in x["retried"].items() if k != "SF001"), s("map_loads"))' "$kind" "$work"/client*.out)"
  echo "app routing ($kind): $inserts inserts, $updates updates, $reads reads and $fan_outs fan-outs checked by 2 clients;" \
       "SF001 seen $sf001 times ($loads map loads), 40001/40P01 retried $retried times"
  ((sf001 > 0)) || fail "no $kind client was told a shard moved (SF001): the test did not test it"
  ((retried > 0)) || fail "no $kind client met a fence (40001): the test did not test it"
  ((inserts > 100 && reads > 100 && fan_outs > 4)) || fail "too little work by the $kind clients: $inserts inserts, $reads reads, $fan_outs fan-outs"
done
echo "app routing (Node and Rust): $moves moves; no error reached an application"
((moves >= 10)) || fail "only $moves moves done"
