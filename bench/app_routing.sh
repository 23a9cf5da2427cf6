#!/usr/bin/env bash
# Benchmark of applications routing by shard themselves (docs/app-routing.md; not a test):
#   bash bench/app_routing.sh
# A single-row insert on a random one of 16 shards of node_a, sent
#   direct      straight to the node, schema-qualified, one statement (autocommit)
#   direct_tx   the same in BEGIN ... COMMIT (what use_shard adds to a transaction)
#   use_shard   BEGIN; SELECT use_shard(n); INSERT (unqualified); COMMIT: four round trips
#   pipelined   the same four in one pipeline (pgbench's \startpipeline): one round trip
#   router      through the router: SELECT insert_post(n, ...) (PL/Proxy, then the node)
# with pgbench: latency (1 session) and throughput (4 sessions), interleaved, ROUNDS rounds,
# medians; then the same insert's latency through the Python clients (one session, in
# process: psycopg direct, the SQLAlchemy and Django routers' units, psycopg through the
# router): bench/app_routing.py; and through the Node client (node-postgres direct, in a
# transaction, routing.js's withShard, through the router): bench/app_routing_node.js.
# Prints the figures and their ratios to direct.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh; source reliability/lib.sh; source scripts/router_cluster.sh
work=$(mktemp -d); chmod 755 "$work"
trap 'router_cluster_down; rm -rf "$work"' EXIT
ROUNDS=${ROUNDS:-3} SECS=${SECS:-5}
SHARDS_PER_NODE=16 router_cluster_up >/dev/null 2>&1
bash clients/venv.sh
bash clients/node.sh

shard='\set shard random(0, 15)'
printf '%s\nINSERT INTO shard_:shard.posts (user_id, body) VALUES (1, '"'bench'"') RETURNING id;\n' "$shard" >"$work/direct.sql"
printf '%s\nBEGIN;\nINSERT INTO shard_:shard.posts (user_id, body) VALUES (1, '"'bench'"') RETURNING id;\nCOMMIT;\n' "$shard" >"$work/direct_tx.sql"
printf '%s\nBEGIN;\nSELECT use_shard(:shard);\nINSERT INTO posts (user_id, body) VALUES (1, '"'bench'"') RETURNING id;\nCOMMIT;\n' "$shard" >"$work/use_shard.sql"
printf '%s\n\\startpipeline\nBEGIN;\nSELECT use_shard(:shard);\nINSERT INTO posts (user_id, body) VALUES (1, '"'bench'"') RETURNING id;\nCOMMIT;\n\\endpipeline\n' "$shard" >"$work/pipelined.sql"
printf '%s\nSELECT insert_post(:shard, 1, '"'bench'"');\n' "$shard" >"$work/router.sql"
pgb() {  # pgb VARIANT CLIENTS -> "tps latency_ms"
  local host port mode=simple
  if [[ $1 == router ]]; then host=$SF_TMP/sfrouter port=$ROUTER_PORT; else host=$(node_dir node_a) port=$(node_port node_a); fi
  [[ $1 != pipelined ]] || mode=extended
  "$PGBIN/pgbench" -n -M "$mode" -h "$host" -p "$port" -U postgres -c "$2" -j "$2" -T "$SECS" -f "$work/$1.sql" postgres 2>/dev/null |
    awk '/^latency average/ {lat=$4} /^tps/ {tps=$3} END {print tps, lat}'
}
variants=(direct direct_tx use_shard pipelined router)
: >"$work/rounds"
for r in $(seq "$ROUNDS"); do
  for c in 1 4; do
    for v in "${variants[@]}"; do echo "$v $c $(pgb "$v" "$c")" >>"$work/rounds"; done
  done
done
python3 - "$work/rounds" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    v, c, tps, ms = line.split()
    runs[v, int(c)].append((float(tps), float(ms)))
med = {k: (statistics.median(t for t, _ in xs), statistics.median(m for _, m in xs)) for k, xs in runs.items()}
print("pgbench, single-row insert, medians (ratio to direct):")
for v in ("direct", "direct_tx", "use_shard", "pipelined", "router"):
    (t1, l1), (t4, _) = med[v, 1], med[v, 4]
    print(f"  {v:10} latency {l1:.3f} ms ({l1 / med['direct', 1][1]:.2f}x)   4-session throughput {t4:,.0f} tps ({t4 / med['direct', 4][0]:.2f}x)")
PY
"$(pwd)/clients/.venv/bin/python" bench/app_routing.py \
  "host=$SF_TMP/sfrouter port=$ROUTER_PORT dbname=postgres user=postgres" "$(node_connstr node_a)"
node bench/app_routing_node.js "host=$SF_TMP/sfrouter port=$ROUTER_PORT dbname=postgres user=postgres" "$(node_connstr node_a)"
