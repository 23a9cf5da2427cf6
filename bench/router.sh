#!/usr/bin/env bash
# Benchmarks of the router (not a test): bash bench/router.sh [OUT.json]
#   1. a routed insert (router -> PL/Proxy -> node_a) against the same insert sent to node_a
#      directly: latency (1 session) and throughput (4 sessions), interleaved rounds, one run;
#   2. the write pause each online move causes under the reliability test's load (4 client
#      sessions), max and median over moves, and the fence time move_shard reports;
#   3. rows moved per second (a 500,000-row shard).
# Expects scripts/install to have run. Writes bench/router.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh; source reliability/lib.sh; source scripts/router_cluster.sh
out=${1:-bench/router.json}
work=$(mktemp -d); chmod 755 "$work"
trap 'router_cluster_down; rm -rf "$work"' EXIT
ROUNDS=${ROUNDS:-3} SECS=${SECS:-5}
SHARDS_PER_NODE=16 router_cluster_up

echo '\set shard random(0, 15)
SELECT insert_post(:shard, 1, '"'"'bench'"'"');' >"$work/insert.sql"
pgb() {  # pgb router|node_a CLIENTS -> "tps latency_ms"
  local host port
  if [[ $1 == router ]]; then host=$SF_TMP/sfrouter port=$ROUTER_PORT; else host=$(node_dir "$1") port=$(node_port "$1"); fi
  "$PGBIN/pgbench" -n -h "$host" -p "$port" -U postgres -c "$2" -j "$2" -T "$SECS" -f "$work/insert.sql" postgres 2>/dev/null |
    awk '/^latency average/ {lat=$4} /^tps/ {tps=$3} END {print tps, lat}'
}
results=()
for r in $(seq "$ROUNDS"); do
  for c in 1 4; do
    read -r rt rl <<<"$(pgb router $c)"; read -r dt dl <<<"$(pgb node_a $c)"
    echo "round $r, $c session(s): routed $rt tps ${rl} ms, direct $dt tps ${dl} ms"
    results+=("{\"round\": $r, \"sessions\": $c, \"routed_tps\": $rt, \"routed_ms\": $rl, \"direct_tps\": $dt, \"direct_ms\": $dl}")
  done
done

# Moves under load.
shards=$(on router -c "SELECT string_agg(s::text, ',') FROM (SELECT generate_series(0, 15) UNION ALL
                        SELECT generate_series(2731, 2746) UNION ALL SELECT generate_series(5462, 5477)) g(s)")
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
: >"$work/moves"
pids=()
for c in 1 2 3 4; do "$PYTHON" reliability/router_client.py "$dsn" "$c" 26 "$shards" "$work/client$c.log" & pids+=($!); done
sleep 2
for m in "1 node_b" "2732 node_c" "5463 node_a" "4 node_c" "2735 node_a" "5466 node_b" "7 node_b" "2738 node_c"; do
  set -- $m; t0=$(date +%s.%N)
  on router -c "SET client_min_messages = notice" -c "SELECT move_shard($1, '$2')" 2>>"$work/move.log" >/dev/null
  echo "$1 $t0 $(date +%s.%N)" >>"$work/moves"; sleep 1.5
done
for p in "${pids[@]}"; do wait "$p"; done
: >"$work/rows"
for n in node_a node_b node_c; do
  q=$(on "$n" -c "SELECT string_agg(format('SELECT %L, %s, id, body FROM %I.posts', '$n', shard, schema_name), ' UNION ALL ') FROM snowflake_id_shards")
  on "$n" -F ' ' -c "$q" >>"$work/rows"
done
on router -F ' ' -c "SELECT shard, node FROM shard_map" >"$work/map"
check=$("$PYTHON" reliability/router_check.py "$work/rows" "$work/map" "$work/moves" "$work"/client*.log)
echo "$check"
pauses=$(echo "$check" | sed -n 's/.*per move (s): \([^;]*\);.*/\1/p' | tr -d ' ')
fenced=$(grep -o 'writes fenced for [0-9.]* ms' "$work/move.log" | awk '{print $4}' | paste -sd, -)
writes=$(cat "$work"/client*.log | wc -l)

# Rows moved per second: a 500,000-row shard, no other load.
on node_a -c "INSERT INTO shard_10.posts (user_id, body) SELECT g % 1000, repeat('x', 100) FROM generate_series(1, 500000) g"
t0=$(date +%s.%N)
on router -c "SET client_min_messages = notice" -c "SELECT move_shard(10, 'node_b')" 2>"$work/big.log"
t1=$(date +%s.%N)
big_rows=$(grep -o '[0-9]* rows' "$work/big.log" | awk '{print $1}')
big_secs=$(python3 -c "print(round($t1 - $t0, 3))")
echo "moved $big_rows rows in $big_secs s: $(python3 -c "print(round($big_rows / $big_secs))") rows/s ($(grep -o 'writes fenced for [0-9.]* ms' "$work/big.log"))"

python3 - "$out" "$pauses" "$fenced" "$writes" "$big_rows" "$big_secs" "${results[@]}" <<'PY'
import json, statistics, sys
out, pauses, fenced, writes, big_rows, big_secs, *rounds = sys.argv[1:]
rounds = [json.loads(r) for r in rounds]
def med(xs): return round(statistics.median(xs), 3)
summary = {}
for c in (1, 4):
    rs = [r for r in rounds if r["sessions"] == c]
    summary[f"{c}_sessions"] = {
        "routed_tps": med([r["routed_tps"] for r in rs]), "direct_tps": med([r["direct_tps"] for r in rs]),
        "routed_latency_ms": med([r["routed_ms"] for r in rs]), "direct_latency_ms": med([r["direct_ms"] for r in rs]),
        "latency_ratio_routed_over_direct": med([r["routed_ms"] / r["direct_ms"] for r in rs]),
        "throughput_ratio_routed_over_direct": med([r["routed_tps"] / r["direct_tps"] for r in rs]),
    }
p = [float(x) for x in pauses.split(",") if x]
f = [float(x) for x in fenced.split(",") if x]
doc = {
    "what": "bench/router.sh: router + 3 data nodes on loopback (unix sockets), one machine",
    "routed_vs_direct_insert": {"rounds": rounds, "median": summary},
    "moves_under_load": {
        "client_sessions": 4, "moves": len(p), "client_writes": int(writes),
        "longest_write_on_moving_shard_s": {"each": p, "max": max(p), "median": med(p)},
        "fenced_ms_reported_by_move_shard": {"each": f, "max": max(f), "median": med(f)},
    },
    "bulk_move": {"rows": int(big_rows), "seconds": round(float(big_secs), 2),
                  "rows_per_second": round(int(big_rows) / float(big_secs))},
}
json.dump(doc, open(out, "w"), indent=2)
print(json.dumps(summary, indent=2))
PY
