#!/usr/bin/env bash
# every version: a 0.3.0 router's unfinished moves converted by the upgrade, then repaired
# Moves left unfinished by snowflake_id_router 0.3.0 (as released) are finished by the
# current version after ALTER EXTENSION ... UPDATE: a router and two nodes with 0.3.0, 12
# shards with rows; three moves whose movers are terminated at a step (a breakpoint) under
# 0.3.0: 'fenced' (state fencing: to undo), 'sealed' (state sealing, the source sealed: to
# complete) and 'flipped' (state flipped: to clean up), beside moves that ended (done).
# Then both extensions are updated. Must hold: every move's state reads the same after the
# upgrade as before it (move.state became a type of its own, its rows converted by
# router/migrations/0.4.0-objects.sql); repair_moves() undoes the first move and completes
# the two others; every row is present once, on the node the map names; nothing a move made
# is left on the nodes (router_invariants).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
ROUTER_NODES=(node_a node_b)
work=$(mktemp -d); chmod 755 "$work"
trap 'router_cluster_down; rm -rf "$work"' EXIT
extdir=$("$PG_CONFIG" --sharedir)/extension
# (Unless there already: tests beside this one install them too.)
for f in "$here"/../released/*.sql; do cmp -s "$f" "$extdir/${f##*/}" || install -m 644 "$f" "$extdir/"; done

# Two nodes with snowflake_id 0.3.0 as released, 6 shards each (from FIRST on), 50 rows each.
node_030() {
  node_start "$1"
  on "$1" -c "CREATE EXTENSION snowflake_id VERSION '0.3.0'" -f "$here/../router/examples/node.sql" \
    -c "SELECT count(create_shard('shard_' || s, s, template => 'tpl')) FROM generate_series($2, $2 + 5) s" \
    -c "DO \$\$ BEGIN FOR s IN $2 .. $2 + 5 LOOP
          EXECUTE format('INSERT INTO shard_%s.posts (user_id, body) SELECT g, ''row '' || g FROM generate_series(1, 50) g', s);
        END LOOP; END \$\$" >/dev/null
}
node_030 node_a 0
node_030 node_b 100
cluster_start sfrouter "$ROUTER_PORT"
on router -c "CREATE EXTENSION snowflake_id VERSION '0.3.0'" -c "CREATE EXTENSION snowflake_id_router VERSION '0.3.0' CASCADE" \
  -c "SELECT add_node('node_a', '$(node_connstr node_a)'), add_node('node_b', '$(node_connstr node_b)')" \
  -c "SELECT assign_shards(0, 6, 'node_a'), assign_shards(100, 6, 'node_b')" \
  -f "$here/../router/examples/router.sql" >/dev/null

# rows: shard, node and row count of every shard, as the map routes it and the node holds it.
rows() {
  local n q
  for n in node_a node_b; do
    q=$(on "$n" -c "SELECT string_agg(format('SELECT %s, %L, count(*) FROM %I.posts', shard, '$n', schema_name), ' UNION ALL ')
                    FROM snowflake_id_shards")
    on "$n" -F ' ' -c "$q"
  done | sort -n
}
# stop_at STEP SHARD TO: move SHARD to TO under 0.3.0, its mover terminated at STEP.
stop_at() {
  local pid mover
  on router -c "INSERT INTO snowflake_id_router.breakpoint (step) VALUES ('$1')"
  on router -c "SELECT move_shard($2, '$3')" >"$work/mover.log" 2>&1 & mover=$!
  for _ in $(seq 600); do
    pid=$(on router -c "SELECT pid FROM snowflake_id_router.breakpoint WHERE step = '$1' AND reached IS NOT NULL")
    [[ -n $pid ]] && break
    kill -0 "$mover" 2>/dev/null || fail "the move of shard $2 ended before step '$1': $(cat "$work/mover.log")"
    sleep 0.05
  done
  [[ -n $pid ]] || fail "the move of shard $2 did not reach step '$1'"
  on router -c "SELECT pg_terminate_backend($pid)" >/dev/null
  wait "$mover" && fail "the move of shard $2 held at '$1' returned success"
  on router -c "DELETE FROM snowflake_id_router.breakpoint"
}

before=$(rows)
on router -c "SELECT move_shard(0, 'node_b'), move_shard(100, 'node_a')" >/dev/null   # (done)
stop_at fenced 1 node_b
stop_at sealed 2 node_b
stop_at flipped 101 node_a
states() { on router -c "SELECT string_agg(id || ' ' || state, ', ' ORDER BY id) FROM snowflake_id_router.move"; }
states_030=$(states)
echo "under 0.3.0: moves $states_030"
[[ $states_030 == "1 done, 2 done, 3 fencing, 4 sealing, 5 flipped" ]] || fail "the moves under 0.3.0 are not as the test expects: $states_030"

for n in node_a node_b router; do on "$n" -c "ALTER EXTENSION snowflake_id UPDATE"; done
on router -c "ALTER EXTENSION snowflake_id_router UPDATE"
echo "updated to $(on router -c "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id_router'")"
states_now=$(states)
[[ $states_now == "$states_030" ]] || fail "the upgrade changed the moves' states: $states_030 before, $states_now after"
echo "every move's state as before: $states_now"

outcome=$(on router -c "SELECT string_agg(move || ': ' || outcome, ', ' ORDER BY move) FROM repair_moves()")
[[ $outcome == "3: undone, 4: completed, 5: completed" ]] || fail "repair_moves() after the upgrade: $outcome"
echo "repair_moves(): $outcome"
[[ $(states) == "1 done, 2 done, 3 undone, 4 done, 5 done" ]] || fail "after the repair, the moves are $(states)"
map=$(on router -c "SELECT string_agg(shard || ' ' || node, ', ' ORDER BY shard) FROM shard_map WHERE shard IN (0, 1, 2, 100, 101)")
[[ $map == "0 node_b, 1 node_a, 2 node_b, 100 node_a, 101 node_a" ]] || fail "the map after the repair: $map"
after=$(rows)
# The same rows per shard; the shards moved now on their targets.
diff <(awk '{ print $1, $3 }' <<<"$before") <(awk '{ print $1, $3 }' <<<"$after") \
  || fail "rows differ after the upgrade and the repair (- before, + after)"
while read -r shard node count; do
  [[ $(on router -c "SELECT node FROM shard_map WHERE shard = $shard") == "$node" ]] || fail "shard $shard is held by $node, the map names another"
done <<<"$after"
echo "every row present: $(awk '{ s += $3 } END { print s }' <<<"$after") rows in $(wc -l <<<"$after") shards, each on the node the map names"
router_invariants "$work"
