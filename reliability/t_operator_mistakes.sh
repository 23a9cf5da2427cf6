#!/usr/bin/env bash
# Operator mistakes that must not strand a shard, hide a change or lose a shard's rows (issue
# 33, items 12, 13, 17, 22, 23 and 24; docs/cluster.md). A router and three data nodes; each
# case is a mistake, then what must hold, printed with its figure:
#   23  add_node of a router database (one with snowflake_id_router, a follower or not):
#       refused, 55000
#   24  remove_node of a node that still serves a shard schema with rows the map sends
#       nowhere: refused, 55000, naming the shard; of a node that cannot be reached and to
#       which no shard is mapped: removed, with a WARNING
#   12  alter_shards with %I inside a string literal, a dollar quote or a comment (a schema
#       name with a quote would break out of it), or running a query on every node (CREATE
#       TABLE AS, SELECT INTO, materialized views): refused before any node is reached;
#       a schema named with quotes changed like any other
#   17  alter_shards while a move is dead after its seal: refused on the router (55000 naming
#       the move); refused by the nodes themselves when it comes from another router
#       database; the sealed and incoming copies untouched, the repair completes the move
#       and the change then reaches every shard
#   22  alter_shards waiting on a node that is frozen (kill -STOP of its postmaster and
#       backends): a cancel returns within a few seconds, and a move can start at once
#   13  a plan leaves out a shard whose move copies it; a move paused after its seal while
#       another session drains its source node (whose other shards were moved off): the
#       drain leaves the shard mapped where it is (55000 naming the move), where before it
#       remapped it by the map alone; the mover killed, repair_moves() completes the move;
#       the drain called again finishes, and the node is removed. Four writers through the
#       router meanwhile.
# The end: router_invariants, with every acknowledged write checked. CASES="13 22" runs only
# those cases.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
bg=() frozen=()
trap 'kill -CONT "${frozen[@]}" 2>/dev/null || true; touch "$work"/client{1,2,3,4}.log.stop; kill "${bg[@]}" 2>/dev/null || true
      router_cluster_down; rm -rf "$work"' EXIT
SHARDS_PER_NODE=8 router_cluster_up
want() { [[ -z ${CASES:-} || " $CASES " == *" $1 "* ]]; }

# refused SQLSTATE PATTERN SQL: the router refuses SQL with SQLSTATE, the message naming PATTERN.
refused() {
  local code=$1 pat=$2 err; shift 2
  if err=$(on router -v VERBOSITY=verbose -c "$1" 2>&1 >/dev/null); then fail "accepted: $1"; fi
  [[ $err == *"ERROR:  $code:"* ]] || fail "expected $code for $1, got: $err"
  [[ $err == *$pat* ]] || fail "the refusal of $1 does not say '$pat': $err"
  printf '  %s\n    %s\n' "$1" "$(grep -m1 -o 'ERROR:  .*' <<<"$err" | cut -c8- | cut -c1-220)"
}
# db SERVER DATABASE ARGS: psql on another database of a node's (or the router's) server.
db() {
  local dir port
  if [[ $1 == router ]]; then dir=$SF_TMP/sfrouter port=$ROUTER_PORT; else dir=$(node_dir "$1") port=$(node_port "$1"); fi
  PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d "$2" "${@:3}"
}
db_connstr() {
  if [[ $1 == router ]]; then echo "host=$SF_TMP/sfrouter port=$ROUTER_PORT dbname=$2 user=postgres"
  else echo "host=$(node_dir "$1") port=$(node_port "$1") dbname=$2 user=postgres"; fi
}
served_by() { on router -c "SELECT node FROM shard_map WHERE shard = $1"; }
clean() {
  local n left
  for n in "${ROUTER_NODES[@]}"; do
    left=$(on "$n" -c "SELECT string_agg(x, '; ') FROM snowflake_id_node.leftovers() x")
    [[ -z $left ]] || fail "$1: left on $n: $left"
  done
}
# kill_mover: the held mover's backend terminated, then the breakpoint removed: a dead move.
kill_mover() {
  on router -c "SELECT pg_terminate_backend($mpid)" >/dev/null
  wait "$mover" || true
  release
}
# since T0: seconds since T0 (date +%s.%N), two decimals.
since() { awk -v t0="$1" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.2f", t1 - t0 }'; }
column_on() { on "$1" -c "SELECT count(*) FROM pg_attribute WHERE attrelid = '$2'::regclass AND attname = '$3' AND NOT attisdropped"; }
for s in 0 1 2 3 4 5 6 7 2731 2732 5462 5463; do on router -c "SELECT count(insert_post($s, 42, 'preload')) FROM generate_series(1, 20)" >/dev/null; done

if want 23; then
echo "23: add_node refuses a router database"
on router -c "CREATE DATABASE router2" -c "CREATE DATABASE router3"
db router router2 -c "CREATE EXTENSION snowflake_id_router CASCADE"
db router router3 -c "CREATE EXTENSION snowflake_id_router CASCADE"
on router -c "SELECT add_router('follower', '$(db_connstr router router3)')" >/dev/null
refused 55000 'router database' "SELECT add_node('r2', '$(db_connstr router router2)')"
refused 55000 'router database' "SELECT add_node('r3', '$(db_connstr router router3)')"
[[ $(on router -c "SELECT count(*) FROM snowflake_id_router.node") == 3 ]] || fail "23: a router database was registered as a node"
echo "  nodes registered: $(on router -c "SELECT string_agg(name, ', ' ORDER BY name) FROM snowflake_id_router.node")"
on router -c "SELECT remove_router('follower')" -c "DROP DATABASE router2" -c "DROP DATABASE router3" >/dev/null
fi

if want 24; then
echo "24: remove_node refuses a node that still serves a shard schema"
on node_b -c "CREATE DATABASE extra"
db node_b extra -c "CREATE EXTENSION snowflake_id" -f "$here/../router/examples/node.sql" \
  -c "SELECT create_shard('shard_8000', 8000, template => 'tpl')" \
  -c "INSERT INTO shard_8000.posts (user_id, body) SELECT 1, 'only here' FROM generate_series(1, 50)" >/dev/null
on router -c "SELECT add_node('extra', '$(db_connstr node_b extra)')" >/dev/null
[[ $(on router -c "SELECT count(*) FROM shard_map WHERE node = 'extra'") == 0 ]] || fail "24: shards are mapped to extra"
refused 55000 'shard 8000' "SELECT remove_node('extra')"
[[ $(on router -c "SELECT count(*) FROM snowflake_id_router.node WHERE name = 'extra'") == 1 ]] || fail "24: extra was removed"
echo "  the node serving shard 8000 (50 rows, mapped to $(served_by 8000)) stays registered"
# A node that cannot be reached (its database gone): removed, with a WARNING.
on node_b -c "DROP DATABASE extra WITH (FORCE)"
t0=$(date +%s.%N)
on router -c "SET client_min_messages = warning" -c "SELECT remove_node('extra')" >/dev/null 2>"$work/remove.log" \
  || fail "24: a node that cannot be reached, no shard mapped to it, was not removed: $(cat "$work/remove.log")"
took=$(since "$t0")
grep -q "WARNING:  node 'extra' cannot be reached" "$work/remove.log" || fail "24: no WARNING that extra could not be checked: $(cat "$work/remove.log")"
echo "  unreachable, removed in $took s: $(grep -m1 -o 'WARNING:  .*' "$work/remove.log" | cut -c11- | cut -c1-160)"
fi

if want 12; then
echo "12: alter_shards: %I only where a name goes; no query on every node"
on node_a -c "SELECT create_shard('odd''na\"me', 100, template => 'tpl')" >/dev/null
changes=$(on router -c "SELECT count(*) FROM snowflake_id_router.schema_change")
refused 42601 'string' "SELECT alter_shards(\$\$COMMENT ON TABLE %I.posts IS 'posts of %I'\$\$)"
refused 42601 'string' "SELECT alter_shards(\$\$ALTER TABLE %I.posts ADD COLUMN tag text DEFAULT E'%I'\$\$)"
refused 42601 'dollar' "SELECT alter_shards('CREATE FUNCTION %I.n() RETURNS bigint LANGUAGE sql AS \$f\$ SELECT count(*) FROM %I.posts \$f\$')"
refused 42601 'comment' "SELECT alter_shards(\$\$ALTER TABLE %I.posts ADD COLUMN tag text /* %I */\$\$)"
refused 22023 'CREATE TABLE AS' "SELECT alter_shards('CREATE TABLE %I.copy AS SELECT * FROM %I.posts')"
refused 22023 'SELECT' "SELECT alter_shards('SELECT * INTO %I.copy FROM %I.posts')"
refused 22023 'CREATE MATERIALIZED VIEW' "SELECT alter_shards('CREATE MATERIALIZED VIEW %I.counts AS SELECT count(*) FROM %I.posts')"
refused 22023 'REFRESH MATERIALIZED VIEW' "SELECT alter_shards('REFRESH MATERIALIZED VIEW %I.counts')"
[[ $(on router -c "SELECT count(*) FROM snowflake_id_router.schema_change") == "$changes" ]] || fail "12: a refused change was recorded"
[[ $(on node_a -c "SELECT count(*) FROM pg_class WHERE relname IN ('copy', 'counts') OR (relname = 'posts' AND obj_description(oid, 'pg_class') IS NOT NULL)") == 0 ]] \
  || fail "12: a refused change ran on node_a"
out=$(on router -c "SELECT string_agg(format('%s %s', node, schemas), ', ' ORDER BY node) FROM alter_shards(\$\$COMMENT ON TABLE %I.posts IS 'posts'\$\$)")
[[ $(on node_a -c "SELECT obj_description('\"odd''na\"\"me\".posts'::regclass, 'pg_class')") == posts ]] || fail "12: the schema named with quotes was not changed"
echo "  refused, nothing recorded or run; then a comment on every schema (node schemas: $out), the one named odd'na\"me too"
on node_a -c "SELECT drop_shard('odd''na\"me', true)" >/dev/null
fi

if want 17; then
echo "17: alter_shards while a move is dead after its seal"
held sealed "SELECT move_shard(2731, 'node_c')"
kill_mover
move=$(on router -c "SELECT max(id) FROM snowflake_id_router.move")
refused 55000 "move $move" "SELECT alter_shards('ALTER TABLE %I.posts ADD COLUMN c17 text')"
# The same change from another router database over the same nodes: refused by the nodes.
on router -c "CREATE DATABASE router2"
db router router2 -c "CREATE EXTENSION snowflake_id_router CASCADE"
for n in "${ROUTER_NODES[@]}"; do db router router2 -c "SELECT add_node('$n', '$(node_connstr "$n")')" >/dev/null; done
on router -c "COPY snowflake_id_router.shard TO STDOUT" | db router router2 -c "COPY snowflake_id_router.shard FROM STDIN"
err=$(db router router2 -v VERBOSITY=verbose -c "SELECT alter_shards('ALTER TABLE %I.posts ADD COLUMN c17 text')" 2>&1 >/dev/null || true)
[[ $err == *'ERROR:  55000:'*'node_'*'move'* ]] || fail "17: another router's change reached a node with a move's copies: $err"
echo "  from another router database: $(grep -m1 -o 'ERROR:  .*' <<<"$err" | cut -c8- | cut -c1-220)"
on router -c "DROP DATABASE router2 WITH (FORCE)"
for n in node_b node_c; do
  [[ $(column_on "$n" shard_2731.posts c17) == 0 ]] || fail "17: the copy of shard 2731 on $n was changed"
done
out=$(on router -c "SELECT outcome FROM repair_moves() WHERE move = $move")
[[ $out == completed ]] || fail "17: the repair of move $move: $out"
on router -c "SELECT count(*) FROM alter_shards('ALTER TABLE %I.posts ADD COLUMN c17 text')" >/dev/null
[[ $(served_by 2731) == node_c && $(column_on node_c shard_2731.posts c17) == 1 ]] || fail "17: shard 2731 is not on node_c with the change"
echo "  the sealed and incoming copies unchanged; repair_moves(): move $move $out; then the change reached every shard"
clean 17
fi

if want 22; then
echo "22: alter_shards waiting on a frozen node is cancelled at once"
on router -c "INSERT INTO snowflake_id_router.setting VALUES ('lock_timeout', '60 s')"
on node_c -c "BEGIN" -c "LOCK TABLE shard_5462.posts IN ACCESS SHARE MODE" -c "SELECT pg_sleep(300)" >/dev/null 2>&1 & bg+=($!)
on router -c "SELECT * FROM alter_shards('ALTER TABLE %I.posts ADD COLUMN c22 text')" >"$work/ddl.log" 2>&1 & ddl=$!
for _ in $(seq 600); do
  [[ $(on node_c -c "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%schema_change_apply%'") == 1 ]] && break
  sleep 0.05
done
[[ $(on node_c -c "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%schema_change_apply%'") == 1 ]] \
  || fail "22: the change did not come to wait on node_c: $(cat "$work/ddl.log")"
pm=$(head -1 "$(node_dir node_c)/data/postmaster.pid")
frozen=("$pm" $(pgrep -P "$pm"))
kill -STOP "${frozen[@]}"
sleep 1
t0=$(date +%s.%N)
on router -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE 'SELECT * FROM alter_shards(%'" >/dev/null
for _ in $(seq 200); do kill -0 "$ddl" 2>/dev/null || break; sleep 0.1; done
kill -0 "$ddl" 2>/dev/null && fail "22: alter_shards did not return within 20 s of its cancel, node_c frozen"
took=$(since "$t0")
if wait "$ddl"; then fail "22: the cancelled alter_shards succeeded"; fi
grep -q 'canceling statement due to user request' "$work/ddl.log" || fail "22: $(cat "$work/ddl.log")"
awk -v t="$took" 'BEGIN { exit !(t < 5) }' || fail "22: alter_shards took $took s to return after its cancel"
on router -c "DELETE FROM snowflake_id_router.setting"
t0=$(date +%s.%N)
timeout 60 env PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 -h "$SF_TMP/sfrouter" -p "$ROUTER_PORT" \
  -U postgres -d postgres -c "SELECT move_shard(0, 'node_b')" >/dev/null \
  || fail "22: a move could not run after the cancel, node_c still frozen"
moved=$(since "$t0")
[[ $(served_by 0) == node_b ]] || fail "22: shard 0 did not move"
echo "  cancelled, node_c frozen: returned in $took s; then shard 0 moved node_a -> node_b in $moved s"
kill -CONT "${frozen[@]}"; frozen=()
kill "${bg[@]}" 2>/dev/null || true; bg=()
on node_c -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(300)'" >/dev/null
out=$(on router -c "SET client_min_messages = warning" -c "SELECT string_agg(node || ' ' || state, ', ' ORDER BY node) FROM alter_shards('ALTER TABLE %I.posts ADD COLUMN c22 text')")
[[ $(column_on node_c shard_5462.posts c22) == 1 && $(column_on node_b shard_0.posts c22) == 1 ]] || fail "22: the resumed change did not reach every node"
echo "  node_c thawed, the same call resumed: $out"
on router -c "SELECT move_shard(0, 'node_a')" >/dev/null
clean 22
fi

if want 13; then
echo "13: a move sealed, not flipped, while another session drains its source"
shards=$(on router -c "SELECT string_agg(s::text, ',') FROM (SELECT generate_series(0, 7) UNION ALL
                        SELECT generate_series(2731, 2738) UNION ALL SELECT generate_series(5462, 5469)) g(s)")
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
for c in 1 2 3 4; do "$PYTHON" "$here/router_client.py" "$dsn" "$c" 600 "$shards" "$work/client$c.log" & bg+=($!); done
# node_c's other shards moved off first: its one shard with data is the one in the move
# (the drain's own batches would wait at the fence gate the sealed move holds).
others=$(on node_c -c "SELECT array_agg(shard) FROM snowflake_id_shards WHERE shard <> 5462")
on router -c "SELECT move_shards('$others', 'node_a')" >/dev/null
# A plan leaves out a shard whose move copies it (before the seal, still served).
held subscribed "SELECT move_shard(5462, 'node_b')"
planned=$(on router -c "SET client_min_messages = notice" -c "SELECT string_agg(array_to_string(shards, ','), ' ') FROM rebalance_plan(drain => 'node_c')" 2>"$work/plan.log")
[[ " ${planned//,/ } " != *" 5462 "* ]] || fail "13: the drain's plan moves shard 5462, which a move copies: $planned"
grep -q "shard(s) 5462 not planned: in unfinished moves" "$work/plan.log" || fail "13: the plan does not say why 5462 is left out: $(cat "$work/plan.log")"
echo "  rebalance_plan(drain => 'node_c') while 5462 is copied: batches [${planned:-none}]; $(grep -o 'shard(s) 5462 not planned[^(]*' "$work/plan.log")"
kill_mover
on router -c "SELECT count(*) FROM repair_moves()" >/dev/null
held sealed "SELECT move_shard(5462, 'node_b')"
move=$(on router -c "SELECT max(id) FROM snowflake_id_router.move")
t0=$(date +%s.%N)
err=$(on router -v VERBOSITY=verbose -c "SET client_min_messages = warning" -c "CALL drain_node('node_c')" 2>&1 >/dev/null || true)
# (The refusal names the move by its id on the router, or by its key on the node it is
# sealed on, <router8>/<id>: which check meets it first depends on timing.)
[[ $err == *'ERROR:  55000:'*"shard 5462"* && $err =~ move\ ([0-9a-f]{8}/)?$move[^0-9] ]] || fail "13: the drain beside a sealed move: ${err:-it succeeded}; shard 5462 is mapped to $(served_by 5462)"
echo "  the drain beside move $move, after $(since "$t0") s: $(grep -m1 -o 'ERROR:  .*' <<<"$err" | cut -c8- | cut -c1-260)"
[[ $(served_by 5462) == node_c ]] || fail "13: shard 5462 was remapped to $(served_by 5462) while its move was unfinished"
kill_mover
t0=$(date +%s.%N)
out=$(on router -c "SELECT string_agg(outcome, '; ') FROM repair_moves() WHERE move = $move")
took=$(since "$t0")
[[ $out == completed ]] || fail "13: repair_moves() on move $move: $out"
[[ $(served_by 5462) == node_b && $(on node_b -c "SELECT count(*) FROM snowflake_id_shards WHERE shard = 5462") == 1 ]] \
  || fail "13: shard 5462 is mapped to $(served_by 5462) after the repair"
echo "  the mover killed: repair_moves() $out move $move in $took s; shard 5462 on node_b"
on router -c "SET client_min_messages = warning" -c "CALL drain_node('node_c')" || fail "13: the drain called again failed"
[[ $(on router -c "SELECT count(*) FROM shard_map WHERE node = 'node_c'") == 0 ]] || fail "13: node_c still has shards after the drain"
on router -c "SELECT remove_node('node_c')" >/dev/null
echo "  the drain called again: done; node_c removed"
touch "$work"/client{1,2,3,4}.log.stop
for p in "${bg[@]}"; do wait "$p" || fail "13: a client failed"; done; bg=()
echo "  writes acknowledged: $(cat "$work"/client*.log | wc -l)"
router_invariants "$work" "$work"/client*.log
else
router_invariants "$work"
fi
