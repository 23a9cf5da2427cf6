#!/usr/bin/env bash
# A rebalance that outlives its caller (docs/cluster.md, background operations). A router and
# three nodes: node_a and node_b hold N shards each (BACKGROUND_SHARDS, 750 by default: the
# rebalance moves 500 of them onto node_c, which holds none). Four client sessions write
# through the router (reliability/router_client.py) throughout, while:
#   CALL rebalance_start()       in a psql that disconnects as soon as it returns: the
#                                rebalance runs in a background worker;
#   a second rebalance_start(), CALL rebalance(), a second maintenance_start()
#                                refused (55P03) while it runs;
#   maintenance_start('1 s')     the periodic repair_moves() in a worker of its own;
#   the router restarted (fast) half-way: rebalance_status says interrupted and names, in
#                                its column resume, the one call that goes on with it; the
#                                move the restart cut short is repaired by the maintenance
#                                worker (started again after the restart) with no one
#                                calling repair_moves();
#   that one call, then rebalance_wait()   the same rebalance resumed to the end: the
#                                shards spread evenly (within one);
#   rebalance_start(drain => 'node_c')     stopped after a batch by rebalance_stop():
#                                rebalance_wait() says stopped, resume names the drain;
#                                resumed by it, then its worker cancelled: stopped again;
#   roles granted what docs/cluster.md lists: rebalance_wait() alone works; a maintenance
#                                worker started directly with no interval waits 1 s between
#                                runs, and ends at once if its role may not run repair_moves();
#                                an operator's procedure handing a rebalance to a worker not
#                                started for it (the maintenance worker) is refused (55000).
# Afterwards (router_invariants): every acknowledged write present exactly once, on the node
# the map names; no ID twice; nothing left on the nodes by moves.
# every version: the background worker's start-up differs by version (signal handler API, NOLOGIN roles)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
trap 'touch "$work"/client{1,2,3,4}.log.stop; router_cluster_down; rm -rf "$work"' EXIT
N=${BACKGROUND_SHARDS:-750}

t0=$SECONDS
ROUTER_NODES=(node_a node_b)   # (node_c joins empty)
SHARDS_PER_NODE=$N router_cluster_up >/dev/null
ROUTER_NODES=(node_a node_b node_c)
node_start node_c
on node_c -c "CREATE EXTENSION snowflake_id" -f "$here/../router/examples/node.sql" >/dev/null
on router -c "SELECT add_node('node_c', '$(node_connstr node_c)')" \
  -c "SELECT assign_shards(${NODE_FIRST[node_c]}, ${NODE_COUNT[node_c]}, 'node_c')" >/dev/null
planned=$(on router -c "SELECT sum(cardinality(shards)) FROM rebalance_plan()")
echo "set up: $N shards on node_a and on node_b, none on node_c: $planned to move ($((SECONDS - t0)) s)"

# sqlstate SQL: the SQLSTATE of SQL run on the router (empty if it succeeds).
sqlstate() { on router -v VERBOSITY=sqlstate -c "$1" 2>&1 | sed -nE 's/.*ERROR:  ([0-9A-Z]{5}).*/\1/p'; }
# status_of COLUMNS: columns of the newest rebalance_status row, separated by |.
status_of() { on router -c "SELECT $1 FROM rebalance_status ORDER BY id DESC LIMIT 1"; }
# wait_until SQL WHAT [SECONDS] [STATES]: polls SQL on the router (a boolean) for up to
# SECONDS (300); fails at once if the rebalance's state becomes one of STATES (failed
# interrupted).
wait_until() {
  local _ st; for _ in $(seq $((${3:-300} * 10))); do
    [[ $(on router -c "$1" 2>/dev/null) == t ]] && return 0
    st=$(on router -c "SELECT state FROM rebalance_status ORDER BY id DESC LIMIT 1" 2>/dev/null)
    [[ " ${4:-failed interrupted} " != *" $st "* ]] \
      || fail "the rebalance is $st, waiting for $2: $(on router -c "SELECT error FROM rebalance_status ORDER BY id DESC LIMIT 1")"
    sleep 0.1
  done
  fail "waited ${3:-300} s for $2: $(on router -c "SELECT * FROM rebalance_status" 2>&1)"
}

shards=$(on router -c "SELECT string_agg(s::text, ',') FROM (SELECT generate_series(${NODE_FIRST[node_a]}, ${NODE_FIRST[node_a]} + $N - 1, 8)
                        UNION ALL SELECT generate_series(${NODE_FIRST[node_b]}, ${NODE_FIRST[node_b]} + $N - 1, 8)) g(s)")
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
pids=()
start_writers "$dsn" 900 "$shards"
sleep 3

t_start=$(now)
id=$(on router -c "CALL rebalance_start()")   # (this psql ends here: the caller is gone)
echo "rebalance $id started in $(secs "$t_start" "$(now)") s; its caller disconnected"
[[ $(on router -c "SELECT maintenance_start('1 s') > 0") == t ]] || fail "maintenance_start did not start"
wait_until "SELECT shards_done > 0 AND state = 'running' AND pid IN (SELECT pid FROM pg_stat_activity
                                                                    WHERE backend_type = 'snowflake_id_router background')
              FROM rebalance_status WHERE id = $id" "a batch moved by the background worker"
[[ $(sqlstate "CALL rebalance_start()") == 55P03 ]] || fail "a second rebalance_start() was not refused with 55P03 while one runs"
[[ $(sqlstate "CALL rebalance()") == 55P03 ]] || fail "CALL rebalance() was not refused with 55P03 while a background one runs"
[[ $(sqlstate "SELECT maintenance_start()") == 55P03 ]] || fail "a second maintenance_start() was not refused with 55P03"

# Half-way, the router restarted.
wait_until "SELECT shards_done * 2 >= shards FROM rebalance_status WHERE id = $id" "half of the rebalance"
cluster_restart sfrouter fast
IFS='|' read -r state done resume <<<"$(status_of "state, shards_done, resume")"
unfinished=$(on router -c "SELECT count(*) FROM snowflake_id_router.move WHERE NOT snowflake_id_router.move_finished(state)")
echo "router restarted after $done of $planned shards: rebalance $id $state, $unfinished move(s) cut short; resume: $resume"
((unfinished > 0)) || echo "(the restart cut no move short: the maintenance worker had nothing to repair)"
[[ $state == interrupted && -n $resume ]] || fail "after the restart rebalance_status shows $state, resume '$resume'"
# The maintenance worker (gone with the server: started again) repairs what the restart cut
# short, with no one calling repair_moves().
on router -c "SELECT maintenance_start('1 s')" >/dev/null
wait_until "SELECT NOT EXISTS (SELECT FROM snowflake_id_router.move WHERE NOT snowflake_id_router.move_finished(state))" \
  "the maintenance worker to repair the move cut short" 60 failed
[[ $(status_of "state") == interrupted ]] || fail "the maintenance worker changed the interrupted rebalance"

# The one call, from a session that disconnects at once again; then wait for the end.
on router -c "$resume" >/dev/null
[[ $(on router -c "SELECT rebalance_wait()") == done ]] || fail "rebalance_wait() after the resume: $(on router -c "SELECT * FROM rebalance_status")"
IFS='|' read -r id2 state done <<<"$(status_of "id, state, shards_done")"
[[ $id2 == "$id" && $state == done ]] || fail "the resumed rebalance: id $id2 (not $id), $state"
read -r counts even <<<"$(on router -F ' ' -c "SELECT string_agg(node || ':' || n, ',' ORDER BY node), max(n) - min(n) <= 1 AND sum(n) = 2 * $N
                                                FROM (SELECT node, count(*) n FROM shard_status WHERE mapped GROUP BY node) x")"
echo "background rebalance: $done shards moved in $(secs "$t_start" "$(now)") s (with the restart and the resume): $counts"
[[ $even == t ]] || fail "the rebalance did not spread the $((2 * N)) shards evenly: $counts"
[[ $(on router -c "SELECT maintenance_stop()") == t ]] || fail "maintenance_stop() stopped nothing"

# A background drain, stopped after its first batch by rebalance_stop() from another session.
drain=$(on router -c "CALL rebalance_start(drain => 'node_c')")
wait_until "SELECT shards_done > 0 FROM rebalance_status WHERE id = $drain" "a batch of the drain"
on router -c "SELECT rebalance_stop()" >/dev/null
[[ $(on router -c "SELECT rebalance_wait()") == stopped ]] || fail "rebalance_wait() after rebalance_stop() of drain $drain: $(status_of "*")"
IFS='|' read -r done resume <<<"$(status_of "shards_done, resume")"
echo "background drain $drain stopped after $done shards; resume: $resume"
[[ $resume == "CALL rebalance_start('by_shard_count', 32, 'tpl', drain => 'node_c')" ]] || fail "the stopped drain's resume: $resume"
# Resumed by that call, then its worker cancelled mid-batch (pg_cancel_backend): stopped,
# the batch moving undone.
on router -c "$resume" >/dev/null
wait_until "SELECT batches_moving > 0 AND state = 'running' FROM rebalance_status WHERE id = $drain" "a batch of the resumed drain" 300 "failed interrupted done"
on router -c "SELECT pg_cancel_backend(pid) FROM rebalance_status WHERE id = $drain" >/dev/null
[[ $(on router -c "SELECT rebalance_wait()") == stopped ]] || fail "rebalance_wait() after cancelling drain $drain's worker: $(status_of "*")"
IFS='|' read -r id3 done error <<<"$(status_of "id, shards_done, error")"
echo "background drain $id3 resumed, its worker cancelled: stopped after $done shards ($error)"
[[ $id3 == "$drain" ]] || fail "the resumed drain is $id3, not $drain"

# Roles granted the background operations as docs/cluster.md lists, and no more (issue 33).
# as_role ROLE SQL: SQL run on the router as ROLE; its output, or its error's SQLSTATE.
as_role() { { on router -U "$1" -v VERBOSITY=sqlstate -c "$2" 2>&1 || true; } | sed -E 's/.*ERROR:  ([0-9A-Z]{5}).*/\1/'; }
grants_of() {   # grants_of ROLE: the grants a background rebalance needs (docs/cluster.md)
  echo "GRANT EXECUTE ON PROCEDURE rebalance_start(text, integer, text, text, integer) TO $1;
        GRANT EXECUTE ON PROCEDURE snowflake_id_router.run_rebalance(text, text, integer, text, integer) TO $1;
        GRANT EXECUTE ON FUNCTION snowflake_id_router.require_primary(text), snowflake_id_router.background_start(integer, integer),
          snowflake_id_router.begin_background(text, text, integer, text), snowflake_id_router.background_step(integer, integer), snowflake_id_router.background_failed(integer, integer, text, text) TO $1;
        DO \$\$ DECLARE f regprocedure; BEGIN
          FOR f IN SELECT p.oid FROM pg_proc p WHERE p.pronamespace = 'snowflake_id_router'::regnamespace AND p.proname LIKE 'rebalance\_%' LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO $1', f);
          END LOOP; END \$\$;"
}
# rebalance_wait() granted alone: it reads the newest rebalance's state as a superuser's does
# (no USAGE on schema snowflake_id_node, whose clock and sleep it uses).
on router -c "CREATE ROLE bg_waiter LOGIN" -c "GRANT EXECUTE ON FUNCTION rebalance_wait(interval) TO bg_waiter" >/dev/null
waited=$(as_role bg_waiter "SELECT rebalance_wait('5 s')")
[[ $waited == stopped ]] || fail "rebalance_wait() as a role granted it: $waited"
echo "rebalance_wait() as a role granted only it: $waited"

# A maintenance worker started directly (background_start(2, 0): no interval) by a role that
# may not run repair_moves() ends at once (42501), rather than retrying with no wait.
[[ $(on router -c "SELECT count(*) FROM snowflake_id_router.maintenance_workers()") == 0 ]] || fail "a maintenance worker still runs"
on router -c "CREATE ROLE bg_maint LOGIN" \
  -c "GRANT EXECUTE ON FUNCTION snowflake_id_router.background_start(integer, integer), snowflake_id_router.background_step(integer, integer),
        snowflake_id_router.background_failed(integer, integer, text, text), snowflake_id_router.maintenance_step(integer),
        snowflake_id_router.maintenance_workers() TO bg_maint" >/dev/null
worker=$(as_role bg_maint "SELECT snowflake_id_router.background_start(2, 0)")
[[ $worker =~ ^[0-9]+$ ]] || fail "background_start(2, 0) as bg_maint: $worker"
gone=f
for _ in $(seq 50); do
  [[ $(on router -c "SELECT count(*) FROM pg_stat_activity WHERE pid = $worker") == 0 ]] && { gone=t; break; }
  sleep 0.1
done
if [[ $gone != t ]]; then
  on router -c "SELECT pg_terminate_backend($worker)" >/dev/null
  fail "the maintenance worker of a role that may not run repair_moves() still runs after 5 s"
fi
echo "maintenance worker $worker of a role without repair_moves(): ended at once"
# The same started by a superuser with no interval: it sleeps 1 s between its runs, out of
# any transaction (with no wait it would be in one at nearly every look: its steps follow
# each other at once). Of looks every 5 ms for 3 s, at least a tenth see it between runs.
worker=$(on router -c "SELECT snowflake_id_router.background_start(2, 0)")
read -r idle looks <<<"$(on router -F ' ' -c "CREATE TEMP TABLE seen (idle boolean)" -c "DO \$\$
    DECLARE t0 timestamptz := clock_timestamp();
    BEGIN
        WHILE clock_timestamp() < t0 + interval '3 s' LOOP
            PERFORM pg_stat_clear_snapshot();
            INSERT INTO seen SELECT a.xact_start IS NULL FROM pg_stat_activity a WHERE a.pid = $worker;
            PERFORM pg_sleep(0.005);
        END LOOP;
    END \$\$" -c "SELECT count(*) FILTER (WHERE idle), count(*) FROM seen")"
on router -c "SELECT maintenance_stop()" >/dev/null
echo "maintenance worker started with no interval: between runs at $idle of $looks looks in 3 s"
((looks > 0 && idle * 10 >= looks)) || fail "a maintenance worker started with interval 0 was between runs at $idle of $looks looks (it waits 1 s between them)"

# A granted operator's own procedure that begins a rebalance and hands it to a router worker
# not started for it (here the maintenance worker): refused (25000: a step's caller must be
# run_rebalance), the rebalance not given to a worker that would never step it.
on router -c "CREATE ROLE bg_ops LOGIN" -c "$(grants_of bg_ops)" \
  -c "CREATE PROCEDURE public.bg_hand(worker integer) LANGUAGE plpgsql AS \$\$
        DECLARE rid integer;
        BEGIN
            COMMIT;
            rid := snowflake_id_router.rebalance_begin(NULL, 'by_shard_count', 32, 'tpl', 1);
            PERFORM snowflake_id_router.rebalance_hand_over(rid, worker);
        END \$\$" -c "GRANT EXECUTE ON PROCEDURE public.bg_hand(integer) TO bg_ops" >/dev/null
worker=$(on router -c "SELECT maintenance_start('1 s')")
handed=$(as_role bg_ops "CALL public.bg_hand($worker)")
held=$(on router -c "SELECT count(*) FROM rebalance_status WHERE pid = $worker")
on router -c "SELECT maintenance_stop()" >/dev/null
[[ $handed == 25000 && $held == 0 ]] || fail "a rebalance handed to maintenance worker $worker by bg_ops's procedure: '$handed', $held rebalance(s) held by it"
echo "a rebalance handed to the maintenance worker by an operator's procedure: refused ($handed)"
[[ $(as_role bg_ops "CALL public.bg_hand(pg_backend_pid())") == 25000 ]] || fail "a rebalance handed to the operator's own session was not refused"
on router -c "DROP PROCEDURE public.bg_hand(integer)" >/dev/null

sleep 2
touch "$work"/client{1,2,3,4}.log.stop
wait_writers
on router -F ' ' -c "SELECT s, extract(epoch FROM b.started), extract(epoch FROM b.ended)
                       FROM snowflake_id_router.rebalance_batch b, unnest(b.shards) s
                      WHERE b.state = 'done' AND s = ANY ('{$shards}'::integer[])" >"$work/moves"
router_invariants "$work" "$work"/client*.log
echo "writes acknowledged: $(cat "$work"/client*.log | wc -l)"
