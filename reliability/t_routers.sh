#!/usr/bin/env bash
# Two routers (scripts/router_cluster.sh's, the primary, and router_b, a follower added
# with add_router), three data nodes, 48 logical shards made. Four client sessions write,
# two through each router, while: a shard moves with both routers up; router_b is stopped;
# a shard moves and alter_node repoints node_a while it is down; router_b comes back, still
# routing by its old map, until repair_moves() pushes the map to it; a last shard moves.
# Checks: the move made while router_b was down leaves its old copy (sealed) on the source
# until router_b routes by the flip, also after router_b is back and before the push;
# router_status says router_b is behind, then current; both routers' maps (shards and node
# connect strings) are equal at the end; every write a client saw acknowledged is present
# exactly once, on the node the map names, no ID twice (router_invariants).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
ROUTER_B_PORT=$((ROUTER_PORT + 6))
trap 'kill $(jobs -p) 2>/dev/null || true; cluster_stop sfrouter2; router_cluster_down; rm -rf "$work"' EXIT
on_b() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 -h "$SF_TMP/sfrouter2" -p "$ROUTER_B_PORT" -U postgres -d postgres "$@"; }

SHARDS_PER_NODE=16 router_cluster_up
cluster_start sfrouter2 "$ROUTER_B_PORT"
on_b -c "CREATE EXTENSION snowflake_id_router CASCADE" -f "$here/../router/examples/router.sql" >/dev/null
on router -c "SELECT add_router('router_b', 'host=$SF_TMP/sfrouter2 port=$ROUTER_B_PORT dbname=postgres user=postgres')"
[[ $(on router -c "SELECT current FROM router_status WHERE name = 'router_b'") == t ]] || fail "router_b is not current after add_router"
err=$(on_b -c "SELECT move_shard(1, 'node_c')" 2>&1 || true)
[[ $err == *"move_shards runs on the primary router"* ]] || fail "router_b ran a move: $err"

# maps_equal: both routers' shard maps and node connect strings.
maps_equal() {
  local q="SELECT md5(string_agg(shard || ' ' || node, ',' ORDER BY shard)) || ' ' ||
                  (SELECT md5(string_agg(name || ' ' || connstr, ',' ORDER BY name)) FROM snowflake_id_router.node) FROM shard_map"
  [[ $(on router -c "$q") == "$(on_b -c "$q")" ]]
}
maps_equal || fail "router_b's map differs from the primary's after add_router"
routes() { on_b -c "SELECT node FROM shard_map WHERE shard = $1"; }
has_schema() { on "$1" -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_$2'"; }

shards=$(on router -c "SELECT string_agg(s::text, ',') FROM (SELECT generate_series(0, 15) UNION ALL
                        SELECT generate_series(2731, 2746) UNION ALL SELECT generate_series(5462, 5477)) g(s)")
: >"$work/moves"
pids=()
for c in 1 2 3 4; do
  if ((c <= 2)); then port=$ROUTER_PORT dir=$SF_TMP/sfrouter; else port=$ROUTER_B_PORT dir=$SF_TMP/sfrouter2; fi
  "$PYTHON" "$here/router_client.py" "host=$dir port=$port user=postgres dbname=postgres" "$c" 600 "$shards" "$work/client$c.log" & pids+=($!)
done
move() {  # move SHARD NODE: on the primary; records its time span
  local t0; t0=$(date +%s.%N)
  on router -c "SET client_min_messages = warning" -c "SELECT move_shard($1, '$2')" 2>>"$work/move.log" >/dev/null \
    || fail "move_shard($1, '$2') failed: $(tail -3 "$work/move.log")"
  echo "$1 $t0 $(date +%s.%N)" >>"$work/moves"
}
sleep 3

# Both routers up: the move is done at once, on both.
move 1 node_c
[[ $(routes 1) == node_c && $(has_schema node_a 1) == 0 ]] || fail "with both routers up, shard 1 is not moved on both"

# router_b down: the move flips, but the old copy stays, sealed; alter_node too is applied here only.
cluster_stop sfrouter2
move 2731 node_c
[[ $(has_schema node_b 2731) == 1 ]] || fail "the old copy of shard 2731 was dropped while router_b still routed to it"
grep -q "router(s) 'router_b' do not route by it yet" "$work/move.log" || fail "the move did not say it waits for router_b: $(tail -3 "$work/move.log")"
[[ $(on router -c "SELECT state FROM snowflake_id_router.move ORDER BY id DESC LIMIT 1") == flipped ]] \
  || fail "the move made while router_b was down is not waiting as flipped"
old_a=$(on router -c "SELECT connstr FROM snowflake_id_router.node WHERE name = 'node_a'")
on router -c "SELECT alter_node('node_a', '$(node_connstr node_a) connect_timeout=9')" 2>"$work/alter.log" >/dev/null
grep -q "not yet on every other router" "$work/alter.log" || fail "alter_node did not say router_b is behind: $(cat "$work/alter.log")"
[[ $(on router -c "SELECT behind_since IS NOT NULL FROM router_status WHERE name = 'router_b'") == t ]] \
  || fail "router_status does not show router_b behind"
sleep 2

# router_b back: it routes by its old map (the sealed copy answers 40001) until the push.
cluster_resume sfrouter2
sleep 2
[[ $(routes 2731) == node_b && $(has_schema node_b 2731) == 1 ]] \
  || fail "router_b back: it routes shard 2731 to $(routes 2731), the old copy there: $(has_schema node_b 2731)"
[[ $(on_b -c "SELECT connstr FROM snowflake_id_router.node WHERE name = 'node_a'") == "$old_a" ]] \
  || fail "router_b got alter_node's change without a push"
on router -c "SELECT * FROM repair_moves()" >"$work/repair.log"
[[ $(routes 2731) == node_c && $(has_schema node_b 2731) == 0 ]] \
  || fail "after repair_moves: router_b routes shard 2731 to $(routes 2731), the old copy there: $(has_schema node_b 2731)"
[[ $(on router -c "SELECT current AND behind_since IS NULL FROM router_status WHERE name = 'router_b'") == t ]] \
  || fail "router_b is not current after repair_moves: $(on router -c "SELECT * FROM router_status")"
echo "router_b stopped: the move waited as flipped, its old copy kept; back and pushed by repair_moves: $(cat "$work/repair.log" | tr '\n' ' ')"

move 5463 node_a
sleep 2
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || fail "a client ended early"; done
touch "$work"/client{1,2,3,4}.log.stop
for p in "${pids[@]}"; do wait "$p" || fail "a client failed"; done
maps_equal || fail "the routers' maps differ at the end"
echo "both routers' maps equal: $(on router -c "SELECT count(*) FROM shard_map") shards, node_a at '$(on_b -c "SELECT connstr FROM snowflake_id_router.node WHERE name = 'node_a'")'"
for c in 3 4; do
  echo "client $c (through router_b): $(wc -l <"$work/client$c.log") writes acknowledged, retries: $(awk '{t += $7 - 1} END {print t}' "$work/client$c.log")"
done
router_invariants "$work" "$work"/client*.log
