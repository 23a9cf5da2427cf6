#!/usr/bin/env bash
# Applications that route by shard themselves need no router once they have a map
# (docs/app-routing.md): every node keeps the map the router last pushed it (app_map()). Four
# writers of clients/python/ (reliability/app_router_client.py) as the role `app`: two
# (SQLAlchemy) read their first map from one node and never name the router, two (Django)
# read it from the router and fall back to the nodes of their map. Moves need the router, so
# it is stopped between moves: the writers are paused, shards move, the router is stopped,
# and the writers go on for a while with no router at all; they meet SF001 on the moved
# shards and must find the new nodes in the nodes' maps. Twice, with moves under way (router
# up) between. Then: no error reached an application, each writer was told SF001 and read the
# map again while the router was down, and (router_invariants, reliability/router_check.py)
# every acknowledged write is present exactly once, on the node the map names, no ID twice.
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
# The application's role: on the router only what PUBLIC has (app_map); on the nodes the
# shards' tables, as default privileges of the role moves make copies as (t_app_java.sh).
on router -c "CREATE ROLE app LOGIN"
for n in node_a node_b node_c; do
  on "$n" -c "CREATE ROLE app LOGIN" \
    -c "ALTER DEFAULT PRIVILEGES FOR ROLE postgres GRANT USAGE ON SCHEMAS TO app" \
    -c "ALTER DEFAULT PRIVILEGES FOR ROLE postgres GRANT SELECT, INSERT, UPDATE ON TABLES TO app" \
    -c "ALTER DEFAULT PRIVILEGES FOR ROLE postgres GRANT USAGE ON SEQUENCES TO app" >/dev/null
  on "$n" -At -c "SELECT format('GRANT USAGE ON SCHEMA %1\$I TO app; GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA %1\$I TO app;
                   GRANT USAGE ON ALL SEQUENCES IN SCHEMA %1\$I TO app;', schema_name) FROM snowflake_id_shards" | on "$n" >/dev/null
done
router_dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT dbname=postgres user=app"
one_node="nodes:$(node_connstr node_a)"
shards=$(on router -c "SELECT string_agg(x::text, ',' ORDER BY x) FROM generate_series(0, 3) s, LATERAL (VALUES (s), (s + 2731), (s + 5462)) v(x)")

logs=()
for c in 1 2 3 4; do
  kind=$([[ $c -le 2 ]] && echo sqlalchemy || echo django)
  source=$([[ $c -le 2 ]] && echo "$one_node" || echo "$router_dsn")
  APP_USER=app "$venv/bin/python" "$here/app_router_client.py" "$kind" "$source" "$c" 120 "$shards" "$work/client$c.log" \
    >"$work/client$c.out" 2>"$work/client$c.err" & pids+=($!)
  logs+=("$work/client$c.log")
done

# without_router SHARD NODE...: pauses the writers, moves each SHARD to its NODE (pairs),
# stops the router, and lets the writers run 4 s with no router; then starts it again.
counts() { "$venv/bin/python" -c '
import json, sys
r = [json.loads(open(p).read()) for p in sys.argv[1:]]
print(" ".join("%d:%d" % (x["retried"].get("SF001", 0), x["map_loads"]) for x in r))' "$@"; }
without_router() {
  local c i
  for c in 1 2 3 4; do touch "$work/client$c.log.pause"; done
  for i in $(seq 400); do
    [[ -f $work/client1.log.paused && -f $work/client2.log.paused && -f $work/client3.log.paused && -f $work/client4.log.paused ]] && break
    ((i < 400)) || fail "the writers did not pause"
    sleep 0.05
  done
  while (($#)); do on router -c "SELECT move_shard($1, '$2')" >/dev/null; shift 2; done
  before=$(counts "$work"/client{1,2,3,4}.log.paused)
  cluster_stop sfrouter
  for c in 1 2 3 4; do rm -f "$work/client$c.log.pause" "$work/client$c.log.paused"; done
  sleep 4
  for c in 1 2 3 4; do touch "$work/client$c.log.pause"; done
  for i in $(seq 400); do
    [[ -f $work/client1.log.paused && -f $work/client2.log.paused && -f $work/client3.log.paused && -f $work/client4.log.paused ]] && break
    ((i < 400)) || fail "the writers did not pause (or one failed: $(cat "$work"/client*.err))"
    sleep 0.05
  done
  after=$(counts "$work"/client{1,2,3,4}.log.paused)
  # Each writer was told SF001 and read the map again while the router was down.
  read -ra b <<<"$before"; read -ra a <<<"$after"
  for c in 0 1 2 3; do
    ((${a[$c]%:*} > ${b[$c]%:*} && ${a[$c]#*:} > ${b[$c]#*:})) \
      || fail "writer $((c + 1)) met no SF001 or read no map without the router (before $before, after $after)"
  done
  echo "without the router: SF001:map loads per writer $before -> $after"
  cluster_resume sfrouter
  for c in 1 2 3 4; do rm -f "$work/client$c.log.pause" "$work/client$c.log.paused"; done
}

sleep 3
# Shards of each writer's set on every node move, so every writer meets them.
without_router 0 node_b 1 node_c 2731 node_a 2732 node_c 5462 node_a 5463 node_b
on router -c "SELECT move_shards('{2,3}', 'node_b')" >/dev/null
on router -c "CALL drain_node('node_c')" >/dev/null
without_router 0 node_c 2 node_c 2731 node_c 5462 node_c 5464 node_c
sleep 2
apps_stop
moves=$(on router -c "SELECT count(*) FROM move_history WHERE outcome = 'done'")
read -r inserts reads <<<"$("$venv/bin/python" -c '
import json, sys
r = [json.loads(open(p).read()) for p in sys.argv[1:]]
print(sum(x["inserts"] for x in r), sum(x["reads"] for x in r))' "$work"/client*.out)"
echo "app without router: $moves moves, the router stopped twice between them; $inserts inserts and $reads reads by 2 SQLAlchemy clients (map from one node) and 2 Django clients (map from the router, then the nodes); no error reached an application"
((inserts > 100 && reads > 100)) || fail "too little work: $inserts inserts, $reads reads"
