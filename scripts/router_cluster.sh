# A router and three data nodes on one machine, on unix sockets under $SF_TMP (source this
# file after scripts/cluster.sh). Throwaway clusters, as the other scripts make them.
#   router_cluster_up        start sfrouter + sfnode_a..c, install, map, example functions
#   router_cluster_down      stop them
# Settings (environment): ROUTER_PORT (55490; nodes take the next three ports),
# SHARDS_PER_NODE (16: shards made on each node, the first of its range),
# NODE_ENV_node_c etc. (extra postmaster environment for one node, e.g. libfaketime),
# NODE_NETNS_node_c and NODE_ADDR_node_c (a network namespace its postmaster runs in and the
# address there it listens on, which its connect string names: reliability/t_network_faults.sh),
# ROUTER_TCP (an address on loopback, e.g. 127.0.0.1: every server listens there too and the
# nodes' connect strings name it, for clients that speak TCP only, such as pgjdbc; then take
# ROUTER_PORT from free_ports, TCP ports being shared by the whole machine).
ROUTER_PORT=${ROUTER_PORT:-55490}
ROUTER_TCP=${ROUTER_TCP:-}
SHARDS_PER_NODE=${SHARDS_PER_NODE:-16}
ROUTER_NODES=(node_a node_b node_c)
# The 8192 shards in three ranges, one per node: first shard and count.
declare -A NODE_FIRST=([node_a]=0 [node_b]=2731 [node_c]=5462)
declare -A NODE_COUNT=([node_a]=2731 [node_b]=2731 [node_c]=2730)
_router_here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Debian's python3, which has python3-psycopg2 (scripts/setup), whatever else is on PATH.
PYTHON=${PYTHON:-/usr/bin/python3}

# Ports: the router's, then node_a..node_d, then a standby (reliability/t_cluster_failover.sh).
node_port() {
  case $1 in node_a) echo $((ROUTER_PORT + 1)) ;; node_b) echo $((ROUTER_PORT + 2)) ;; node_c) echo $((ROUTER_PORT + 3)) ;;
             node_d) echo $((ROUTER_PORT + 4)) ;; standby) echo $((ROUTER_PORT + 5)) ;; esac
}
node_dir() { echo "$SF_TMP/sf$1"; }
node_addr() { local var="NODE_ADDR_$1"; echo "${!var:-${ROUTER_TCP:-}}"; }
node_connstr() { local a; a=$(node_addr "$1"); echo "host=${a:-$(node_dir "$1")} port=$(node_port "$1") dbname=postgres user=postgres"; }
# free_ports N: the first of N consecutive ports free on loopback (for ROUTER_PORT with ROUTER_TCP).
free_ports() {
  python3 -c 'import random, socket, sys
n = int(sys.argv[1])
while True:
    base, ok = random.randrange(20000, 60000 - n), []
    for p in range(base, base + n):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); ok.append(s)
        except OSError:
            break
    if len(ok) == n:
        print(base); break' "$1"
}
# psql on a node or on the router (first argument: node name or "router").
on() {
  local who=$1; shift
  if [[ $who == router ]]; then
    PGOPTIONS="-c client_min_messages=warning -c role=none" psql -X -q -At -v ON_ERROR_STOP=1 -h "$SF_TMP/sfrouter" -p "$ROUTER_PORT" -U postgres -d postgres "$@"
  else
    PGOPTIONS="-c client_min_messages=warning -c role=none" psql -X -q -At -v ON_ERROR_STOP=1 -h "$(node_dir "$who")" -p "$(node_port "$who")" -U postgres -d postgres "$@"
  fi
}

# node_start NAME [OPTION=VALUE...]: (re)starts a data node's cluster (fresh), with
# wal_level = logical and the options given.
node_start() {
  local var="NODE_ENV_$1" ns="NODE_NETNS_$1" addr; addr=$(node_addr "$1")
  CLUSTER_ENV=${!var:-} CLUSTER_WRAP=${!ns:+ip netns exec ${!ns}} \
    cluster_start "sf$1" "$(node_port "$1")" wal_level=logical fsync=off max_wal_senders=20 max_replication_slots=20 wal_retrieve_retry_interval=100ms \
    ${addr:+listen_addresses=$addr} "${@:2}"
  if [[ -n ${!ns:-} ]]; then   # (initdb -A trust trusts loopback only)
    echo "host all all ${addr%.*}.0/24 trust" >>"$(node_dir "$1")/data/pg_hba.conf"
    sudo -u postgres "$PGBIN/pg_ctl" -D "$(node_dir "$1")/data" reload >/dev/null
  fi
}
# node_restart NAME: restarts a node's existing cluster (after a crash), same options.
node_restart() {
  local var="NODE_ENV_$1" dir; dir=$(node_dir "$1")
  local try
  # After a kill -9 of the postmaster its children take a moment to exit; until then the
  # old shared memory is in use and a new postmaster refuses to start.
  for try in $(seq 50); do
    rm -f "$dir/data/postmaster.pid" "$dir/.s.PGSQL.$(node_port "$1").lock"
    $(cat "$dir/wrap" 2>/dev/null) sudo -u postgres env ${!var:-} "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" \
      -o "$(cat "$dir/options")" \
      -w start >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

router_cluster_up() {
  local n p pids=()
  for n in "${ROUTER_NODES[@]}"; do node_start "$n"; done
  # The nodes' shards are made side by side.
  for n in "${ROUTER_NODES[@]}"; do
    on "$n" -c "CREATE EXTENSION snowflake_id" -f "$_router_here/router/examples/node.sql" \
      -c "SELECT count(create_shard('shard_' || s, s, template => 'tpl'))
            FROM generate_series(${NODE_FIRST[$n]}, ${NODE_FIRST[$n]} + $SHARDS_PER_NODE - 1) s" >/dev/null & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  cluster_start sfrouter "$ROUTER_PORT" ${ROUTER_TCP:+listen_addresses=$ROUTER_TCP}
  on router -c "CREATE EXTENSION snowflake_id_router CASCADE" >/dev/null
  for n in "${ROUTER_NODES[@]}"; do
    on router -c "SELECT add_node('$n', '$(node_connstr "$n")')" \
      -c "SELECT assign_shards(${NODE_FIRST[$n]}, ${NODE_COUNT[$n]}, '$n')" >/dev/null
  done
  on router -f "$_router_here/router/examples/router.sql"
}

router_cluster_down() {
  local n
  cluster_stop sfrouter
  for n in "${ROUTER_NODES[@]}"; do cluster_stop "sf$n"; done
}

# router_invariants WORK [CLIENT_LOG...]: what must hold after any move, finished, failed or
# interrupted and repaired (docs/cluster-design.md; reliability tests call it after they
# move, and `fail` comes from reliability/lib.sh):
#   - nothing a move makes is left on any node (snowflake_id_node.leftovers(): move records,
#     slots, publications, subscriptions, fence triggers, marker tables);
#   - every move on the router is done or undone;
#   - each shard a node serves (its snowflake_id_shards) is served there only, and the map
#     names that node;
#   - with client logs (reliability/router_client.py): every write the router acknowledged
#     is present exactly once, on the node the map names, with its last acknowledged body,
#     and no ID appears twice over all nodes (reliability/router_check.py). WORK/moves, if
#     present, lists moves whose new IDs must lie above the old ones (router_check.py).
router_invariants() {
  local work=$1 n left; shift
  for n in "${ROUTER_NODES[@]}"; do
    left=$(on "$n" -c "SELECT string_agg(x, '; ') FROM snowflake_id_node.leftovers() x")
    [[ -z $left ]] || fail "left on $n by a move: $left"
  done
  left=$(on router -c "SELECT string_agg(format('move %s (shards %s) %s', id, shards, state), '; ')
                         FROM snowflake_id_router.move WHERE state NOT IN ('done', 'undone')")
  [[ -z $left ]] || fail "moves neither done nor undone: $left"
  on router -F ' ' -c "SELECT shard, node FROM shard_map" >"$work/map"
  : >"$work/served"; : >"$work/rows"
  for n in "${ROUTER_NODES[@]}"; do
    on "$n" -F ' ' -c "SELECT shard, '$n' FROM snowflake_id_shards" >>"$work/served"
  done
  left=$(sort "$work/served" | awk 'NR == FNR { map[$1] = $2; next }
           { if (seen[$1]++) print "shard " $1 " served twice"; if (map[$1] != $2) print "shard " $1 " served by " $2 ", the map names " map[$1] }' \
           "$work/map" - | head -5)
  [[ -z $left ]] || fail "shards served where the map does not name: $left"
  if (($#)); then
    for n in "${ROUTER_NODES[@]}"; do
      q=$(on "$n" -c "SELECT string_agg(format('SELECT %L, %s, id, body FROM %I.posts', '$n', shard, schema_name), ' UNION ALL ')
                      FROM snowflake_id_shards")
      [[ -z $q ]] || on "$n" -F ' ' -c "$q" >>"$work/rows"
    done
    [[ -f $work/moves ]] || : >"$work/moves"
    "$PYTHON" "$_router_here/reliability/router_check.py" "$work/rows" "$work/map" "$work/moves" "$@" \
      || fail "acknowledged writes and what the nodes hold disagree (above)"
  fi
  echo "router invariants: nothing left by moves on $(IFS=,; echo "${ROUTER_NODES[*]}"), every shard served once where the map names it"
}

# apps_stop: for the tests whose four application clients (pids, writing logs in $work)
# stop once $work/clientN.log.stop exists: stops them, fails if an error reached one, prints
# their output and checks router_invariants over their logs.
apps_stop() {
  local c i failed=0
  for c in 1 2 3 4; do touch "$work/client$c.log.stop"; done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed=1; done
  pids=()
  cat "$work"/client*.err >&2
  ((failed == 0)) || fail "an error reached an application (above)"
  cat "$work"/client*.out
  router_invariants "$work" "${logs[@]}"
}

# For tests that hold a move at a step (the router's test hook snowflake_id_router.breakpoint);
# they set `work` (where mover.log goes).
now() { date +%s.%N; }
secs() { python3 -c "print(round($2 - $1, 2))"; }
# held STEP SQL [OPTIONS]: runs SQL on the router in the background (the session's PGOPTIONS
# OPTIONS), held at breakpoint STEP; sets mover (the psql's pid) and mpid (the mover's
# backend) once it is there. Its notices and errors (with their SQLSTATE) go to mover.log.
held() {
  on router -c "INSERT INTO snowflake_id_router.breakpoint (step) VALUES ('$1')"
  PGOPTIONS="-c client_min_messages=notice ${3:-}" psql -X -q -At -v VERBOSITY=verbose -h "$SF_TMP/sfrouter" \
    -p "$ROUTER_PORT" -U postgres -d postgres -c "$2" >"$work/mover.log" 2>&1 & mover=$!
  mpid=
  for _ in $(seq 600); do
    mpid=$(on router -c "SELECT pid FROM snowflake_id_router.breakpoint WHERE reached IS NOT NULL LIMIT 1")
    [[ -n $mpid ]] && return 0
    kill -0 "$mover" 2>/dev/null || fail "'$2' ended before step '$1': $(cat "$work/mover.log")"
    sleep 0.05
  done
  fail "'$2' did not reach step '$1'"
}
release() { on router -c "DELETE FROM snowflake_id_router.breakpoint"; }
