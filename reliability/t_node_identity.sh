#!/usr/bin/env bash
# every version: streaming replication and promotion of this version
# Node identity (docs/cluster.md, "A node's identity"): a node is known by the mark the
# router writes into it when it registers it, with its system identifier and database OID.
# node_c and node_d are two copies of one initdb (the same system identifier and database
# OID): both register, as the different nodes they are, and alter_node refuses to repoint
# one to the other. A second name for node_a, or for node_d, is refused (42710). A streaming
# standby of node_b (pg_basebackup -R) carries node_b's mark: refused while in recovery,
# accepted by alter_node once promoted; node_b's old primary, restarted, is then refused
# under a new name, as it is node_b. A node registered by 0.3.0 (no mark) is given its mark by
# alter_node.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
ROUTER_NODES=(node_a node_b)
standby=$(node_dir standby)
trap 'for d in "$standby" "$(node_dir node_c)" "$(node_dir node_d)"; do
        sudo -u postgres "$PGBIN/pg_ctl" -D "$d/data" -m immediate -w stop >/dev/null 2>&1 || true; done
      router_cluster_down' EXIT
SHARDS_PER_NODE=4 router_cluster_up
sqlstate() { on router -v VERBOSITY=sqlstate -c "$1" 2>&1 | sed -nE 's/.*ERROR:  ([0-9A-Z]{5}).*/\1/p'; }
mark() { on "$1" -c "SELECT snowflake_id_node.node_mark()"; }

# Two copies of one initdb: node_c made and stopped, its data directory copied to node_d.
node_start node_c
on node_c -c "CREATE EXTENSION snowflake_id" >/dev/null
cluster_stop sfnode_c
rm -rf "$(node_dir node_d)"; cp -a "$(node_dir node_c)" "$(node_dir node_d)"
sed -e "s|-p $(node_port node_c) -k $(node_dir node_c)|-p $(node_port node_d) -k $(node_dir node_d)|" \
  "$(node_dir node_c)/options" >"$(node_dir node_d)/options"
cluster_resume sfnode_c; cluster_resume sfnode_d
[[ $(on node_c -c "SELECT snowflake_id_node.identity()") == $(on node_d -c "SELECT snowflake_id_node.identity()") ]] \
  || fail "the copies of one initdb do not share system identifier and database OID"
on router -c "SELECT add_node('node_c', '$(node_connstr node_c)')" >/dev/null
on router -c "SELECT add_node('node_d', '$(node_connstr node_d)')" >/dev/null \
  || fail "add_node refused the second copy of one initdb as a node of its own"
[[ -n $(mark node_c) && -n $(mark node_d) && $(mark node_c) != "$(mark node_d)" ]] \
  || fail "the copies were not given marks of their own: '$(mark node_c)' '$(mark node_d)'"
echo "two copies of one initdb registered as node_c and node_d, marks $(mark node_c) and $(mark node_d)"
[[ $(on router -c "SELECT count(*) FROM node_status WHERE node IN ('node_c', 'node_d') AND reachable") == 2 ]] \
  || fail "node_status does not reach both copies"
[[ $(sqlstate "SELECT alter_node('node_c', '$(node_connstr node_d)')") == 55000 ]] \
  || fail "alter_node repointed node_c to node_d, another node of the same initdb"

# One server under two names.
[[ $(sqlstate "SELECT add_node('node_a2', '$(node_connstr node_a) application_name=again')") == 42710 ]] \
  || fail "add_node accepted node_a under a second name"
[[ $(sqlstate "SELECT add_node('node_d2', '$(node_connstr node_d) application_name=again')") == 42710 ]] \
  || fail "add_node accepted node_d under a second name"

# A streaming standby of node_b, promoted: node_b failed over.
rm -rf "$standby"; mkdir -p "$standby"; chown postgres: "$standby"
sudo -u postgres "$PGBIN/pg_basebackup" -h "$(node_dir node_b)" -p "$(node_port node_b)" -U postgres \
  -D "$standby/data" -R -X stream -c fast
sudo -u postgres "$PGBIN/pg_ctl" -D "$standby/data" -l "$standby/server.log" \
  -o "-p $(node_port standby) -k $standby -c listen_addresses='' -c hot_standby=on -c wal_level=logical -c fsync=off -c max_wal_senders=20 -c max_replication_slots=20" \
  -w start >/dev/null
[[ $(mark standby) == "$(mark node_b)" ]] || fail "the standby does not carry node_b's mark"
sc=$(node_connstr standby)
[[ $(sqlstate "SELECT add_node('node_b2', '$sc')") == 42710 ]] || fail "add_node accepted node_b's standby as a new node"
[[ $(sqlstate "SELECT alter_node('node_b', '$sc')") == 55000 ]] || fail "alter_node accepted a standby in recovery"
[[ $(sqlstate "SELECT alter_node('node_a', '$sc')") == 55000 ]] || fail "alter_node accepted node_b's standby for node_a"
cluster_stop sfnode_b
sudo -u postgres "$PGBIN/pg_ctl" -D "$standby/data" -w promote >/dev/null
on router -c "SELECT alter_node('node_b', '$sc')" >/dev/null || fail "alter_node refused node_b's promoted standby"
[[ $(on router -c "SELECT reachable FROM node_status WHERE node = 'node_b'") == t ]] || fail "node_b unreachable after the failover"
[[ $(on router -c "SELECT count(*) FROM shard_status WHERE node = 'node_b' AND mapped") == 4 ]] \
  || fail "shard_status does not show node_b's shards on its promoted standby"
echo "node_b failed over to its promoted standby (mark $(mark standby))"
# The old primary, back: it is node_b, not a new node.
cluster_resume sfnode_b
[[ $(sqlstate "SELECT add_node('node_b_old', '$(node_connstr node_b)')") == 42710 ]] \
  || fail "add_node accepted node_b's old primary as a new node"

# A node registered by 0.3.0 (no mark, identity system identifier/database OID): reached as
# before, a second name refused by the 0.3.0 rule, given its mark by alter_node.
on node_a -c "DELETE FROM snowflake_id_node.node_mark" >/dev/null
on router -c "UPDATE snowflake_id_router.node SET identity = snowflake_id_router.database_of(identity) WHERE name = 'node_a'"
[[ $(on router -c "SELECT reachable FROM node_status WHERE node = 'node_a'") == t ]] || fail "node_a registered without a mark unreachable"
[[ $(sqlstate "SELECT add_node('node_a2', '$(node_connstr node_a) application_name=again')") == 42710 ]] \
  || fail "add_node accepted node_a (registered without a mark) under a second name"
on router -c "SELECT alter_node('node_a', '$(node_connstr node_a)')" >/dev/null
[[ -n $(mark node_a) && $(on router -c "SELECT identity FROM snowflake_id_router.node WHERE name = 'node_a'") == */"$(mark node_a)" ]] \
  || fail "alter_node did not give node_a (registered without a mark) its mark"
echo "ok"
