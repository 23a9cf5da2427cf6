#!/usr/bin/env bash
# Huge input on a server with a limited address space (`ulimit -v`, as under
# vm.overcommit_memory = 2, which PostgreSQL's docs advise): every function taking text, given
# 300 MB of it, raises its SQLSTATE and nothing else, and no backend dies. A Rust allocation
# that fails aborts the backend (signal 6) and the postmaster then restarts every session: the
# limit is set so that the server holds the input once, but not a second copy of it, so any
# copy of an argument onto Rust's heap (or anything larger) is caught.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
name=relhuge
cluster_start $name 55452
trap 'cluster_stop $name' EXIT
setup_generator postgres
# The inputs are made while the query runs (`+ zero`, volatile, keeps the planner from
# folding them into constants, which it would hold twice for a moment): a query holds each
# once, as the function's argument.
mb=300
zero="(random() * 0)::int"
# big C [MB]: SQL for MB (default $mb) megabytes of C (ASCII), made 1000 bytes at a time.
big() { echo "repeat(repeat('$1', 1000), ${2:-$mb} * 1000 + $zero)"; }
# The limit: the postmaster's own address space (shared memory, libraries), the input once,
# and 150 MB for a backend's own needs; a second copy of the input does not fit.
pm_kb=$(awk '/^VmSize/ {print $2}' "/proc/$(head -1 "$SF_TMP/$name/data/postmaster.pid")/status")
limit_kb=$((pm_kb + (mb + 150) * 1024))
cluster_stop $name
(ulimit -v "$limit_kb"; cluster_resume $name)
echo "address space limit: $((limit_kb / 1024)) MB (postmaster $((pm_kb / 1024)) MB, input $mb MB)"
pid_of_checkpointer() { q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'"; }
checkpointer=$(pid_of_checkpointer)

# expect STATE SQL: SQL fails with exactly STATE, the one line of output.
checked=0
expect() {
  local got
  got=$(psql -X -q -At -c '\set VERBOSITY sqlstate' -c "$2" 2>&1) && fail "accepted: $2"
  [[ $got == "ERROR:  $1" ]] || fail "${2:0:80}: expected $1, got: $got"
  checked=$((checked + 1))
}
expect 22P02 "SELECT ulid_timestamp($(big 0))"
expect 22P02 "SELECT ulid_timestamp('0000000000000000000000000' || $(big '!' $((mb / 4))))"
expect 22P02 "SELECT objectid_timestamp($(big a))"
expect 22P02 "SELECT id_from_text($(big 0))"
expect 22P02 "SELECT id_from_text(repeat(repeat('é', 500), $mb * 1000 + $zero))"
expect 22023 "SELECT id_timestamp(1, $(big x))"
expect 22023 "SELECT id_timestamp(1, $(big x), now())"
expect 22023 "SELECT id_fields(1, $(big x))"
expect 22023 "SELECT id_decode(1, $(big x))"
expect 22023 "SELECT id_decode(1, $(big x), now())"
expect 22023 "SELECT next_id(1, 's', $(big x))"
expect 22023 "SELECT next_id(1, 's', $(big x), '2026-01-01+00')"
expect 22023 "SELECT id_mask(1, $(big 0))"
expect 22023 "SELECT id_unmask(1, $(big a))"
echo "$checked calls with $mb MB of text: each refused with its SQLSTATE"

[[ $(pid_of_checkpointer) == "$checkpointer" ]] || fail "the server restarted (a backend died)"
! grep -E "terminated by signal|memory allocation of" "$SF_TMP/$name/server.log" || fail "a backend crashed"
echo "no backend died; the server never restarted"
