#!/usr/bin/env bash
# every version: streaming replication, promotion and crashes of this version
# A node split (docs/cluster.md, "Splitting a node onto its standby") cut short by faults,
# under four clients writing through the router on every 2nd shard of node_a and node_b
# (SPLIT_SHARDS shards each, 16):
#   0. split_plan by size: a heavy shard goes alone; by count, the upper half;
#   1. node_a split onto its standby, held once sealed: a move of a shard node_a keeps, and
#      one onto node_a, are refused (55000: a move starting on a node being split, issue 38
#      item 2); the standby is killed (pg_ctl stop -m immediate) and started again, the
#      caller terminated: split_node run again completes it;
#   2. node_b split by size onto its standby (at node_c's place), held once registered (the new
#      node hides its copies of node_b's other shards: not served, SF001): node_b killed
#      and started again, the caller terminated: repair_moves() completes it;
#   3. node_a split again, onto a second standby (at node_d's place), held with its shards
#      fenced (the window between the split's check and its seal): a move of a kept shard
#      refused (55000); node_a killed and started again, the caller let go: the split fails
#      and is undone (nothing left on node_a, the standby not promoted); split_node run
#      again, held once flipped (its hidden copies not yet dropped), its caller terminated:
#      repair_moves() completes it.
# Afterwards every acknowledged write is present exactly once on the node the map names, no
# ID twice, each moved shard's new IDs above its old ones, nothing left by a move or a split
# (router_invariants), every split done.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
ROUTER_NODES=(node_a node_b)
N=${SPLIT_SHARDS:-16}
work=$(mktemp -d); chmod 755 "$work"
trap 'touch "$work"/client{1,2,3,4}.log.stop; kill ${pids[@]:-} 2>/dev/null || true
      for n in standby node_c node_d; do cluster_stop "sf$n" immediate; done
      router_cluster_down; rm -rf "$work"' EXIT
SHARDS_PER_NODE=$N router_cluster_up
B=${NODE_FIRST[node_b]}
sqlstate() { on router -v VERBOSITY=sqlstate -c "$1" 2>&1 | sed -nE 's/.*ERROR:  ([0-9A-Z]{5}).*/\1/p'; }
split_state() { on router -c "SELECT state FROM snowflake_id_router.split WHERE node = '$1' ORDER BY id DESC LIMIT 1"; }
for n in node_a node_b; do
  on "$n" -c "DO \$\$ DECLARE s record; BEGIN FOR s IN SELECT schema_name FROM snowflake_id_shards LOOP
      EXECUTE format('INSERT INTO %I.posts (user_id, body) SELECT g, ''preload'' FROM generate_series(1, 3) g', s.schema_name);
    END LOOP; END \$\$"
done

# make_standby NAME OF: a streaming standby NAME of node OF (pg_basebackup -R), started.
make_standby() {
  local dir; dir=$(node_dir "$1")
  rm -rf "$dir"; mkdir -p "$dir"; chown postgres: "$dir"
  sudo -u postgres "$PGBIN/pg_basebackup" -h "$(node_dir "$2")" -p "$(node_port "$2")" -U postgres -D "$dir/data" -R -X stream -c fast
  echo "-p $(node_port "$1") -k $dir -c listen_addresses='' -c hot_standby=on -c wal_level=logical -c fsync=off -c max_wal_senders=20 -c max_replication_slots=20 -c wal_retrieve_retry_interval=100ms -c log_line_prefix='%m [%p] %e '" >"$dir/options"
  : >"$dir/environment"
  cluster_resume "sf$1"
}
# streaming NAME: waits (30 s) until standby NAME streams from its primary.
streaming() {
  for _ in $(seq 300); do
    [[ $(on "$1" -c "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'") == 1 ]] && return 0
    sleep 0.1
  done
  fail "standby $1 does not stream"
}
# crash NAME: a node's server killed (pg_ctl stop -m immediate) and started again.
crash() { cluster_stop "sf$1" immediate; node_restart "$1" || fail "$1 did not start again"; }
# terminated: the held split's caller terminated, the breakpoint let go.
terminated() {
  on router -c "SELECT pg_terminate_backend($mpid)" >/dev/null; release
  wait "$mover" && fail "split_node survived its termination"
  return 0
}
# By size (issue 38 item 3): one heavy shard (3) outweighs node_a's 15 others, so it alone
# goes; by count, the upper half. by => 'size' takes no count (22023).
on node_a -c "INSERT INTO shard_3.posts (user_id, body) SELECT g, repeat('x', 200) FROM generate_series(1, 40000) g"
[[ $(on router -c "SELECT split_plan('node_a', by => 'size')") == "{3}" ]] \
  || fail "split_plan by size does not send the heavy shard alone: $(on router -c "SELECT split_plan('node_a', by => 'size')")"
[[ $(on router -c "SELECT split_plan('node_a')") == "{$(seq -s, $((N / 2)) $((N - 1)))}" ]] || fail "split_plan by count is not the upper half"
[[ $(sqlstate "SELECT split_plan('node_a', 2, by => 'size')") == 22023 ]] || fail "split_plan by size with a count was not refused (22023)"
echo "0. split_plan by size: the heavy shard alone, by count the upper half"
make_standby standby node_a
make_standby node_c node_b

shards=$(echo $(seq 0 2 $((N - 1))) $(seq "$B" 2 $((B + N - 1))) | tr ' ' ,)
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
pids=()
start_writers "$dsn" 600 "$shards"
sleep 2

# 1. Held once sealed; moves refused; the standby crashed; split_node again completes it.
held "split sealed" "SELECT split_node('node_a', 'standby', '$(node_connstr standby)')"
[[ $(sqlstate "SELECT move_shard(0, 'node_b')") == 55000 ]] || fail "a move of a shard node_a keeps started while node_a is being split"
[[ $(sqlstate "SELECT move_shard($B, 'node_a')") == 55000 ]] || fail "a move onto node_a started while node_a is being split"
cluster_stop sfstandby immediate; cluster_resume sfstandby
terminated
[[ $(split_state node_a) == sealed ]] || fail "the split cut short once sealed is recorded $(split_state node_a)"
on router -c "SELECT split_node('node_a', 'standby', '$(node_connstr standby)')" >"$work/split1.log" 2>&1 \
  || fail "split_node run again after a crash of the standby failed: $(cat "$work/split1.log")"
[[ $(split_state node_a) == done ]] || fail "the split of node_a is $(split_state node_a)"
echo "1. split held sealed, moves on node_a refused (55000), the standby crashed: completed by split_node again"

# 2. Held once registered; node_b crashed; repair_moves() completes it.
held "split registered" "SELECT split_node('node_b', 'node_c', '$(node_connstr node_c)', by => 'size')"
# The new node hides its copies of the shards node_b keeps (not served: SF001), dropped only
# after the flip.
kept=$(on router -c "SELECT min(m.shard) FROM shard_map m WHERE m.node = 'node_b'")
[[ $(on node_c -c "SELECT count(*) FROM snowflake_id_shards WHERE shard = $kept")/$(on node_c -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_$kept'") == 0/1 ]] \
  || fail "the registered new node serves (or no longer holds) its copy of shard $kept, which node_b keeps"
[[ $(on node_c -v VERBOSITY=sqlstate -c "SELECT use_shard($kept)" 2>&1) == *SF001* ]] || fail "use_shard($kept) on the new node did not answer SF001"
crash node_b
terminated
[[ $(split_state node_b) == registered ]] || fail "the split of node_b cut short once registered is recorded $(split_state node_b)"
on router -c "SELECT * FROM repair_moves()" >"$work/repair2.log" 2>&1 || fail "repair_moves() failed: $(cat "$work/repair2.log")"
[[ $(split_state node_b) == done ]] || fail "repair_moves() left the split of node_b $(split_state node_b): $(cat "$work/repair2.log")"
echo "2. split held registered, node_b crashed: completed by repair_moves()"

# 3. node_a split again, held fenced; a move refused; node_a crashed: the split fails,
# undone; split_node again completes it.
make_standby node_d node_a
held "split fenced" "SELECT split_node('node_a', 'node_d', '$(node_connstr node_d)')"
[[ $(sqlstate "SELECT move_shard(1, 'node_b')") == 55000 ]] || fail "a move of a shard node_a keeps started between the split's check and its seal"
crash node_a
release
wait "$mover" && fail "split_node survived the crash of node_a"
[[ $(split_state node_a) == undone ]] || fail "the split cut short by a crash before its seal is $(split_state node_a): $(cat "$work/mover.log")"
[[ -z $(on node_a -c "SELECT string_agg(x, '; ') FROM snowflake_id_node.leftovers() x") ]] || fail "the undone split left something on node_a"
[[ $(on node_d -c "SELECT pg_is_in_recovery()") == t ]] || fail "the undone split promoted the standby"
streaming node_d
# Run again, held once flipped (the hidden copies on node_d not yet dropped), its caller
# terminated: repair_moves() drops them and completes it.
held "split flipped" "SELECT split_node('node_a', 'node_d', '$(node_connstr node_d)')"
terminated
[[ $(on node_d -c "SELECT count(*) FROM snowflake_id_node.move WHERE key LIKE '%/kept'") == 1 ]] \
  || fail "the new node node_d holds no hidden copies when the split is flipped"
on router -c "SELECT * FROM repair_moves()" >"$work/repair3.log" 2>&1 || fail "repair_moves() failed: $(cat "$work/repair3.log")"
[[ $(split_state node_a) == done ]] || fail "the second split of node_a is $(split_state node_a): $(cat "$work/repair3.log")"
echo "3. split held fenced, a move refused (55000), node_a crashed: undone; run again, held flipped: completed by repair_moves()"

sleep 2
touch "$work"/client{1,2,3,4}.log.stop
wait_writers
on router -F ' ' -c "SELECT s, extract(epoch FROM x.fenced), extract(epoch FROM x.ended) FROM snowflake_id_router.split x, unnest(x.shards) s
                     WHERE x.state = 'done' AND s = ANY ('{$shards}')" >"$work/moves"   # (the moved shards written)
ROUTER_NODES=(node_a node_b standby node_c node_d)
router_invariants "$work" "$work"/client*.log
for n in node_a node_b standby node_c node_d; do
  left=$(on "$n" -c "SELECT string_agg(nspname, ' ') FROM pg_namespace n WHERE nspname ~ '^shard_[0-9]+$'
                        AND NOT EXISTS (SELECT FROM snowflake_id_shards s WHERE s.schema_name = n.nspname)")
  [[ -z $left ]] || fail "$n still has schemas of shards it does not serve: $left"
done
echo "ok"
