#!/usr/bin/env bash
# every version: moves: this version's logical replication, in both directions
# A move's old copy kept current for its revert window (setting revert_window, docs/cluster.md
# "Keeping a move's old copy"), under four clients writing through the router
# (scripts/router_cluster.sh: a router and three data nodes):
#   - a move with a window keeps the source's copy: after 10 s of writes served by the
#     target, every row of the shard is on the source too, the same (compared row by row),
#     and the source still refuses a write of its own (40001); move_history says kept;
#   - finish_move ends it: the reverse subscription, publication, slot and the old copy are
#     gone from every node;
#   - the window's end, found by repair_moves(), and the next move of the shard end it too;
#   - a slot of a move's reverse name made beforehand in another database by a role with
#     REPLICATION is dropped (a WARNING), the move keeps its copy;
#   - the mover killed between the reverse publication and the slot (breakpoint 'published
#     back'): repair_moves() completes the move from the records, kept; finish_move cleans;
#   - a reverse slot that cannot be made in time (a transaction held open on the target):
#     the move flips all the same, keeps nothing, leaves nothing;
#   - revert_window 0 keeps nothing, as before;
# and afterwards (router_invariants) every write the clients saw acknowledged is present
# exactly once, on the node the map names, and nothing any move made is left on any node.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
trap 'touch "$work"/client{1,2,3,4,5,6,7,8}.log.stop; router_cluster_down; rm -rf "$work"' EXIT

SHARDS_PER_NODE=16 router_cluster_up
shards=$(on router -c "SELECT string_agg(s::text, ',') FROM (SELECT generate_series(0, 15) UNION ALL
                        SELECT generate_series(2731, 2746) UNION ALL SELECT generate_series(5462, 5477)) g(s)")
on node_a -c "INSERT INTO shard_1.posts (user_id, body) SELECT 0, 'preload' FROM generate_series(1, 20000)"
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
pids=()
clients() {  # clients FIRST: four writers, numbered from FIRST
  start_writers "$dsn" 300 "$shards" "$1"
}
stop_clients() {
  touch "$work"/client{1,2,3,4,5,6,7,8}.log.stop
  wait_writers
  pids=()
  rm -f "$work"/client*.log.stop
}
window() {  # window VALUE: the setting revert_window
  on router -c "INSERT INTO snowflake_id_router.setting VALUES ('revert_window', '$1')
                  ON CONFLICT (name) DO UPDATE SET value = excluded.value"
}
move() {  # move SHARD NODE: must succeed; prints the move's id
  on router -c "SET client_min_messages = notice" -c "SELECT move_shard($1, '$2')" 2>>"$work/move.log" >/dev/null \
    || fail "move_shard($1, '$2') failed: $(grep -A3 ERROR "$work/move.log")"
  on router -c "SELECT max(id) FROM snowflake_id_router.move WHERE $1 = ANY (shards)"
}
outcome() { on router -c "SELECT outcome FROM move_history WHERE move = $1"; }
# sfid_* slots, publications and subscriptions on NODE, one line
replication_on() {
  on "$1" -c "SELECT concat_ws(' ', (SELECT string_agg('slot ' || slot_name, ' ') FROM pg_replication_slots WHERE slot_name LIKE 'sfid%'),
                                    (SELECT string_agg('publication ' || pubname, ' ') FROM pg_publication WHERE pubname LIKE 'sfid%'),
                                    (SELECT string_agg('subscription ' || subname, ' ') FROM pg_subscription WHERE subname LIKE 'sfid%'))"
}
nothing_left() {  # nothing_left WHAT: no move's object on any node
  local n left
  for n in "${ROUTER_NODES[@]}"; do
    left=$(on "$n" -c "SELECT string_agg(x, '; ') FROM snowflake_id_node.leftovers() x")
    [[ -z $left ]] || fail "$1: left on $n: $left"
    left=$(replication_on "$n")
    [[ -z $left ]] || fail "$1: left on $n: $left"
  done
}
# digest NODE SHARD: every row of the shard's posts, in key order
digest() { on "$1" -c "SELECT count(*) || ' ' || md5(coalesce(string_agg(format('%s|%s|%s', id, body, edits), ',' ORDER BY id), '')) FROM shard_$2.posts"; }

clients 1
sleep 2

# 1. A move with a window: the old copy kept, current. A source of PostgreSQL 15 keeps none
# (its apply would write as a superuser): there, the move is done, says why, and leaves
# nothing; the cases below need a source of 16 or later and are not run (said so).
window '1 h'
id=$(move 1 node_c)
if ((PG_MAJOR < 16)); then
  [[ $(outcome "$id") == done ]] || fail "move $id from a PostgreSQL $PG_MAJOR source: outcome $(outcome "$id")"
  grep -q "keeps no old copy: node 'node_a' runs PostgreSQL 15" "$work/move.log" || fail "no WARNING that the move keeps nothing"
  stop_clients
  nothing_left "a PostgreSQL 15 move with a window"
  router_invariants "$work" "$work"/client*.log
  echo "revert window on PostgreSQL $PG_MAJOR: the move kept nothing and said why; the kept-copy cases (16 and later) not run here"
  exit 0
fi
[[ $(outcome "$id") == kept:* ]] || fail "move $id with a window: outcome $(outcome "$id")"
rep_a=$(replication_on node_a); rep_c=$(replication_on node_c)
[[ $rep_a == "subscription sfid_"*_r ]] || fail "the source has no reverse subscription: '$rep_a'"
[[ $rep_c == "slot sfid_"*"_r publication sfid_"*_r ]] || fail "the target has no reverse slot and publication: '$rep_c'"
echo "move $id kept: node_a: $rep_a; node_c: $rep_c"
sleep 10   # writes served by node_c for shard 1
stop_clients
ok=
for _ in $(seq 100); do
  [[ $(digest node_a 1) == "$(digest node_c 1)" ]] && { ok=1; break; }
  sleep 0.1
done
[[ -n $ok ]] || fail "the old copy is not current: node_a $(digest node_a 1), node_c $(digest node_c 1)"
after=$(on node_c -c "SELECT count(*) FROM shard_1.posts WHERE body LIKE 'c%'")
echo "old copy current: node_a and node_c both hold $(digest node_a 1) (count, md5), $after of them the clients'"
err=$(on node_a -c "INSERT INTO shard_1.posts (user_id, body) VALUES (0, 'stray')" 2>&1 || true)
[[ $err == *'write refused'* ]] || fail "the kept old copy took a write of its own: $err"

# A reverse apply that stopped (its subscription disabled, as disable_on_error does) is
# reported by the next repair.
sub=$(on node_a -c "SELECT subname FROM pg_subscription WHERE subname LIKE 'sfid%_r'")
on node_a -c "ALTER SUBSCRIPTION $sub DISABLE"
on router -c "SELECT outcome FROM repair_moves()" >"$work/repair.log" 2>&1
grep -q "its old copy is not kept current: .*disabled itself" "$work/repair.log" || fail "a stopped reverse apply went unreported: $(cat "$work/repair.log")"
on node_a -c "ALTER SUBSCRIPTION $sub ENABLE"
echo "a stopped reverse apply: $(grep -o 'WARNING: .*' "$work/repair.log" | head -1 | cut -c1-160)"

# 2. finish_move: everything kept goes.
out=$(on router -c "SELECT finish_move($id)")
[[ $out == completed ]] || fail "finish_move($id): $out"
[[ $(outcome "$id") == done ]] || fail "after finish_move: outcome $(outcome "$id")"
[[ -z $(on node_a -c "SELECT to_regnamespace('shard_1')") ]] || fail "finish_move left the old copy on node_a"
nothing_left "finish_move"
err=$(on router -c "SELECT finish_move($id)" 2>&1 || true)
[[ $err == *'keeps no old copy'* ]] || fail "finish_move of a done move: $err"
echo "finish_move: old copy, subscription, publication and slot gone"

clients 5
# 3. The window's end, found by repair_moves().
window '2 s'
id=$(move 2 node_c)
[[ $(outcome "$id") == kept:* ]] || fail "move $id with a window: outcome $(outcome "$id")"
out=$(on router -c "SELECT outcome FROM repair_moves() WHERE move = $id")
[[ $out == kept:* ]] || fail "repair_moves() within the window: $out"
sleep 2.5
out=$(on router -c "SELECT outcome FROM repair_moves() WHERE move = $id")
[[ $out == completed ]] || fail "repair_moves() past the window: $out"
[[ -z $(on node_a -c "SELECT to_regnamespace('shard_2')") ]] || fail "the window's end left the old copy on node_a"
echo "window's end: repair_moves() removed what move $id kept"

# 4. The next move of a kept shard ends its window.
window '1 h'
id=$(move 3 node_c)
[[ $(outcome "$id") == kept:* ]] || fail "move $id with a window: outcome $(outcome "$id")"
id2=$(move 3 node_b)
[[ $(outcome "$id") == done ]] || fail "the next move of shard 3 did not end move $id's window: $(outcome "$id")"
[[ $(on router -c "SELECT node FROM shard_map WHERE shard = 3") == node_b ]] || fail "shard 3 is not on node_b"
[[ -z $(on node_a -c "SELECT to_regnamespace('shard_3')") ]] || fail "the next move left the old copy on node_a"
[[ $(outcome "$id2") == kept:* ]] || fail "move $id2 with a window: outcome $(outcome "$id2")"
[[ $(on router -c "SELECT finish_move($id2)") == completed ]] || fail "finish_move($id2)"
echo "next move: move $id2 ended move $id's window"

# 4b. A slot of the next move's reverse name, made beforehand by a role with REPLICATION in
# another database: its name proves nothing; dropped (a WARNING), the move keeps its copy.
router8=$(on router -c "SELECT left(md5(snowflake_id_node.identity()), 8)")
next=$(on router -c "SELECT pg_sequence_last_value(pg_get_serial_sequence('snowflake_id_router.move', 'id')::regclass) + 1")
squat=sfid_${router8}_${next}_r
on node_c -c "CREATE DATABASE squat" -c "CREATE ROLE squatter LOGIN REPLICATION" >/dev/null
PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 -h "$(node_dir node_c)" -p "$(node_port node_c)" -U squatter -d squat \
  -c "SELECT 1 FROM pg_create_logical_replication_slot('$squat', 'pgoutput')" >/dev/null
id=$(move 7 node_c)
[[ $id == "$next" ]] || fail "the move is $id, not $next as foreseen"
[[ $(outcome "$id") == kept:* ]] || fail "move $id, with another's slot of its reverse name: outcome $(outcome "$id")"
[[ $(on node_c -c "SELECT database FROM pg_replication_slots WHERE slot_name = '$squat'") == postgres ]] \
  || fail "the reverse slot of move $id is not its own: $(on node_c -c "SELECT database FROM pg_replication_slots WHERE slot_name = '$squat'")"
grep -q "replication slot $squat (logical, plugin pgoutput, database squat) is not one this move made: dropped" "$(node_dir node_c)/server.log" \
  || fail "no WARNING that the squatter's slot was dropped"
[[ $(on router -c "SELECT finish_move($id)") == completed ]] || fail "finish_move($id)"
on node_c -c "DROP DATABASE squat" -c "DROP ROLE squatter" >/dev/null
echo "a slot of move $id's reverse name in another database: dropped (WARNING), the move kept its copy"

# 5. The mover killed once the reverse publication is made, before the flip: the move is
# sealed; repair_moves() completes it, with its window, from the records.
on router -c "INSERT INTO snowflake_id_router.breakpoint (step) VALUES ('published back')"
on router -c "SELECT move_shard(5, 'node_c')" >"$work/killed.log" 2>&1 & mover=$!
for _ in $(seq 400); do
  [[ -n $(on router -c "SELECT reached FROM snowflake_id_router.breakpoint") ]] && break
  sleep 0.05
done
[[ -n $(on router -c "SELECT reached FROM snowflake_id_router.breakpoint") ]] || fail "the mover never reached 'published back'"
on router -c "SELECT pg_terminate_backend(pid) FROM snowflake_id_router.breakpoint" >/dev/null
if wait "$mover"; then fail "the killed mover succeeded"; fi
on router -c "DELETE FROM snowflake_id_router.breakpoint"
id=$(on router -c "SELECT max(id) FROM snowflake_id_router.move WHERE 5 = ANY (shards)")
out=$(on router -c "SELECT outcome FROM repair_moves() WHERE move = $id")
[[ $out == kept:* ]] || fail "repair_moves() after the mover was killed: $out"
[[ $(on router -c "SELECT node FROM shard_map WHERE shard = 5") == node_c ]] || fail "shard 5 is not on node_c after the repair"
[[ $(replication_on node_a) == "subscription sfid_"*_r ]] || fail "the repaired move has no reverse subscription: $(replication_on node_a)"
[[ $(on router -c "SELECT finish_move($id)") == completed ]] || fail "finish_move($id) after the repair"
nothing_left "a repaired move, finished"
echo "mover killed before the flip: repair_moves() completed move $id, kept; finish_move removed it"

# 6. The reverse slot cannot be made in time (a transaction with an ID held open on the
# target, which making a logical slot waits for, past lock_timeout): the move flips all the
# same and keeps nothing.
on node_c -c "BEGIN" -c "SELECT txid_current()" -c "SELECT pg_sleep(15)" -c "COMMIT" >/dev/null 2>&1 & holder=$!
sleep 0.5
id=$(move 6 node_c)
kill "$holder" 2>/dev/null || true; wait "$holder" 2>/dev/null || true
on node_c -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(15)'" >/dev/null
[[ $(outcome "$id") == done ]] || fail "move $id whose reverse slot could not be made: outcome $(outcome "$id")"
grep -q "move $id keeps no old copy" "$work/move.log" || fail "move $id did not warn that it keeps no old copy"
[[ $(on router -c "SELECT node FROM shard_map WHERE shard = 6") == node_c ]] || fail "shard 6 is not on node_c"
nothing_left "a move whose reverse slot failed"
echo "reverse slot not made in time: move $id flipped, kept nothing ($(grep -o "move $id keeps no old copy: .*" "$work/move.log" | head -1))"

# 7. Window 0: nothing kept, as before.
window '0'
id=$(move 4 node_c)
[[ $(outcome "$id") == done ]] || fail "move $id without a window: outcome $(outcome "$id")"
nothing_left "a move with revert_window 0"
echo "write pause (fence to flip): $(on router -c "SELECT string_agg(format('move %s %s ms', move, round(extract(epoch FROM write_pause) * 1000)), ', ' ORDER BY move) FROM move_history")"
sleep 2
stop_clients
router_invariants "$work" "$work"/client*.log
