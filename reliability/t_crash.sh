#!/usr/bin/env bash
# Crashes: (1) kill -9 a backend in the middle of a burst (the postmaster restarts every
# backend and replays WAL), (2) pg_ctl stop -m immediate in the middle of a burst, then a
# restart with the clock stepped back 10 s (libfaketime). After each, generation resumes
# and every new ID is greater than every ID committed before the crash.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
work=$(mktemp -d); chmod 755 "$work"
clock=$work/faketime; echo "+0" > "$clock"; chmod 644 "$clock"
export CLUSTER_ENV="LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 FAKETIME_TIMESTAMP_FILE=$clock FAKETIME_NO_CACHE=1"
cluster_start relcrash 55445
data=$SF_TMP/relcrash/data
trap 'cluster_stop relcrash; rm -rf "$work"' EXIT
setup_generator postgres
q -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT $GEN, round int)"

# burst ROUND: many small committed transactions from 3 sessions, until killed.
burst() {
  for s in 1 2 3; do
    (for i in $(seq 1 100000); do q -c "INSERT INTO t (round) SELECT $1 FROM generate_series(1, 50000)" 2>/dev/null || exit 0; done) &
  done
}
wait_until_ready() { for _ in $(seq 1 60); do q -c "SELECT 1" >/dev/null 2>&1 && return 0; sleep 0.5; done; fail "server did not come back"; }
check_after() {  # ROUND: new IDs issued after the crash are above the max committed before it
  local before=$1 round=$2
  q -c "INSERT INTO t (round) SELECT $round FROM generate_series(1, 100000)"
  read -r min_new dup <<<"$(q -F ' ' -c "SELECT min(id) FILTER (WHERE round = $round), count(*) - count(DISTINCT id) FROM t")"
  echo "  max committed before: $before, min issued after: $min_new, duplicates: $dup"
  [[ $dup == 0 ]] || fail "$dup duplicate IDs"
  ((min_new > before)) || fail "an ID issued after the crash ($min_new) is not above the max committed before ($before)"
}

echo "kill -9 of a backend mid-burst"
burst 1; sleep 3
victim=
for _ in $(seq 1 50); do
  victim=$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND state = 'active' AND pid <> pg_backend_pid() LIMIT 1")
  [[ -z $victim ]] || break; sleep 0.1
done
[[ -n $victim ]] || fail "no backend to kill"
kill -9 "$victim"; wait || true
wait_until_ready
before=$(q -c "SELECT max(id) FROM t")
echo "  $(q -c "SELECT count(*) FROM t") rows committed before the crash"
check_after "$before" 2

echo "pg_ctl stop -m immediate mid-burst, restart with the clock 10 s behind"
burst 3; sleep 3
sudo -u postgres "$PGBIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null
wait || true
echo "-10s" > "$clock"
sudo -u postgres env $CLUSTER_ENV "$PGBIN/pg_ctl" -D "$data" -l "$SF_TMP/relcrash/server.log" \
  -o "-p $PGPORT -k $PGHOST -c listen_addresses=''" -w start >/dev/null
wait_until_ready
behind=$(q -c "SELECT clock_timestamp() < timestamptz '$(date -u +%FT%T)Z' - interval '8 s'")
[[ $behind == t ]] || fail "the clock was not stepped back for the restart"
before=$(q -c "SELECT max(id) FROM t")
echo "  $(q -c "SELECT count(*) FROM t") rows committed before the crash"
check_after "$before" 4
