#!/usr/bin/env bash
# every version: pg_dump/pg_restore of this version
# pg_dump / pg_restore round trip: a database whose table defaults to the generator is
# dumped (custom format) and restored into a fresh database on ANOTHER server whose clock
# stands one hour behind (libfaketime). The restore must raise no error, and every ID issued
# after it must be greater than every ID issued before the dump.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
work=$(mktemp -d); chmod 755 "$work"
cluster_start reldumpa 55442
setup_generator postgres
q -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT $GEN, body text)"
q -c "INSERT INTO t (body) SELECT 'before' FROM generate_series(1, 300000)"
before_max=$(q -c "SELECT max(id) FROM t")
pg_dump -Fc -f "$work/db.dump" postgres
cluster_stop reldumpa
echo "-1h" > "$work/faketime"
CLUSTER_ENV=$(faketime_env "$work/faketime") cluster_start reldumpb 55443
trap 'cluster_stop reldumpb; rm -rf "$work"' EXIT
behind=$(q -c "SELECT now() < timestamptz '$(date -u +%FT%T)Z' - interval '50 minutes'")
[[ $behind == t ]] || fail "libfaketime did not put the restored server's clock behind"
q -c "CREATE DATABASE restored"
pg_restore -d restored --exit-on-error "$work/db.dump" 2>"$work/restore.err" || { cat "$work/restore.err"; fail "pg_restore failed"; }
q -d restored -c "INSERT INTO t (body) SELECT 'after' FROM generate_series(1, 300000)"
read -r after_min dup <<<"$(q -d restored -F ' ' -c "SELECT min(id) FILTER (WHERE body = 'after'), count(*) - count(DISTINCT id) FROM t")"
assert_new_ids_above "dump/restore onto a clock 1 h behind" "$before_max" "$after_min" "$dup"
