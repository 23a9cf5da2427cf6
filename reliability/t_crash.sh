#!/usr/bin/env bash
# every version: crash recovery of the sequence state
# Crashes: (1) kill -9 a backend in the middle of a burst (the postmaster restarts every
# backend and replays WAL), (2) pg_ctl stop -m immediate in the middle of a burst, then a
# restart with the clock stepped back 10 s (libfaketime). After each, generation resumes
# and every new ID is greater than every ID committed before the crash.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
work=$(mktemp -d); chmod 755 "$work"
clock=$work/faketime
CLUSTER_ENV=$(faketime_env "$clock") cluster_start relcrash 55445
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
  assert_new_ids_above "  crash (committed before, issued after)" "$before" "$min_new" "$dup"
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
cluster_stop relcrash immediate
wait || true
echo "-10s" > "$clock"
cluster_resume relcrash
wait_until_ready
behind=$(q -c "SELECT clock_timestamp() < timestamptz '$(date -u +%FT%T)Z' - interval '8 s'")
[[ $behind == t ]] || fail "the clock was not stepped back for the restart"
before=$(q -c "SELECT max(id) FROM t")
echo "  $(q -c "SELECT count(*) FROM t") rows committed before the crash"
check_after "$before" 4
