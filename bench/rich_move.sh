#!/usr/bin/env bash
# Benchmark (issue 35's bar; not a test): what a shard's keys, triggers, partitions and views
# cost its move.   bash bench/rich_move.sh [OUT.json]
# Two shards on node_a with the same rows: shard 1 made from the Instagram-shaped template
# (reliability/instagram.sql: photos in two month partitions, likes and comments with foreign
# keys to them, triggers, a view, a materialized view, a function), shard 2 from a plain one
# with the same tables and columns and primary keys only. Each holds PHOTOS photos (default
# 20,000), five likes and one comment each. Each round moves shard 1 to node_b, shard 2 to
# node_b, then both back, with no other load. Per move: the caller's time and the write pause
# (fence to flip, move_history); medians over ROUNDS rounds (default 3); ratios rich / plain.
# Expects scripts/install to have run. Writes bench/rich_move.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh; source reliability/lib.sh; source scripts/router_cluster.sh; source bench/lib.sh
out=${1:-bench/rich_move.json}
work=$(mktemp -d); chmod 755 "$work"
ROUTER_NODES=(node_a node_b)
trap 'router_cluster_down; rm -rf "$work"' EXIT
ROUNDS=${ROUNDS:-3}
PHOTOS=${PHOTOS:-20000}

start_nodes node_a node_b
boundary=$(on node_a -c "SELECT make_id(now() - interval '1 day', 0)")
until_next=$(on node_a -c "SELECT make_id(now() + interval '40 days', 0)")
for n in node_a node_b; do
  on "$n" -v boundary="$boundary" -v until_next="$until_next" -f reliability/instagram.sql >/dev/null
  on "$n" >/dev/null <<'SQL'
CREATE SCHEMA plain;
CREATE TABLE plain.users (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE plain.photos (id bigint PRIMARY KEY, user_id bigint NOT NULL, like_count integer NOT NULL DEFAULT 0, updated_at timestamptz);
CREATE TABLE plain.likes (user_id bigint NOT NULL, photo_id bigint NOT NULL, PRIMARY KEY (user_id, photo_id));
CREATE INDEX ON plain.likes (photo_id);
CREATE TABLE plain.comments (id bigint PRIMARY KEY, photo_id bigint NOT NULL, body text NOT NULL);
SQL
done
on node_a -c "SELECT create_shard('shard_1', 1, template => 'ig'), create_shard('shard_2', 2, template => 'plain')" >/dev/null
for s in 1 2; do
  on node_a >/dev/null <<SQL
INSERT INTO shard_$s.users SELECT g, 'user ' || g FROM generate_series(1, 1000) g;
INSERT INTO shard_$s.photos (id, user_id) SELECT make_id(now() - interval '2 days', $s) + g, g % 1000 + 1 FROM generate_series(1, $PHOTOS / 2) g;
INSERT INTO shard_$s.photos (id, user_id) SELECT make_id(now() - interval '1 hour', $s) + g, g % 1000 + 1 FROM generate_series(1, $PHOTOS - $PHOTOS / 2) g;
INSERT INTO shard_$s.likes SELECT u, p.id FROM shard_$s.photos p, generate_series(1, 5) u;
INSERT INTO shard_$s.comments SELECT shard_$s.next_id(), p.id, 'a comment of about forty characters here' FROM shard_$s.photos p;
ANALYZE;
SQL
done
[[ $(on node_a -c "SELECT sum(like_count) FROM shard_1.photos") == $((PHOTOS * 5)) ]] || fail "the rich shard's counter trigger did not count its likes"
cluster_start sfrouter "$ROUTER_PORT"
on router -c "CREATE EXTENSION snowflake_id_router CASCADE" >/dev/null
for n in node_a node_b; do on router -c "SELECT add_node('$n', '$(node_connstr "$n")')" >/dev/null 2>&1; done
on router -c "SELECT assign_shards(0, 8192, 'node_a')" >/dev/null
echo "two shards of $PHOTOS photos, $((PHOTOS * 5)) likes and $PHOTOS comments each on node_a"

move() {   # KIND SQL
  local t0 t1
  t0=$(date +%s.%N); on router -c "$2" >/dev/null; t1=$(date +%s.%N)
  echo "$1 $(python3 -c "print($t1 - $t0)") $(on router -c "SELECT extract(epoch FROM write_pause) FROM move_history ORDER BY move DESC LIMIT 1")" >>"$work/moves"
}
: >"$work/moves"
for r in $(seq "$ROUNDS"); do
  move rich "SELECT move_shard(1, 'node_b', 'ig')"
  move plain "SELECT move_shard(2, 'node_b', 'plain')"
  move rich "SELECT move_shard(1, 'node_a', 'ig')"
  move plain "SELECT move_shard(2, 'node_a', 'plain')"
  echo "round $r done"
done
python3 - "$work/moves" "$out" "$ROUNDS" "$PHOTOS" <<'PY'
import json, statistics, sys
by = {}
for kind, secs, pause in (l.split() for l in open(sys.argv[1])):
    by.setdefault(kind, []).append((float(secs), float(pause)))
med = {k: {"move_s": round(statistics.median(s for s, _ in v), 3), "write_pause_s": round(statistics.median(p for _, p in v), 4),
           "worst_move_s": round(max(s for s, _ in v), 3)} for k, v in by.items()}
result = {"rounds": int(sys.argv[3]), "photos": int(sys.argv[4]), "medians": med,
          "ratio_rich_over_plain": {"move": round(med["rich"]["move_s"] / med["plain"]["move_s"], 2),
                                    "write_pause": round(med["rich"]["write_pause_s"] / med["plain"]["write_pause_s"], 2)}}
json.dump(result, open(sys.argv[2], "w"), indent=2)
for k in ("rich", "plain"):
    print(f"{k:6} move {med[k]['move_s']:6.2f} s (worst {med[k]['worst_move_s']:.2f} s), write pause {med[k]['write_pause_s'] * 1000:6.1f} ms")
print("rich / plain:", result["ratio_rich_over_plain"])
PY
