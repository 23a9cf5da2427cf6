#!/usr/bin/env bash
# alone
# Moves under faults the operator does not control (issue 33, items 14, 15, 16, 18, 19). A
# router (its clock under libfaketime) and three data nodes, 16 logical shards made on each;
# four client sessions write through the router (reliability/router_client.py) the whole
# time. One case per item, each printing the bound it must meet and what it measured:
#   14  a sealed move completes whoever cancels what: move_shard cancelled
#       (pg_cancel_backend) between its seal and its flip, another by its own
#       statement_timeout there, and CALL rebalance(parallel_moves => 2) stopped by Ctrl-C
#       (SIGINT to psql) with a batch sealed: each sealed move flips, then stops (57014),
#       its old copy left sealed for the repair, nothing else; resumed, the rebalance ends.
#       A cancel of the mover's session on a node there: that step tried again, the move done.
#       A cancel where no step's own handler runs (as the move is recorded, between its
#       copy and its cutover): the move undone by the call itself, nothing left.
#   15  a target frozen (kill -STOP of its postmaster and backends) while the move waits
#       for it under the fence: the healthy source takes writes again within
#       lock_timeout + cutover_timeout + 1 s (the undo does the source first); the mover
#       terminated there ends at once, its fence with it (3 s).
#   16  the router's clock stepped back one hour while a fenced move waits for a target
#       slow to catch up (its apply held up by a lock there): the fence still ends within
#       that bound (every wait's deadline and sleep is monotonic); the move, run again with
#       the clock still behind, completes.
#   19  a follower router down during a drain of single-shard batches (more than a
#       target's logical replication workers): every batch flips; each keeps only its
#       sealed old copy, no subscription, publication, slot or WAL held; repaired once the
#       follower is back.
#   18  a node whose lock table is small (max_locks_per_transaction = 10): a batch too
#       large to fence is refused before anything is made (53400); CALL drain_node(...,
#       batch_size => 8192) drains it, its old copies dropped in as many transactions as
#       its lock table needs.
# Afterwards (router_invariants): every acknowledged write present exactly once, on the node
# the map names; no ID twice; nothing left by a move on any node.
# CASES (environment) runs some of them, e.g. CASES="15 16"; they run in this order.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
ROUTER_B_PORT=$((ROUTER_PORT + 6))
CASES=${CASES:-14 15 16 19 18}
pids=()
trap 'touch "$work"/client{1,2,3,4}.log.stop; [[ -f $work/frozen ]] && sudo kill -CONT $(cat "$work/frozen") 2>/dev/null;
      kill "${pids[@]}" 2>/dev/null || true; cluster_stop sfrouter2; router_cluster_down; rm -rf "$work"' EXIT

# The router's clock under libfaketime; its monotonic clock is not faked: a real clock step
# (NTP, an operator's date -s) moves the wall clock only.
CLUSTER_ENV="$(faketime_env "$work/clock") FAKETIME_DONT_FAKE_MONOTONIC=1" SHARDS_PER_NODE=16 router_cluster_up
on router -c "INSERT INTO snowflake_id_router.setting VALUES ('cutover_timeout', '3 s')"
lock_s=$(on router -c "SELECT extract(epoch FROM snowflake_id_router.timeout('lock_timeout'))")
bound=$(python3 -c "print($lock_s + 3 + 1)")   # lock_timeout + cutover_timeout + 1 s

shards="0,1,2,3,4,5,6,7,2731,2732,2733,2734,5462,5463,5464,5465"
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
start_writers "$dsn" 900 "$shards"
sleep 2

# ended: waits (60 s at most) for the held call to end; its exit status.
ended() {
  local _; for _ in $(seq 600); do kill -0 "$mover" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$mover" 2>/dev/null && fail "the call did not end within 60 s: $(cat "$work/mover.log")"
  wait "$mover"
}
map() { on router -c "SELECT node FROM shard_map WHERE shard = $1"; }
leftovers() {
  local n; for n in "${ROUTER_NODES[@]}"; do
    on "$n" -c "SELECT '$n: ' || string_agg(x, '; ') FROM snowflake_id_node.leftovers() x HAVING count(*) > 0"
  done
}
# pause SHARD T0 T1: the longest a write to SHARD took (first try to acknowledgement) among
# the writes in flight between T0 and T1, in s.
pause() {
  awk -v s="$1" -v a="$2" -v b="$3" '
    $1 == "I" && $3 == s && $6 >= a && $5 <= b { if ($6 - $5 > m) m = $6 - $5 }
    END { printf "%.2f\n", m + 0 }' "$work"/client*.log
}
# fence_watch NODE SHARD OUT: in the background, every 10 ms until OUT.stop exists, whether
# NODE refuses the shard's writes while the router's map still sends them there (its move
# record there fenced or sealed, the map naming NODE); writes to OUT the first and the
# last time it did (s since the epoch).
fence_watch() {
  "$PYTHON" - "$(node_connstr "$1")" "$dsn" "$1" "$2" "$3" <<'PY' &
import os, sys, time, psycopg2
node_dsn, router_dsn, node, shard, out = sys.argv[1:]
n, r = psycopg2.connect(node_dsn), psycopg2.connect(router_dsn)
n.autocommit = r.autocommit = True
first = last = None
while not os.path.exists(out + ".stop"):
    with n.cursor() as c, r.cursor() as d:
        c.execute("SELECT EXISTS (SELECT FROM snowflake_id_node.move WHERE role = 'source' AND %s = ANY (shards)"
                  " AND state IN ('fenced', 'sealed'))", (int(shard),))
        d.execute("SELECT node FROM shard_map WHERE shard = %s", (int(shard),))
        if c.fetchone()[0] and d.fetchone()[0] == node:
            last = time.time()
            first = first or last
    time.sleep(0.01)
open(out, "w").write(f"{first or 0} {last or 0}\n")
PY
  watcher=$!
}
# fence_end OUT: stops fence_watch; sets fence to how long it saw the fence, in s.
fence_end() { touch "$1.stop"; wait "$watcher"; read -r f l <"$1"; fence=$(secs "$f" "$l"); rm -f "$1.stop"; }
# freeze NODE / thaw: kill -STOP of a node's postmaster and every process of it (a paused VM).
freeze() {
  local pm; pm=$(head -1 "$(node_dir "$1")/data/postmaster.pid")
  echo "$pm $(pgrep -P "$pm" | tr '\n' ' ')" >"$work/frozen"
  sudo kill -STOP $(cat "$work/frozen")
}
thaw() { sudo kill -CONT $(cat "$work/frozen"); rm -f "$work/frozen"; }
repaired() {  # repair_moves(), after which nothing is left
  on router -c "SELECT * FROM repair_moves()" >"$work/repair.log"
  local left; left=$(leftovers); [[ -z $left ]] || fail "left after repair_moves(): $left ($(cat "$work/repair.log"))"
}

# A cancel of the mover between its seal and its flip (ARGS: STEP how SHARD TARGET).
cancelled_between() {
  local step=$1 how=$2 shard=$3 to=$4 from t0 t1 state
  from=$(map "$shard")
  if [[ $how == statement_timeout ]]; then
    held "$step" "SELECT move_shard($shard, '$to')" "-c statement_timeout=2s"
    sleep 2.5
  else
    held "$step" "SELECT move_shard($shard, '$to')"
    on router -c "SELECT pg_cancel_backend($mpid)" >/dev/null
    sleep 0.5
  fi
  t0=$(now); release
  if ended; then fail "move_shard($shard) cancelled at '$step' ($how) succeeded"; fi
  t1=$(now)
  grep -q "is done, but its clean-up was cancelled" "$work/mover.log" \
    || fail "move_shard($shard) cancelled at '$step' ($how) did not complete its flip: $(cat "$work/mover.log")"
  [[ $(map "$shard") == "$to" ]] || fail "shard $shard is mapped to $(map "$shard") after the cancelled move"
  state=$(on router -c "SELECT state FROM snowflake_id_router.move ORDER BY id DESC LIMIT 1")
  left=$(leftovers)
  [[ $left == "$from: move record "*"(source, sealed, shards {$shard}); fence trigger "* && $left != *";"*";"* ]] \
    || fail "the cancelled move left more than its sealed old copy: $left"
  on router -c "SELECT insert_post($shard, 0, 'after the cancel')" >/dev/null || fail "shard $shard takes no writes after the cancelled move"
  echo "14: move_shard($shard) cancelled ($how) at '$step': flipped to $to, then ended $(secs "$t0" "$t1") s after the breakpoint let go (57014); record $state, left only the sealed old copy"
  repaired
}

# A cancel of the mover where no step's own handler runs (ARGS: STEP SHARD TARGET): as its
# record is made (planned), between its copy and its cutover (copied). The move is undone at
# once by the call itself (57014), nothing left, the shard where it was and taking writes.
cancelled_outside() {
  local step=$1 shard=$2 to=$3 from state
  from=$(map "$shard")
  held "$step" "SELECT move_shard($shard, '$to')"
  on router -c "SELECT pg_cancel_backend($mpid)" >/dev/null
  sleep 0.5; release
  if ended; then fail "move_shard($shard) cancelled at '$step' succeeded"; fi
  grep -q "57014: moving shard $shard from node '$from' to node '$to' failed while" "$work/mover.log" \
    || fail "move_shard($shard) cancelled at '$step': $(cat "$work/mover.log")"
  state=$(on router -c "SELECT state FROM snowflake_id_router.move ORDER BY id DESC LIMIT 1")
  [[ $state == undone && $(map "$shard") == "$from" && -z $(leftovers) ]] \
    || fail "move_shard($shard) cancelled at '$step' left its move $state, the shard on $(map "$shard"), leftovers: $(leftovers)"
  on router -c "SELECT insert_post($shard, 0, 'after the cancel')" >/dev/null || fail "shard $shard takes no writes after the cancelled move"
  echo "14: move_shard($shard) cancelled at '$step' (outside the steps): undone by the call itself (57014), nothing left"
}

case14() {
  cancelled_outside planned 3 node_b
  cancelled_outside copied 3 node_c
  cancelled_between flipping statement_timeout 1 node_b
  cancelled_between sealed pg_cancel_backend 2 node_b
  # Someone cancels the mover's session on the target while it activates the copy (held
  # there by a lock on the move's record): the activation is tried again, the move done.
  local key
  held sealed "SELECT move_shard(5, 'node_b')"
  key=$(on router -c "SELECT snowflake_id_router.move_key(max(id)) FROM snowflake_id_router.move")
  on node_b -c "BEGIN" -c "SELECT key FROM snowflake_id_node.move WHERE key = '$key' FOR UPDATE" -c "SELECT pg_sleep(1)" >/dev/null &
  sleep 0.3; release
  for _ in $(seq 100); do
    [[ $(on node_b -c "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity
                        WHERE application_name LIKE 'snowflake_id_router mover %' AND query LIKE '%activate%'") == 1 ]] && break
    sleep 0.02
  done
  ended || fail "move_shard(5) whose node session was cancelled while it activated failed: $(cat "$work/mover.log")"
  [[ $(map 5) == node_b && $(on router -c "SELECT error FROM move_history ORDER BY move DESC LIMIT 1") == *"canceling statement"* ]] \
    || fail "move_shard(5): not moved after the cancel of its node session, or not cancelled: $(on router -c "SELECT * FROM move_history ORDER BY move DESC LIMIT 1")"
  echo "14: the mover's session on the target cancelled while it activated the copy: tried again, the move done"
  # Ctrl-C of a rebalance with two batches moving (a=14, b=18, c=16 shards: two of b's to
  # a), one of them sealed (the other waits for the fence gate, which the sealed one holds
  # until its flip): the sealed one flips, the other is undone.
  local t0 t1 id state outcome
  on router -c "INSERT INTO snowflake_id_router.breakpoint (step) VALUES ('sealed')"
  psql -X -q -At -h "$SF_TMP/sfrouter" -p "$ROUTER_PORT" -U postgres -d postgres -c "SET client_min_messages = warning" \
    -c "CALL rebalance(batch_size => 1, parallel_moves => 2)" >"$work/mover.log" 2>&1 & mover=$!
  for _ in $(seq 600); do
    [[ -n $(on router -c "SELECT reached FROM snowflake_id_router.breakpoint")
       && $(on router -c "SELECT count(*) FROM snowflake_id_router.move WHERE state NOT IN ('done', 'undone')") == 2 ]] && break
    kill -0 "$mover" 2>/dev/null || fail "the rebalance ended before a batch was sealed: $(cat "$work/mover.log")"
    sleep 0.05
  done
  sleep 0.3
  kill -INT "$mover"; sleep 0.5     # (Ctrl-C: psql sends a cancel request)
  t0=$(now); release
  if ended; then fail "the rebalance stopped by Ctrl-C succeeded"; fi
  t1=$(now)
  read -r id state <<<"$(on router -F ' ' -c "SELECT id, state FROM rebalance_status ORDER BY id DESC LIMIT 1")"
  # The sealed batch flips; the other is undone, or, when the cancel landed where the call
  # could not catch it (a COMMIT between its looks) and it ended at once, finished by its
  # worker (which then moves its batch whole: copy, fence, flip and clean-up, 10 s and more
  # under CI's load). Either way within a bound, and none left unfinished.
  for _ in $(seq 1200); do
    [[ $(on router -c "SELECT count(*) FROM (SELECT * FROM snowflake_id_router.move ORDER BY id DESC LIMIT 2) m
                        WHERE m.state NOT IN ('flipped', 'done', 'undone')") == 0 ]] && break
    sleep 0.05
  done
  outcome=$(on router -c "SELECT string_agg(state::text, ' ' ORDER BY id) FROM (SELECT * FROM snowflake_id_router.move ORDER BY id DESC LIMIT 2) m")
  [[ $outcome =~ ^(flipped|done|undone)\ (flipped|done|undone)$ && $outcome != 'undone undone' ]] \
    || fail "Ctrl-C of the rebalance: its batches ended $outcome: $(on router -c "SELECT id, shards, state, error FROM snowflake_id_router.move ORDER BY id")"
  echo "14: CALL rebalance(parallel_moves => 2) stopped by Ctrl-C, one batch sealed: the batches ended $outcome, the call $(secs "$t0" "$t1") s after the breakpoint let go; rebalance $id $state"
  on router -c "SET client_min_messages = notice" -c "CALL rebalance(batch_size => 1)" >"$work/rebalance.log" 2>&1 \
    || fail "the resumed rebalance failed: $(cat "$work/rebalance.log")"
  [[ $(on router -c "SELECT state FROM rebalance_status WHERE id = $id") == done ]] || fail "rebalance $id did not end done"
  local left; left=$(leftovers); [[ -z $left ]] || fail "left after the resumed rebalance: $left"
}

# 15 and 16: a move held at its fence, its target then stuck (HOW: frozen, kill -STOP of
# its postmaster and processes; or slow: the marker's apply held up by a lock there, and the
# router's clock stepped back 1 h while the mover waits for it), then let go: the healthy
# source's fence ends within lock_timeout + cutover_timeout + 1 s.
stuck_target() {
  local item=$1 shard=$2 to=$3 how=$4 from t0 p marker
  from=$(map "$shard")
  held fenced "SELECT move_shard($shard, '$to')"
  fence_watch "$from" "$shard" "$work/fence"
  if [[ $how == frozen ]]; then
    freeze "$to"
  else
    marker=$(on router -c "SELECT 'sfid_' || replace(snowflake_id_router.move_key(max(id)), '/', '_') FROM snowflake_id_router.move")
    on "$to" -c "BEGIN" -c "LOCK TABLE snowflake_id_node.$marker IN SHARE MODE" -c "SELECT pg_sleep(120)" >/dev/null 2>&1 &
    for _ in $(seq 100); do
      [[ $(on "$to" -c "SELECT count(*) FROM pg_locks WHERE relation = 'snowflake_id_node.$marker'::regclass AND mode = 'ShareLock' AND granted") == 1 ]] && break
      sleep 0.05
    done
  fi
  t0=$(now); release
  if [[ $how == slow ]]; then sleep 1; faketime_set "$work/clock" "-1h"; fi
  for _ in $(seq 600); do   # (the source's fence ends with its record there)
    [[ $(on "$from" -c "SELECT count(*) FROM snowflake_id_node.move WHERE $shard = ANY (shards)") == 0 ]] && break
    sleep 0.1
  done
  fence_end "$work/fence"; p=$(pause "$shard" "$t0" "$(now)")
  echo "$item: target $to $how under the fence${5:-}: node $from refused shard $shard's writes for $fence s, the writers' longest write $p s (bound $bound s)"
  python3 -c "import sys; sys.exit(not ($fence <= $bound and $p <= $bound + 0.5))" \
    || fail "the fence on the healthy source outlasted lock_timeout + cutover_timeout + 1 s: $fence s (writes: $p s)"
  if [[ $how == frozen ]]; then
    thaw
  else
    on "$to" -c "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE relation = 'snowflake_id_node.$marker'::regclass AND mode = 'ShareLock'" >/dev/null
  fi
  if ended; then fail "move_shard($shard) with its target $how succeeded"; fi
  grep -q "shards stay on node '$from'" "$work/mover.log" || fail "the move with its target $how: $(cat "$work/mover.log")"
  echo "$item: the move $(grep -o 'failed while [^:]*' "$work/mover.log" | head -1), undone"
  repaired
}

case15() {
  local t0 t1 t2
  stuck_target 15 3 node_c frozen
  # The mover terminated while it waits for its frozen target: it ends at once, and with it
  # (its node sessions gone) its fence.
  held fenced "SELECT move_shard(3, 'node_c')"
  freeze node_c; release; sleep 0.5
  t0=$(now); on router -c "SELECT pg_terminate_backend($mpid)" >/dev/null
  for _ in $(seq 200); do [[ $(on router -c "SELECT count(*) FROM pg_stat_activity WHERE pid = $mpid") == 0 ]] && break; sleep 0.02; done
  t1=$(now)
  for _ in $(seq 200); do on router -c "SELECT insert_post(3, 0, 'after the terminate')" >/dev/null 2>&1 && break; sleep 0.02; done
  t2=$(now); thaw
  echo "15: the mover terminated while its target is frozen: gone $(secs "$t0" "$t1") s later, shard 3 took writes $(secs "$t0" "$t2") s later (bound 3 s)"
  python3 -c "import sys; sys.exit(not $t2 - $t0 <= 3)" || fail "the terminated mover's fence outlived it by more than 3 s"
  wait "$mover" || true
  repaired
}

case16() {
  local t0 t1 p fence
  stuck_target 16 4 node_c slow " and the router's clock stepped back 1 h while the mover waited for it"
  [[ $(on router -c "SELECT now() < timestamptz '$(date -u +%FT%T)Z' - interval '50 minutes'") == t ]] \
    || fail "libfaketime did not put the router's clock behind"
  # Run again with the clock still behind: completes, the writes' pause within the bound.
  fence_watch "$(map 4)" 4 "$work/fence"
  t0=$(now)
  on router -c "SELECT move_shard(4, 'node_c')" >/dev/null || fail "move_shard(4) with the router's clock behind failed"
  t1=$(now); p=$(pause 4 "$t0" "$t1"); fence_end "$work/fence"
  echo "16: move_shard(4) with the router's clock 1 h behind: done in $(secs "$t0" "$t1") s, writes fenced $fence s, the writers' longest write $p s"
  python3 -c "import sys; sys.exit(not $p <= $bound)" || fail "a write waited $p s with the router's clock behind"
  faketime_set "$work/clock" "+0"
}

case19() {
  local n batches slots subs wal workers
  cluster_start sfrouter2 "$ROUTER_B_PORT"
  psql -X -q -h "$SF_TMP/sfrouter2" -p "$ROUTER_B_PORT" -U postgres -d postgres -c "SET client_min_messages = warning" \
    -c "CREATE EXTENSION snowflake_id_router CASCADE" -f "$here/../router/examples/router.sql" >/dev/null
  on router -c "SELECT add_router('router_b', 'host=$SF_TMP/sfrouter2 port=$ROUTER_B_PORT dbname=postgres user=postgres')" >/dev/null
  cluster_stop sfrouter2
  n=$(on router -c "SELECT count(*) FROM shard_status WHERE node = 'node_c' AND mapped")
  workers=$(on node_a -c "SHOW max_logical_replication_workers")
  on router -c "SET client_min_messages = error" -c "CALL drain_node('node_c', batch_size => 1)" >"$work/drain.log" 2>&1 \
    || fail "the drain with router_b down failed: $(cat "$work/drain.log")"
  batches=$(on router -c "SELECT batches_done FROM rebalance_status ORDER BY id DESC LIMIT 1")
  subs=$(( $(on node_a -c "SELECT count(*) FROM pg_subscription") + $(on node_b -c "SELECT count(*) FROM pg_subscription") ))
  read -r slots wal <<<"$(on node_c -F ' ' -c "SELECT count(*), coalesce(sum(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)), 0)
                                                FROM pg_replication_slots WHERE slot_name LIKE 'sfid%'")"
  local kept; kept=$(on node_c -c "SELECT count(*) FROM snowflake_id_node.move WHERE state = 'sealed'")
  echo "19: router_b down, node_c drained in $batches batches of one shard ($n shards; $workers logical replication workers a target): $subs subscriptions, $slots slots, $wal bytes of WAL held; $kept sealed old copies kept"
  ((batches == n && n > workers)) || fail "the drain moved $batches batches of $n"
  [[ $subs == 0 && $slots == 0 && $wal == 0 ]] || fail "moves waiting for router_b hold replication: $(leftovers)"
  [[ $kept == "$n" ]] || fail "not every old copy waits, sealed, for router_b: $(leftovers)"
  cluster_resume sfrouter2
  repaired
  [[ $(psql -X -At -h "$SF_TMP/sfrouter2" -p "$ROUTER_B_PORT" -U postgres -d postgres -c "SELECT count(*) FROM shard_map WHERE node = 'node_c'") == 0 ]] \
    || fail "router_b still routes to node_c after the repair"
}

case18() {
  local n cap per
  # More shards made on node_b, then its lock table made small.
  on node_b -c "SELECT count(create_shard('shard_' || s, s, template => 'tpl')) FROM generate_series(2747, 2916) s" >/dev/null
  on node_b -c "ALTER SYSTEM SET max_locks_per_transaction = 10" -c "ALTER SYSTEM SET max_connections = 15" >/dev/null
  cluster_stop sfnode_b; node_restart node_b || fail "node_b did not start again"
  # (The lock table: max_locks_per_transaction for each process that can take locks.)
  cap=$(on node_b -c "SELECT current_setting('max_locks_per_transaction')::int * (current_setting('max_connections')::int
                        + coalesce(current_setting('autovacuum_worker_slots', true), current_setting('autovacuum_max_workers'))::int
                        + current_setting('max_worker_processes')::int + current_setting('max_wal_senders')::int
                        + current_setting('max_prepared_transactions')::int + 1)")
  n=$(on router -c "SELECT count(*) FROM shard_status WHERE node = 'node_b' AND mapped")
  # All of them at once: the fence would not fit. Refused before anything is made.
  err=$(on router -v VERBOSITY=verbose -c "SELECT move_shards(ARRAY(SELECT shard FROM shard_status WHERE node = 'node_b' AND mapped), 'node_c')" 2>&1 || true)
  [[ $err == *"ERROR:  53400: "*"fencing $n shards at once takes about"*"Move fewer shards at once"* ]] \
    || fail "a batch of $n shards too large for node_b's lock table was not refused with 53400: $err"
  local left; left=$(leftovers); [[ -z $left ]] || fail "the refused batch left: $left"
  echo "18: node_b's lock table holds $cap locks; moving its $n shards at once refused: $(grep -o 'fencing [^(]*' <<<"$err")"
  # The drain in batches as large as they come: each old copy dropped in as many
  # transactions as node_b's lock table needs (a schema's drop takes some 17 locks).
  on router -c "SET client_min_messages = warning" -c "CALL drain_node('node_b', batch_size => 8192)" >"$work/drain.log" 2>&1 \
    || fail "CALL drain_node('node_b', batch_size => 8192) failed: $(cat "$work/drain.log")"
  grep -q WARNING "$work/drain.log" && fail "the drain warned: $(cat "$work/drain.log")"
  left=$(leftovers); [[ -z $left ]] || fail "the drain left: $left"
  per=$(on router -c "SELECT max(cardinality(shards)) FROM snowflake_id_router.rebalance_batch
                       WHERE rebalance = (SELECT max(id) FROM snowflake_id_router.rebalance)")
  echo "18: CALL drain_node('node_b', batch_size => 8192): $n shards in batches of up to $per, each old copy (about $((per * 17)) locks to drop) dropped in transactions that fit $cap; nothing left"
  ((per * 17 > cap)) || fail "the batches ($per shards) fit node_b's lock table whole: the test proves nothing"
}

for c in $CASES; do "case$c"; done
sleep 1
touch "$work"/client{1,2,3,4}.log.stop
wait_writers
router_invariants "$work" "$work"/client*.log
