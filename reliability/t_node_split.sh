#!/usr/bin/env bash
# every version: streaming replication and promotion of this version
# A node split through its streaming standby (docs/cluster.md, "Splitting a node onto its
# standby"). node_a serves SPLIT_SHARDS shards (1,000) holding rows; a standby of it is made
# with pg_basebackup -R -X stream, its clock an hour behind (libfaketime). Four clients
# write through the router on every 4th shard of node_a (both halves) while
#   split_node('node_a', 'standby', <standby>)
# moves the upper half to the standby, promoted and registered as node "standby": first cut
# short with the shards fenced (its caller terminated: repair_moves() undoes it, the standby
# untouched), then cut short once the standby is promoted and not yet registered (the record
# says promoted; repair_moves() completes it); node_b is then split onto its standby, its
# caller cancelled once sealed (the split completes all the same, the call ends with 57014).
# Refused
# first: a split onto a server that is not node_a's standby (55000), onto the standby of a
# copy of node_a (its identity and mark, but not its WAL: 55000), onto a registered name
# (42710), one with the standby further behind than max_lag (55000) or its replay paused
# (55000), of a shard with an unlogged table or with a view of a kept shard reading it
# (55000: what a split would lose), and one whose shards
# the node's lock table cannot fence at once (53400), none leaving a fence or a record. Afterwards: every acknowledged write present exactly once, on the node
# the map names; no ID twice; each moved shard's new IDs above its old ones (the standby's
# clock behind); no write to a shard node_a keeps retried (never fenced); nothing of the
# other half left on either side, nothing left by the split (router_invariants); the split
# recorded done. Identity: node_a and the new node have marks of their own, a second name for
# either is refused (42710), alter_node refuses one for the other (55000), a shard moves
# from one to the other and back (they share a system identifier), and a failover of
# the new node to its own promoted standby is recognised (alter_node).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
ROUTER_NODES=(node_a node_b)
N=${SPLIT_SHARDS:-1000}
work=$(mktemp -d); chmod 755 "$work"
standby=$(node_dir standby); standby2=$(node_dir node_d)
trap 'touch "$work"/client{1,2,3,4}.log.stop; kill ${pids[@]:-} 2>/dev/null || true
      for d in "$standby" "$standby2" "$(node_dir node_c)" "$(node_dir node_d)"; do sudo -u postgres "$PGBIN/pg_ctl" -D "$d/data" -m immediate -w stop >/dev/null 2>&1 || true; done
      router_cluster_down; rm -rf "$work"' EXIT
SHARDS_PER_NODE=$N router_cluster_up
sqlstate() { on router -v VERBOSITY=sqlstate -c "$1" 2>&1 | sed -nE 's/.*ERROR:  ([0-9A-Z]{5}).*/\1/p'; }
mark() { on "$1" -c "SELECT snowflake_id_node.node_mark()"; }
on node_a -c "DO \$\$ BEGIN FOR s IN 0 .. $N - 1 LOOP
    EXECUTE format('INSERT INTO shard_%s.posts (user_id, body) SELECT g, ''preload'' FROM generate_series(1, 3) g', s);
  END LOOP; END \$\$"

# make_standby NAME OF [ENV [copy]]: a streaming standby NAME of node OF (pg_basebackup -R),
# started; with copy, a server of its own made from OF's base backup (no -R).
make_standby() {
  local dir; dir=$(node_dir "$1")
  rm -rf "$dir"; mkdir -p "$dir"; chown postgres: "$dir"
  sudo -u postgres "$PGBIN/pg_basebackup" -h "$(node_dir "$2")" -p "$(node_port "$2")" -U postgres -D "$dir/data" \
    $([[ ${4:-} == copy ]] || echo -R) -X stream -c fast
  [[ ${4:-} != copy ]] || rm -f "$dir/data/standby.signal"   # (a backup of a standby has its own)
  echo "-p $(node_port "$1") -k $dir -c listen_addresses='' -c hot_standby=on -c wal_level=logical -c fsync=off -c max_wal_senders=20 -c max_replication_slots=20 -c log_line_prefix='%m [%p] %e '" >"$dir/options"
  echo "${3:-}" >"$dir/environment"
  sudo -u postgres env ${3:-} "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "$(cat "$dir/options")" -w start >/dev/null
}
make_standby standby node_a "$(faketime_env "$work/clock")"
faketime_set "$work/clock" "-1h"
sc=$(node_connstr standby)
[[ $(mark standby) == "$(mark node_a)" ]] || fail "the standby does not carry node_a's mark"

moved=$(on router -c "SELECT split_plan('node_a')")
[[ $moved == "{$(seq -s, $((N / 2)) $((N - 1)))}" ]] || fail "split_plan('node_a') is not the upper half: $moved"

# Refusals, before anything is fenced.
[[ $(sqlstate "SELECT split_node('node_a', 'node_x', '$(node_connstr node_b)')") == 55000 ]] \
  || fail "a split onto node_b (not node_a's standby) was not refused with 55000"
[[ $(sqlstate "SELECT split_node('node_a', 'node_b', '$sc')") == 42710 ]] || fail "a split onto a registered name was not refused with 42710"
on standby -c "SELECT pg_wal_replay_pause()" >/dev/null
on node_a -c "CREATE TABLE lag_maker AS SELECT g, repeat('x', 100) x FROM generate_series(1, 20000) g" >/dev/null
[[ $(sqlstate "SELECT split_node('node_a', 'standby', '$sc', max_lag => '1MB')") == 55000 ]] \
  || fail "a split onto a standby behind max_lag was not refused with 55000"
# A standby whose replay is paused (or delayed) would keep the shards fenced until it replays
# the seal: refused, however much lag the caller allows.
err=$(on router -c "SELECT split_node('node_a', 'standby', '$sc', max_lag => '1TB')" 2>&1 || true)
[[ $err == *"replay is paused or delayed"* ]] || fail "a split onto a standby whose replay is paused was not refused: $err"
on standby -c "SELECT pg_wal_replay_resume()" >/dev/null
# What a split would lose: an unlogged table's rows (the standby has it empty), and what
# depends across the cut (a kept shard's view of a moved shard's table).
on node_a -c "ALTER TABLE shard_$((N - 1)).posts SET UNLOGGED" >/dev/null
err=$(on router -v VERBOSITY=sqlstate -c "SELECT split_node('node_a', 'standby', '$sc')" 2>&1 || true)
[[ $err == *55000* ]] || fail "a split of a shard with an unlogged table was not refused with 55000: $err"
on node_a -c "ALTER TABLE shard_$((N - 1)).posts SET LOGGED" -c "CREATE VIEW shard_0.across AS SELECT * FROM shard_$((N - 1)).posts" >/dev/null
err=$(on router -c "SELECT split_node('node_a', 'standby', '$sc')" 2>&1 || true)
[[ $err == *"view shard_0.across depends on"* ]] || fail "a split across a view's dependency was not refused: $err"
on node_a -c "DROP VIEW shard_0.across" >/dev/null
# More shards than the node's lock table can fence in one transaction (another session holds
# all of it but 80 entries and one for each shard lock the split takes first): refused, 53400,
# before anything is fenced.
room=$(on node_a -c "SELECT capacity - in_use - 80 - $((N - N / 2)) FROM snowflake_id_node.lock_table()")
on node_a -c "BEGIN" -c "SELECT count(pg_advisory_xact_lock(38, g)) FROM generate_series(1, $room) g" -c "SELECT pg_sleep(300)" \
  >/dev/null 2>&1 & hog=$!
until (($(on node_a -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 38") >= room)); do sleep 0.1; done
err=$(on router -c "SELECT split_node('node_a', 'standby', '$sc')" 2>&1 || true)
[[ $err == *"the lock table has room"* ]] || fail "a split too large for node_a's lock table was not refused with 53400: $err"
on node_a -c "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND classid = 38 LIMIT 1" >/dev/null
wait "$hog" || true
# A standby of a copy of node_a (pg_basebackup made into a server of its own: node_a's
# identity and mark, WAL of its own): it never replays what the split records on node_a.
# (Taken from node_a's standby: a base backup's checkpoint on node_a would remove WAL the
# standby, streaming without a slot, still reads.)
make_standby node_c standby "" copy
make_standby node_d node_c
[[ $(mark node_d) == "$(mark node_a)" ]] || fail "the copy's standby does not carry node_a's mark"
err=$(on router -c "SELECT split_node('node_a', 'node_x', '$(node_connstr node_d)')" 2>&1 || true)
[[ $err == *"the standby does not follow node 'node_a'"* ]] || fail "a split onto the standby of a copy of node_a was not refused: $err"
[[ $(on node_d -c "SELECT pg_is_in_recovery()") == t ]] || fail "the refused split promoted the copy's standby"
echo "  onto the standby of a copy of node_a (its identity and mark): refused ($(grep -o 'ERROR: .*' <<<"$err" | cut -c8- | cut -c1-90))"
for n in node_d node_c; do cluster_stop "sf$n" immediate; rm -rf "$(node_dir "$n")"; done
[[ $(on router -c "SELECT count(*) FROM snowflake_id_router.split WHERE state <> 'undone'") == 0 ]] || fail "a refused split left a record"
[[ -z $(on node_a -c "SELECT string_agg(x, '; ') FROM snowflake_id_node.leftovers() x") ]] || fail "a refused split left something on node_a"

shards=$(seq -s, 0 4 $((N - 1)))
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
pids=()
start_writers "$dsn" 600 "$shards"
sleep 3
# Cut short before the seal (its caller terminated with the shards fenced): the fence lets
# writes through once the caller's node session is gone; repair_moves() undoes it.
held "split fenced" "SELECT split_node('node_a', 'standby', '$sc')"
on router -c "SELECT pg_terminate_backend($mpid)" >/dev/null; release
wait "$mover" && fail "split_node survived its termination"
on router -c "SELECT * FROM repair_moves()" >"$work/repair1.log"
[[ $(on router -c "SELECT state FROM snowflake_id_router.split ORDER BY id DESC LIMIT 1") == undone ]] \
  || fail "repair_moves() did not undo the split cut short before its seal: $(cat "$work/repair1.log")"
[[ -z $(on node_a -c "SELECT string_agg(x, '; ') FROM snowflake_id_node.leftovers() x") ]] || fail "the undone split left something on node_a"
[[ $(on standby -c "SELECT pg_is_in_recovery()") == t ]] || fail "the undone split promoted the standby"
echo "split cut short before its seal: undone by repair_moves()"
# Cut short after the promotion, before the registration: the record says so, and
# repair_moves() completes it. The time the split takes is counted from this start.
t0=$(now)
held "split promoted" "SELECT split_node('node_a', 'standby', '$sc')"
on router -c "SELECT pg_terminate_backend($mpid)" >/dev/null; release
wait "$mover" && fail "split_node survived its termination"
[[ $(on router -c "SELECT state FROM snowflake_id_router.split ORDER BY id DESC LIMIT 1") == promoted \
   && $(on standby -c "SELECT pg_is_in_recovery()") == f ]] || fail "the split cut short after the promotion is not recorded promoted"
on router -c "SELECT * FROM repair_moves()" >"$work/split.log" 2>&1 || fail "repair_moves() failed: $(cat "$work/split.log")"
t1=$(now)
echo "split cut short after the promotion, unregistered: completed by repair_moves(): $(grep -o "split [0-9]* of node 'node_a'.*" "$work/split.log")"
# Every moved shard takes a write on the new node at once (its sequence carried, not capped).
on router -c "SET statement_timeout = '10s'" -c "SELECT count(insert_post(s, 0, 'after_split')) FROM generate_series($((N / 2)), $((N - 1))) s" \
  >/dev/null || fail "a moved shard refused a write after the split"
sleep 3
touch "$work"/client{1,2,3,4}.log.stop
wait_writers
read -r state pause <<<"$(on router -F ' ' -c "SELECT s.state, round(extract(epoch FROM m.flipped - s.fenced), 2)
                                               FROM snowflake_id_router.split s JOIN snowflake_id_router.move m ON m.id = s.move
                                              ORDER BY s.id DESC LIMIT 1")"
echo "split of $((N - N / 2)) of node_a's $N shards: $state in $(secs "$t0" "$t1") s (with the interruption), the moved shards' writes refused for $pause s"
[[ $state == done ]] || fail "the split is $state: $(cat "$work/split.log")"
[[ $(on router -c "SELECT array_agg(shard ORDER BY shard) FROM shard_map WHERE node = 'standby'") == "$moved" ]] \
  || fail "the map does not send the moved shards to the new node"

# Writes to the shards node_a keeps were never refused (their tries, one each); none to the
# other half while the split ran without a retry is not required.
kept_retried=$(cat "$work"/client*.log | awk -v n=$((N / 2)) '$1 == "I" && $3 < n && $7 > 1' | wc -l)
echo "inserts on the shards node_a keeps retried: $kept_retried; on the moved shards: $(cat "$work"/client*.log | awk -v n=$((N / 2)) '$1 == "I" && $3 >= n && $7 > 1' | wc -l)"
((kept_retried == 0)) || fail "$kept_retried inserts on shards node_a keeps were retried (fenced?)"
# Nothing of the other half on either side.
left=$(on node_a -c "SELECT string_agg(nspname, ' ') FROM pg_namespace WHERE nspname ~ '^shard_[0-9]+$' AND substr(nspname, 7)::integer >= $((N / 2))")
[[ -z $left ]] || fail "node_a still has the moved shards' schemas: $left"
left=$(on standby -c "SELECT string_agg(nspname, ' ') FROM pg_namespace WHERE nspname ~ '^shard_[0-9]+$' AND substr(nspname, 7)::integer < $((N / 2))")
[[ -z $left ]] || fail "the new node still has the kept shards' schemas: $left"
for s in $(seq $((N / 2)) 4 $((N - 1))); do echo "$s $t0 $t1"; done >"$work/moves"   # (the shards written)

# node_b split onto its standby (at node_c's place), its caller cancelled (Ctrl-C,
# statement_timeout) once sealed, before the promotion: the cancel waits until the split is
# done, then ends the call (57014); nothing is left sealed.
make_standby node_c node_b
held "split sealed" "SELECT split_node('node_b', 'node_c', '$(node_connstr node_c)')"
on router -c "SELECT pg_cancel_backend($mpid)" >/dev/null; sleep 0.5; release
wait "$mover" && fail "split_node ignored its cancel"
grep -q 57014 "$work/mover.log" || fail "the cancelled split did not end with 57014: $(cat "$work/mover.log")"
[[ $(on router -c "SELECT state FROM snowflake_id_router.split WHERE node = 'node_b'") == done ]] \
  || fail "the split of node_b cancelled once sealed is not done: $(cat "$work/mover.log")"
echo "split of node_b cancelled once sealed: done all the same, the call ended with 57014"
ROUTER_NODES=(node_a node_b standby node_c)
router_invariants "$work" "$work"/client*.log

# Identity after the split.
[[ -n $(mark standby) && $(mark standby) != "$(mark node_a)" ]] || fail "the new node has no mark of its own: $(mark standby)"
[[ $(sqlstate "SELECT add_node('a2', '$(node_connstr node_a) application_name=again')") == 42710 ]] || fail "node_a under a second name accepted"
[[ $(sqlstate "SELECT add_node('s2', '$sc application_name=again')") == 42710 ]] || fail "the new node under a second name accepted"
[[ $(sqlstate "SELECT alter_node('node_a', '$sc')") == 55000 ]] || fail "alter_node repointed node_a to the new node"
[[ $(sqlstate "SELECT alter_node('standby', '$(node_connstr node_a)')") == 55000 ]] || fail "alter_node repointed the new node to node_a"
# The two halves are two nodes: a shard moves from one to the other and back.
on router -c "SELECT move_shard(1, 'standby')" >/dev/null 2>"$work/move.log" || fail "a move from node_a to the new node failed: $(cat "$work/move.log")"
[[ $(on standby -c "SELECT count(*) FROM shard_1.posts") -ge 3 ]] || fail "shard 1 did not move onto the new node with its rows"
on router -c "SELECT move_shard(1, 'node_a')" >/dev/null 2>"$work/move.log" || fail "a move from the new node to node_a failed: $(cat "$work/move.log")"
echo "a shard moved from node_a to the new node and back"
# The new node fails over to its own standby (made at node_d's place), promoted.
make_standby node_d standby
cluster_stop sfstandby
sudo -u postgres "$PGBIN/pg_ctl" -D "$standby2/data" -w promote >/dev/null
on router -c "SELECT alter_node('standby', '$(node_connstr node_d)')" >/dev/null || fail "alter_node refused the new node's promoted standby"
[[ $(on router -c "SELECT count(*) FROM shard_status WHERE node = 'standby' AND mapped") == $((N / 2)) ]] \
  || fail "shard_status does not show the new node's shards on its promoted standby"
echo "ok"
