#!/usr/bin/env bash
# Benchmark of a move's content verification (issue 37; not a test):
#   bash bench/move_verify.sh [OUT.json]
# One shard of ROWS rows (default 1,000,000 posts) moved node_a -> node_b and back, ROUNDS
# times (default 3) with verify_moves on and as many with it off, alternating. Per move: the
# caller's time and the write pause (fence to flip, move_history); medians; what
# verification adds to each. Goal (issue 37): at most 20% more move time, 50 ms more pause.
# Expects scripts/install to have run. Writes bench/move_verify.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh; source reliability/lib.sh; source scripts/router_cluster.sh
out=${1:-bench/move_verify.json}
work=$(mktemp -d); chmod 755 "$work"
trap 'router_cluster_down; rm -rf "$work"' EXIT
ROUNDS=${ROUNDS:-3}
ROWS=${ROWS:-1000000}

SHARDS_PER_NODE=1 router_cluster_up >/dev/null 2>&1
on router -c "INSERT INTO snowflake_id_router.setting VALUES ('copy_timeout', '10 min'), ('cutover_timeout', '60 s')"
on node_a -c "INSERT INTO shard_0.posts (user_id, body) SELECT g % 1000, 'post number ' || g FROM generate_series(1, $ROWS) g" \
          -c "VACUUM ANALYZE shard_0.posts" >/dev/null

# move MODE NODE: moves shard 0 to NODE with verify_moves MODE; records MODE, seconds, pause.
move() {
  local t0 t1
  on router -c "INSERT INTO snowflake_id_router.setting VALUES ('verify_moves', '$1')
                ON CONFLICT (name) DO UPDATE SET value = excluded.value"
  t0=$(date +%s.%N)
  on router -c "SELECT move_shard(0, '$2')" >/dev/null
  t1=$(date +%s.%N)
  echo "$1 $(python3 -c "print($t1 - $t0)") $(on router -c "SELECT extract(epoch FROM write_pause) FROM move_history ORDER BY move DESC LIMIT 1")" >>"$work/moves"
}
: >"$work/moves"
for r in $(seq "$ROUNDS"); do
  move on node_b; move off node_a; move off node_b; move on node_a
  echo "round $r done"
done
[[ $(on node_a -c "SELECT count(*) FROM shard_0.posts") == "$ROWS" ]] || fail "shard 0 does not hold its $ROWS rows at the end"

python3 - "$work/moves" "$out" "$ROUNDS" "$ROWS" <<'EOF'
import json, statistics, sys
by = {}
for mode, secs, pause in (l.split() for l in open(sys.argv[1])):
    by.setdefault(mode, []).append((float(secs), float(pause)))
med = {m: {"move_s": round(statistics.median(s for s, _ in v), 3),
           "write_pause_s": round(statistics.median(p for _, p in v), 4)} for m, v in by.items()}
result = {"rows": int(sys.argv[4]), "moves_per_mode": 2 * int(sys.argv[3]),
          "medians": {"verify_on": med["on"], "verify_off": med["off"]},
          "verification_adds": {"move_pct": round(100 * (med["on"]["move_s"] / med["off"]["move_s"] - 1), 1),
                                "write_pause_ms": round(1000 * (med["on"]["write_pause_s"] - med["off"]["write_pause_s"]), 1)}}
json.dump(result, open(sys.argv[2], "w"), indent=2)
for m in ["on", "off"]:
    print(f"verify_moves {m:3}: move {med[m]['move_s']:7.2f} s, write pause {med[m]['write_pause_s'] * 1000:7.1f} ms")
print("verification adds:", result["verification_adds"])
EOF
