#!/usr/bin/env bash
# every version: streaming replication and promotion of this version
# A node failed over to its standby (docs/cluster.md, "Fail a node over to its standby"): a
# router and two data nodes (16 shards made on each); node_b streams to a synchronous
# standby whose clock stands one hour behind (libfaketime). Four client sessions write
# through the router (reliability/router_client.py: inserts on the 32 shards, updates of
# their own rows) for 16 s. Mid-load node_b's postmaster and its processes are killed (-9),
# the standby promoted and `alter_node('node_b', <the standby>)` run. Before that, alter_node
# refuses the standby still in recovery, another database, an unknown node, NULLs and a
# password; node_status shows node_b unreachable. Afterwards (reliability/router_check.py):
# writes to node_b's shards resumed; every acknowledged write is present exactly once, on the
# node the map names; no ID twice; each node_b shard's IDs made after the failover are above
# all of its IDs from before, though the promoted node's clock is an hour behind; and
# shard_status shows those shards' newest IDs about an hour ahead of node_b's clock.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
ROUTER_NODES=(node_a node_b)
NODE_FIRST=([node_a]=0 [node_b]=4096)
NODE_COUNT=([node_a]=4096 [node_b]=4096)
work=$(mktemp -d); chmod 755 "$work"
standby=$(node_dir standby)
trap 'touch "$work"/client{1,2,3,4}.log.stop; sudo -u postgres "$PGBIN/pg_ctl" -D "$standby/data" -m immediate -w stop >/dev/null 2>&1 || true
      router_cluster_down; rm -rf "$work"' EXIT
SHARDS_PER_NODE=16 router_cluster_up

# The standby: a base backup of node_b, streaming, its clock an hour behind, synchronous.
rm -rf "$standby"; mkdir -p "$standby"; chown postgres: "$standby"
sudo -u postgres "$PGBIN/pg_basebackup" -h "$(node_dir node_b)" -p "$(node_port node_b)" -U postgres \
  -D "$standby/data" -R -X stream -c fast
echo "-1h" >"$work/faketime"
sudo -u postgres env $(faketime_env "$work/faketime") "$PGBIN/pg_ctl" -D "$standby/data" -l "$standby/server.log" \
  -o "-p $(node_port standby) -k $standby -c listen_addresses='' -c hot_standby=on -c wal_level=logical -c fsync=off -c max_wal_senders=20 -c max_replication_slots=20" \
  -w start >/dev/null
on node_b -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null
for _ in $(seq 100); do
  [[ $(on node_b -c "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'") == 1 ]] && break
  sleep 0.1
done
[[ $(on node_b -c "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'") == 1 ]] || fail "the standby is not synchronous"
[[ $(on standby -c "SELECT now() < timestamptz '$(date -u +%FT%T)Z' - interval '50 minutes'") == t ]] \
  || fail "libfaketime did not put the standby's clock behind"
[[ $(on router -c "SELECT sync_standbys FROM node_status WHERE node = 'node_b'") == 1 ]] \
  || fail "node_status does not show node_b's synchronous standby"

shards=$(on router -c "SELECT string_agg(s::text, ',') FROM (SELECT generate_series(0, 15) UNION ALL
                        SELECT generate_series(4096, 4111)) g(s)")
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
pids=()
start_writers "$dsn" 16 "$shards"
sleep 5

# node_b's primary dies: the postmaster and every process it started, at once.
pm=$(head -1 "$(node_dir node_b)/data/postmaster.pid")
t_kill=$(date +%s.%N)
sudo -u postgres kill -9 $(pgrep -P "$pm") "$pm" 2>/dev/null || true   # (some exit on their own meanwhile)
[[ $(on router -c "SELECT reachable FROM node_status WHERE node = 'node_b'") == f ]] \
  || fail "node_status shows node_b reachable after its primary was killed"

# sqlstate SQL: the SQLSTATE of SQL run on the router (empty if it succeeds).
sqlstate() { on router -v VERBOSITY=sqlstate -c "$1" 2>&1 | sed -nE 's/.*ERROR:  ([0-9A-Z]{5}).*/\1/p'; }
sc=$(node_connstr standby)
[[ $(sqlstate "SELECT alter_node('node_b', '$sc')") == 55000 ]] || fail "alter_node accepted a standby in recovery"
[[ $(sqlstate "SELECT alter_node('node_b', '$(node_connstr node_a)')") == 55000 ]] || fail "alter_node accepted another database"
[[ $(sqlstate "SELECT alter_node('node_x', '$sc')") == 42704 ]] || fail "alter_node accepted an unknown node"
[[ $(sqlstate "SELECT alter_node(NULL, '$sc')") == 22004 ]] || fail "alter_node accepted a NULL node"
[[ $(sqlstate "SELECT alter_node('node_b', NULL)") == 22004 ]] || fail "alter_node accepted a NULL connect string"
[[ $(sqlstate "SELECT alter_node('node_b', '$sc password=secret')") == 22023 ]] || fail "alter_node accepted a password"
[[ $(on router -c "SELECT connstr FROM snowflake_id_router.node WHERE name = 'node_b'") == *"$(node_port node_b)"* ]] \
  || fail "a refused alter_node changed node_b"

sudo -u postgres "$PGBIN/pg_ctl" -D "$standby/data" -w promote >/dev/null
on router -c "SELECT alter_node('node_b', '$sc')" >/dev/null
t_alter=$(date +%s.%N)
echo "failover: node_b killed, standby promoted and alter_node done in $(python3 -c "print(round($t_alter - $t_kill, 2))") s"
wait_writers

# Every write, and IDs above the old ones on each of node_b's shards.
: >"$work/moves"
for s in $(seq 4096 4111); do echo "$s $t_kill $t_alter" >>"$work/moves"; done
for n in node_a standby; do
  name=$n; [[ $n == standby ]] && name=node_b
  q=$(on "$n" -c "SELECT string_agg(format('SELECT %L, %s, id, body FROM %I.posts', '$name', shard, schema_name), ' UNION ALL ')
                  FROM snowflake_id_shards")
  on "$n" -F ' ' -c "$q" >>"$work/rows"
done
on router -F ' ' -c "SELECT shard, node FROM shard_map" >"$work/map"
"$PYTHON" "$here/router_check.py" "$work/rows" "$work/map" "$work/moves" "$work"/client*.log

read -r reachable recovering <<<"$(on router -F ' ' -c "SELECT reachable, in_recovery FROM node_status WHERE node = 'node_b'")"
[[ $reachable == t && $recovering == f ]] || fail "node_status after the failover: reachable $reachable, in recovery $recovering"
read -r listed ahead <<<"$(on router -F ' ' -c "SELECT count(*), min(ahead_of_clock) > interval '50 minutes'
                                               FROM shard_status WHERE node = 'node_b' AND mapped")"
echo "shard_status: $listed shards on node_b, newest IDs ahead of its clock by more than 50 minutes: $ahead"
[[ $listed == 16 && $ahead == t ]] || fail "shard_status does not show node_b's 16 shards an hour ahead of its clock"
