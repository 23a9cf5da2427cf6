#!/usr/bin/env bash
# versions: 15
# A network that fails (issue 39; docs/cluster.md, "When the network fails"). node_c runs in
# a network namespace of its own, reached over a veth pair: the router and the other nodes
# reach it by TCP only. Four client sessions write through the router, on shards of node_a
# and node_c, the whole time. Each case holds a move at a step (the router's test hook),
# cuts node_c off (its end of the link down: packets vanish, connections hang rather than
# fail), releases the move and times it; then restores the link and runs repair_moves():
#   1  copy      shard 0, node_a -> node_c, cut once replicating ('subscribed'): undone
#   2  fence     shard 1, node_a -> node_c, cut with the source fenced ('fenced'): undone; the
#                shard takes writes on node_a again while node_c is still cut off
#   3  seal      shard 2, node_a -> node_c, cut as the seal goes out ('sealing'): sealed,
#                completed by repair_moves() once the link is back
#   4  clean-up  shard 3, node_a -> node_c, cut right after the flip ('flipped'): done; what
#                node_c held of the move is removed by repair_moves()
#   5  source    shard 5462, node_c -> node_b, cut with node_c fenced ('fenced'): undone
#   6  rebalance node_a drained in batches of 4, node_c cut off once the first is replicating:
#                the drain stops at its batch onto node_c; run again after the link is back,
#                it ends with node_a empty
#   7  follower  router_b, a follower router in node_c's namespace, cut off as shard 4 flips
#                (back onto node_a): the move ends, its old copy kept (sealed) while router_b
#                routes by the old map; once the link is back repair_moves() pushes the map,
#                router_b is current and the old copy gone
# The cut is held 3 s past the move's end (the mover must end while node_c is unreachable).
# Each mover must end within its timeouts (set below: the longest is measured), with an
# error whose SQLSTATE is 57014 or 08xxx, or done; afterwards (router_invariants) nothing
# any move made is left on any node, every move is done or undone, every shard is served
# once, where the map names it, every acknowledged write is present exactly once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
pids=()
ns=sfn$$ veth=sfv$$ net=10.$((200 + $$ % 50)).$(($$ / 50 % 250)).0
down() {
  touch "$work"/client{1,2,3,4}.log.stop; kill "${pids[@]}" 2>/dev/null || true
  cluster_stop sfrouter2; router_cluster_down; ip netns del "$ns" 2>/dev/null || true; ip link del "$veth" 2>/dev/null || true; rm -rf "$work"
}
trap down EXIT

ip netns add "$ns"
ip link add "$veth" type veth peer name "${veth}c"
ip link set "${veth}c" netns "$ns"
ip addr add "${net%.0}.1/24" dev "$veth"; ip link set "$veth" up
ip netns exec "$ns" ip addr add "${net%.0}.2/24" dev "${veth}c"
ip netns exec "$ns" ip link set "${veth}c" up; ip netns exec "$ns" ip link set lo up
link() { ip netns exec "$ns" ip link set "${veth}c" "$1"; }

export NODE_NETNS_node_c=$ns NODE_ADDR_node_c=${net%.0}.2
SHARDS_PER_NODE=12 router_cluster_up
[[ $(on router -c "SELECT connstr FROM snowflake_id_router.node WHERE name = 'node_c'") == *"${net%.0}.2"* ]] \
  || fail "node_c is not reached by TCP"
on router -c "INSERT INTO snowflake_id_router.setting VALUES ('copy_timeout', '10 s'), ('cutover_timeout', '3 s'), ('cleanup_timeout', '5 s')"
shards="0,1,2,3,4,5,6,7,5462,5463,5464,5465"
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
start_writers "$dsn" 900 "$shards"
sleep 2
map() { on router -c "SELECT node FROM shard_map WHERE shard = $1"; }
longest=0

# bounded CASE: the move took (`took`) no longer than its timeouts allow: copy_timeout 10 s,
# lock_timeout 2 s, cutover_timeout 3 s, cleanup_timeout 5 s for each step after the seal,
# and a node call's connect_timeout (10 s) once the link is gone.
bounded() {
  python3 -c "import sys; sys.exit(not $took <= 45)" || fail "$1: the move under the cut ran $took s"
  if python3 -c "import sys; sys.exit(not $took > $longest)"; then longest=$took; fi
}
# cut_at CASE STEP SQL: runs SQL held at STEP, cuts node_c off, releases it, waits for it
# (timed), runs the command $during (if set) while the link is still cut, keeps the cut 3 s
# more, restores it and repairs. Sets `took` and `outcome`.
cut_at() {
  held "$2" "$3"
  link down; local t0; t0=$(now)
  release
  outcome=ok; wait "$mover" || outcome=failed
  took=$(secs "$t0" "$(now)")
  bounded "$1"
  if [[ $outcome == failed ]]; then
    grep -Eq "ERROR:  (57014|08[0-9A-Z]{3}):" "$work/mover.log" || fail "$1: an error other than a timeout or a lost connection: $(cat "$work/mover.log")"
  fi
  echo "  $outcome after $took s: $({ grep -m1 -o 'ERROR: .*' "$work/mover.log" || true; } | cut -c1-160)"
  ${during:-}; during=
  sleep 3; link up
  on router -c "SELECT count(*) FROM repair_moves()" >/dev/null
}
# writes SHARD NODE: a write to SHARD through the router (retried on 40001 for 20 s), and its
# row on NODE.
writes() {
  local id= try
  for try in $(seq 200); do
    id=$(on router -c "SET statement_timeout = '20s'" -c "SELECT insert_post($1, 39, 'after')" 2>"$work/write.err") && break
    grep -q 40001 "$work/write.err" || grep -q "moving to another node" "$work/write.err" || fail "a write to shard $1: $(cat "$work/write.err")"
    sleep 0.1
  done
  [[ -n $id ]] || fail "a write to shard $1 was refused for 20 s: $(cat "$work/write.err")"
  [[ $(on "$2" -c "SELECT count(*) FROM shard_$1.posts WHERE id = $id") == 1 ]] || fail "a write to shard $1 is not on $2"
}

echo "1: node_c cut off during the copy"
cut_at 1 subscribed "SELECT move_shard(0, 'node_c')"
[[ $outcome == failed && $(map 0) == node_a ]] || fail "1: shard 0 is on $(map 0), the move $outcome"
writes 0 node_a

echo "2: node_c cut off with the source fenced"
held fenced "SELECT move_shard(1, 'node_c')"
link down; t0=$(now); release
# The fence dissolves on node_a (its bound: lock_timeout + cutover_timeout + 1 s) though the
# target cannot be told: a write to shard 1 passes there while node_c is still cut off.
writes 1 node_a; echo "  a write to shard 1 passed $(secs "$t0" "$(now)") s after the cut, node_c still cut off"
outcome=ok; wait "$mover" || outcome=failed; took=$(secs "$t0" "$(now)")
bounded 2
echo "  $outcome after $took s: $({ grep -m1 -o 'ERROR: .*' "$work/mover.log" || true; } | cut -c1-160)"
link up; on router -c "SELECT count(*) FROM repair_moves()" >/dev/null
[[ $outcome == failed && $(map 1) == node_a ]] || fail "2: shard 1 is on $(map 1), the move $outcome"

echo "3: node_c cut off as the seal goes out"
cut_at 3 sealing "SELECT move_shard(2, 'node_c')"
[[ $(map 2) == node_c ]] || fail "3: the sealed move of shard 2 was not completed by repair_moves(): on $(map 2)"
writes 2 node_c

echo "4: node_c cut off right after the flip"
cut_at 4 flipped "SELECT move_shard(3, 'node_c')"
[[ $(map 3) == node_c ]] || fail "4: shard 3 is on $(map 3) after its flip"
writes 3 node_c

echo "5: the source, node_c, cut off while fenced"
cut_at 5 fenced "SELECT move_shard(5462, 'node_b')"
[[ $outcome == failed && $(map 5462) == node_c ]] || fail "5: shard 5462 is on $(map 5462), the move $outcome"
writes 5462 node_c

echo "6: node_c cut off during a rebalance's batch"
cut_at 6 subscribed "CALL drain_node('node_a', batch_size => 4)"
grep -q "batch [0-9]* (shard(s) [0-9, ]* from node 'node_a' to node 'node_c')" "$work/mover.log" \
  || fail "6: no batch onto node_c met the cut (the plan changed: adapt the case): $(cat "$work/mover.log")"
on router -c "CALL drain_node('node_a')" >/dev/null
[[ $(on router -c "SELECT count(*) FROM shard_map WHERE node = 'node_a'") == 0 ]] || fail "6: node_a still serves shards after its drain"

echo "7: a follower router cut off during the map push"
b_port=$((ROUTER_PORT + 6))
CLUSTER_WRAP="ip netns exec $ns" cluster_start sfrouter2 "$b_port" "listen_addresses=${net%.0}.2"
echo "host all all ${net%.0}.0/24 trust" >>"$SF_TMP/sfrouter2/data/pg_hba.conf"
sudo -u postgres "$PGBIN/pg_ctl" -D "$SF_TMP/sfrouter2/data" reload >/dev/null
on_b() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 -h "$SF_TMP/sfrouter2" -p "$b_port" -U postgres -d postgres "$@"; }
on_b -c "CREATE EXTENSION snowflake_id_router CASCADE" -f "$here/../router/examples/router.sql" >/dev/null
on router -c "SELECT add_router('router_b', 'host=${net%.0}.2 port=$b_port dbname=postgres user=postgres')" >/dev/null
old=$(map 4)   # (the drain of case 6 moved it off node_a)
kept() {
  [[ $(on "$old" -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_4'") == 1 ]] || fail "7: the old copy went while router_b routes by the old map"
  [[ $(on router -c "SELECT current FROM router_status WHERE name = 'router_b'") == f ]] || fail "7: router_b is said current while cut off"
}
during=kept
cut_at 7 flipping "SELECT move_shard(4, 'node_a')"
[[ $(map 4) == node_a && $(on_b -c "SELECT node FROM shard_map WHERE shard = 4") == node_a ]] \
  || fail "7: shard 4 is on $(map 4) for the primary, $(on_b -c "SELECT node FROM shard_map WHERE shard = 4") for router_b after the push"
[[ $(on router -c "SELECT current FROM router_status WHERE name = 'router_b'") == t ]] || fail "7: router_b is not current after repair_moves()"
[[ $(on "$old" -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_4'") == 0 ]] || fail "7: shard 4's old copy stays on $old"
on router -c "SELECT remove_router('router_b')" >/dev/null

echo "the longest move under a cut: $longest s"
touch "$work"/client{1,2,3,4}.log.stop
wait_writers
router_invariants "$work" "$work"/client{1,2,3,4}.log
echo "t_network_faults: OK"
