#!/usr/bin/env bash
# every version: moves: this version's logical replication
# Online shard moves under load, through the router (scripts/router_cluster.sh: a router and
# three data nodes, 48 logical shards made, all 8192 mapped). Four client sessions write
# through the router (inserts on random shards, updates of their own earlier rows) for 24 s
# while shards move: a->c and b->c onto node_c, whose clock stands one hour behind
# (libfaketime); a move to node_c whose postmaster is killed (kill -9) while it replicates, which must
# fail cleanly (shard still served by its source, slot and publication gone) and succeed when
# re-run after node_c restarts; and c->b. Afterwards (router_invariants, router_check.py):
# every write the clients saw acknowledged is present exactly once, on the node the map
# names; no ID appears twice over all nodes; each moved shard's new IDs are above all its
# old ones; nothing any move made is left on any node.
# The routing examples are docs/cluster.md's (router/examples/*.sql, checked to be in it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
trap 'touch "$work"/client{1,2,3,4}.log.stop; router_cluster_down; rm -rf "$work"' EXIT

for f in "$here"/../router/examples/*.sql; do
  python3 -c 'import sys; sys.exit(open(sys.argv[1]).read().strip() not in open(sys.argv[2]).read())' \
    "$f" "$here/../docs/cluster.md" || fail "docs/cluster.md does not show $(basename "$f") as it is"
done

NODE_ENV_node_c=$(faketime_env "$work/faketime"); export NODE_ENV_node_c
SHARDS_PER_NODE=16 router_cluster_up
# The routing examples, by hand: a write routed by shard, a read and an update by ID, a fan-out feed.
id=$(on router -c "SELECT insert_post(3, 42, 'first')")
[[ $(on router -c "SELECT id_shard($id)") == 3 ]] || fail "insert_post(3, ...) made ID $id, not of shard 3"
[[ $(on node_a -c "SELECT count(*) FROM shard_3.posts WHERE id = $id") == 1 ]] || fail "the routed insert is not on node_a"
[[ $(on router -c "SELECT update_post($id, 'edited')") == t ]] || fail "update_post by ID did not find the row"
[[ $(on router -c "SELECT body || edits FROM get_post($id)") == edited1 ]] || fail "get_post by ID"
on router -c "SELECT insert_post(2735, 42, 'on b'), insert_post(5470, 42, 'on c')" >/dev/null
feed=$(on router -c "SELECT string_agg(body, ',' ORDER BY id DESC) FROM user_feed(42, 20)")
[[ $feed == "on c,on b,edited" ]] || fail "user_feed over all nodes gave '$feed'"
err=$(on router -c "SELECT insert_post(100, 1, 'x')" 2>&1 || true)
[[ $err == *'shard 100 is not on this node'* ]] || fail "a mapped shard without a schema: $err"
on router -c "DELETE FROM snowflake_id_router.shard WHERE shard = 8000"
err=$(on router -c "SELECT insert_post(8000, 1, 'x')" 2>&1 || true)
[[ $err == *'shard_8000_is_assigned_to_no_node'* ]] || fail "a shard assigned to no node: $err"

faketime_set "$work/faketime" "-1h"
behind=$(on node_c -c "SELECT now() < timestamptz '$(date -u +%FT%T)Z' - interval '50 minutes'")
[[ $behind == t ]] || fail "libfaketime did not put node_c's clock behind"


# Shards the clients write to: 16 on each node. Shard 2 gets rows to copy.
shards=$(on router -c "SELECT string_agg(s::text, ',') FROM (SELECT generate_series(0, 15) UNION ALL
                        SELECT generate_series(2731, 2746) UNION ALL SELECT generate_series(5462, 5477)) g(s)")
on node_a -c "INSERT INTO shard_2.posts (user_id, body) SELECT 0, 'preload' FROM generate_series(1, 50000)"

: >"$work/moves"
move() {  # move SHARD NODE: must succeed; records its time span
  local t0 t1; t0=$(date +%s.%N)
  on router -c "SET client_min_messages = notice" -c "SELECT move_shard($1, '$2')" 2>>"$work/move.log" >/dev/null || fail "move_shard($1, '$2') failed: $(grep -A3 ERROR "$work/move.log")"
  t1=$(date +%s.%N); echo "$1 $t0 $t1" >>"$work/moves"
}
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
pids=()
start_writers "$dsn" 300 "$shards"
sleep 3; move 1 node_c
sleep 2; move 2731 node_c

# node_c killed while it replicates: the mover held (breakpoint) once its subscription exists, the
# target's postmaster killed, the mover let go. The move must fail cleanly: shard still
# served by its source, no slot, publication or fence there; what is left on node_c (down)
# is recorded and removed by the re-run once node_c is back.
on router -c "INSERT INTO snowflake_id_router.breakpoint (step) VALUES ('subscribed')"
on router -c "SET client_min_messages = notice" -c "SELECT move_shard(2, 'node_c')" >"$work/failed_move.log" 2>&1 & mover=$!
for _ in $(seq 200); do
  [[ -n $(on router -c "SELECT reached FROM snowflake_id_router.breakpoint") ]] && break
  sleep 0.05
done
sudo -u postgres kill -9 "$(head -1 "$(node_dir node_c)/data/postmaster.pid")"
on router -c "DELETE FROM snowflake_id_router.breakpoint"
if wait "$mover"; then fail "move_shard(2, 'node_c') succeeded with node_c killed"; fi
grep -q "shards stay on node 'node_a'" "$work/failed_move.log" || fail "the failed move did not say where the shard is: $(cat "$work/failed_move.log")"
[[ $(on router -c "SELECT node FROM shard_map WHERE shard = 2") == node_a ]] || fail "shard 2 left node_a in a failed move"
[[ $(on node_a -c "SELECT count(*) FROM snowflake_id_node.leftovers()") == 0 ]] \
  || fail "the failed move left on node_a: $(on node_a -c "SELECT string_agg(x, '; ') FROM snowflake_id_node.leftovers() x")"
echo "killed target: $(grep -o 'failed while [^:]*' "$work/failed_move.log"); left: $(grep -o 'Left for [^(]*' "$work/failed_move.log")"
sleep 1
node_restart node_c
sleep 1; move 2 node_c

# A move that fails after the fence (the target may not take any time to catch up): the
# fence is undone, the source takes writes again, and the re-run succeeds.
# (A catch-up timeout of 1 us: the deadline passes before the first look. A session's SET of
# the old setting name is ignored: only the owner's table steers the router.)
err=$(on router -c "SET snowflake_id_router.cutover_timeout = '1 h'" \
        -c "INSERT INTO snowflake_id_router.setting VALUES ('cutover_timeout', '1 us')" \
        -c "SELECT move_shard(4, 'node_b')" 2>&1 || true)
on router -c "DELETE FROM snowflake_id_router.setting WHERE name = 'cutover_timeout'"
[[ $err == *'failed while waiting for the target to catch up'* ]] || fail "the catch-up timeout did not fail the move: $err"
[[ $(on router -c "SELECT node FROM shard_map WHERE shard = 4") == node_a ]] || fail "shard 4 left node_a in a failed move"
[[ $(on node_a -c "SELECT count(*) FROM snowflake_id_node.leftovers()") == 0 ]] \
  || fail "the move that failed after the fence left on node_a: $(on node_a -c "SELECT string_agg(x, '; ') FROM snowflake_id_node.leftovers() x")"
on router -c "SELECT insert_post(4, 0, 'after the undone fence')" >/dev/null || fail "shard 4 refuses writes after the failed move"
echo "catch-up timeout: fence undone, shard 4 takes writes on node_a"
sleep 1; move 4 node_b
sleep 2; move 5463 node_b
# (The writers go on past the last move, however long the moves took: each moved shard
# needs writes after its move for the check.)
sleep 2; touch "$work"/client{1,2,3,4}.log.stop
wait_writers
cat "$work/move.log" | grep -o 'shard .* writes fenced for .* ms' || true

router_invariants "$work" "$work"/client*.log
