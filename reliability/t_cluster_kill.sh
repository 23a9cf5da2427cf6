#!/usr/bin/env bash
# Moves that survive their own interruption (issue 20; docs/cluster-design.md). A router and
# three data nodes; four client sessions write through the router (inserts on random shards,
# updates of their own rows, retrying 40001) the whole time, while moves are interrupted at
# each step that matters, held there by the breakpoint hook (snowflake_id_router.breakpoint):
#   owned        (copies made and given their owners, the source not prepared)  terminated
#   copying      (before the copy)        terminated
#   subscribed   (copied, replicating)    terminated
#   fenced       (before the marker)      kill -9 of the router's postmaster
#   fenced       (held past the fence's time: the source takes writes again with its
#                 mover alive, within lock_timeout + cutover_timeout + 1 s)  then terminated
#   catching up  (after the marker)       terminated
#   sealing      (the seal's transaction open on the source: its tables locked, its
#                 sequences stopped)      terminated, and kill -9 of the router's postmaster
#   sealed       (sealed, not flipped)    terminated
#   flipped      (right after the flip)   kill -9 of the router's postmaster
#   cleaning the source (clean-up half done)  terminated
#   sealed       (the mover frozen right after its seal, kill -STOP, alive for TCP):
#                 repair_moves() reports it running until its complete_by (the fence's
#                 bound + cleanup_timeout after its seal: 18 s), then takes it over and
#                 completes it; writes through the router pass again within 18 s + 5 s of
#                 the freeze; the mover, thawed, fails with 55000 and leaves nothing
# and a flip whose reply is lost (its loopback connection dies in the commit): completed.
# Before the seal, the shard must take writes again on its source within 10 s with no one
# acting (the fence dissolves with its mover); from the seal on, it takes none there (the
# seal holds) until the move is completed. Then the same command is run again, which
# completes or undoes the interrupted move (and, undone, moves the shard). At the end
# (router_invariants): nothing any move made is left on any node, every move is done or
# undone, every shard is served once, where the map names it, and every write the clients
# saw acknowledged is there exactly once; no ID appears twice.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
pids=()
writer=
trap '[[ -f $work/frozen ]] && sudo kill -CONT $(cat "$work/frozen") 2>/dev/null; touch "$work"/client{1,2,3,4}.log.stop; kill "${pids[@]}" $writer 2>/dev/null || true; router_cluster_down; rm -rf "$work"' EXIT

SHARDS_PER_NODE=8 router_cluster_up
on node_a -c "INSERT INTO shard_2.posts (user_id, body) SELECT 0, 'preload' FROM generate_series(1, 50000)"
# Shard 2's table is over 1 MB: its copies' indexes and key are made after their rows.
indexes() { on "$1" -c "SELECT string_agg(x, '; ' ORDER BY x) FROM (
                          SELECT pg_get_indexdef(indexrelid) || CASE WHEN indisvalid THEN '' ELSE ' (invalid)' END
                            FROM pg_index WHERE indrelid = 'shard_2.posts'::regclass
                          UNION ALL SELECT format('constraint %s %s', conname, pg_get_constraintdef(oid))
                            FROM pg_constraint WHERE conrelid = 'shard_2.posts'::regclass AND contype <> 'n') c(x)"; }
indexes_before=$(indexes node_a)
shards=$(on router -c "SELECT string_agg(s::text, ',') FROM (SELECT generate_series(0, 7) UNION ALL
                        SELECT generate_series(2731, 2738) UNION ALL SELECT generate_series(5462, 5469)) g(s)")
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
start_writers "$dsn" 600 "$shards"
sleep 2

# router_start: starts the router again after a kill -9 of its postmaster (its children
# take a moment to exit; until then the old shared memory is in use).
router_start() {
  local try
  for try in $(seq 100); do
    cluster_resume sfrouter 2>/dev/null && return 0
    sleep 0.1
  done
  fail "the router did not start again after kill -9"
}
# direct_write NODE SHARD: one write straight to the node (no router): ok, or why not.
direct_write() {
  on "$1" -c "SELECT insert_post($2, 0, 'direct')" >/dev/null 2>"$work/direct.err" && { echo ok; return; }
  grep -o 'write refused\|not on this node' "$work/direct.err" | head -1 || echo failed
}

# interrupt STEP SHARD FROM TO HOW: move SHARD from FROM to TO, held at STEP, interrupted by
# HOW (terminate: the mover's backend; kill9: the router's postmaster, started again after
# the checks that need no router; late: held until the source takes writes again by its
# fence's time, the mover alive, then terminated); then what must hold, and the same
# command run again.
interrupt() {
  local step=$1 shard=$2 from=$3 to=$4 how=$5 pid t0 t1 state mover
  on router -c "INSERT INTO snowflake_id_router.breakpoint (step) VALUES ('$step')"
  on router -c "SELECT move_shard($shard, '$to')" >"$work/mover.log" 2>&1 & mover=$!
  for _ in $(seq 600); do
    pid=$(on router -c "SELECT pid FROM snowflake_id_router.breakpoint WHERE step = '$step' AND reached IS NOT NULL")
    [[ -n $pid ]] && break
    kill -0 "$mover" 2>/dev/null || fail "the move of shard $shard ended before step '$step': $(cat "$work/mover.log")"
    sleep 0.05
  done
  [[ -n $pid ]] || fail "the move of shard $shard did not reach step '$step'"
  t0=$(date +%s.%N)
  if [[ $how == late ]]; then
    # (the fence's bound: lock_timeout + cutover_timeout + 1 s, 7 s by default)
    while [[ $(direct_write "$from" "$shard") != ok ]]; do
      t1=$(date +%s.%N)
      awk "BEGIN { exit !($t1 - $t0 > 10) }" && fail "shard $shard fenced on $from refused writes 10 s after its mover stopped: $(cat "$work/direct.err")"
      sleep 0.1
    done
    printf '  shard %s took writes on %s again %.2f s after its mover stopped at the fence, the mover alive (bound: lock_timeout + cutover_timeout + 1 s = 8 s)\n' \
      "$shard" "$from" "$(awk "BEGIN { print $(date +%s.%N) - $t0 }")"
    kill -0 "$mover" 2>/dev/null || fail "the mover held at 'fenced' ended by itself: $(cat "$work/mover.log")"
  fi
  if [[ $how == kill9 ]]; then
    sudo -u postgres kill -9 "$(head -1 "$SF_TMP/sfrouter/data/postmaster.pid")"
  else
    on router -c "SELECT pg_terminate_backend($pid)" >/dev/null
  fi
  if wait "$mover"; then fail "the move of shard $shard held at '$step' returned success after its interruption"; fi
  case $step in
    owned|copying|subscribed|fenced|'catching up'|sealing)
      # No one acts (with kill9, the router is down): the source takes the shard's writes again.
      while [[ $(direct_write "$from" "$shard") != ok ]]; do
        t1=$(date +%s.%N)
        awk "BEGIN { exit !($t1 - $t0 > 10) }" && fail "shard $shard refused writes on $from 10 s after its mover died at '$step': $(cat "$work/direct.err")"
        sleep 0.05
      done
      t1=$(date +%s.%N)
      what=$(printf 'shard %s took writes on %s again after %.2f s, no one acting' "$shard" "$from" "$(awk "BEGIN { print $t1 - $t0 }")")
      ;;
    sealed)
      # (Straight into the table: the example's insert_post already finds the sealed copy
      # gone from snowflake_id_shards.)
      sleep 1
      if on "$from" -c "INSERT INTO shard_$shard.posts (user_id, body) VALUES (0, 'sealed')" >/dev/null 2>"$work/direct.err"; then
        fail "shard $shard sealed on $from took a write there after its mover died"
      fi
      grep -q 'write refused' "$work/direct.err" || fail "shard $shard sealed on $from: $(cat "$work/direct.err")"
      what="shard $shard still refuses writes on $from (sealed) until the move is completed"
      ;;
    *)
      what="shard $shard served by $to (flipped)"
      ;;
  esac
  [[ $how != kill9 ]] || router_start
  on router -c "DELETE FROM snowflake_id_router.breakpoint"
  state=$(on router -c "SELECT state FROM snowflake_id_router.move ORDER BY id DESC LIMIT 1")
  if [[ $step == flipped || $step == 'cleaning the source' ]]; then
    [[ $(on router -c "SELECT node FROM shard_map WHERE shard = $shard") == "$to" ]] || fail "the map of shard $shard does not name $to after the flip"
  fi
  printf 'interrupted at %-21s (%-9s record: %-11s): %s\n' "'$step'" "$how," "$state" "$what"
  # The same command again: it completes or undoes the interrupted move, then moves.
  on router -c "SET client_min_messages = notice" -c "SELECT move_shard($shard, '$to')" >"$work/rerun.log" 2>&1 \
    || fail "re-running move_shard($shard, '$to') failed: $(cat "$work/rerun.log")"
  [[ $(on router -c "SELECT node FROM shard_map WHERE shard = $shard") == "$to" ]] || fail "shard $shard is not on $to after the re-run"
  echo "    the same command again: the interrupted move $(grep -o 'interrupted move [0-9]*[^:]*: [a-z ]*' "$work/rerun.log" | head -1 | sed 's/.*: //'), then the shard $(grep -q 'already on' "$work/rerun.log" && echo 'was there already' || echo 'moved')"
  [[ $(direct_write "$to" "$shard") == ok ]] || fail "shard $shard takes no writes on $to after the re-run: $(cat "$work/direct.err")"
}

# frozen SHARD FROM TO: the move held at 'sealed' (its seal committed), its mover's router
# backend then frozen (kill -STOP: a paused VM, a stalled network; alive for TCP) while a
# writer inserts into SHARD through the router every 0.1 s. repair_moves() says "running"
# until the move's complete_by, then takes it over and completes it; the mover, thawed,
# fails with 55000 and its call leaves nothing (router_invariants, at the end).
frozen() {
  local shard=$1 from=$2 to=$3 pid mover id out t0 t_ok   # (writer: global, for the trap)
  on router -c "INSERT INTO snowflake_id_router.breakpoint (step) VALUES ('sealed')"
  on router -c '\set VERBOSITY verbose' -c "SELECT move_shard($shard, '$to')" >"$work/mover.log" 2>&1 & mover=$!
  for _ in $(seq 600); do
    pid=$(on router -c "SELECT pid FROM snowflake_id_router.breakpoint WHERE step = 'sealed' AND reached IS NOT NULL")
    [[ -n $pid ]] && break
    kill -0 "$mover" 2>/dev/null || fail "the move of shard $shard ended before its seal: $(cat "$work/mover.log")"
    sleep 0.05
  done
  [[ -n $pid ]] || fail "the move of shard $shard did not reach its seal"
  sudo kill -STOP "$pid"; echo "$pid" >"$work/frozen"
  t0=$(date +%s.%N)
  on router -c "DELETE FROM snowflake_id_router.breakpoint"
  id=$(on router -c "SELECT max(id) FROM snowflake_id_router.move")
  ( while [[ ! -f $work/writer.stop ]]; do
      if on router -c "SELECT insert_post($shard, 0, 'frozen mover')" >/dev/null 2>&1; then echo "$(date +%s.%N) ok"; else echo "$(date +%s.%N) error"; fi
      sleep 0.1
    done ) >"$work/writer.log" & writer=$!
  while :; do
    out=$(on router -c "SELECT outcome FROM repair_moves() WHERE move = $id")
    [[ $out == taken* ]] && break
    [[ $out == running* ]] || fail "repair_moves() on move $id, its mover frozen after the seal: $out"
    awk "BEGIN { exit !($(date +%s.%N) - $t0 > 40) }" && fail "repair_moves() still says '$out' 40 s after the mover of move $id froze after its seal"
    sleep 0.5
  done
  [[ $out == 'taken over from its stalled mover: completed' ]] || fail "repair_moves() on move $id: $out"
  for _ in $(seq 100); do
    t_ok=$(awk -v t="$t0" '$1 > t && $2 == "ok" { print $1; exit }' "$work/writer.log")
    [[ -n $t_ok ]] && break
    sleep 0.1
  done
  touch "$work/writer.stop"; wait "$writer"; writer=; rm -f "$work/writer.stop"
  [[ -n $t_ok ]] || fail "no write to shard $shard passed through the router after repair_moves() completed move $id"
  printf 'mover frozen right after its seal (kill -STOP): repair_moves() "%s" %.2f s after the freeze; writes through the router pass again %.2f s after it (bound: lock_timeout + cutover_timeout + 1 s + cleanup_timeout + 5 s = 23 s)\n' \
    "$out" "$(awk "BEGIN { print $(date +%s.%N) - $t0 }")" "$(awk "BEGIN { print $t_ok - $t0 }")"
  awk "BEGIN { exit !($t_ok - $t0 <= 23) }" || fail "writes to shard $shard passed again only $(awk "BEGIN { print $t_ok - $t0 }") s after its mover froze"
  [[ $(on router -c "SELECT node FROM shard_map WHERE shard = $shard") == "$to" ]] || fail "the map of shard $shard does not name $to after the repair"
  [[ $(direct_write "$to" "$shard") == ok ]] || fail "shard $shard takes no writes on $to after the repair: $(cat "$work/direct.err")"
  sudo kill -CONT "$pid"; rm -f "$work/frozen"
  if wait "$mover"; then fail "the thawed mover of move $id returned success: $(cat "$work/mover.log")"; fi
  grep -q "ERROR:  55000: move $id of shard $shard is not this session's: a repair (repair_moves()) took it over" "$work/mover.log" \
    || fail "the thawed mover of move $id: $(cat "$work/mover.log")"
  echo "    the thawed mover: $(grep -o 'ERROR:  55000: .*' "$work/mover.log" | head -1)"
  [[ $(on router -c "SELECT state FROM snowflake_id_router.move WHERE id = $id") == done ]] || fail "move $id is not done after its mover thawed"
}

interrupt owned 2736 node_b node_a terminate
interrupt copying 1 node_a node_b terminate
interrupt subscribed 2 node_a node_c terminate
interrupt fenced 3 node_a node_b kill9
interrupt fenced 2737 node_b node_c late
interrupt 'catching up' 4 node_a node_c terminate
interrupt sealing 2734 node_b node_a terminate
interrupt sealing 2735 node_b node_c kill9
interrupt sealed 2732 node_b node_c terminate
interrupt flipped 2733 node_b node_a kill9
interrupt 'cleaning the source' 5463 node_c node_a terminate
frozen 2738 node_b node_a

# The flip committed, its reply lost: the loopback connection that runs it is terminated
# while its commit waits for a synchronous standby that is not there (committed locally).
# The move is flipped, so the mover completes it rather than report it sealed and failed.
on router -c "INSERT INTO snowflake_id_router.breakpoint (step) VALUES ('flipping')"
on router -c "SELECT move_shard(0, 'node_c')" >"$work/mover.log" 2>&1 & mover=$!
for _ in $(seq 600); do
  [[ -n $(on router -c "SELECT pid FROM snowflake_id_router.breakpoint WHERE reached IS NOT NULL") ]] && break
  sleep 0.05
done
on router -c "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" -c "SELECT pg_reload_conf()" >/dev/null
on router -c "SET synchronous_commit = local" -c "DELETE FROM snowflake_id_router.breakpoint"
for _ in $(seq 600); do
  flipper=$(on router -c "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query LIKE '%snowflake_id_router.flip(%'")
  [[ -n $flipper ]] && break
  sleep 0.05
done
[[ -n $flipper ]] || fail "the flip of shard 0 did not wait for the standby: $(cat "$work/mover.log")"
on router -c "SELECT pg_terminate_backend($flipper)" >/dev/null
on router -c "ALTER SYSTEM RESET synchronous_standby_names" -c "SELECT pg_reload_conf()" >/dev/null
wait "$mover" || fail "the move of shard 0 whose flip's reply was lost failed: $(cat "$work/mover.log")"
[[ $(on router -c "SELECT node || ' ' || state FROM shard_map, snowflake_id_router.move WHERE shard = 0 AND 0 = ANY (shards) ORDER BY id DESC LIMIT 1") == "node_c done" ]] \
  || fail "shard 0: the map or its move's record after the lost reply: $(on router -c "SELECT node FROM shard_map WHERE shard = 0") $(cat "$work/mover.log")"
[[ $(direct_write node_c 0) == ok ]] || fail "shard 0 takes no writes on node_c after its move: $(cat "$work/direct.err")"
echo "the flip's reply lost (loopback terminated in its commit): shard 0 moved to node_c, the move done"
# Several shards in one move, uninterrupted.
on router -c "SELECT move_shards('{5,6,7}', 'node_b')" >/dev/null

touch "$work"/client{1,2,3,4}.log.stop
wait_writers
on router -c "SELECT string_agg(format('%s %s %s', move, array_to_string(shards, ','), outcome), '; ' ORDER BY move) FROM move_history"
router_invariants "$work" "$work"/client*.log
at=$(on router -c "SELECT node FROM shard_map WHERE shard = 2")
[[ $(indexes "$at") == "$indexes_before" ]] || fail "shard 2's indexes on $at: $(indexes "$at"); on node_a before its moves: $indexes_before"
echo "shard 2 (50,000 rows, indexes and key made after the copy) has on $at what it had on node_a: $indexes_before"
