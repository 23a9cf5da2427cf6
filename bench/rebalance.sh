#!/usr/bin/env bash
# Benchmarks of cluster operations (not a test): bash bench/rebalance.sh [OUT.json]
#   1. rebalance of small shards onto a new node under 4 writer sessions: shards per second
#      for several batch sizes, against one move_shard at a time, measured before and after
#      in the same run; the longest write to a moving shard per batch (first try to
#      acknowledgement, retries of 40001 included): median and max over batches;
#   2. one large shard: rows per second moved by move_shards, against pg_dump | psql of the
#      same schema into another node, alternately, twice each;
#   3. at scale (issue 24): shard_status and rebalance_plan per shard over 8,192 shards
#      against over 512; a drain of 256 shards onto a node holding 7,936 shards against onto
#      an empty node, per shard.
# Expects scripts/install to have run. Writes bench/rebalance.json. SMALL (2,000 shards made
# on node_a, about half moved per pass), BATCHES (batch sizes, one rebalance or drain each,
# alternately; SIZExN: N batches moving at once, parallel_moves),
# BIG_ROWS (rows of the large shard), FEW (part 3's drained shards) are settable; SCALE=0
# leaves part 3 out (its figures null), for comparing moves alone.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
source scripts/cluster.sh; source reliability/lib.sh; source scripts/router_cluster.sh; source bench/lib.sh
out=${1:-bench/rebalance.json}
work=$(mktemp -d); chmod 755 "$work"
ROUTER_NODES=(node_a node_b node_c)
trap 'touch "$work"/client{1,2,3,4}.log.stop 2>/dev/null; router_cluster_down; rm -rf "$work"' EXIT
SMALL=${SMALL:-2000} BATCHES=${BATCHES:-"8 32 64 12x3 16x4 10x6"} BIG_ROWS=${BIG_ROWS:-1000000}
FEW=${FEW:-256}   # part 3: shards on y (drained twice); x holds 8192 - FEW
SCALE=${SCALE:-1}

# fresh_node NAME: a data node with snowflake_id and the example template, no shard.
fresh_node() {
  node_start "$1" max_logical_replication_workers=10 max_worker_processes=16
  on "$1" -c "CREATE EXTENSION snowflake_id" -f router/examples/node.sql >/dev/null
}
now() { date +%s.%N; }
secs() { python3 -c "print(round($2 - $1, 3))"; }

# == 1. Rebalance of small shards, under load ==
for n in node_a node_b node_c; do fresh_node "$n"; done
make_shards node_a 0 "$SMALL"
cluster_start sfrouter "$ROUTER_PORT"
on router -c "CREATE EXTENSION snowflake_id_router CASCADE" -f router/examples/router.sql >/dev/null
on router -c "SELECT add_node('node_a', '$(node_connstr node_a)'), add_node('node_b', '$(node_connstr node_b)')" \
  -c "SELECT assign_shards(0, 8192, 'node_a')" >/dev/null
shards=$(on router -c "SELECT string_agg(s::text, ',') FROM generate_series(0, $SMALL - 1, 4) s")
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
pids=()
for c in 1 2 3 4; do "$PYTHON" reliability/router_client.py "$dsn" "$c" 3600 "$shards" "$work/client$c.log" & pids+=($!); done
sleep 2

# single FROM TO COUNT: COUNT move_shard calls one after another (shards on FROM, highest first).
single() {
  local list t0 t1
  list=$(on router -c "SELECT string_agg(shard::text, ' ') FROM (SELECT shard FROM shard_status WHERE node = '$1' AND mapped
                                                                ORDER BY shard DESC LIMIT $3) x")
  t0=$(now)
  for s in $list; do on router -c "SELECT move_shard($s, '$2')" >/dev/null; done
  t1=$(now)
  echo "{\"moves\": $3, \"seconds\": $(secs "$t0" "$t1")}"
}
singles=()
singles+=("$(single node_a node_b 10)")
echo "one move_shard at a time: ${singles[0]}"
passes=()
direction=rebalance
for pass in $BATCHES; do
  b=${pass%x*} par=1; [[ $pass != *x* ]] || par=${pass#*x}
  t0=$(now)
  if [[ $direction == rebalance ]]; then
    on router -c "CALL rebalance(batch_size => $b, parallel_moves => $par)" >/dev/null; direction=drain
  else
    on router -c "CALL drain_node('node_b', batch_size => $b, parallel_moves => $par)" >/dev/null; direction=rebalance
  fi
  t1=$(now)
  read -r id kind moved <<<"$(on router -F ' ' -c "SELECT id, kind, shards_done FROM rebalance_status ORDER BY id DESC LIMIT 1")"
  on router -F ' ' -c "SELECT b.batch, extract(epoch FROM b.started), extract(epoch FROM b.ended), array_to_string(b.shards, ',')
                         FROM snowflake_id_router.rebalance_batch b WHERE b.rebalance = $id AND b.state = 'done'" >"$work/batches$id"
  # Each batch's fence to flip, as move_history records it: median and max.
  fenced=$(on router -c "SELECT json_build_object('median', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM write_pause))::numeric, 3),
                                                  'max', round(max(extract(epoch FROM write_pause)), 3))
                           FROM move_history WHERE started >= to_timestamp($t0) AND outcome = 'done'")
  echo "$kind of $moved shards, batch_size $b, parallel_moves $par: $(secs "$t0" "$t1") s, $(python3 -c "print(round($moved / ($t1 - $t0), 1))") shards/s, fenced $fenced"
  passes+=("{\"kind\": \"$kind\", \"batch_size\": $b, \"parallel_moves\": $par, \"shards\": $moved, \"seconds\": $(secs "$t0" "$t1"), \"fenced_per_batch_s\": $fenced, \"batches_file\": \"$work/batches$id\"}")
done
singles+=("$(single node_a node_b 10)")
echo "one move_shard at a time, again: ${singles[1]}"
touch "$work"/client{1,2,3,4}.log.stop
for p in "${pids[@]}"; do wait "$p"; done
# Correctness of the writes, as the tests check it.
for n in node_a node_b; do
  q=$(on "$n" -c "SELECT coalesce(string_agg(format('SELECT %L, %s, id, body FROM %I.posts', '$n', shard, schema_name), ' UNION ALL '), 'SELECT 1 WHERE false') FROM snowflake_id_shards")
  on "$n" -F ' ' -c "$q" >>"$work/rows"
done
on router -F ' ' -c "SELECT shard, node FROM shard_map" >"$work/map"
: >"$work/moves"
"$PYTHON" reliability/router_check.py "$work/rows" "$work/map" "$work/moves" "$work"/client*.log | head -1

# == 2. One large shard: move_shards against pg_dump | psql ==
big=$((SMALL + 10))
make_shards node_a "$big" 1
on node_a -c "INSERT INTO shard_$big.posts (user_id, body) SELECT g % 1000, repeat('x', 100) FROM generate_series(1, $BIG_ROWS) g" \
  -c "VACUUM ANALYZE shard_$big.posts" >/dev/null
bulk=()
from=node_a to=node_b
for round in 1 2; do
  # pg_dump of the schema where it is, restored into node_c (dropped again after).
  t0=$(now)
  "$PGBIN/pg_dump" -h "$(node_dir $from)" -p "$(node_port $from)" -U postgres -n "shard_$big" postgres |
    PGOPTIONS="-c client_min_messages=warning" "$PGBIN/psql" -X -q -h "$(node_dir node_c)" -p "$(node_port node_c)" -U postgres -d postgres >/dev/null
  t1=$(now)
  on node_c -c "DROP SCHEMA shard_$big CASCADE" >/dev/null
  t2=$(now)
  on router -c "SELECT move_shards(ARRAY[$big], '$to')" >/dev/null
  t3=$(now)
  echo "$BIG_ROWS rows: pg_dump | psql $(secs "$t0" "$t1") s, move_shards $(secs "$t2" "$t3") s ($from -> $to)"
  bulk+=("{\"rows\": $BIG_ROWS, \"pg_dump_psql_s\": $(secs "$t0" "$t1"), \"move_shards_s\": $(secs "$t2" "$t3")}")
  tmp=$from; from=$to; to=$tmp
done
router_cluster_down

# == 3. At scale: 8,192 shards ==
status_small=null status_big=null plan_small=null plan_big=null t0=0 t1=0 t2=0 t3=0
if ((SCALE)); then
  for n in node_a node_b node_c; do fresh_node "$n"; done
  cluster_start sfrouter "$ROUTER_PORT"
  on router -c "CREATE EXTENSION snowflake_id_router CASCADE" >/dev/null
  on router -c "SELECT add_node('x', '$(node_connstr node_a)'), add_node('y', '$(node_connstr node_b)'), add_node('z', '$(node_connstr node_c)')" \
    -c "SELECT assign_shards(0, 8192 - $FEW, 'x'), assign_shards(8192 - $FEW, $FEW, 'y')" >/dev/null
  # timed SQL ROUNDS: median seconds of SQL on the router over ROUNDS runs.
  timed() {
    local r t0 t1 all=()
    for r in $(seq "$2"); do t0=$(now); on router -c "$1" >/dev/null; t1=$(now); all+=("$(secs "$t0" "$t1")"); done
    python3 -c "import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "${all[@]}"
  }
  make_shards node_a 0 "$FEW"
  make_shards node_b $((8192 - FEW)) "$FEW"
  status_small=$(timed "SELECT count(*) FROM shard_status" 5)
  plan_small=$(timed "SELECT count(*) FROM rebalance_plan('by_disk_size')" 5)
  make_shards node_a "$FEW" $((8192 - 2 * FEW))
  status_big=$(timed "SELECT count(*) FROM shard_status" 5)
  plan_big=$(timed "SELECT count(*) FROM rebalance_plan('by_disk_size')" 5)
  echo "shard_status: $status_small s over $((2 * FEW)) shards, $status_big s over 8,192; rebalance_plan('by_disk_size'): $plan_small s, $plan_big s"
  # FEW shards drained from y onto z (empty), then (y removed) from z onto x (8192 - FEW shards).
  t0=$(now); on router -c "CALL drain_node('y')" >/dev/null; t1=$(now)
  on router -c "SELECT remove_node('y')" >/dev/null
  t2=$(now); on router -c "CALL drain_node('z')" >/dev/null; t3=$(now)
  echo "drain of $FEW shards onto an empty node: $(secs "$t0" "$t1") s; onto a node holding $((8192 - FEW)): $(secs "$t2" "$t3") s"
fi

python3 - "$out" "$work" "$(IFS=';'; echo "${singles[*]}")" "$(IFS=';'; echo "${passes[*]}")" "$(IFS=';'; echo "${bulk[*]}")" \
  "$status_small" "$status_big" "$plan_small" "$plan_big" "$( ((SCALE)) && secs "$t0" "$t1" || echo null)" \
  "$( ((SCALE)) && secs "$t2" "$t3" || echo null)" "$FEW" <<'PY'
import json, statistics, sys, glob
out, work, singles, passes, bulk = sys.argv[1:6]
status_small, status_big, plan_small, plan_big, drain_empty, drain_big = (
    None if x == "null" else float(x) for x in sys.argv[6:12])
few = int(sys.argv[12])
singles = [json.loads(x) for x in singles.split(";")]
passes = [json.loads(x) for x in passes.split(";")]
bulk = [json.loads(x) for x in bulk.split(";")]
# Client writes: (shard, t_first, t_ack).
writes = []
for path in glob.glob(f"{work}/client*.log"):
    for line in open(path):
        kind, pid, shard, _body, t0, t1, _tries = line.split()
        pid = int(pid)
        writes.append((int(shard) if kind == "I" else (pid >> 10) & 8191, float(t0), float(t1)))
for p in passes:
    pauses = []
    for line in open(p.pop("batches_file")):
        _batch, start, end, shards = line.split()
        start, end, shards = float(start), float(end), {int(s) for s in shards.split(",")}
        span = [t1 - t0 for s, t0, t1 in writes if s in shards and t1 >= start and t0 <= end]
        if span:
            pauses.append(max(span))
    p["shards_per_second"] = round(p["shards"] / p["seconds"], 1)
    p["longest_write_per_batch_s"] = {"batches_with_writes": len(pauses),
                                      "median": round(statistics.median(pauses), 3) if pauses else None,
                                      "max": round(max(pauses), 3) if pauses else None}
single_rate = statistics.median(s["moves"] / s["seconds"] for s in singles)
for s in singles:
    s["shards_per_second"] = round(s["moves"] / s["seconds"], 2)
for b in bulk:
    b["move_rows_per_second"] = round(b["rows"] / b["move_shards_s"])
    b["pg_dump_rows_per_second"] = round(b["rows"] / b["pg_dump_psql_s"])
doc = {
    "what": "bench/rebalance.sh: router + data nodes on loopback (unix sockets), one 2-core machine, shared",
    "one_move_shard_at_a_time": singles,
    "rebalance_passes": passes,
    "rebalance_over_single_moves": {f'{p["batch_size"]}' + (f'x{p["parallel_moves"]}' if p["parallel_moves"] > 1 else ''):
                                    round(p["shards_per_second"] / single_rate, 1) for p in passes},
    "bulk": bulk,
    "bulk_move_over_pg_dump": round(statistics.median(b["pg_dump_psql_s"] / b["move_shards_s"] for b in bulk), 2),
    "scale": None if status_small is None else {
        "shard_status_s": {"few_shards": 2 * few, "over_few": status_small, "over_8192": status_big,
                           "per_shard_ratio_8192_over_few": round((status_big / 8192) / (status_small / (2 * few)), 2)},
        "rebalance_plan_by_disk_size_s": {"few_shards": 2 * few, "over_few": plan_small, "over_8192": plan_big,
                                          "per_shard_ratio_8192_over_few": round((plan_big / 8192) / (plan_small / (2 * few)), 2)},
        "drain_s": {"shards": few, "onto_empty_node": drain_empty, f"onto_node_with_{8192 - few}": drain_big,
                    "ratio": round(drain_big / drain_empty, 2)},
    },
}
json.dump(doc, open(out, "w"), indent=2)
print(json.dumps({k: doc[k] for k in ("rebalance_over_single_moves", "bulk_move_over_pg_dump", "scale")}, indent=2))
PY
