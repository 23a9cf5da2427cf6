#!/usr/bin/env bash
# Benchmarks of alter_shards (not a test): bash bench/alter_shards.sh [OUT.json]
#   1. alter_shards on 1,002 shards over 3 nodes (scripts/router_cluster.sh, 334 a node)
#      against a hand-written loop of the same DDL on each node in turn (one DO block a node,
#      the template and every shard's schema, one transaction: what alter_shards does
#      without its checks and records): seconds, rounds interleaved, for a column with a
#      default and for an index;
#   2. seconds per shard on a node holding 8192 shards against a node holding 512, in the
#      same alter_shards call (it reports each node's time), beside the hand-written loop on
#      each node; and what the call says when the big node's lock table is too small.
# Expects scripts/install to have run. Writes bench/alter_shards.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh; source reliability/lib.sh; source scripts/router_cluster.sh
out=${1:-bench/alter_shards.json}
ROUNDS=${ROUNDS:-3}
trap 'router_cluster_down' EXIT
now() { date +%s.%N; }
secs() { python3 -c "print(round($2 - $1, 3))"; }

# 1. alter_shards against the hand-written loop.
SHARDS_PER_NODE=334 router_cluster_up
shards=0
for n in node_a node_b node_c; do shards=$((shards + $(on "$n" -c "SELECT count(*) FROM snowflake_id_shards"))); done
hand() {  # hand DDL [NODE...]: the DDL (%I for the schema) on each node's template and shards, one DO block a node
  local n ddl=$1; shift
  local nodes=("$@"); ((${#nodes[@]})) || nodes=(node_a node_b node_c)
  for n in "${nodes[@]}"; do
    on "$n" -c "DO \$do\$ DECLARE s text; BEGIN
                  EXECUTE format(\$f\$$ddl\$f\$, 'tpl');
                  FOR s IN SELECT schema_name FROM snowflake_id_shards ORDER BY shard LOOP EXECUTE format(\$f\$$ddl\$f\$, s); END LOOP;
                END \$do\$"
  done
}
rounds=()
for r in $(seq "$ROUNDS"); do
  for kind in column index; do
    if [[ $kind == column ]]; then a="ALTER TABLE %I.posts ADD COLUMN a$r integer NOT NULL DEFAULT 0"; h="ALTER TABLE %I.posts ADD COLUMN h$r integer NOT NULL DEFAULT 0"
    else a="CREATE INDEX ON %I.posts (a$r)"; h="CREATE INDEX ON %I.posts (h$r)"; fi
    # Interleaved: odd rounds alter_shards first, even rounds the loop first.
    for who in $( ((r % 2)) && echo "alter hand" || echo "hand alter"); do
      t0=$(now)
      if [[ $who == alter ]]; then on router -c "SELECT count(*) FROM alter_shards(\$\$$a\$\$)" >/dev/null; ta=$(secs "$t0" "$(now)")
      else hand "$h"; th=$(secs "$t0" "$(now)"); fi
    done
    echo "round $r, $kind on $shards shards: alter_shards $ta s, hand-written loop $th s ($(python3 -c "print(round($ta / $th, 2))")x)"
    rounds+=("{\"round\": $r, \"kind\": \"$kind\", \"alter_shards_s\": $ta, \"hand_loop_s\": $th}")
  done
done
router_cluster_down

# 2. A node with 8192 shards and one with 512, in one call. The shards are made as
# create_shard(..., template) makes them, in batches (one transaction each).
node_start node_a max_locks_per_transaction=64
node_start node_b
for n in node_a node_b; do
  count=$([[ $n == node_a ]] && echo 8192 || echo 512)
  on "$n" -c "CREATE EXTENSION snowflake_id" -f router/examples/node.sql >/dev/null
  for first in $(seq 0 512 $((count - 1))); do
    on "$n" -c "DO \$\$ BEGIN FOR s IN $first .. $first + 511 LOOP
                  PERFORM create_shard('shard_' || s, s);
                  EXECUTE format('CREATE TABLE %I.posts (LIKE tpl.posts INCLUDING ALL)', 'shard_' || s);
                  EXECUTE format('ALTER TABLE %I.posts ALTER COLUMN id SET DEFAULT %I.next_id()', 'shard_' || s, 'shard_' || s);
                END LOOP; END \$\$" >/dev/null
  done
done
cluster_start sfrouter "$ROUTER_PORT"
on router -c "CREATE EXTENSION snowflake_id_router CASCADE" >/dev/null
on router -c "SELECT add_node('node_a', '$(node_connstr node_a)'), add_node('node_b', '$(node_connstr node_b)')" >/dev/null
refusal=$(on router -c "SELECT * FROM alter_shards('ALTER TABLE %I.posts ADD COLUMN x integer NOT NULL DEFAULT 0')" 2>&1 | head -2 | tr '\n' ' ' || true)
echo "with max_locks_per_transaction = 64 on the 8192-shard node: $refusal"
locks=$(echo "$refusal" | sed -n 's/.*at least \([0-9]*\).*/\1/p')
[[ -n $locks ]] || { echo "alter_shards did not refuse the 8192-shard node: $refusal" >&2; exit 1; }
# Twice what that change asks for: each round below adds an index to every posts table, so
# later changes lock more relations per schema than the one that was refused.
hinted=$locks locks=$((locks * 2))
cluster_stop sfnode_a
sed -i "s/max_locks_per_transaction=64/max_locks_per_transaction=$locks/" "$(node_dir node_a)/options"
cluster_resume sfnode_a
per_shard=()
for r in $(seq "$ROUNDS"); do
  for kind in column index; do
    if [[ $kind == column ]]; then ddl="ALTER TABLE %I.posts ADD COLUMN b$r integer NOT NULL DEFAULT 0"; else ddl="CREATE INDEX ON %I.posts (b$r)"; fi
    res=$(on router -F ' ' -c "SELECT node, schemas, seconds FROM alter_shards(\$\$$ddl\$\$) ORDER BY node")
    read -r _ sa xa _ sb xb <<<"$(echo $res)"
    hddl=${ddl//b$r/h$r}
    t0=$(now); hand "$hddl" node_a; ha=$(secs "$t0" "$(now)")
    t0=$(now); hand "$hddl" node_b; hb=$(secs "$t0" "$(now)")
    echo "round $r, $kind: node with $((sa - 1)) shards $xa s ($(python3 -c "print(round($xa / $sa * 1000, 3))") ms a shard; loop $ha s), node with $((sb - 1)) shards $xb s ($(python3 -c "print(round($xb / $sb * 1000, 3))") ms a shard; loop $hb s)"
    per_shard+=("{\"round\": $r, \"kind\": \"$kind\", \"big_schemas\": $sa, \"big_s\": $xa, \"big_loop_s\": $ha, \"small_schemas\": $sb, \"small_s\": $xb, \"small_loop_s\": $hb}")
  done
done

python3 - "$out" "$shards" "$locks" "$hinted" "$refusal" "${rounds[@]}" -- "${per_shard[@]}" <<'PY'
import json, statistics, sys
out, shards, locks, hinted, refusal, *rest = sys.argv[1:]
sep = rest.index("--")
rounds = [json.loads(r) for r in rest[:sep]]
per_shard = [json.loads(r) for r in rest[sep + 1:]]
med = lambda xs: round(statistics.median(xs), 3)
summary = {}
for kind in ("column", "index"):
    rs = [r for r in rounds if r["kind"] == kind]
    ps = [p for p in per_shard if p["kind"] == kind]
    summary[kind] = {
        "alter_shards_s": med([r["alter_shards_s"] for r in rs]),
        "hand_loop_s": med([r["hand_loop_s"] for r in rs]),
        "ratio": med([r["alter_shards_s"] / r["hand_loop_s"] for r in rs]),
        "ms_per_shard_8192": med([p["big_s"] / p["big_schemas"] * 1000 for p in ps]),
        "ms_per_shard_512": med([p["small_s"] / p["small_schemas"] * 1000 for p in ps]),
        "per_shard_ratio_8192_vs_512": med([(p["big_s"] / p["big_schemas"]) / (p["small_s"] / p["small_schemas"]) for p in ps]),
        "loop_per_shard_ratio_8192_vs_512": med([(p["big_loop_s"] / p["big_schemas"]) / (p["small_loop_s"] / p["small_schemas"]) for p in ps]),
        "alter_shards_vs_loop_on_8192": med([p["big_s"] / p["big_loop_s"] for p in ps]),
    }
json.dump({"what": "bench/alter_shards.sh: router + data nodes on unix sockets, one machine",
           "shards_over_3_nodes": int(shards), "summary": summary, "rounds": rounds, "per_shard_rounds": per_shard,
           "max_locks_per_transaction_hinted": int(hinted), "max_locks_per_transaction_used": int(locks),
           "refusal_at_64": refusal},
          open(out, "w"), indent=2)
print(json.dumps(summary, indent=2))
PY
