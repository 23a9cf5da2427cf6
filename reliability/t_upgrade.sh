#!/usr/bin/env bash
# 0.1.0 -> 0.2.0 in place. A database runs 0.1.0 as released (pg_test/upgrade holds its SQL,
# generated from the 0.1.0 release commit), with shards and rows; ALTER EXTENSION snowflake_id
# UPDATE must keep every row and shard, keep IDs increasing, and leave exactly the SQL
# surface of a fresh 0.2.0 install (reliability/surface.sql: signatures, volatility, bodies,
# comments, tables and views).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
extdir=$("$PG_CONFIG" --sharedir)/extension
install -m 644 "$here/../pg_test/upgrade/snowflake_id--0.1.0.sql" "$extdir/snowflake_id--0.1.0.sql"
cluster_start relupgrade 55470
trap 'cluster_stop relupgrade' EXIT
q -c "CREATE DATABASE old" -c "CREATE DATABASE fresh"
q -d old -c "CREATE EXTENSION snowflake_id VERSION '0.1.0'" \
  -c "SELECT create_shards('insta', 1, 3)" \
  -c "CREATE TABLE insta2.t (id bigint PRIMARY KEY DEFAULT insta2.next_id(), body text)" \
  -c "INSERT INTO insta2.t (body) SELECT 'old' FROM generate_series(1, 5000)" \
  -c "CREATE SEQUENCE s" -c "CREATE TABLE plain (id bigint PRIMARY KEY DEFAULT next_id(7, 's'))" \
  -c "INSERT INTO plain SELECT FROM generate_series(1, 5000)"
q -d old -c "ALTER EXTENSION snowflake_id UPDATE"
version=$(q -d old -c "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")
[[ $version == 0.2.0 ]] || fail "extension is at $version after UPDATE, expected 0.2.0"
q -d old -c "INSERT INTO insta2.t (body) SELECT 'new' FROM generate_series(1, 5000)" \
  -c "INSERT INTO plain SELECT FROM generate_series(1, 5000)"
read -r rows above dup shards <<<"$(q -d old -F ' ' -c "
  SELECT count(*), min(id) FILTER (WHERE body = 'new') > max(id) FILTER (WHERE body = 'old'),
         count(*) - count(DISTINCT id), (SELECT count(*) FROM snowflake_id_shards)
    FROM insta2.t")"
plain=$(q -d old -c "SELECT count(DISTINCT id) FROM plain")
echo "upgrade: $rows rows on a shard, new IDs above old: $above, $dup duplicates, $shards shards, $plain distinct IDs from a plain sequence"
[[ $rows == 10000 && $above == t && $dup == 0 && $shards == 3 && $plain == 10000 ]] || fail "data after UPDATE is wrong"

q -d fresh -c "CREATE EXTENSION snowflake_id"
q -d old -f "$here/surface.sql" >"$SF_TMP/relupgrade/upgraded.txt"
q -d fresh -f "$here/surface.sql" >"$SF_TMP/relupgrade/fresh.txt"
for db in old fresh; do
  q -d $db -c "SELECT array(SELECT c::regclass::text FROM pg_extension, unnest(extconfig) c WHERE extname = 'snowflake_id')"
done | uniq | wc -l | grep -qx 1 || fail "the tables pg_dump dumps differ"
if ! diff -u "$SF_TMP/relupgrade/fresh.txt" "$SF_TMP/relupgrade/upgraded.txt"; then
  fail "the upgraded surface differs from a fresh 0.2.0 install (- fresh, + upgraded)"
fi
echo "upgrade: surface identical to a fresh install ($(wc -l <"$SF_TMP/relupgrade/fresh.txt") objects)"
