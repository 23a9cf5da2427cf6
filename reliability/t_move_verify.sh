#!/usr/bin/env bash
# every version: moves: this version's logical replication and row output
# Moves that prove what they moved (issue 37; docs/cluster.md, "What a move verifies"). A
# router and three data nodes, 16 logical shards made on each; four client sessions write
# through the router (reliability/router_client.py) the whole time, shard 3 among theirs.
#   1  shard 3 moves node_a -> node_b while an ENABLE REPLICA trigger on its copy there
#      changes one value of an old row (one no client writes) as another row is applied,
#      after both sides' content was first read (so found under the fence, by the row's
#      new xmin): the move is refused before the flip
#      (55000) naming the table, the key and both rows; the shard stays served by node_a.
#   2  the same with a trigger that, as one row is applied, deletes the oldest row of the
#      copy (in a chunk no write touches: found by counting every chunk) and inserts a
#      third: refused, naming the deleted row.
# (Shard 3 holds 3,000 rows no client writes, made before the clients start.)
#   3  the same move with no trigger: done (the map names node_b).
#   4  verify_shard: shard 9's copy on node_c, while a move holds it (subscribed): no
#      difference; a row changed there by hand: one, naming its key and both rows; the move,
#      released, refused as in 1 (found at the first read, compared again under the fence).
#   5  the lag gate (setting switch_lag, 64kB here): shard 4's move node_a -> node_b, its
#      target's subscription disabled once subscribed and 2,000 rows written (so the target
#      falls behind): with copy_timeout 3 s the move is refused (57014) naming the lag, and
#      undone, no fence ever set; again, the subscription enabled after 2 s of waiting: the
#      move fences once the target is near (move_history.fence_lag at most 64kB).
#   6  fence_attempts: shard 5's move, its copy's table on node_b locked against writes for
#      7 s before the fence (the apply waits): the fence (cutover_timeout 2 s) is lifted, a write to shard 5
#      passes, and once the lock goes the move fences again and is done (fence_retries);
#      with fence_attempts 1, shard 6's move in the same plight is undone (57014).
# Afterwards (router_invariants): every acknowledged write present exactly once, on the node
# the map names; no ID twice; nothing left by a move on any node.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
pids=()
trap 'touch "$work"/client{1,2,3,4}.log.stop; kill "${pids[@]}" 2>/dev/null || true; router_cluster_down; rm -rf "$work"' EXIT

SHARDS_PER_NODE=16 router_cluster_up
# Rows no client writes: the oldest chunks of shard 3 (the clients' rows come after them).
on node_a -c "INSERT INTO shard_3.posts (user_id, body) SELECT 0, 'preload' FROM generate_series(1, 3000)"
shards="0,1,2,3,4,5,6,7,2731,2732,2733,2734,5462,5463,5464,5465"
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
start_writers "$dsn" 900 "$shards"
sleep 2
map() { on router -c "SELECT node FROM shard_map WHERE shard = $1"; }
ended() { wait "$mover"; }

# refused CASE SHARD TARGET TRIGGER_BODY VICTIM_BODY: holds a move of SHARD to TARGET once
# both sides' content is read (verified: what differs later is found under the fence only),
# puts an ENABLE REPLICA trigger (BEFORE INSERT, TRIGGER_BODY) on its copy there, writes a
# row with body VICTIM_BODY through the router, releases: the move must fail.
refused() {
  held verified "SELECT move_shard($2, '$3')"
  # (Past the guard that refuses DDL on a copy being filled: what a careless superuser could do.)
  on "$3" -c "CREATE FUNCTION public.t37() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN $4 END \$\$" \
          -c "BEGIN" -c "ALTER EVENT TRIGGER snowflake_id_guard_ddl DISABLE" \
          -c "CREATE TRIGGER t37 BEFORE INSERT ON shard_$2.posts FOR EACH ROW EXECUTE FUNCTION public.t37()" \
          -c "ALTER TABLE shard_$2.posts ENABLE REPLICA TRIGGER t37" \
          -c "ALTER EVENT TRIGGER snowflake_id_guard_ddl ENABLE ALWAYS" -c "COMMIT"
  victim=$(on router -c "SELECT insert_post($2, 37, '$5')")
  release
  if ended; then fail "$1: the move of shard $2 succeeded though its copy differs"; fi
  grep -q "moving shard $2 from node 'node_a' to node '$3' failed while comparing the copies: the copy on node '$3' does not hold the rows of node 'node_a': table shard_$2.posts, key" "$work/mover.log" \
    || fail "$1: $(cat "$work/mover.log")"
  [[ $(on router -c "SELECT error FROM move_history ORDER BY move DESC LIMIT 1") == "55000 while comparing the copies: "* ]] \
    || fail "$1: the move's error is not 55000: $(on router -c "SELECT error FROM move_history ORDER BY move DESC LIMIT 1")"
  echo "  $(grep -o 'table shard_[0-9]*.posts, key .*' "$work/mover.log" | head -1)"
  [[ $(map "$2") == node_a ]] || fail "$1: shard $2 is not served by node_a after the refusal"
  [[ $(on node_a -c "SELECT count(*) FROM shard_$2.posts WHERE id = $victim") == 1 ]] || fail "$1: the row written is not on node_a"
  on "$3" -c "DROP FUNCTION public.t37() CASCADE"
}

echo "1: a copy whose trigger changes one value as a row is applied"
old=$(on node_a -c "SELECT id FROM shard_3.posts ORDER BY id OFFSET 9 LIMIT 1")
refused 1 3 node_b "IF NEW.body = 'victim' THEN UPDATE shard_3.posts SET body = 'changed' WHERE id = $old; END IF; RETURN NEW;" victim
grep -q "key $old: ($old,0,preload,0) on node 'node_a', ($old,0,changed,0) on node 'node_b'" "$work/mover.log" \
  || fail "1: the difference named is not the changed row: $(cat "$work/mover.log")"

echo "2: a copy whose trigger deletes one row and inserts another as a row is applied"
first=$(on node_a -c "SELECT min(id) FROM shard_3.posts")
# (The extra row's ID is 2^40 ahead, about two minutes: NEW.id + 1 could be the ID a writer's
# next row takes, whose apply then failed on the duplicate instead of being compared.)
refused 2 3 node_b "IF NEW.body = 'victim2' THEN DELETE FROM shard_3.posts WHERE id = $first;
  INSERT INTO shard_3.posts VALUES (NEW.id + (1::bigint << 40), 0, 'extra'); END IF; RETURN NEW;" victim2
grep -q "key $first: ($first,[^)]*) on node 'node_a', missing on node 'node_b'" "$work/mover.log" \
  || fail "2: the difference named is not the deleted row $first: $(cat "$work/mover.log")"

echo "3: the same move with no trigger"
t0=$(now)
on router -c "SELECT move_shard(3, 'node_b')" >/dev/null
[[ $(map 3) == node_b ]] || fail "3: shard 3 is not on node_b after its move"
echo "  moved in $(secs "$t0" "$(now)") s, write pause $(on router -c "SELECT round(extract(epoch FROM write_pause) * 1000) FROM move_history ORDER BY move DESC LIMIT 1") ms"

echo "4: verify_shard"
on router -c "SELECT insert_post(9, 37, 'row ' || g) FROM generate_series(1, 2500) g" >/dev/null
held subscribed "SELECT move_shard(9, 'node_c')"
diffs=$(on router -c "SELECT count(*) FROM verify_shard(9)")
[[ $diffs == 0 ]] || fail "4: verify_shard found $diffs differences between equal copies: $(on router -c "SELECT * FROM verify_shard(9)")"
changed=$(on node_a -c "SELECT id FROM shard_9.posts ORDER BY id OFFSET 1500 LIMIT 1")
on node_c -c "SET session_replication_role = replica" -c "UPDATE shard_9.posts SET body = 'by hand' WHERE id = $changed"
got=$(on router -c "SELECT copy_on || ' ' || table_name || ' ' || difference FROM verify_shard(9, 'node_c')")
[[ $got == "node_c shard_9.posts table shard_9.posts, key $changed: ($changed,37,\"row "*",0) on node 'node_a' (served), ($changed,37,\"by hand\",0) on node 'node_c'" ]] \
  || fail "4: verify_shard after a row changed on node_c: '$got'"
echo "  $got"
release
if ended; then fail "4: the move of shard 9 succeeded though its copy differs"; fi
grep -q "table shard_9.posts, key $changed:" "$work/mover.log" || fail "4: $(cat "$work/mover.log")"
[[ $(map 9) == node_a ]] || fail "4: shard 9 is not served by node_a after the refusal"
err=$(on router -c "SELECT * FROM verify_shard(9, 'node_c')" 2>&1 || true)
[[ $err == *"55000"*"node 'node_c' holds no copy of shard 9"* || $err == *"node 'node_c' holds no copy of shard 9"* ]] \
  || fail "4: verify_shard against a node with no copy: $err"

echo "5: the fence waits for the target to come within switch_lag"
setting() { on router -c "INSERT INTO snowflake_id_router.setting VALUES ('$1', '$2') ON CONFLICT (name) DO UPDATE SET value = excluded.value"; }
sub() { on node_b -c "ALTER SUBSCRIPTION $(on node_b -c "SELECT subname FROM pg_subscription WHERE subname LIKE 'sfid%'") $1"; }
setting switch_lag 64kB; setting copy_timeout '3 s'
# (The subscription disabled, and 2,000 rows written on node_a: the target falls behind far
# past 64kB before the mover reads the lag.)
behind() { sub DISABLE; on node_a -c "INSERT INTO shard_4.posts (user_id, body) SELECT 0, repeat('x', 200) FROM generate_series(1, 2000)"; }
held subscribed "SELECT move_shard(4, 'node_b')"
behind; release
if ended; then fail "5: the move of shard 4 fenced though its target stayed behind"; fi
grep -q "57014.*moving shard 4 from node 'node_a' to node 'node_b' failed while waiting for the target to come near: the target stayed .* behind the source (switch_lag 64kB)" "$work/mover.log" \
  || fail "5: $(cat "$work/mover.log")"
[[ $(map 4) == node_a ]] || fail "5: shard 4 is not served by node_a after the refusal"
on router -c "DELETE FROM snowflake_id_router.setting WHERE name = 'copy_timeout'"
held subscribed "SELECT move_shard(4, 'node_b')"
behind; release; sleep 2
[[ $(on router -c "SELECT state FROM snowflake_id_router.move ORDER BY id DESC LIMIT 1") == copying ]] \
  || fail "5: the move did not wait for its target: $(on router -c "SELECT state FROM snowflake_id_router.move ORDER BY id DESC LIMIT 1")"
sub ENABLE
ended || fail "5: the move of shard 4 failed once its target caught up: $(cat "$work/mover.log")"
[[ $(map 4) == node_b ]] || fail "5: shard 4 is not on node_b after its move"
lag=$(on router -c "SELECT fence_lag FROM move_history ORDER BY move DESC LIMIT 1")
(( lag <= 65536 )) || fail "5: the move fenced $lag bytes behind"
echo "  refused after 3 s behind; fenced $lag bytes behind once its subscription was enabled"
on router -c "DELETE FROM snowflake_id_router.setting"

echo "6: a fence the target does not catch up with in time is lifted and tried again"
setting cutover_timeout '2 s'
# blocked SHARD SECONDS: the copy's table on node_b locked against writes for that long,
# and a row written on node_a: the apply waits on it (reads pass).
blocked() {
  on node_b -c "BEGIN" -c "LOCK TABLE shard_$1.posts IN SHARE MODE" -c "SELECT pg_sleep($2)" -c "COMMIT" >/dev/null & locker=$!
  sleep 0.3
  on node_a -c "INSERT INTO shard_$1.posts (user_id, body) VALUES (0, 'held up')"
}
held subscribed "SELECT move_shard(5, 'node_b')"
blocked 5 7; t0=$(now); release
sleep 3.5   # (past the first fence's cutover_timeout: lifted, waiting for the target)
id=$(on router -c "SET statement_timeout = '5s'" -c "SELECT insert_post(5, 39, 'between the fences')") \
  || fail "6: a write to shard 5 did not pass with the fence lifted"
kill -0 "$mover" 2>/dev/null || fail "6: the move ended with its fence lifted: $(cat "$work/mover.log")"
wait "$locker"
ended || fail "6: the move of shard 5 failed though its target caught up after a lifted fence: $(cat "$work/mover.log")"
[[ $(map 5) == node_b && $(on node_b -c "SELECT count(*) FROM shard_5.posts WHERE id = $id") == 1 ]] \
  || fail "6: shard 5 is on $(map 5); the write between the fences is not on node_b"
grep -q "the fence is lifted and will be tried again" "$work/mover.log" || fail "6: no notice of the lifted fence: $(cat "$work/mover.log")"
retries=$(on router -c "SELECT fence_retries FROM move_history ORDER BY move DESC LIMIT 1")
(( retries >= 1 )) || fail "6: move_history shows $retries fence retries"
echo "  done in $(secs "$t0" "$(now)") s after $retries lifted fence(s); a write passed between the fences"
setting fence_attempts 1
held subscribed "SELECT move_shard(6, 'node_b')"
blocked 6 5; release
if ended; then fail "6: with fence_attempts 1 the move of shard 6 succeeded though its target stayed behind"; fi
grep -q "57014.*catching up after the fence" "$work/mover.log" || fail "6: $(cat "$work/mover.log")"
[[ $(map 6) == node_a ]] || fail "6: shard 6 is not served by node_a after the refusal"
wait "$locker"
on router -c "DELETE FROM snowflake_id_router.setting"

touch "$work"/client{1,2,3,4}.log.stop
wait_writers
router_invariants "$work" "$work"/client{1,2,3,4}.log
echo "t_move_verify: OK"
