#!/usr/bin/env bash
# every version: pg_dump/pg_restore of shards
# Shards survive pg_dump / pg_restore, and a shard's schema moves to another server:
# (1) a database with 50 shards (create_shards) and Instagram's table on each is dumped
#     and restored into a fresh database: no error, the catalog (snowflake_id_shards) is
#     back, and every ID issued after the restore is above every ID issued before;
# (2) `pg_dump -n insta5 | psql` onto a second server whose clock is 1 h behind, then
#     create_shard('insta5', 5) there to register it: IDs continue above the old ones.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
work=$(mktemp -d); chmod 755 "$work"
cluster_start instdumpa 55461
trap 'cluster_stop instdumpa; cluster_stop instdumpb; rm -rf "$work"' EXIT
q -c "CREATE EXTENSION snowflake_id" -c "SELECT create_shards('insta', 1, 50)"
for n in 1 5 50; do
  q -c "CREATE TABLE insta$n.our_table (\"id\" bigint NOT NULL DEFAULT insta$n.next_id(), \"user_id\" int NOT NULL, PRIMARY KEY (\"id\"))"
  q -c "INSERT INTO insta$n.our_table (user_id) SELECT 1 FROM generate_series(1, 100000)"
done
before_max=$(q -c "SELECT max(id) FROM insta5.our_table")
pg_dump -Fc -f "$work/all.dump" postgres
pg_dump -n insta5 -f "$work/insta5.sql" postgres

q -c "CREATE DATABASE restored"
pg_restore -d restored --exit-on-error "$work/all.dump" 2>"$work/err" || { cat "$work/err"; fail "pg_restore failed"; }
shards=$(q -d restored -c "SELECT count(*) FROM snowflake_id_shards")
[[ $shards == 50 ]] || fail "catalog has $shards shards after restore, expected 50"
for n in 1 5 50; do q -d restored -c "INSERT INTO insta$n.our_table (user_id) SELECT 2 FROM generate_series(1, 100000)"; done
read -r ok dup <<<"$(q -d restored -F ' ' -c "SELECT min(id) FILTER (WHERE user_id = 2) > max(id) FILTER (WHERE user_id = 1), count(*) - count(DISTINCT id) FROM insta5.our_table")"
echo "installer dump/restore: $shards shards restored, new IDs above old: $ok, duplicates: $dup"
[[ $ok == t && $dup == 0 ]] || fail "IDs after restore not all above the old ones"

echo "-1h" > "$work/faketime"
CLUSTER_ENV=$(faketime_env "$work/faketime") cluster_start instdumpb 55462
q -c "CREATE EXTENSION snowflake_id"
q -v ON_ERROR_STOP=1 -f "$work/insta5.sql" >/dev/null
q -c "SELECT create_shard('insta5', 5)"
q -c "INSERT INTO insta5.our_table (user_id) SELECT 3 FROM generate_series(1, 100000)"
read -r min_new dup listed <<<"$(q -F ' ' -c "SELECT min(id) FILTER (WHERE user_id = 3), count(*) - count(DISTINCT id), (SELECT count(*) FROM snowflake_id_shards WHERE shard = 5) FROM insta5.our_table")"
[[ $listed == 1 ]] || fail "moved shard: registered $listed times in snowflake_id_shards"
assert_new_ids_above "moved schema insta5 (clock 1 h behind)" "$before_max" "$min_new" "$dup"
