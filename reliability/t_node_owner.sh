#!/usr/bin/env bash
# What the owner of a node's database may set there steers none of the router's work on it
# (issue 33, findings F4, F5, F7, F10 of the project's own review; docs/security.md, "Nothing
# of the peer's choosing in the sessions it opens"). node_c's database is given to dbowner,
# a role with no other right, who sets for every session there (ALTER DATABASE ... SET)
# standard_conforming_strings = off (the node code's backslash literals would read
# otherwise), a far time zone, transform_null_equals, quote_all_identifiers (definitions
# would print otherwise), array_nulls, short
# statement and lock timeouts and, from PostgreSQL 17, a transaction_timeout of 30 ms; and
# makes public.make_id(timestamptz, integer), an overload that would make the extension's
# own two-argument calls ambiguous. Then create_shard there, moves onto and off node_c,
# node_status, shard_status and a rebalance plan all work as on the other nodes.
# And the caller's own cancel of a status view (statement_timeout, pg_cancel_backend) while a
# node is slow to answer ends the call with 57014: never a partial answer with a WARNING.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
bg=()
trap 'kill "${bg[@]}" 2>/dev/null || true; router_cluster_down; rm -rf "$work"' EXIT
SHARDS_PER_NODE=2 router_cluster_up >/dev/null 2>&1
served_by() { on router -c "SELECT node FROM shard_map WHERE shard = $1"; }
major=$(on node_c -c "SHOW server_version_num"); major=$((major / 10000))
# node_c's own sessions in this script override what dbowner sets, as the router's do.
pinned="-c client_min_messages=warning -c role=none -c statement_timeout=0 -c lock_timeout=0"
(( major >= 17 )) && pinned+=" -c transaction_timeout=0"
on_c() { PGOPTIONS=$pinned psql -X -q -At -v ON_ERROR_STOP=1 -h "$(node_dir node_c)" -p "$(node_port node_c)" -U postgres -d postgres "$@"; }
for n in "${ROUTER_NODES[@]}"; do
  on "$n" -c "SELECT count(*) FROM (SELECT insert_post(shard, 1, 'row') FROM snowflake_id_shards, generate_series(1, 20)) x" >/dev/null
done

echo "node_c's database owner sets its sessions' settings and overloads make_id"
on_c -c "CREATE ROLE dbowner LOGIN" -c "ALTER DATABASE postgres OWNER TO dbowner" >/dev/null
{
  echo "SET ROLE dbowner;"
  for s in "standard_conforming_strings = off" "TimeZone = 'Pacific/Chatham'" "transform_null_equals = on" "quote_all_identifiers = on" "array_nulls = off" \
           "statement_timeout = '10ms'" "lock_timeout = '1ms'"; do
    echo "ALTER DATABASE postgres SET $s;"
  done
  (( major >= 17 )) && echo "ALTER DATABASE postgres SET transaction_timeout = '30ms';"
  echo "CREATE FUNCTION public.make_id(ts timestamptz, shard integer) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint';"
} | on_c >/dev/null
set_now=$(PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -h "$(node_dir node_c)" -p "$(node_port node_c)" -U postgres -d postgres \
  -c "SELECT current_setting('standard_conforming_strings') || ' ' || current_setting('TimeZone')")
[[ $set_now == "off Pacific/Chatham" ]] || fail "dbowner's settings did not take: $set_now"
(( major >= 17 )) && echo "  (with transaction_timeout = 30ms)" || echo "  (transaction_timeout: PostgreSQL $major has none)"

echo "the extension's own calls are not ambiguous"
on_c -c "SELECT create_shard('shard_8000', 8000, template => 'tpl')" >/dev/null
[[ $(on_c -c "SELECT schema_name FROM snowflake_id_shards WHERE shard = 8000") == shard_8000 ]] || fail "create_shard on node_c failed"
on_c -c "SELECT drop_shard('shard_8000', cascade => true)" >/dev/null

echo "moves onto and off node_c, the status views and a plan"
a_shard=$(on router -c "SELECT shard FROM shard_map WHERE node = 'node_a' ORDER BY shard LIMIT 1")
c_shard=$(on router -c "SELECT shard FROM shard_map WHERE node = 'node_c' ORDER BY shard LIMIT 1")
on router -c "SELECT move_shard($a_shard, 'node_c')" >/dev/null
on router -c "SELECT move_shard($c_shard, 'node_b')" >/dev/null
[[ $(served_by "$a_shard") == node_c && $(served_by "$c_shard") == node_b ]] || fail "the moves did not land"
on router -c "SELECT move_shard($a_shard, 'node_a')" >/dev/null
on router -c "SELECT move_shard($c_shard, 'node_c')" >/dev/null
errors=$(on router -c "SELECT string_agg(node || ': ' || error, '; ') FROM node_status WHERE error IS NOT NULL")
[[ -z $errors ]] || fail "node_status: $errors"
listed=$(on router -c "SELECT count(*) FROM shard_status")
served=$(( $(on node_a -c "SELECT count(*) FROM snowflake_id_shards") + $(on node_b -c "SELECT count(*) FROM snowflake_id_shards")
          + $(on_c -c "SELECT count(*) FROM snowflake_id_shards") ))
[[ $listed == "$served" ]] || fail "shard_status lists $listed shards of the $served the nodes serve"
on router -c "SELECT count(*) FROM rebalance_plan()" >/dev/null
echo "  4 moves, node_status, shard_status ($listed shards) and rebalance_plan held"

echo "the caller's cancel of a status view while a node is slow"
on router -c "CREATE ROLE mon LOGIN" -c "GRANT SELECT ON shard_status TO mon" \
  -c "GRANT EXECUTE ON FUNCTION snowflake_id_router.shard_status() TO mon" >/dev/null
table=$(on node_a -c "SELECT schema_name || '.posts' FROM snowflake_id_shards ORDER BY shard LIMIT 1")
{ echo "BEGIN; LOCK TABLE $table IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(20);"; } | on node_a >/dev/null 2>&1 & bg+=($!)
for _ in $(seq 100); do
  [[ $(on node_a -c "SELECT count(*) FROM pg_locks WHERE relation = '$table'::regclass AND granted") -gt 0 ]] && break; sleep 0.05
done
mon() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -h "$SF_TMP/sfrouter" -p "$ROUTER_PORT" -U mon -d postgres "$@"; }
out=$(mon -c "SET statement_timeout = '1s'" -c "SELECT count(*) FROM shard_status" 2>&1 || true)
[[ $out == *"ERROR:  canceling statement due to statement timeout"* ]] \
  || fail "shard_status under the caller's statement_timeout answered: $out"
echo "  statement_timeout: $(grep -m1 -o 'ERROR: .*' <<<"$out")"
mon -c "SELECT count(*) FROM shard_status" >"$work/cancel.log" 2>&1 & pid=$!
sleep 1
on router -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE usename = 'mon'" >/dev/null
wait "$pid" || true
grep -q "ERROR:  canceling statement due to user request" "$work/cancel.log" \
  || fail "shard_status, cancelled by its caller, answered: $(cat "$work/cancel.log")"
echo "  pg_cancel_backend: $(grep -m1 -o 'ERROR: .*' "$work/cancel.log")"
on_c -c "SET ROLE dbowner" -c "ALTER DATABASE postgres RESET ALL" >/dev/null
router_invariants "$work"
