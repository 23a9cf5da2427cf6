#!/usr/bin/env bash
# every version: sequence state under load
# Load: 8 pgbench sessions for RELIABILITY_LOAD_SECONDS (default 60) on ONE shard's
# sequence, then on 8 shards (one sequence each), inserting 100 rows per transaction into a
# table with a primary key. Asserts zero errors (pgbench's failed/aborted counts and exit
# code), zero unique violations, and reports IDs per second.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
seconds=${RELIABILITY_LOAD_SECONDS:-60}
work=$(mktemp -d)
cluster_start relload 55448 max_connections=50
trap 'cluster_stop relload; rm -rf "$work"' EXIT
setup_generator postgres
q -c "CREATE TABLE one_shard (id bigint PRIMARY KEY DEFAULT $GEN, at timestamptz DEFAULT clock_timestamp())"
q -c "CREATE TABLE eight_shards (id bigint PRIMARY KEY, at timestamptz DEFAULT clock_timestamp())"
for i in 0 1 2 3 4 5 6 7; do q -c "CREATE SEQUENCE s$i"; done
echo "INSERT INTO one_shard (at) SELECT clock_timestamp() FROM generate_series(1, 100);" > "$work/one.sql"
echo "INSERT INTO eight_shards (id) SELECT next_id(:client_id, ('s' || :client_id)::regclass) FROM generate_series(1, 100);" > "$work/eight.sql"
run() {  # NAME SCRIPT TABLE
  local log=$work/$1.log
  "$PGBIN/pgbench" -n -c 8 -j 2 -T "$seconds" -f "$2" postgres >"$log" 2>&1 || { cat "$log"; fail "$1: pgbench failed"; }
  local failed rows distinct
  failed=$(grep -Eo 'number of failed transactions: [0-9]+' "$log" | grep -Eo '[0-9]+$' || echo 0)
  read -r rows distinct <<<"$(q -F ' ' -c "SELECT count(*), count(DISTINCT id) FROM $3")"
  echo "load $1: 8 sessions x ${seconds} s: $rows IDs, $((rows / seconds)) IDs/s, $failed failed transactions, $((rows - distinct)) duplicates"
  [[ $failed == 0 ]] || fail "$1: $failed failed transactions"
  grep -q "aborted" "$log" && fail "$1: clients aborted: $(grep aborted "$log")"
  [[ $rows == "$distinct" ]] || fail "$1: duplicate IDs"
  ((rows > 0)) || fail "$1: no rows"
}
run one_shard "$work/one.sql" one_shard
run eight_shards "$work/eight.sql" eight_shards
lead=$(q -c "SELECT round(extract(epoch FROM max($(gen_ts id) - at)) * 1000) FROM one_shard")
echo "load one_shard: largest lead of an ID over the clock: $lead ms (snowflake_id.max_lead = 1000 ms)"
