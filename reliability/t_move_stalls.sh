#!/usr/bin/env bash
# every version: moves: this version's logical replication
# A move's source stays sound whatever its mover does, on a router and three data nodes,
# node_c's clock one hour behind (libfaketime); cutover_timeout 3 s (the fence's bound:
# lock_timeout 2 s + cutover_timeout 3 s + 1 s = 6 s):
#   1. IDs taken on the source between the seal and the flip (the move held at 'sealed'):
#      refused, 40001 (the sealed copy's sequences are stopped at the seal); once the move
#      onto node_c (an hour behind) is done, every new ID of the shard is above every ID
#      issued before, on either node (issue h12 F12: they were issued, and the new node's
#      IDs came out below them).
#   2. A mover stalled (kill -STOP of its router backend, alive for TCP) at its fence under
#      a writer: writes pass again within the fence's bound, by the source's own deadline
#      (h12 F8: refused for as long as the stall lasted); the thawed mover then fails
#      cleanly (its seal refused), and nothing is left (after repair_moves(), should its
#      own clean-up have run out of time).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
trap '[[ -f $work/frozen ]] && sudo kill -CONT $(cat "$work/frozen") 2>/dev/null; router_cluster_down; rm -rf "$work"' EXIT

NODE_ENV_node_c=$(faketime_env "$work/faketime"); export NODE_ENV_node_c
SHARDS_PER_NODE=4 router_cluster_up
on router -c "INSERT INTO snowflake_id_router.setting VALUES ('cutover_timeout', '3 s')"
faketime_set "$work/faketime" "-1h"
[[ $(on node_c -c "SELECT now() < timestamptz '$(date -u +%FT%T)Z' - interval '50 minutes'") == t ]] \
  || fail "libfaketime did not put node_c's clock behind"


# == 1. IDs on the sealed source ==
for i in 1 2 3; do on router -c "SELECT insert_post(1, $i, 'before')" >/dev/null; done
held sealed "SELECT move_shard(1, 'node_c')"
: >"$work/sealed_ids"
for i in 1 2 3; do
  out=$(on node_a -c "\\set VERBOSITY sqlstate" -c "SELECT shard_1.next_id()" 2>&1 || true)
  echo "$out" >>"$work/sealed_ids"
done
release
wait "$mover" || fail "move_shard(1, 'node_c') failed: $(cat "$work/mover.log")"
echo "1: next_id() on the sealed source: $(sort "$work/sealed_ids" | uniq -c | tr -s ' \n' ' ')"
old_max=$(on node_c -c "SELECT max(id) FROM shard_1.posts")
issued=$(grep -E '^[0-9]+$' "$work/sealed_ids" | sort -n | tail -1 || true)
[[ -z $issued ]] || ((issued < old_max)) || old_max=$issued
for i in 1 2 3; do on router -c "SELECT insert_post(1, 100 + $i, 'after')" >/dev/null; done
min_new=$(on node_c -c "SELECT min(id) FROM shard_1.posts WHERE body = 'after'")
assert_new_ids_above "1: shard 1 moved onto node_c (an hour behind), IDs taken while sealed" "$old_max" "$min_new" \
  "$(on node_c -c "SELECT count(*) - count(DISTINCT id) FROM shard_1.posts")"
[[ -z $issued ]] || fail "1: next_id() on the sealed source issued $issued"
grep -q 40001 "$work/sealed_ids" || fail "1: next_id() on the sealed source: $(cat "$work/sealed_ids")"

# == 2. A mover stalled at its fence, under a writer ==
# The writer: a routed insert every 0.1 s, each line "time ok" or "time error".
( while [[ ! -f $work/writer.stop ]]; do
    if on router -c "SELECT insert_post(2, 0, 'w')" >/dev/null 2>&1; then echo "$(now) ok"; else echo "$(now) error"; fi
    sleep 0.1
  done ) >"$work/writer.log" & writer=$!
sleep 1
held fenced "SELECT move_shard(2, 'node_c')"
t_fence=$(now)
sudo kill -STOP "$mpid"; echo "$mpid" >"$work/frozen"
release
t_ok=
for _ in $(seq 300); do
  t_ok=$(awk -v t="$t_fence" '$1 > t && $2 == "ok" { print $1; exit }' "$work/writer.log")
  [[ -n $t_ok ]] && break
  sleep 0.1
done
refused=$(awk -v t="$t_fence" '$1 > t && $2 == "error"' "$work/writer.log" | wc -l)
sudo kill -CONT "$mpid"; rm -f "$work/frozen"
[[ -n $t_ok ]] || fail "2: no write passed within 30 s of the stalled mover's fence"
pause=$(secs "$t_fence" "$t_ok")
echo "2: mover stalled (kill -STOP) at its fence: writes refused $refused times, pass again $pause s after the fence (bound: lock_timeout + cutover_timeout + 1 s = 6 s)"
python3 -c "import sys; sys.exit(not $pause <= 6.5)" || fail "2: writes passed again only after $pause s"
if wait "$mover"; then fail "2: the stalled mover's move succeeded after its fence's time: $(cat "$work/mover.log")"; fi
# (Thawed past its own deadline, it fails there; were it not, the source refuses its seal.)
grep -q "The shards stay on node 'node_a'" "$work/mover.log" || fail "2: the thawed mover: $(cat "$work/mover.log")"
echo "2: the thawed mover: $(grep -o 'failed while [^:]*: [^(]*' "$work/mover.log" | head -1)"
[[ $(on router -c "SELECT node FROM shard_map WHERE shard = 2") == node_a ]] || fail "2: shard 2 left node_a"
touch "$work/writer.stop"; wait "$writer"
on router -c "SELECT insert_post(2, 0, 'after the stall')" >/dev/null || fail "2: shard 2 refuses writes after the stall"
# The thawed mover undoes what it made, unless its own clean-up runs out of time (a loaded
# machine): then, as for any mover whose clean-up failed, repair_moves() clears it.
left=$(on router -c "SELECT count(*) FROM snowflake_id_router.move WHERE state NOT IN ('done', 'undone')")
left=$((left + $(on node_a -c "SELECT count(*) FROM snowflake_id_node.leftovers()")))
if [[ $left != 0 ]]; then
  echo "2: the thawed mover left its undo to repair_moves(): $(on router -c "SELECT string_agg(move || ' ' || outcome, '; ') FROM repair_moves()")"
fi

router_invariants "$work"
