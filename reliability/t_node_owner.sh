#!/usr/bin/env bash
# A node whose database's owner can drop snowflake_id's schema is refused, and what that
# owner may set there steers none of the router's work on it (issue 33, findings F4, F5, F7,
# F10 of the project's own review, and a later review's A5; docs/security.md, "Nothing of the
# peer's choosing in the sessions it opens"). node_c's database is given to dbowner, whom
# PostgreSQL 15 makes the owner of schema public, snowflake_id's: she could drop the
# extension with it (DROP SCHEMA public CASCADE) and make functions of its names for the
# router's superuser sessions to call. Every connection the router opens there is refused
# (55000, naming her), as it is while PUBLIC may create in the schema; once the schema is a
# superuser's she can drop nothing of it. Then dbowner,
# a role with no other right, who sets for every session there (ALTER DATABASE ... SET)
# standard_conforming_strings = off (the node code's backslash literals would read
# otherwise), a far time zone, transform_null_equals, quote_all_identifiers (definitions
# would print otherwise), array_nulls, short
# statement and lock timeouts, exit_on_error (a caught error would end the session),
# locales and time zone abbreviations, and more, from PostgreSQL 17 a transaction_timeout
# of 30 ms; and a superuser (an application's migration) makes
# public.make_id(timestamptz, integer), an overload that would make the extension's own
# two-argument calls ambiguous. Then create_shard there, moves onto and off node_c,
# node_status, shard_status and a rebalance plan all work as on the other nodes.
# A background worker on a router whose database's owner can drop the router's schema ends
# before it calls anything there. And the caller's own cancel of a status view (statement_timeout, pg_cancel_backend) while a
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

echo "a node whose database's owner can drop snowflake_id's schema is refused"
on_c -c "CREATE ROLE dbowner LOGIN" -c "ALTER DATABASE postgres OWNER TO dbowner" >/dev/null
as_dbowner() { PGOPTIONS=$pinned psql -X -q -At -v ON_ERROR_STOP=1 -h "$(node_dir node_c)" -p "$(node_port node_c)" -U dbowner -d postgres "$@"; }
# (she can: in a transaction rolled back)
out=$(as_dbowner -c "BEGIN" -c "DROP SCHEMA public CASCADE" -c "SELECT count(*) FROM pg_extension WHERE extname = 'snowflake_id'" -c "ROLLBACK" 2>&1) \
  || fail "dbowner could not drop schema public: $out"
[[ $out == 0 ]] || fail "DROP SCHEMA public CASCADE left the extension: $out"
a_shard=$(on router -c "SELECT shard FROM shard_map WHERE node = 'node_a' ORDER BY shard LIMIT 1")
refused() {   # what a move onto node_c and node_status say
  local out
  if out=$(on router -c "SELECT move_shard($a_shard, 'node_c')" 2>&1); then fail "a move onto node_c ran while $1"; fi
  grep -q "ERROR:  node 'node_c': roles that are not superusers can change the schemas of snowflake_id there" <<<"$out" \
    || fail "the move's refusal while $1: $out"
  grep -q "$2" <<<"$out" || fail "the refusal does not say '$2': $out"
  [[ $(on router -c "SELECT error FROM node_status WHERE node = 'node_c'") == *"roles that are not superusers"* ]] \
    || fail "node_status does not show node_c refused while $1"
  [[ $(served_by "$a_shard") == node_a ]] || fail "shard $a_shard left node_a"
  echo "  $1: refused ($(grep -o 'DETAIL: .*' <<<"$out" | cut -d. -f1 | cut -c10-))"
}
refused "dbowner owns schema public" "role dbowner can drop schema public"
on_c -c "ALTER SCHEMA public OWNER TO postgres" -c "GRANT CREATE ON SCHEMA public TO PUBLIC" >/dev/null
refused "PUBLIC may create in it" "every role (PUBLIC) can create objects in schema public"
on_c -c "REVOKE CREATE ON SCHEMA public FROM PUBLIC" >/dev/null
if out=$(as_dbowner -c "DROP SCHEMA public CASCADE" 2>&1); then fail "dbowner dropped a superuser's schema public"; fi
echo "  schema public a superuser's: dbowner's DROP SCHEMA public CASCADE: $(grep -o 'ERROR: .*' <<<"$out" | cut -c8-)"

echo "node_c's database owner sets its sessions' settings; an overload of make_id"
{
  echo "SET ROLE dbowner;"
  echo 'DO $$BEGIN END$$;'   # (PL/pgSQL loaded: its settings are known)
  # (19 refuses standard_conforming_strings = off: it no longer has the setting's other value)
  (( major < 19 )) && echo "ALTER DATABASE postgres SET standard_conforming_strings = off;"
  for s in "TimeZone = 'Pacific/Chatham'" "transform_null_equals = on" "quote_all_identifiers = on" "array_nulls = off" \
           "statement_timeout = '10ms'" "lock_timeout = '1ms'" "exit_on_error = on" "timezone_abbreviations = 'Australia'" \
           "lc_numeric = 'C.utf8'" "lc_time = 'C.utf8'" "lc_monetary = 'C.utf8'" "backslash_quote = off" "xmloption = document" \
           "row_security = off" "synchronize_seqscans = off" "default_table_access_method = 'heap'" "plpgsql.check_asserts = off"; do
    echo "ALTER DATABASE postgres SET $s;"
  done
  (( major >= 17 )) && echo "ALTER DATABASE postgres SET transaction_timeout = '30ms';"
  true
} | on_c >/dev/null
on_c -c "CREATE FUNCTION public.make_id(ts timestamptz, shard integer) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint'" >/dev/null
set_now=$(PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -h "$(node_dir node_c)" -p "$(node_port node_c)" -U postgres -d postgres \
  -c "SELECT current_setting('standard_conforming_strings') || ' ' || current_setting('TimeZone')")
want=$( ((major < 19)) && echo off || echo on)
[[ $set_now == "$want Pacific/Chatham" ]] || fail "dbowner's settings did not take: $set_now"
(( major >= 17 )) && echo "  (with transaction_timeout = 30ms)" || echo "  (transaction_timeout: PostgreSQL $major has none)"

echo "the extension's own calls are not ambiguous"
on_c -c "SELECT create_shard('shard_8000', 8000, template => 'tpl')" >/dev/null
[[ $(on_c -c "SELECT schema_name FROM snowflake_id_shards WHERE shard = 8000") == shard_8000 ]] || fail "create_shard on node_c failed"
on_c -c "SELECT drop_shard('shard_8000', cascade => true)" >/dev/null

echo "moves onto and off node_c, the status views and a plan"
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
echo "the router's own sessions on node_c keep none of dbowner's settings, and pin every one that matters"
# A session the router opens to node_c (its registry, as every operation's): no setting
# there comes from the database (pg_settings.source 'database'). Then every setting of the
# running server a database's or role's owner could set for it (context user or superuser,
# PL/pgSQL's loaded) is either pinned by the router (source client: the startup packet, or
# session: set first thing; src/pg/node/remote.rs, SESSION_OPTIONS and PINNED_LATER) or
# named below as harmless to the router's work, with why: a setting a new PostgreSQL adds
# fails this test until it is pinned or named.
declare -A harmless=(
  [application_name]="named by the router's connection itself" [client_encoding]="given by the router's connection"
  [client_min_messages]="which messages reach the router: it reads none but errors"
  [escape_string_warning]="a warning only" [trace_notify]="logs only" [trace_sort]="logs only"
  [debug_pretty_print]="logs only" [debug_print_parse]="logs only" [debug_print_plan]="logs only"
  [debug_print_rewritten]="logs only" [log_parameter_max_length_on_error]="logs only"
  [plpgsql.print_strict_params]="an error's detail only"
  [createrole_self_grant]="CREATE ROLE only: the router makes no role" [icu_validation_level]="CREATE COLLATION only"
  [password_encryption]="passwords only" [scram_iterations]="passwords only" [md5_password_warnings]="passwords only"
  [file_copy_method]="CREATE DATABASE only" [default_text_search_config]="text search without a configuration: none in the router's code"
  [gin_fuzzy_search_limit]="GIN searches: none in the router's code" [local_preload_libraries]="only libraries an administrator put in \$libdir/plugins"
  [stats_fetch_consistency]="how statistics views cache within a transaction, not what they say"
  [transaction_isolation]="set from default_transaction_isolation (pinned) at each transaction"
  [transaction_read_only]="set from default_transaction_read_only (pinned)" [transaction_deferrable]="set from default_transaction_deferrable (pinned)"
  [tcp_keepalives_idle]="the router's own connect options" [tcp_keepalives_interval]="the router's own connect options"
  [tcp_keepalives_count]="the router's own connect options" [tcp_user_timeout]="the connection's lifetime only, like keepalives"
  [debug_logical_replication_streaming]="when decoded changes are streamed, not which"
  [debug_print_raw_parse]="logs only" [timing_clock_source]="how EXPLAIN and statistics time, not what runs"
  [wal_receiver_timeout]="a replication connection's liveness: at worst a move fails and is undone, as on any fault"
  [wal_sender_shutdown_timeout]="how long a sender waits at its end, not what it sends"
)
# Speed and resources only: what a plan, a sort, a scan or a flush costs, never its result.
for s in backend_flush_after commit_siblings constraint_exclusion cpu_index_tuple_cost cpu_operator_cost cpu_tuple_cost \
         cursor_tuple_fraction default_statistics_target effective_cache_size effective_io_concurrency from_collapse_limit \
         geqo geqo_effort geqo_generations geqo_pool_size geqo_seed geqo_selection_bias geqo_threshold gin_pending_list_limit \
         hash_mem_multiplier min_eager_agg_group_size io_combine_limit jit jit_above_cost jit_expressions jit_inline_above_cost jit_optimize_above_cost \
         jit_tuple_deforming join_collapse_limit logical_decoding_work_mem maintenance_io_concurrency maintenance_work_mem \
         max_parallel_maintenance_workers max_parallel_workers max_parallel_workers_per_gather min_parallel_index_scan_size \
         min_parallel_table_scan_size parallel_leader_participation parallel_setup_cost parallel_tuple_cost plan_cache_mode \
         random_page_cost recursive_worktable_factor seq_page_cost temp_buffers work_mem wal_skip_threshold \
         vacuum_buffer_usage_limit vacuum_cost_delay vacuum_cost_limit vacuum_cost_page_dirty vacuum_cost_page_hit \
         vacuum_cost_page_miss vacuum_failsafe_age vacuum_freeze_min_age vacuum_freeze_table_age vacuum_max_eager_freeze_failure_rate \
         vacuum_multixact_failsafe_age vacuum_multixact_freeze_min_age vacuum_multixact_freeze_table_age vacuum_truncate; do
  harmless[$s]="speed or resources only"
done
probe_c() {
  on router -c "SELECT snowflake_id_node.remote_open('sfid_probe', \$\$$(node_connstr node_c)\$\$, NULL, 'node_c', 10);
                SELECT snowflake_id_router.fetch('sfid_probe', 'DO \$x\$BEGIN END\$x\$');
                SELECT snowflake_id_router.fetch('sfid_probe', \$q\$$1\$q\$)" | tail -1
}
from_db=$(probe_c "SELECT string_agg(name || '=' || setting, ', ' ORDER BY name) FROM pg_catalog.pg_settings WHERE source = 'database'")
[[ -z $from_db ]] || fail "the router's session on node_c runs with dbowner's settings: $from_db"
unpinned=$(probe_c "SELECT string_agg(name, ' ' ORDER BY name) FROM pg_catalog.pg_settings
                     WHERE context IN ('user', 'superuser') AND source NOT IN ('client', 'session')")
n_pinned=$(probe_c "SELECT count(*) FROM pg_catalog.pg_settings WHERE context IN ('user', 'superuser') AND source IN ('client', 'session')")
unnamed=() named=0
for s in $unpinned; do
  case $s in
    enable_*|geqo*|jit*|vacuum_*) ;;    # speed or resources only (the planner's choices, JIT, VACUUM's pace)
    # Superuser-only (a database's or role's owner cannot set these: ALTER DATABASE ... SET
    # needs a superuser, or a role one granted SET on it) and harmless to the router's work:
    # logs, statistics, traces, tuning, and what a superuser has the server load.
    log_*|track_*|debug_discard_caches|backtrace_functions|compute_query_id|update_process_title|jit_dump_bitcode) ;;
    commit_delay|deadlock_timeout|max_stack_depth|temp_file_limit|wal_compression|wal_consistency_checking|wal_init_zero|wal_recycle) ;;
    allow_in_place_tablespaces|dynamic_library_path|extension_control_path|extension_destdir|session_preload_libraries|output_plugin_libraries) ;;
    *) [[ -n ${harmless[$s]:-} ]] || { unnamed+=("$s"); continue; } ;;
  esac
  named=$((named + 1))
done
((${#unnamed[@]} == 0)) || fail "settings a database's or role's owner can set that the router's sessions neither pin nor name harmless: ${unnamed[*]}"
echo "  no setting of dbowner's in the router's session; $n_pinned settings pinned, $named named harmless"
on_c -c "SET ROLE dbowner" -c "ALTER DATABASE postgres RESET ALL" >/dev/null

echo "a background worker on a router whose database's owner can drop snowflake_id_router's schema"
# The worker (here the maintenance, started by a superuser) calls the router's functions by
# name: it ends before it calls any.
on router -c "CREATE ROLE rowner LOGIN" -c "ALTER DATABASE postgres OWNER TO rowner" >/dev/null
on router -c "SELECT maintenance_start('1 s')" >/dev/null
for _ in $(seq 100); do
  [[ $(on router -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'snowflake_id_router background'") == 0 ]] && break
  sleep 0.1
done
line=$(grep -a "background job 2 (1) ends: this database: roles that are not superusers can change the schemas of snowflake_id" \
         "$SF_TMP/sfrouter/server.log" || true)
[[ $line == *"role rowner can drop schema public"* ]] || fail "the maintenance worker did not end at the check: $(tail -5 "$SF_TMP/sfrouter/server.log")"
[[ $(on router -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'snowflake_id_router background'") == 0 ]] \
  || fail "the maintenance worker runs on"
echo "  ended at once: $(grep -o 'WARNING: .*' <<<"$line" | cut -d: -f2- | cut -c1-150)"
on router -c "ALTER DATABASE postgres OWNER TO postgres" -c "DROP ROLE rowner" >/dev/null
router_invariants "$work"
