#!/usr/bin/env bash
# Benchmark of applications routing by shard themselves (docs/app-routing.md; not a test):
#   bash bench/app_routing.sh [OUT.json]      (writes bench/app_routing.json)
# A single-row insert on a random one of 16 shards of node_a, sent
#   direct      straight to the node, schema-qualified, one statement (autocommit)
#   direct_ext  the same by the extended protocol (as drivers send parameterized statements,
#               and as the pipelines below must)
#   direct_tx   the same in BEGIN ... COMMIT (what use_shard adds to a transaction)
#   direct_tx_pipelined  BEGIN; INSERT; COMMIT in one pipeline: what the transaction costs
#   use_shard   BEGIN; SELECT use_shard(n); INSERT (unqualified); COMMIT: four round trips
#   pipelined   the same four in one pipeline (pgbench's \startpipeline): one round trip
#   implicit    SELECT use_shard(n); INSERT in one pipeline with no BEGIN: the statements up
#               to the pipeline's sync are one transaction (the extended protocol's implicit
#               one), which use_shard's setting lasts
#   router      through the router: SELECT insert_post(n, ...) (PL/Proxy, then the node)
# with pgbench: latency (1 session) and throughput (4 sessions), interleaved, ROUNDS rounds,
# medians. Then issue 36's bar, through the clients, with the same INSERT and the same read by
# ID sent straight to the node and through the router (PL/Proxy): latency (median, p99) and
# 4-session throughput of the Python client (the SQLAlchemy router of clients/python/ against
# psycopg and a plain SQLAlchemy Session on the node): bench/app_routing.py; of the Java client
# (the Spring routing DataSource of clients/java-spring against pgjdbc on a HikariCP pool):
# AppRoutingBench in its tests; and the Node client's insert latency: bench/app_routing_node.js.
# Every server listens on loopback TCP too (pgjdbc speaks no unix sockets), so the router's
# PL/Proxy and the clients reach the nodes by TCP; pgbench uses the unix sockets.
# Prints the figures and their ratios to direct, and writes them with every round to OUT.json.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-bench/app_routing.json}")
source scripts/cluster.sh; source reliability/lib.sh; source scripts/router_cluster.sh
work=$(mktemp -d); chmod 755 "$work"
trap 'router_cluster_down; rm -rf "$work"' EXIT
export ROUNDS=${ROUNDS:-3} SECS=${SECS:-5}
ROUTER_TCP=127.0.0.1 ROUTER_PORT=$(free_ports 6)
SHARDS_PER_NODE=16 router_cluster_up >/dev/null 2>&1
bash clients/venv.sh
bash clients/node.sh
bash scripts/setup clients   # the JDK and Maven

shard='\set shard random(0, 15)'
printf '%s\nINSERT INTO shard_:shard.posts (user_id, body) VALUES (1, '"'bench'"') RETURNING id;\n' "$shard" >"$work/direct.sql"
printf '%s\nBEGIN;\nINSERT INTO shard_:shard.posts (user_id, body) VALUES (1, '"'bench'"') RETURNING id;\nCOMMIT;\n' "$shard" >"$work/direct_tx.sql"
printf '%s\nBEGIN;\nSELECT use_shard(:shard);\nINSERT INTO posts (user_id, body) VALUES (1, '"'bench'"') RETURNING id;\nCOMMIT;\n' "$shard" >"$work/use_shard.sql"
printf '%s\n\\startpipeline\nBEGIN;\nSELECT use_shard(:shard);\nINSERT INTO posts (user_id, body) VALUES (1, '"'bench'"') RETURNING id;\nCOMMIT;\n\\endpipeline\n' "$shard" >"$work/pipelined.sql"
printf '%s\nSELECT insert_post(:shard, 1, '"'bench'"');\n' "$shard" >"$work/router.sql"
# The extended protocol sends :shard as a parameter, which cannot name a schema: one script
# per shard (pgbench picks one at random for each transaction).
for s in $(seq 0 15); do
  printf 'INSERT INTO shard_%s.posts (user_id, body) VALUES (1, '"'bench'"') RETURNING id;\n' "$s" >"$work/direct_ext.$s.sql"
  printf '\\startpipeline\nBEGIN;\nINSERT INTO shard_%s.posts (user_id, body) VALUES (1, '"'bench'"') RETURNING id;\nCOMMIT;\n\\endpipeline\n' "$s" >"$work/direct_tx_pipelined.$s.sql"
done
printf '%s\n\\startpipeline\nSELECT use_shard(:shard);\nINSERT INTO posts (user_id, body) VALUES (1, '"'bench'"') RETURNING id;\n\\endpipeline\n' "$shard" >"$work/implicit.sql"
pgb() {  # pgb VARIANT CLIENTS -> "tps latency_ms"
  local host port mode=simple
  if [[ $1 == router ]]; then host=$SF_TMP/sfrouter port=$ROUTER_PORT; else host=$(node_dir node_a) port=$(node_port node_a); fi
  [[ $1 != *pipelined && $1 != implicit && $1 != direct_ext ]] || mode=extended
  local scripts=("$work/$1".*.sql); [[ -f ${scripts[0]} ]] || scripts=("$work/$1.sql")
  "$PGBIN/pgbench" -n -M "$mode" -h "$host" -p "$port" -U postgres -c "$2" -j "$2" -T "$SECS" \
    "${scripts[@]/#/-f}" postgres 2>/dev/null |
    awk '/^latency average/ {lat=$4} /^tps/ {tps=$3} END {print tps, lat}'
}
variants=(direct direct_ext direct_tx direct_tx_pipelined use_shard pipelined implicit router)
: >"$work/rounds"
for r in $(seq "$ROUNDS"); do
  for c in 1 4; do
    for v in "${variants[@]}"; do echo "$v $c $(pgb "$v" "$c")" >>"$work/rounds"; done
  done
done
"$(pwd)/clients/.venv/bin/python" bench/app_routing.py \
  "host=$SF_TMP/sfrouter port=$ROUTER_PORT dbname=postgres user=postgres" "$(node_connstr node_a)" "$work/python.json"
SF_BENCH_OUT=$work/java.json SF_USER=postgres SF_ROUTER_URL="jdbc:postgresql://127.0.0.1:$ROUTER_PORT/postgres" \
  SF_NODE_URL="jdbc:postgresql://127.0.0.1:$(node_port node_a)/postgres" LOGGING_LEVEL_ROOT=WARN \
  mvn -B -q -f clients/java-spring/pom.xml -P boot3 -Dtest=AppRoutingBench -Dsurefire.failIfNoSpecifiedTests=false test \
  >"$work/java.out" 2>&1 || { cat "$work/java.out"; exit 1; }
node bench/app_routing_node.js "host=$SF_TMP/sfrouter port=$ROUTER_PORT dbname=postgres user=postgres" "$(node_connstr node_a)" \
  "$work/node.json"
python3 - "$work" "$out" "$ROUNDS" "$SECS" <<'PY'
import collections, json, statistics, sys
work, out, rounds, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
runs, every = collections.defaultdict(list), []
for line in open(f"{work}/rounds"):
    v, c, tps, ms = line.split()
    runs[v, int(c)].append((float(tps), float(ms)))
    every.append({"variant": v, "sessions": int(c), "tps": float(tps), "latency_ms": float(ms)})
med = {k: (statistics.median(t for t, _ in xs), statistics.median(m for _, m in xs)) for k, xs in runs.items()}
pgbench = {}
print("pgbench, single-row insert, medians (ratio to direct):")
for v in ("direct", "direct_ext", "direct_tx", "direct_tx_pipelined", "use_shard", "pipelined", "implicit", "router"):
    (t1, l1), (t4, _) = med[v, 1], med[v, 4]
    pgbench[v] = {"latency_ms": l1, "latency_ratio": round(l1 / med["direct", 1][1], 3),
                  "tps_4_sessions": round(t4, 1), "tps_ratio": round(t4 / med["direct", 4][0], 3)}
    print(f"  {v:20} latency {l1:.3f} ms ({l1 / med['direct', 1][1]:.2f}x)   4-session throughput {t4:,.0f} tps ({t4 / med['direct', 4][0]:.2f}x)")
doc = {"what": "bench/app_routing.sh: a router and 3 data nodes on loopback (pgbench by unix sockets, the clients and PL/Proxy by TCP), one machine; "
               f"single-row inserts on 16 shards of node_a; pgbench {rounds} interleaved rounds of {secs} s, medians",
       "pgbench": {"median": pgbench, "rounds": every},
       "python": json.load(open(f"{work}/python.json")), "java": json.load(open(f"{work}/java.json")),
       "node": json.load(open(f"{work}/node.json"))}
java = doc["java"]
print("Java, one thread's latency (median, p99) and 4 threads' throughput (ratio to pgjdbc direct tx / autocommit):")
for op in ("insert", "read"):
    b, a = java[f"pgjdbc direct tx/{op}"], java[f"pgjdbc direct/{op}"]
    for name in ("pgjdbc direct", "pgjdbc direct tx", "Spring routing DataSource", "pgjdbc via router"):
        f = java[f"{name}/{op}"]
        f.update(latency_ratio_tx=round(f["latency_ms"] / b["latency_ms"], 3),
                 latency_ratio_autocommit=round(f["latency_ms"] / a["latency_ms"], 3),
                 tps_ratio_tx=round(f["tps_4"] / b["tps_4"], 3), tps_ratio_autocommit=round(f["tps_4"] / a["tps_4"], 3))
        print(f"  {op:6} {name:26} {f['latency_ms']:.3f} ms p99 {f['p99_ms']:.3f} ({f['latency_ratio_tx']:.2f}x / "
              f"{f['latency_ratio_autocommit']:.2f}x)  {f['tps_4']:,.0f}/s ({f['tps_ratio_tx']:.2f}x / "
              f"{f['tps_ratio_autocommit']:.2f}x)  rounds {f['tps_rounds']}")
json.dump(doc, open(out, "w"), indent=1)
print(f"written to {out}")
PY
