#!/usr/bin/env bash
# Where a batch's time goes (not a test): bash bench/move_steps.sh [OUT.json]
# A router and two nodes; SHARDS small shards on node_a (a posts table, 3 rows each, as
# bench/rebalance.sh makes them); then one move_shards of each size in BATCHES from node_a to
# node_b, no other load. Every statement on the nodes and the router is logged with its
# duration (log_min_duration_statement = 0); per move, each step's calls (the node-side
# functions, the router's records through its loopback connection) are summed, and what is
# left of the move's time is the mover's own (PL/pgSQL, polling). The write pause (fence to
# flip) is broken down the same way. Expects scripts/install to have run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh; source reliability/lib.sh; source scripts/router_cluster.sh
out=${1:-/dev/null}
SHARDS=${SHARDS:-160} BATCHES=${BATCHES:-"32 128"}
ROUTER_NODES=(node_a node_b)
trap 'router_cluster_down' EXIT
for n in node_a node_b; do
  node_start "$n" log_min_duration_statement=0 "log_line_prefix='%m|%p|'" log_timezone=UTC
  on "$n" -c "CREATE EXTENSION snowflake_id" -f router/examples/node.sql >/dev/null
done
# 500 shards a transaction (each table takes locks until its transaction ends).
for ((f = 0; f < SHARDS; f += 500)); do
  l=$((f + 500 < SHARDS ? f + 499 : SHARDS - 1))
  on node_a -c "SELECT count(create_shard('shard_' || s, s)) FROM generate_series($f, $l) s" \
    -c "DO \$\$ BEGIN FOR s IN $f .. $l LOOP
          EXECUTE format('CREATE TABLE shard_%s.posts (LIKE tpl.posts INCLUDING ALL)', s);
          EXECUTE format('ALTER TABLE shard_%s.posts ALTER COLUMN id SET DEFAULT shard_%s.next_id()', s, s);
          EXECUTE format('INSERT INTO shard_%s.posts (user_id, body) SELECT g, ''preload'' FROM generate_series(1, 3) g', s);
        END LOOP; END \$\$" >/dev/null
done
cluster_start sfrouter "$ROUTER_PORT" log_min_duration_statement=0 "log_line_prefix='%m|%p|'" log_timezone=UTC
on router -c "CREATE EXTENSION snowflake_id_router CASCADE" >/dev/null
on router -c "SELECT add_node('node_a', '$(node_connstr node_a)'), add_node('node_b', '$(node_connstr node_b)')" \
  -c "SELECT assign_shards(0, 8192, 'node_a')" >/dev/null 2>&1
first=0
ids=()
for b in $BATCHES; do
  ids+=("$(on router -c "SELECT move_shards(ARRAY(SELECT generate_series($first, $first + $b - 1)), 'node_b')")")
  first=$((first + b))
done
moves=$(on router -F '|' -c "SELECT id, cardinality(shards), extract(epoch FROM started), extract(epoch FROM ended),
                                    extract(epoch FROM fenced), extract(epoch FROM flipped)
                               FROM snowflake_id_router.move WHERE id IN ($(IFS=,; echo "${ids[*]}")) ORDER BY id")
python3 - "$out" "$moves" "$SF_TMP/sfnode_a/server.log" "$SF_TMP/sfnode_b/server.log" "$SF_TMP/sfrouter/server.log" <<'PY'
import datetime, json, re, sys
out, moves = sys.argv[1], sys.argv[2]
line = re.compile(r"^(\S+ \S+) \S+\|(\d+)\|LOG:  duration: ([\d.]+) ms  (?:statement|execute [^:]*): (.*)$")
calls = []   # (end epoch, ms, where, what)
for where, path in zip(("node_a", "node_b", "router"), sys.argv[3:6]):
    for l in open(path, errors="replace"):
        m = line.match(l.rstrip("\n"))
        if not m:
            continue
        end = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc).timestamp()
        sql = m.group(4)
        what = re.search(r"(snowflake_id_(?:node|router)\.\w+|UPDATE snowflake_id_router\.\w+|INSERT INTO snowflake_id_router\.\w+|set_config)", sql)
        what = what.group(1) if what else sql[:40]
        if where == "router" and not sql.startswith(("UPDATE snowflake_id_router", "INSERT INTO snowflake_id_router", "SELECT snowflake_id_router.")):
            continue   # the mover's own statement, and its psql
        calls.append((end, float(m.group(3)), where, what))
doc = []
for row in moves.splitlines():
    mid, n, started, ended, fenced, flipped = row.split("|")
    started, ended, fenced, flipped = map(float, (started, ended, fenced, flipped))
    def steps(t0, t1):
        acc = {}
        for end, ms, where, what in calls:
            if t0 <= end - ms / 1000 and end <= t1 + 0.0005:
                k = f"{what} ({where})"
                c, s = acc.get(k, (0, 0.0))
                acc[k] = (c + 1, s + ms)
        return acc
    def show(title, t0, t1):
        acc = steps(t0, t1)
        total = (t1 - t0) * 1000
        print(f"{title}: {total:.0f} ms")
        for k, (c, s) in sorted(acc.items(), key=lambda kv: -kv[1][1])[:14]:
            print(f"  {s:8.1f} ms {c:4d}x  {k}")
        print(f"  {total - sum(s for _, s in acc.values()):8.1f} ms        the mover's own (PL/pgSQL, polls, round trips)")
        return {"ms": round(total, 1), "calls": {k: {"n": c, "ms": round(s, 1)} for k, (c, s) in acc.items()}}
    print(f"== move {mid}: {n} shards")
    doc.append({"move": int(mid), "shards": int(n), "whole": show("whole move", started, ended),
                "write_pause": show("write pause (fence to flip)", fenced, flipped)})
if out != "/dev/null":
    json.dump(doc, open(out, "w"), indent=1)
PY
