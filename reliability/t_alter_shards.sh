#!/usr/bin/env bash
# alter_shards under load (scripts/router_cluster.sh: a router and three data nodes, 170
# shards made on each, 510 in all). Four client sessions write through the router and
# stop at the first error that is not 40001, while alter_shards adds a column with a
# default to every shard, then an index on it. The first change is interrupted: a long
# transaction on node_b holds one shard's table, so the change waits there, node_a done;
# meanwhile a move of a node_b shard to node_c is started (it waits for the change); the
# session running alter_shards is then terminated. node_b must be left all-old, the move
# then runs, and alter_shards called again resumes at node_b. Afterwards every shard on
# every node has the column and the index, the template is the same on every node
# (template_status), the moved shard matches its new node's template, and every
# acknowledged write is present exactly once, and the move left nothing on any node
# (router_invariants).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
trap 'kill $(jobs -p) 2>/dev/null || true; router_cluster_down; rm -rf "$work"' EXIT

SHARDS_PER_NODE=170 router_cluster_up
add_column="ALTER TABLE %I.posts ADD COLUMN note text NOT NULL DEFAULT 'none'"
add_index="CREATE INDEX ON %I.posts (note, id)"

# The clients write to 16 shards of each node, among them the shard that moves (2735).
shards=$(on router -c "SELECT string_agg(s::text, ',') FROM (SELECT generate_series(0, 15) UNION ALL
                        SELECT generate_series(2731, 2746) UNION ALL SELECT generate_series(5462, 5477)) g(s)")
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
pids=()
for c in 1 2 3 4; do
  "$PYTHON" "$here/router_client.py" "$dsn" "$c" 20 "$shards" "$work/client$c.log" strict & pids+=($!)
done
sleep 2

# A long transaction on node_b holds shard 2740's table: the change waits there.
on node_b -c "BEGIN" -c "LOCK TABLE shard_2740.posts IN ACCESS SHARE MODE" -c "SELECT pg_sleep(60)" >/dev/null 2>&1 & blocker=$!
on router -c "SELECT * FROM alter_shards(\$\$$add_column\$\$)" >"$work/first.log" 2>&1 & first=$!
for _ in $(seq 200); do
  [[ $(on router -c "SELECT count(*) FROM schema_change_status WHERE node = 'node_a' AND node_state = 'done'") == 1 ]] \
    && [[ $(on node_b -c "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'snowflake_id_router %' AND wait_event_type = 'Lock'") == 1 ]] && break
  sleep 0.05
done
[[ $(on node_b -c "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'snowflake_id_router %' AND wait_event_type = 'Lock'") == 1 ]] \
  || fail "alter_shards did not reach node_b: $(cat "$work/first.log")"

# A move started during the change waits for it.
: >"$work/moves"
t0=$(date +%s.%N)
on router -c "SELECT move_shard(2735, 'node_c')" >"$work/move.log" 2>&1 & mover=$!
for _ in $(seq 100); do
  [[ $(on router -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted") == 1 ]] && break
  sleep 0.05
done
[[ $(on router -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted") == 1 ]] \
  || fail "the move did not wait for the schema change"

# Longer than lock_timeout (2 s): node_b's transaction gives up on shard 2740's lock and is
# tried again, never committing the other shards.
sleep 3
# The change's session ends; node_b rolls back (its session notices within a second).
on router -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%alter_shards(%' AND pid <> pg_backend_pid()" >/dev/null
if wait "$first"; then fail "alter_shards survived its session's end: $(cat "$work/first.log")"; fi
for _ in $(seq 100); do
  [[ $(on node_b -c "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'snowflake_id_router %' AND wait_event_type = 'Lock'") == 0 ]] && break
  sleep 0.05
done
state=$(on router -c "SELECT string_agg(format('%s %s %s', state, node, node_state), ', ' ORDER BY node) FROM schema_change_status")
[[ $state == "interrupted node_a done, interrupted node_b pending, interrupted node_c pending" ]] \
  || fail "after the interruption schema_change_status says: $state"
for n in node_a node_b node_c; do
  with=$(on "$n" -c "SELECT count(*) FILTER (WHERE a.attname IS NOT NULL) || '/' || count(*) FROM snowflake_id_shards s
                      LEFT JOIN pg_attribute a ON a.attrelid = format('%I.posts', s.schema_name)::regclass AND a.attname = 'note'")
  echo "after the interruption: $n has the column on $with shards"
  case $n in node_a) [[ $with == 170/170 ]] ;; *) [[ $with == 0/* ]] ;; esac || fail "$n is neither all-old nor all-new: $with"
done
wait "$mover" || fail "the move started during the change failed: $(cat "$work/move.log")"
echo "2735 $t0 $(date +%s.%N)" >>"$work/moves"
echo "the move waited for the change, then ran between two nodes without it"

# Called again, the change resumes at node_b.
kill "$blocker" 2>/dev/null || true
on node_b -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()" >/dev/null
resumed=$(on router -c "SET client_min_messages = notice" -c "SELECT string_agg(node || ' ' || state, ', ' ORDER BY node) FROM alter_shards(\$\$$add_column\$\$)" 2>&1) \
  || fail "the change called again failed: $resumed"
[[ $resumed == *"resumes schema change 1"* && $resumed == *"node_b done, node_c done" ]] || fail "the resumed change: $resumed"
echo "resumed: $resumed" | tr '\n' ' '; echo
on router -c "SELECT * FROM alter_shards(\$\$$add_index\$\$)" >/dev/null
for p in "${pids[@]}"; do wait "$p" || fail "a client's write failed with an error other than 40001 (above)"; done

# Every shard on every node has both; the template is the same everywhere.
for n in node_a node_b node_c; do
  read -r shards_there with_both <<<"$(on "$n" -F ' ' -c "
    SELECT count(*), count(*) FILTER (WHERE EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = format('%I.posts', s.schema_name)::regclass
                                                   AND a.attname = 'note' AND a.atthasdef)
                                 AND EXISTS (SELECT FROM pg_index i WHERE i.indrelid = format('%I.posts', s.schema_name)::regclass
                                                   AND pg_get_indexdef(i.indexrelid) LIKE '%(note, id)'))
      FROM snowflake_id_shards s")"
  echo "$n: $with_both of $shards_there shards have the column and the index"
  [[ $with_both == "$shards_there" ]] || fail "$n: $((shards_there - with_both)) shards lack the change"
done
[[ $(on node_c -c "SELECT count(*) FROM snowflake_id_shards WHERE shard = 2735") == 1 ]] || fail "shard 2735 is not on node_c"
status=$(on router -F ' ' -c "SELECT node, fingerprint, matches, changes_behind, shards_checked, shards_differing FROM template_status(shards => true)")
echo "$status"
[[ $(awk '{print $2}' <<<"$status" | sort -u | wc -l) == 1 && $(awk '$3 != "t" || $4 != 0 || $6 != 0' <<<"$status") == "" ]] \
  || fail "templates or shards differ after the change: $status"
[[ $(on node_c -c "SELECT snowflake_id_node.fingerprint('shard_2735') = snowflake_id_node.fingerprint('tpl')") == t ]] \
  || fail "the moved shard does not match its new node's template"

# The move's invariants (scripts/router_cluster.sh): nothing it made left on any node, every
# shard served once where the map names it, every acknowledged write there exactly once.
router_invariants "$work" "$work"/client*.log
