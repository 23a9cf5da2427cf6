#!/usr/bin/env bash
# every version: the sequence state on a promoted standby
# Failover: a streaming standby made with pg_basebackup (over the primary's unix socket).
# IDs are generated on the primary; next_id on the standby is refused (25006); once the
# standby has replayed the primary's WAL (we wait for it: asynchronous replication would
# lose the unreplicated tail, rows and IDs alike), it is promoted and generates: every ID
# there is greater than every ID committed on the primary, though the standby's clock runs
# 10 s behind the primary's (libfaketime).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
cluster_start relprimary 55446
primary=$PGHOST
standby=$SF_TMP/relstandby
rm -rf "$standby"; mkdir -p "$standby"; chown postgres: "$standby"
trap 'sudo -u postgres "$PGBIN/pg_ctl" -D "$standby/data" -m fast -w stop >/dev/null 2>&1; cluster_stop relprimary' EXIT
setup_generator postgres
q -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT $GEN, node text)"
q -c "INSERT INTO t (node) SELECT 'primary' FROM generate_series(1, 200000)"
sudo -u postgres "$PGBIN/pg_basebackup" -h "$primary" -p 55446 -U postgres -D "$standby/data" -R -X stream -c fast
echo "-10s" > "$standby/faketime"
sudo -u postgres env $(faketime_env "$standby/faketime") "$PGBIN/pg_ctl" -D "$standby/data" -l "$standby/server.log" \
  -o "-p 55447 -k $standby -c listen_addresses='' -c hot_standby=on" -w start >/dev/null
# More IDs on the primary while the standby streams.
q -c "INSERT INTO t (node) SELECT 'primary' FROM generate_series(1, 300000)"
primary_max=$(q -c "SELECT max(id) FROM t")
target=$(q -c "SELECT pg_current_wal_lsn()")
for _ in $(seq 1 100); do
  caught_up=$(q -h "$standby" -p 55447 -c "SELECT pg_last_wal_replay_lsn() >= '$target'::pg_lsn")
  [[ $caught_up == t ]] && break; sleep 0.1
done
[[ $caught_up == t ]] || fail "the standby did not replay the primary's WAL"
refused=$(psql -X -At -h "$standby" -p 55447 -v VERBOSITY=sqlstate -c "SELECT $GEN" 2>&1 || true)
echo "  next_id on the standby: $refused"
[[ $refused == *25006* ]] || fail "the standby did not refuse with 25006: $refused"
sudo -u postgres "$PGBIN/pg_ctl" -D "$standby/data" -w promote >/dev/null
cluster_stop relprimary   # the old primary is gone
q -h "$standby" -p 55447 -c "INSERT INTO t (node) SELECT 'promoted' FROM generate_series(1, 200000)"
read -r min_new dup <<<"$(q -h "$standby" -p 55447 -F ' ' -c "SELECT min(id) FILTER (WHERE node = 'promoted'), count(*) - count(DISTINCT id) FROM t")"
assert_new_ids_above "failover (primary, then the promoted standby 10 s behind)" "$primary_max" "$min_new" "$dup"
