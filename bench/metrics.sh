#!/usr/bin/env bash
# Benchmark of the exporter's scrape at scale (issue 39's bar; not a test):
#   bash bench/metrics.sh [OUT.json]
# What one scrape of monitoring/queries.yaml costs when a node holds 8,176 shards, against
# the same cluster while it holds 16. node_b holds 16 shards (0 .. 15) throughout, node_c
# none; node_a first 16 (16 .. 31), then 8,176 (16 .. 8191), each shard a posts table of 3
# rows, the nodes' catalogs analyzed. At each size: each query's time as the monitoring role
# (median of RUNS, default 5: metrics_check.py cost), and the exporter's scrapes with curl:
# a first scrape after a start (every query run, the cache of the shards' query empty)
# and the scrapes after it (that query cached), medians of RUNS. Writes bench/metrics.json.
# Expects scripts/install to have run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh; source reliability/lib.sh; source scripts/router_cluster.sh; source bench/lib.sh; source monitoring/exporter.sh
bash scripts/setup monitoring
out=${1:-bench/metrics.json}
work=$(mktemp -d); chmod 755 "$work"
trap 'exporter_stop; router_cluster_down; rm -rf "$work"' EXIT
RUNS=${RUNS:-5}

start_nodes node_a node_b node_c
make_shards node_a 16 16
make_shards node_b 0 16
cluster_start sfrouter "$ROUTER_PORT"
on router -c "CREATE EXTENSION snowflake_id_router CASCADE" >/dev/null
for n in node_a node_b node_c; do on router -c "SELECT add_node('$n', '$(node_connstr "$n")')" >/dev/null 2>&1; done
on router -c "SELECT assign_shards(0, 16, 'node_b'), assign_shards(16, 8176, 'node_a')" >/dev/null
on router -f monitoring/grants.sql

# measure SIZE: the queries' cost and the scrapes' times into $work/SIZE.*.
measure() {
  for n in node_a node_b node_c; do on "$n" -c "ANALYZE" >/dev/null; done
  "$PYTHON" reliability/metrics_check.py cost monitoring/queries.yaml "$MONITOR_DSN" "$RUNS" "$work/$1.queries"
  local i
  : >"$work/$1.first"; : >"$work/$1.cached"
  for ((i = 0; i < RUNS; i++)); do
    exporter_start "$work/exporter.log"
    scrape "$work/scrape.prom" >>"$work/$1.first"; echo >>"$work/$1.first"
    grep -q '^pg_exporter_last_scrape_error 0' "$work/scrape.prom" || { echo "a query failed: $(tail -3 "$work/exporter.log")" >&2; exit 1; }
    scrape "$work/scrape.prom" >>"$work/$1.cached"; echo >>"$work/$1.cached"
    exporter_stop
  done
  echo "node_a with $(on node_a -c "SELECT count(*) FROM snowflake_id_shards") shards: scrapes (first, cached): $(tr '\n' ' ' <"$work/$1.first")/ $(tr '\n' ' ' <"$work/$1.cached")"
}
measure small
t0=$(date +%s)
make_shards node_a 32 8160
echo "8,160 more shards made on node_a in $(($(date +%s) - t0)) s"
measure full

"$PYTHON" - "$work" "$out" "$RUNS" <<'EOF'
import json, statistics, sys
work, out, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def times(name):
    return [float(x) for x in open(f"{work}/{name}").read().split()]
result = {"runs": runs, "shards_on_node_a": {"small": 16, "full": 8176}}
for size in ("small", "full"):
    result[size] = {
        "queries_s": json.load(open(f"{work}/{size}.queries")),
        "scrape_first_s": round(statistics.median(times(f"{size}.first")), 4),
        "scrape_cached_s": round(statistics.median(times(f"{size}.cached")), 4),
    }
s, f = result["small"]["queries_s"], result["full"]["queries_s"]
result["ratios_full_over_small"] = {q: round(f[q] / s[q], 1) for q in s if s[q] > 0}
result["shard_status_ms_per_shard"] = round(f["snowflake_id_shards"] * 1000 / (8176 + 16), 3)
json.dump(result, open(out, "w"), indent=1)
open(out, "a").write("\n")
print(json.dumps(result, indent=1))
EOF
