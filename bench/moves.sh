#!/usr/bin/env bash
# Benchmark of a move's cost at scale (issue 24's bar for moves; not a test):
#   bash bench/moves.sh [OUT.json]
# A move should cost no more per shard onto or from a node holding thousands of shards
# than between nodes holding a few: none of its queries may read every shard of a node.
# node_a holds 8,176 shards (16 .. 8191), node_b 16 (0 .. 15), node_c none. Each round, in
# this order: one shard node_b -> node_c (small), one node_a -> node_c (from the full node),
# both back (the second onto the full node); then the same with 8 shards per move_shards.
# So each round also sets a move onto an empty node (node_b -> node_c, first) against one
# onto the full node (node_c, holding one shard, -> node_a, fourth).
# Every shard holds 3 rows. Per move: the caller's time and the write pause (fence to flip,
# move_history); medians over ROUNDS rounds (default 5), per shard; ratios full / small.
# Expects scripts/install to have run. Writes bench/moves.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh; source reliability/lib.sh; source scripts/router_cluster.sh; source bench/lib.sh
out=${1:-bench/moves.json}
work=$(mktemp -d); chmod 755 "$work"
trap 'router_cluster_down; rm -rf "$work"' EXIT
ROUNDS=${ROUNDS:-5}

start_nodes node_a node_b node_c
t0=$(date +%s)
make_shards node_a 16 8176
make_shards node_b 0 16
echo "8,192 shards made in $(($(date +%s) - t0)) s"
# The catalogs' statistics, as autovacuum gathers them within a minute or two of their growth:
# until then the planner takes pg_class, pg_depend and the rest of a node that just grew to
# 8,176 shards for small tables, and a move from it reads its definitions 4-5x slower.
for n in node_a node_b node_c; do on "$n" -c "ANALYZE" >/dev/null; done
cluster_start sfrouter "$ROUTER_PORT"
on router -c "CREATE EXTENSION snowflake_id_router CASCADE" >/dev/null
for n in node_a node_b node_c; do on router -c "SELECT add_node('$n', '$(node_connstr "$n")')" >/dev/null 2>&1; done
on router -c "SELECT assign_shards(0, 16, 'node_b'), assign_shards(16, 8176, 'node_a')" >/dev/null

# move KIND SQL: runs one move, records KIND, the caller's seconds, the shards and the write pause.
move() {
  local t0 t1 n
  t0=$(date +%s.%N)
  on router -c "$2" >/dev/null
  t1=$(date +%s.%N)
  n=$(on router -c "SELECT cardinality(shards) || ' ' || extract(epoch FROM write_pause) FROM move_history ORDER BY move DESC LIMIT 1")
  echo "$1 $(python3 -c "print($t1 - $t0)") $n" >>"$work/moves"
}
: >"$work/moves"
for r in $(seq "$ROUNDS"); do
  move small_out "SELECT move_shard(0, 'node_c')"
  move full_out "SELECT move_shard(16, 'node_c')"
  move small_back "SELECT move_shard(0, 'node_b')"
  move full_back "SELECT move_shard(16, 'node_a')"
  move small_out_8 "SELECT move_shards('{1,2,3,4,5,6,7,8}', 'node_c')"
  move full_out_8 "SELECT move_shards('{17,18,19,20,21,22,23,24}', 'node_c')"
  move small_back_8 "SELECT move_shards('{1,2,3,4,5,6,7,8}', 'node_b')"
  move full_back_8 "SELECT move_shards('{17,18,19,20,21,22,23,24}', 'node_a')"
  echo "round $r done"
done
[[ $(on node_a -c "SELECT count(*) FROM snowflake_id_shards") == 8176 ]] || fail "node_a does not hold its 8,176 shards at the end"

python3 - "$work/moves" "$out" "$ROUNDS" <<'EOF'
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for kind, secs, shards, pause in rows:
    by.setdefault(kind, []).append((float(secs), int(shards), float(pause)))
med = {k: {"move_s_per_shard": round(statistics.median(s / n for s, n, _ in v), 4),
           "write_pause_s": round(statistics.median(p for _, _, p in v), 4)} for k, v in by.items()}
ratio = lambda a, b: round(med[a]["move_s_per_shard"] / med[b]["move_s_per_shard"], 2)
result = {"rounds": int(sys.argv[3]), "medians": med,
          "per_shard_ratio_full_over_small": {
              "from_full_1": ratio("full_out", "small_out"), "onto_full_1": ratio("full_back", "small_back"),
              "from_full_8": ratio("full_out_8", "small_out_8"), "onto_full_8": ratio("full_back_8", "small_back_8")},
          "per_shard_ratio_onto_full_over_onto_empty": {
              "1": ratio("full_back", "small_out"), "8": ratio("full_back_8", "small_out_8")}}
json.dump(result, open(sys.argv[2], "w"), indent=2)
for k in ["small_out", "full_out", "small_back", "full_back", "small_out_8", "full_out_8", "small_back_8", "full_back_8"]:
    print(f"{k:14} {med[k]['move_s_per_shard'] * 1000:8.1f} ms per shard, write pause {med[k]['write_pause_s'] * 1000:6.1f} ms")
print("per shard, full node / small node:", result["per_shard_ratio_full_over_small"])
print("per shard, onto the full node / onto the empty node_c:", result["per_shard_ratio_onto_full_over_onto_empty"])
EOF
