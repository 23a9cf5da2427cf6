#!/usr/bin/env bash
# every version: sequence state (src/pg/mirror.rs differs by version)
# Concurrency: 6 sessions at once, each issuing 200,000 IDs from ONE sequence in single big
# statements (far past 1,024 IDs per millisecond). Asserts: zero duplicates across all
# sessions, and each statement's IDs strictly increasing in the order they were issued.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
cluster_start relconc 55441
trap 'cluster_stop relconc' EXIT
setup_generator postgres
q -c "CREATE UNLOGGED TABLE ids (session int, n int, id bigint)"
sessions=6 per=200000
pids=()
for s in $(seq 1 $sessions); do
  q -c "INSERT INTO ids SELECT $s, g, $GEN FROM generate_series(1, $per) g" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a session failed"; done
read -r total distinct <<<"$(q -F ' ' -c "SELECT count(*), count(DISTINCT id) FROM ids")"
out_of_order=$(q -c "SELECT count(*) FROM (SELECT id, lag(id) OVER (PARTITION BY session ORDER BY n) prev FROM ids) x WHERE id <= prev")
echo "concurrency: $sessions sessions x $per IDs: $total issued, $distinct distinct, $out_of_order out of order"
[[ $total == $((sessions * per)) ]] || fail "expected $((sessions * per)) IDs, got $total"
[[ $distinct == "$total" ]] || fail "$((total - distinct)) duplicate IDs"
[[ $out_of_order == 0 ]] || fail "$out_of_order IDs not increasing within their session"
