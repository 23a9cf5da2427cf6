#!/usr/bin/env bash
# Prometheus (monitoring/, docs/monitoring.md): Debian's postgres_exporter (0.11) with
# monitoring/queries.yaml, started against scripts/router_cluster.sh's router (three nodes,
# and a follower router added), connected as the role monitoring/grants.sql makes (no
# superuser); its /metrics scraped with curl. Healthy: every metric the queries file defines
# is scraped, every node reachable, nothing left over, the follower current, and on the
# scraped series no rule of monitoring/alerts.yml fires (promtool test rules,
# reliability/metrics_check.py). Then five faults: a replication slot named as a move's left
# on node_a, node_c stopped, the follower stopped while the map changes (alter_node), a
# shard of node_b whose newest ID is an hour ahead of the clock, a move that failed (its
# target held a schema of the shard's name). Each shows in the metric its alert reads, and
# on the scraped series exactly those five alerts fire, each for that node or router only.
# Prints the values and what a scrape costs (the exporter's time and each
# query's, as the monitoring role).
# Once: the exporter reads only the router's views, the same SQL on every version, and it is
# Debian 12's package, on the host (not in the chroots of 17 and 19); 15 is Debian 12's own.
# versions: 15
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/..
source "$root/scripts/cluster.sh"; source "$here/lib.sh"
source "$root/scripts/router_cluster.sh"; source "$root/monitoring/exporter.sh"
bash "$root/scripts/setup" monitoring   # the exporter and promtool (waits while CI's set-up installs them)
work=$(mktemp -d); chmod 755 "$work"
ROUTER_B_PORT=$((ROUTER_PORT + 6))
trap 'exporter_stop; cluster_stop sfrouter2; router_cluster_down; rm -rf "$work"' EXIT
on_b() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 -h "$SF_TMP/sfrouter2" -p "$ROUTER_B_PORT" -U postgres -d postgres "$@"; }

SHARDS_PER_NODE=16 router_cluster_up >/dev/null
cluster_start sfrouter2 "$ROUTER_B_PORT"
on_b -c "CREATE EXTENSION snowflake_id_router CASCADE" >/dev/null
on router -c "SELECT add_router('router_b', 'host=$SF_TMP/sfrouter2 port=$ROUTER_B_PORT dbname=postgres user=postgres')" >/dev/null
on router -f "$root/monitoring/grants.sql"
[[ $(on router -c "SELECT rolsuper OR pg_has_role(oid, 'pg_monitor', 'MEMBER') FROM pg_roles WHERE rolname = 'snowflake_id_monitor'") == f ]] \
  || fail "the monitoring role is a superuser or a pg_monitor member"
err=$(psql -X -At -h "$SF_TMP/sfrouter" -p "$ROUTER_PORT" -U snowflake_id_monitor -d postgres -c "SELECT * FROM repair_moves()" 2>&1 || true)
[[ $err == *"permission denied"* ]] || fail "the monitoring role may call repair_moves(): $err"

# scrape_to NAME: /metrics into $work/NAME.prom; prints the scrape's seconds.
scrape_to() { scrape "$work/$1.prom" || fail "scraping /metrics failed"; }
# value NAME METRIC [LABEL=VALUE]: the scraped value of that series.
value() {
  local pat="^$2"
  if (($# > 2)); then pat+="\\{([^}]*,)?${3%%=*}=\"${3#*=}\"[,}]"; else pat+="[ {]"; fi
  grep -E "$pat" "$work/$1.prom" | awk '{print $2}' | head -1
}
# is NAME METRIC LABEL=VALUE EXPECTED: that series has that value.
is() {
  local v; v=$(value "$1" "$2" "$3")
  [[ $v == "$4" ]] || fail "$2{$3} is '$v' in the $1 scrape, not $4"
}

exporter_start "$work/exporter.log"
t_healthy=$(scrape_to healthy)
[[ $(value healthy pg_exporter_last_scrape_error) == 0 ]] \
  || fail "the exporter's queries failed: $(grep -i error "$work/exporter.log" | tail -3)"
"$PYTHON" "$here/metrics_check.py" present "$root/monitoring/queries.yaml" "$work/healthy.prom"
for n in node_a node_b node_c; do
  is healthy snowflake_id_node_reachable node=$n 1
  is healthy snowflake_id_node_leftovers node=$n 0
  is healthy snowflake_id_node_shards_served node=$n 16
  is healthy snowflake_id_shards_ahead_of_clock node=$n 0
done
is healthy snowflake_id_follower_current router=router_b 1
"$PYTHON" "$here/metrics_check.py" alerts "$root/monitoring/alerts.yml" "$work/healthy.prom" "$work"
echo "healthy: scraped in ${t_healthy} s (the exporter's own time: $(value healthy pg_exporter_last_scrape_duration_seconds) s)"
"$PYTHON" "$here/metrics_check.py" cost "$root/monitoring/queries.yaml" "$MONITOR_DSN"

# The faults. A replication slot named as a move's makes (sfid_<router>_<move>), with no move.
on node_a -c "SELECT pg_create_logical_replication_slot('sfid_0badc0de_1', 'pgoutput')" >/dev/null
# A move that fails for real: its target holds a schema of the shard's name (42P06), undone.
on node_b -c "CREATE SCHEMA shard_1"
err=$(on router -c "SELECT move_shard(1, 'node_b')" 2>&1 || true)
[[ $err == *"42P06"* || $err == *"already has a schema"* ]] || fail "the move onto a squatted schema did not fail as expected: $err"
on node_b -c "DROP SCHEMA shard_1"
cluster_stop sfnode_c
cluster_stop sfrouter2
on router -c "SELECT alter_node('node_a', '$(node_connstr node_a) connect_timeout=9')" >/dev/null 2>&1
seq=$(on node_b -c "SELECT sequence::regclass FROM snowflake_id_shards WHERE shard = 2731")
on node_b -c "SELECT setval('$seq', make_id(now() + interval '1 hour', 2731, 0))" >/dev/null
# Restarted: the shards' query is cached for 5 minutes (queries.yaml), and the first scrape filled it.
exporter_stop; exporter_start "$work/exporter.log"
t_faults=$(scrape_to faults)
is faults snowflake_id_node_reachable node=node_a 1
is faults snowflake_id_node_reachable node=node_b 1
is faults snowflake_id_node_reachable node=node_c 0
is faults snowflake_id_node_leftovers node=node_a 1
is faults snowflake_id_node_leftover_slots node=node_a 1
is faults snowflake_id_node_leftovers node=node_b 0
is faults snowflake_id_follower_current router=router_b 0
is faults snowflake_id_shards_ahead_of_clock node=node_b 1
is faults snowflake_id_shards_ahead_of_clock node=node_a 0
[[ $(value faults snowflake_id_moves_undone_last_hour) == 1 && $(value faults snowflake_id_moves_undone_total) == 1 ]] \
  || fail "the failed move is not counted: undone_last_hour $(value faults snowflake_id_moves_undone_last_hour), undone_total $(value faults snowflake_id_moves_undone_total)"
[[ $(value healthy snowflake_id_moves_undone_total) == 0 ]] || fail "a move was undone before the faults"
[[ $(value faults snowflake_id_node_slot_wal_bytes node=node_a) != NaN ]] || fail "node_a's slot holds no WAL in the scrape"
awk -v v="$(value faults snowflake_id_follower_behind_seconds router=router_b)" 'BEGIN { exit !(v > 0) }' \
  || fail "router_b is not behind for any time in the scrape"
awk -v v="$(value faults snowflake_id_shards_ahead_of_clock_max_seconds node=node_b)" 'BEGIN { exit !(v > 3500) }' \
  || fail "node_b's shard does not lead the clock by an hour in the scrape"
echo "faults scraped in ${t_faults} s:"
grep -E '^snowflake_id_(node_(reachable|leftovers|leftover_slots|slot_wal_bytes)|follower_(current|behind_seconds)|shards_ahead_of_clock(_max_seconds)?)\{' \
  "$work/faults.prom" | sed -E 's/,?server="[^"]*"//; s/\{\}//; s/^/  /'
"$PYTHON" "$here/metrics_check.py" alerts "$root/monitoring/alerts.yml" "$work/faults.prom" "$work" \
  SnowflakeIdNodeUnreachable:node=node_c SnowflakeIdLeftovers:node=node_a \
  SnowflakeIdFollowerBehind:router=router_b SnowflakeIdIdsAheadOfClock:node=node_b SnowflakeIdMoveFailed
"$PYTHON" "$here/metrics_check.py" cost "$root/monitoring/queries.yaml" "$MONITOR_DSN"
exporter_stop
on node_a -c "SELECT pg_drop_replication_slot('sfid_0badc0de_1')" >/dev/null
