#!/usr/bin/env bash
# every version: the snowflake type through this version's pg_dump
# IDs in applications, across processes: a snowflake column through pg_dump/pg_restore (type,
# default, values, foreign keys, new IDs above the old) and binary COPY. (The mask key:
# t_mask_key.sh.)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
cluster_start relapps 55481
trap 'cluster_stop relapps' EXIT
q -c "CREATE DATABASE src" -c "CREATE DATABASE dst"
q -d src -c "CREATE EXTENSION snowflake_id" -c "CREATE SEQUENCE items_seq" \
  -c "CREATE TABLE items (id snowflake PRIMARY KEY DEFAULT next_id(3, 'items_seq'), body text)" \
  -c "CREATE TABLE likes (item_id bigint REFERENCES items (id), n int)" \
  -c "INSERT INTO items (body) SELECT 'old' FROM generate_series(1, 5000)" \
  -c "INSERT INTO items VALUES (4000000000000979520, 'explicit')" \
  -c "INSERT INTO likes SELECT id, 1 FROM items"
"$PGBIN/pg_dump" -Fc -d src -f "$SF_TMP/relapps/src.dump"
"$PGBIN/pg_restore" -d dst "$SF_TMP/relapps/src.dump"
same=$(q -d dst -c "SELECT format_type(atttypid, NULL) || ' ' || pg_get_expr(adbin, adrelid) FROM pg_attribute
                     JOIN pg_attrdef ON adrelid = attrelid AND adnum = attnum WHERE attrelid = 'items'::regclass AND attname = 'id'")
[[ $same == "snowflake next_id(3, 'items_seq'::regclass)" ]] || fail "restored column is: $same"
a=$(q -d src -c "SELECT md5(string_agg(id::text || body, ',' ORDER BY id)) FROM items")
b=$(q -d dst -c "SELECT md5(string_agg(id::text || body, ',' ORDER BY id)) FROM items")
[[ $a == "$b" ]] || fail "restored rows differ"
q -d dst -c "INSERT INTO items (body) SELECT 'new' FROM generate_series(1, 1000)"
read -r above fk json <<<"$(q -d dst -F ' ' -c "
  SELECT min(id) FILTER (WHERE body = 'new') > max(id) FILTER (WHERE body <> 'new'),
         (SELECT count(*) FROM likes JOIN items ON items.id = likes.item_id) = 5001,
         (SELECT json_agg(id) ->> 0 FROM items WHERE id = 4000000000000979520) = '4000000000000979520'
    FROM items")"
echo "dump/restore: rows identical, new IDs above old: $above, foreign keys joined: $fk, JSON string: $json"
[[ $above == t && $fk == t && $json == t ]] || fail "snowflake column after pg_restore"

# Binary COPY out and in (the type's send and receive, bigint's 8 bytes).
q -d dst -c "CREATE TABLE items_bin (LIKE items)"
q -d dst -c "COPY items TO STDOUT (FORMAT binary)" | q -d dst -c "COPY items_bin FROM STDIN (FORMAT binary)"
diffs=$(q -d dst -c "SELECT count(*) FROM (SELECT * FROM items EXCEPT SELECT * FROM items_bin) x")
rows=$(q -d dst -c "SELECT count(*) FROM items_bin")
echo "binary COPY: $rows rows, $diffs differ"
[[ $rows == 6001 && $diffs == 0 ]] || fail "binary COPY round trip"
