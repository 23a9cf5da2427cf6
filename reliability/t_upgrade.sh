#!/usr/bin/env bash
# every version: upgrade scripts on this version's catalogs
# Upgrades in place, from every released version to the current one. A database runs a
# released snowflake_id (released/ holds each release's scripts as they shipped) with shards and rows; ALTER EXTENSION snowflake_id UPDATE must keep every row and shard,
# keep IDs increasing, and leave exactly the SQL surface of a fresh install
# (reliability/surface.sql: signatures, volatility, bodies, comments, tables, views, types,
# casts, operators). The same for snowflake_id_router from each release, with two nodes and a
# map set up. And
# every function, type, cast and operator of each extension has a comment.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
extdir=$("$PG_CONFIG" --sharedir)/extension
current=$(sed -nE 's/^version = "(.*)"/\1/p' "$here/../Cargo.toml" | head -1)
released=$here/../released
for f in "$released"/*.sql; do install -m 644 "$f" "$extdir/"; done
cluster_start relupgrade 55470
trap 'cluster_stop relupgrade' EXIT
work=$SF_TMP/relupgrade

# surface DB EXT: the extension's objects, one line each (reliability/surface.sql).
surface() { q -d "$1" -v ext="$2" -f "$here/surface.sql"; }
# commented DB EXT: every function, type, cast and operator of EXT has a comment, so that
# \df+, \dT+, \dC+ and \do+ explain it (the comment is surface.sql's last column). Each
# function's description exists once, as its COMMENT in the SQL sources. Types PostgreSQL makes
# by itself are left out: array types, and the row type of a table or view (whose own comment
# \d+ shows); since PostgreSQL 17 these are members of the extension too.
commented() {
  local missing
  missing=$(q -d "$1" -v ext="$2" -F $'\t' -f "$here/surface.sql" | awk -F'\t' '
    $1 ~ /^(table|view) / { relation["type " substr($1, index($1, " ") + 1)] = 1 }
    $3 == "" && ($1 ~ /^(function|cast) / || ($1 ~ /^type / && $1 !~ /\[\]$/) ||
                 ($1 ~ /^operator / && $1 !~ /^operator (class|family) /)) { candidate[$1] = 1 }
    END { for (c in candidate) if (!(c in relation)) print "  " c }' | sort)
  [[ -z $missing ]] || fail "$2: these have no comment:"$'\n'"$missing"
  echo "$2: every function, type, cast and operator has a comment"
}
# same_as_fresh DB EXT WHAT: DB's surface of EXT equals that of a fresh install.
same_as_fresh() {
  surface "$1" "$2" >"$work/$1.txt"
  if ! diff -u "$work/fresh_$2.txt" "$work/$1.txt"; then
    fail "$3: the upgraded surface differs from a fresh $current install (- fresh, + upgraded)"
  fi
  for db in "$1" "fresh_$2"; do
    q -d "$db" -c "SELECT array(SELECT c::regclass::text FROM pg_extension, unnest(extconfig) c WHERE extname = '$2' ORDER BY 1)"
  done | uniq | wc -l | grep -qx 1 || fail "$3: the tables pg_dump dumps differ"
  echo "$3: surface identical to a fresh install ($(wc -l <"$work/fresh_$2.txt") objects)"
}

q -c "CREATE DATABASE fresh_snowflake_id"
q -d fresh_snowflake_id -c "CREATE EXTENSION snowflake_id"
surface fresh_snowflake_id snowflake_id >"$work/fresh_snowflake_id.txt"
commented fresh_snowflake_id snowflake_id

for from in $(ls "$released" | sed -nE 's/^snowflake_id--([0-9.]+)\.sql$/\1/p' | sort -V); do
  db=from_${from//./_}
  q -c "CREATE DATABASE $db"
  q -d "$db" -c "CREATE EXTENSION snowflake_id VERSION '$from'" \
    -c "SELECT create_shards('insta', 1, 3)" \
    -c "CREATE TABLE insta2.t (id bigint PRIMARY KEY DEFAULT insta2.next_id(), body text)" \
    -c "INSERT INTO insta2.t (body) SELECT 'old' FROM generate_series(1, 5000)" \
    -c "CREATE SEQUENCE s" -c "CREATE TABLE plain (id bigint PRIMARY KEY DEFAULT next_id(7, 's'))" \
    -c "INSERT INTO plain SELECT FROM generate_series(1, 5000)"
  q -d "$db" -c "ALTER EXTENSION snowflake_id UPDATE"
  version=$(q -d "$db" -c "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")
  [[ $version == "$current" ]] || fail "$from: extension is at $version after UPDATE, expected $current"
  q -d "$db" -c "INSERT INTO insta2.t (body) SELECT 'new' FROM generate_series(1, 5000)" \
    -c "INSERT INTO plain SELECT FROM generate_series(1, 5000)"
  read -r rows above dup shards <<<"$(q -d "$db" -F ' ' -c "
    SELECT count(*), min(id) FILTER (WHERE body = 'new') > max(id) FILTER (WHERE body = 'old'),
           count(*) - count(DISTINCT id), (SELECT count(*) FROM snowflake_id_shards)
      FROM insta2.t")"
  plain=$(q -d "$db" -c "SELECT count(DISTINCT id) FROM plain")
  echo "$from -> $current: $rows rows on a shard, new IDs above old: $above, $dup duplicates, $shards shards, $plain distinct IDs from a plain sequence"
  [[ $rows == 10000 && $above == t && $dup == 0 && $shards == 3 && $plain == 10000 ]] || fail "$from: data after UPDATE is wrong"
  same_as_fresh "$db" snowflake_id "snowflake_id $from -> $current"
done

# The router, where PL/Proxy is installed: from 0.2.0 with two nodes and a map.
if [[ ! -f $extdir/plproxy.control ]]; then
  echo "router upgrade: skipped, no PL/Proxy for PostgreSQL $PG_MAJOR here"
  exit 0
fi
router_versions=$(ls "$released" | sed -nE 's/^snowflake_id_router--([0-9.]+)\.sql$/\1/p' | sort -V)
q -c "CREATE DATABASE fresh_snowflake_id_router"
q -d fresh_snowflake_id_router -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id_router CASCADE"
surface fresh_snowflake_id_router snowflake_id_router >"$work/fresh_snowflake_id_router.txt"
commented fresh_snowflake_id_router snowflake_id_router
for from in $router_versions; do
  [[ $from != "$current" ]] || continue
  db=router_from_${from//./_}
  q -c "CREATE DATABASE $db"
  # Two nodes (databases here) and the router, each with the snowflake_id it ran with, then
  # the router as released.
  for node in a b; do
    q -c "CREATE DATABASE ${db}_$node"
    q -d "${db}_$node" -c "CREATE EXTENSION snowflake_id VERSION '$from'"
  done
  q -d "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id VERSION '$from'" \
    -c "CREATE EXTENSION snowflake_id_router VERSION '$from' CASCADE" \
    -c "SELECT add_node('a', 'host=$PGHOST port=$PGPORT dbname=${db}_a'),
               add_node('b', 'host=$PGHOST port=$PGPORT dbname=${db}_b')" \
    -c "SELECT assign_shards(0, 4096, 'a'), assign_shards(4096, 4096, 'b')" >/dev/null
  q -d "$db" -c "SET client_min_messages = warning" -c "ALTER EXTENSION snowflake_id UPDATE" \
    -c "ALTER EXTENSION snowflake_id_router UPDATE"
  version=$(q -d "$db" -c "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id_router'")
  [[ $version == "$current" ]] || fail "router $from: at $version after UPDATE, expected $current"
  read -r mapped follows <<<"$(q -d "$db" -F ' ' -c "
    SELECT count(*), bool_and(o.opt = format('p%s=%s', m.shard, m.connstr))
      FROM shard_map m JOIN (SELECT unnest(srvoptions) opt FROM pg_foreign_server WHERE srvname = 'snowflake_id') o
        ON o.opt LIKE format('p%s=%%', m.shard)")"
  echo "router $from -> $current: $mapped shards mapped, cluster follows the map: $follows"
  [[ $mapped == 8192 && $follows == t ]] || fail "router $from: the map after UPDATE is wrong"
  same_as_fresh "$db" snowflake_id_router "snowflake_id_router $from -> $current"
done
