#!/usr/bin/env bash
# every version: the rules privileged code relies on change by version (restricted operations, search_path in maintenance commands since 17, dblink and libpq)
# Class 3 of issue 33, as a class: a lock, name or marker that proves a move's state can be
# taken or made only by the extension's owner (docs/cluster-design.md, docs/security.md).
# Roles a deployment has forge every proof the old design trusted:
#   - an application role on every node and a routing role on the router hold every advisory
#     lock key the old design used, in both key spaces (two integers and one bigint): each
#     moved shard's (1397114180, shard), the schema-change lock (1397114180, -1), the fence
#     gate, the rebalance lock and the router-session key (hashtext(...), 0); their sessions
#     are named 'snowflake_id_router ...' (application_name);
#   - they make objects named like a move's: a publication and a subscription of the next
#     move's name (squatters: dropped with a WARNING), a table of that name in the shard's
#     schema (a table of the shard: moved with its rows), a trigger of that name on a shard
#     table (a trigger of the shard the template lacks: the move refuses it), and, named like
#     past moves, a publication, a subscription, a table, a trigger and (a replication
#     role) a replication slot;
#   - a routing session named like the router's, in a transaction older than a move's flip.
# Then moves, a drain and a rebalance, alter_shards and repair_moves all succeed (squatted
# names after a WARNING); repair_moves neither drops nor reports another role's objects,
# and node_status lists none as a leftover; the move waits for the disguised transaction.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
bg=()
# (pkill: the sleeps that keep the holders' psql sessions open, children of this shell)
trap 'kill "${bg[@]}" 2>/dev/null || true; pkill -P $$ -x sleep 2>/dev/null || true; router_cluster_down; rm -rf "$work"' EXIT
SHARDS_PER_NODE=2 router_cluster_up >/dev/null 2>&1
router8=$(on router -c "SELECT left(md5(snowflake_id_node.identity()), 8)")
served_by() { on router -c "SELECT node FROM shard_map WHERE shard = $1"; }
as() { local who=$1 role=$2; shift 2
  PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 -h "$(node_dir "$who")" -p "$(node_port "$who")" -U "$role" -d postgres "$@"; }
shards=(0 1 2731 2732 5462 5463)
for n in "${ROUTER_NODES[@]}"; do
  on "$n" -c "SELECT count(*) FROM (SELECT insert_post(shard, 1, 'row') FROM snowflake_id_shards, generate_series(1, 20)) x" \
    -c "CREATE ROLE app LOGIN" -c "GRANT CREATE ON DATABASE postgres TO app" -c "CREATE SCHEMA app AUTHORIZATION app" \
    -c "CREATE ROLE cdc LOGIN REPLICATION" \
    -c "DO \$\$ BEGIN IF to_regrole('pg_create_subscription') IS NOT NULL THEN GRANT pg_create_subscription TO app; END IF; END \$\$" \
    -c "DO \$\$ DECLARE s text; BEGIN FOR s IN SELECT schema_name FROM snowflake_id_shards LOOP
          EXECUTE format('GRANT USAGE, CREATE ON SCHEMA %I TO app', s); END LOOP; END \$\$" >/dev/null
done
on router -c "CREATE ROLE router_user LOGIN" -c "GRANT USAGE ON FOREIGN SERVER snowflake_id TO router_user"

echo "every advisory lock key of the old design, held by other roles"
# (class, key) pairs, each taken in both key spaces: pg_advisory_lock(class, key) and
# pg_advisory_lock(class << 32 | key).
keys="SELECT 1397114180, s FROM unnest(ARRAY[$(IFS=,; echo "${shards[*]}")]) s
      UNION ALL SELECT 1397114180, -1
      UNION ALL SELECT hashtext(k), 0 FROM unnest(ARRAY['snowflake_id_router.fence_gate', 'snowflake_id_router.rebalance',
                                                        'snowflake_id_router.session']) k"
forge="SET application_name = 'snowflake_id_router mover 1';
SELECT count(*) FROM ($keys) k(c, s), LATERAL (SELECT pg_advisory_lock(c, s),
                                                       pg_advisory_lock((c::bigint << 32) | (s::bigint & 4294967295))) l;"
holders=0
hold_locks() {   # WHO ROLE: a session of ROLE there that takes them all, then idles (no transaction)
  local host port
  if [[ $1 == router ]]; then host=$SF_TMP/sfrouter port=$ROUTER_PORT; else host=$(node_dir "$1") port=$(node_port "$1"); fi
  { echo "$forge"; exec sleep 600; } | psql -X -q -At -h "$host" -p "$port" -U "$2" -d postgres >/dev/null 2>&1 & bg+=($!)
  holders=$((holders + 1))
}
for n in "${ROUTER_NODES[@]}"; do hold_locks "$n" app; done
hold_locks router router_user
want=$(( (${#shards[@]} + 4) * 2 ))
for who in router "${ROUTER_NODES[@]}"; do
  for _ in $(seq 200); do
    [[ $(on "$who" -c "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                        WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = 'snowflake_id_router mover 1'") == "$want" ]] && break
    sleep 0.05
  done
  [[ $(on "$who" -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid IN (1, 2)") == "$want" ]] \
    || fail "the forged locks are not all held on $who"
done
echo "  $want keys held on the router and on each node, by sessions named 'snowflake_id_router mover 1'"

t0=$SECONDS
on router -c "SELECT move_shard(0, 'node_b')" -c "SELECT move_shards('{2731,2732}', 'node_c')" \
  -c "SELECT move_shard(5462, 'node_a')" -c "SELECT move_shard(0, 'node_a')" >/dev/null 2>"$work/moves.log" \
  || fail "a move failed under forged locks: $(cat "$work/moves.log")"
echo "  four moves done under them ($((SECONDS - t0)) s)"

echo "names of the next move, made by other roles"
# (Before PostgreSQL 16 only a superuser makes a subscription: no other role can squat one.)
subs=$(on node_a -c "SELECT to_regrole('pg_create_subscription') IS NOT NULL")
next=$(( $(on router -c "SELECT coalesce(max(id), 0) FROM snowflake_id_router.move") + 1 ))
name=sfid_${router8}_$next
src=$(served_by 1); dst=node_c
# (in the template too, as a table of every shard would be: else the copy would differ)
for n in "${ROUTER_NODES[@]}"; do on "$n" -c "CREATE TABLE tpl.$name (n integer PRIMARY KEY)"; done
as "$src" app -c "CREATE PUBLICATION $name" \
  -c "CREATE TABLE shard_1.$name (n integer PRIMARY KEY)" -c "INSERT INTO shard_1.$name SELECT generate_series(1, 10)"
[[ $subs == f ]] || as "$dst" app -c "SET client_min_messages = error" \
  -c "CREATE SUBSCRIPTION $name CONNECTION 'dbname=nowhere password=x' PUBLICATION p WITH (connect = false)"
on router -c "SET client_min_messages = warning" -c "SELECT move_shard(1, '$dst')" >/dev/null 2>"$work/squat.log" \
  || fail "the move whose names were squatted failed: $(cat "$work/squat.log")"
[[ $(on router -c "SELECT max(id) FROM snowflake_id_router.move") == "$next" ]] || fail "the move did not get id $next"
# (the WARNINGs are the nodes': the router does not pass them on, so their server logs have them)
grep -q "publication $name belongs to role app" "$(node_dir "$src")/server.log" \
  && { [[ $subs == f ]] || grep -q "subscription $name belongs to role app" "$(node_dir "$dst")/server.log"; } \
  || fail "the squatters were not named: $(grep -h "$name" "$(node_dir "$src")/server.log" "$(node_dir "$dst")/server.log")"
[[ $(on "$dst" -c "SELECT count(*) FROM shard_1.$name") == 10 ]] || fail "the shard's table $name did not move with its rows"
echo "  move $next of shard 1: done; on the nodes: $(grep -h -o "WARNING: .*$name belongs to role app.*" "$(node_dir "$src")/server.log" "$(node_dir "$dst")/server.log" | cut -c10- | tr '\n' ';')"
echo "  shard_1.$name (the shard's table of the marker's name): moved with its 10 rows"
as "$dst" app -c "DROP TABLE shard_1.$name"
for n in "${ROUTER_NODES[@]}"; do on "$n" -c "DROP TABLE tpl.$name"; done
next=$((next + 1)); name=sfid_${router8}_$next
on "$dst" -c "GRANT TRIGGER ON shard_1.posts TO app" -c "CREATE FUNCTION public.app_trg() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END'"
as "$dst" app -c "CREATE TRIGGER $name AFTER INSERT ON shard_1.posts FOR EACH STATEMENT EXECUTE FUNCTION public.app_trg()"
if out=$(on router -c "SELECT move_shard(1, 'node_a')" 2>&1); then fail "a shard with a trigger of the next move's name moved"; fi
grep -q "differs from its copy: trigger on posts: CREATE TRIGGER $name" <<<"$out" || fail "the refusal does not name the trigger: $out"
[[ $(on "$dst" -c "SELECT count(*) FROM pg_trigger WHERE tgname = '$name'") == 1 ]] || fail "the app's trigger $name is gone"
echo "  a trigger named $name on shard_1.posts: refused as any trigger the template lacks ($(grep -o 'ERROR: .*' <<<"$out" | cut -c8- | cut -c1-120))"
on "$dst" -c "DROP TRIGGER $name ON shard_1.posts"   # (its owner may; TRIGGER lets app make it only)

echo "objects of other roles named like past moves"
# publication and subscription (app), a table and a trigger of its own (app), a logical
# replication slot (cdc, a replication role), on every node.
for n in "${ROUTER_NODES[@]}"; do
  as "$n" app -c "SET client_min_messages = error" -c "CREATE PUBLICATION sfid_${router8}_1" \
    -c "$([[ $subs == f ]] && echo "SELECT 1" || echo "CREATE SUBSCRIPTION sfid_${router8}_2 CONNECTION 'dbname=nowhere password=x' PUBLICATION p WITH (connect = false)")" \
    -c "CREATE TABLE app.sfid_${router8}_3 (n integer)" \
    -c "CREATE FUNCTION app.app_trg2() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END'" \
    -c "CREATE TRIGGER sfid_${router8}_4 AFTER INSERT ON app.sfid_${router8}_3 FOR EACH ROW EXECUTE FUNCTION app.app_trg2()"
  PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 -h "$(node_dir "$n")" -p "$(node_port "$n")" \
    -U cdc -d postgres -c "SELECT 1 FROM pg_create_logical_replication_slot('sfid_${router8}_5', 'pgoutput')" >/dev/null
done
theirs="SELECT string_agg(x, ', ' ORDER BY x) FROM (
          SELECT 'publication ' || pubname FROM pg_publication WHERE pubname = 'sfid_${router8}_1'
          UNION ALL SELECT 'subscription ' || subname FROM pg_subscription WHERE subname = 'sfid_${router8}_2'
          UNION ALL SELECT 'table ' || relname FROM pg_class WHERE relname = 'sfid_${router8}_3'
          UNION ALL SELECT 'trigger ' || tgname FROM pg_trigger WHERE tgname = 'sfid_${router8}_4'
          UNION ALL SELECT 'slot ' || slot_name FROM pg_replication_slots WHERE slot_name = 'sfid_${router8}_5') o(x)"
all_theirs=$(on node_a -c "$theirs")
[[ $(grep -o ', ' <<<"$all_theirs" | wc -l) == $([[ $subs == f ]] && echo 3 || echo 4) ]] || fail "not all were made: $all_theirs"
out=$(on router -c "SELECT coalesce(string_agg(outcome, '; '), '') FROM repair_moves()" 2>&1) || fail "repair_moves failed: $out"
for k in 1 2 3 4 5; do
  [[ $out != *"sfid_${router8}_$k"* ]] || fail "repair_moves reported another role's object: $out"
done
for n in "${ROUTER_NODES[@]}"; do
  [[ $(on "$n" -c "$theirs") == "$all_theirs" ]] || fail "repair_moves dropped another role's object on $n: left $(on "$n" -c "$theirs")"
done
left=$(on router -c "SELECT string_agg(array_to_string(leftovers, ', '), '; ') FROM node_status")
[[ $left != *sfid_${router8}_[1234]* ]] || fail "node_status lists another role's objects as leftovers: $left"
echo "  repair_moves: '${out:-no rows}'; all five kept on every node ($all_theirs)"
# (A slot has no owner to tell it by: node_status, a status view, still lists cdc's.)
echo "  node_status lists as leftovers: ${left:-nothing}"
for n in "${ROUTER_NODES[@]}"; do on "$n" -c "SELECT pg_drop_replication_slot('sfid_${router8}_5')" >/dev/null; done

echo "a drain, a rebalance and a schema change under the forged locks"
t0=$SECONDS
on router -c "CALL drain_node('node_c')" -c "CALL rebalance()" >/dev/null 2>"$work/rebalance.log" \
  || fail "a drain or rebalance failed under forged locks: $(cat "$work/rebalance.log")"
[[ $(on router -c "SELECT count(*) FROM shard_status WHERE node = 'node_c'") -gt 0 ]] || fail "the rebalance gave node_c nothing"
echo "  drain_node('node_c') then rebalance(): done ($((SECONDS - t0)) s), node_c serves $(on router -c "SELECT count(*) FROM shard_status WHERE node = 'node_c'") shard(s)"
# (app may create in every shard schema, for the names above: a schema change there would
# resolve the statement's names among what app may add, so it is refused, 42501, until the
# grants go)
err=$(on router -c "SELECT count(*) FROM alter_shards('ALTER TABLE %I.posts ADD COLUMN note text')" 2>&1 || true)
[[ $err == *'holds what another role than postgres'*'CREATE on schema'*'(granted to app)'* ]] \
  || fail "alter_shards over shard schemas where app may create was not refused: $err"
on router -c "SELECT abandon_schema_change(max(change)) FROM schema_change_status" >/dev/null 2>&1 || true
for n in "${ROUTER_NODES[@]}"; do
  on "$n" -c "DO \$\$ DECLARE s text; BEGIN FOR s IN SELECT schema_name FROM snowflake_id_shards LOOP
                EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM app', s); END LOOP; END \$\$" >/dev/null
done
echo "  alter_shards while app may create in the shards' schemas: refused (42501); the grants revoked"
on router -c "SELECT count(*) FROM alter_shards('ALTER TABLE %I.posts ADD COLUMN note text')" >/dev/null 2>"$work/alter.log" \
  || fail "alter_shards failed under forged locks: $(cat "$work/alter.log")"
echo "  alter_shards: done on $(on router -c "SELECT count(*) FROM schema_change_status WHERE state = 'done'") node(s)"

echo "a routing session named like the router's own, in a transaction older than the flip"
on router -c "INSERT INTO snowflake_id_router.setting VALUES ('lock_timeout', '2 s')"
{ echo "SET application_name = 'snowflake_id_router loopback 1';"; echo "BEGIN;"; echo "SELECT 1;"; exec sleep 600; } \
  | psql -X -q -At -h "$SF_TMP/sfrouter" -p "$ROUTER_PORT" -U router_user -d postgres >/dev/null 2>&1 & old=$!; bg+=($old)
for _ in $(seq 100); do
  [[ $(on router -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'router_user' AND state = 'idle in transaction'") == 1 ]] && break
  sleep 0.05
done
s=$(served_by 2731); t=$([[ $s == node_a ]] && echo node_b || echo node_a)
began=$(date +%s.%N)
on router -c "SELECT move_shard(2731, '$t')" >/dev/null
took=$(awk -v a="$began" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
awk -v t="$took" 'BEGIN { exit !(t >= 1.9) }' || fail "the move took $took s: it did not wait (lock_timeout 2 s) for a transaction older than its flip named like the router's"
echo "  the move waited for it: $took s (lock_timeout 2 s)"
kill "$old" 2>/dev/null || true
on router -c "DELETE FROM snowflake_id_router.setting"

router_invariants "$work"
