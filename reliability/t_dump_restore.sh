#!/usr/bin/env bash
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
echo "-1h" > "$work/faketime"; chmod 644 "$work/faketime"
CLUSTER_ENV="LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 FAKETIME_TIMESTAMP_FILE=$work/faketime FAKETIME_NO_CACHE=1" \
  cluster_start reldumpb 55443
trap 'cluster_stop reldumpb; rm -rf "$work"' EXIT
behind=$(q -c "SELECT now() < timestamptz '$(date -u +%FT%T)Z' - interval '50 minutes'")
[[ $behind == t ]] || fail "libfaketime did not put the restored server's clock behind"
q -c "CREATE DATABASE restored"
pg_restore -d restored --exit-on-error "$work/db.dump" 2>"$work/restore.err" || { cat "$work/restore.err"; fail "pg_restore failed"; }
q -d restored -c "INSERT INTO t (body) SELECT 'after' FROM generate_series(1, 300000)"
read -r after_min dup <<<"$(q -d restored -F ' ' -c "SELECT min(id) FILTER (WHERE body = 'after'), count(*) - count(DISTINCT id) FROM t")"
echo "dump/restore: max ID before dump $before_max, min ID after restore $after_min (clock 1 h behind), $dup duplicates"
[[ $dup == 0 ]] || fail "$dup duplicate IDs after restore"
((after_min > before_max)) || fail "an ID issued after restore ($after_min) is not above the dumped max ($before_max)"
