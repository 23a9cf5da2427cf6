#!/usr/bin/env bash
# every version: keys, triggers, partitions and views moved by this version's apply worker (t_move_keys_triggers' checks run on 15)
# Issue 35's bar: a template shaped like Instagram's shard, 200 shards over three nodes, four
# sessions writing through the router while CALL rebalance() spreads them onto a fourth node
# and CALL drain_node() empties the first. Template ig: users; photos partitioned by ID
# range (a partition per month, bounds made with make_id; the next month's partition begins
# during the writes, so new photos cross the boundary); likes (user_id,
# photo_id) with a composite key and a foreign key to photos; comments with a foreign key;
# a trigger keeping photos.like_count and one setting photos.updated_at (their functions in
# the template, copied into each shard); a view of recent photos; a materialized view of the
# top photos (unique index: refreshable concurrently); and a function of the shard that likes
# a photo. The writers like photos, comment on them and post new ones (40001 retried).
# Afterwards: every acknowledged like, comment and photo present exactly once, on the node
# the map names; each photo's like_count equals its likes there (the trigger fired once per
# like: never for the rows a move copies); every foreign key valid and no row without its
# parent; each served shard's materialized view refreshes concurrently; its photos in both
# month partitions as their IDs say; each moved shard's definition its template's; nothing
# left by any move (router_invariants). pg_partman's carrying is t_move_partman's (15).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
trap 'touch "$work/stop"; kill $(jobs -p) 2>/dev/null || true; ROUTER_NODES=(node_a node_b node_c node_d); router_cluster_down; rm -rf "$work"' EXIT
SHARDS_PER_NODE=0 router_cluster_up >/dev/null 2>&1
declare -A COUNT=([node_a]=67 [node_b]=67 [node_c]=66)   # 200 shards

# The months: this one up to a bound 40 s ahead (as if the month turned during the writes,
# which begin once the shards are made and go on at least until it is past), the next after.
boundary=$(on node_a -c "SELECT make_id(now() + interval '40 s', 0)")
boundary_at=$(( $(date +%s) + 40 ))
until_next=$(on node_a -c "SELECT make_id(now() + interval '40 days', 0)")
template() {
  on "$1" -v boundary="$boundary" -v until_next="$until_next" -f "$here/instagram.sql" >/dev/null
}
pids=()
for n in node_a node_b node_c; do
  { template "$n"
    on "$n" -c "SELECT count(create_shard('shard_' || s, s, template => 'ig')) FROM generate_series(${NODE_FIRST[$n]}, ${NODE_FIRST[$n]} + ${COUNT[$n]} - 1) s" >/dev/null
    on "$n" -c "SELECT string_agg(format('INSERT INTO %I.users VALUES (1, ''one''); INSERT INTO %I.photos (id, user_id) SELECT %s::bigint + g, 1 FROM generate_series(1, 5) g;',
                                   schema_name, schema_name, make_id(now() - interval '1 hour', shard)), ' ') FROM snowflake_id_shards" | on "$n" >/dev/null
  } & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for f in "ig_like(shard integer, photo bigint, by_user bigint) RETURNS void" "ig_comment(shard integer, photo bigint, body text) RETURNS bigint" \
         "ig_photo(shard integer, by_user bigint) RETURNS bigint"; do
  on router -c "CREATE FUNCTION $f LANGUAGE plproxy AS \$\$ CLUSTER 'snowflake_id'; RUN ON shard; \$\$" >/dev/null
done
for n in node_a node_b node_c; do
  on "$n" -c "SELECT string_agg(format('SELECT %s, id FROM %I.photos', shard, schema_name), ' UNION ALL ') FROM snowflake_id_shards" \
    | on "$n" -F ' ' >>"$work/photos"
done
echo "200 shards from template ig ($(wc -l <"$work/photos") photos), the next month's partition from ID $boundary"

# The writers: likes (each a new user's), comments, new photos (liked later by the same
# writer); 40001 retried; a like whose retry finds it there (23505: the first try committed,
# its answer lost) counts as acknowledged.
cat >"$work/writer.py" <<'PY'
import os, random, sys, time, psycopg2, psycopg2.errors
dsn, client, photos_file, log, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
photos = [tuple(map(int, l.split())) for l in open(photos_file)]
rng = random.Random(client); conn = psycopg2.connect(dsn); conn.autocommit = True
out = open(log, "w"); i = 0
def call(sql, args):
    for attempt in range(600):
        try:
            cur = conn.cursor(); cur.execute(sql, args); return cur.fetchone()[0]
        except psycopg2.errors.SerializationFailure:
            time.sleep(0.02)
    sys.exit(f"{sql} {args} refused 600 times")
while not os.path.exists(stop):
    i += 1; shard, photo = rng.choice(photos); kind = rng.random()
    if kind < 0.6:
        user = client * 10000000 + i
        try:
            call("SELECT ig_like(%s, %s, %s)", (shard, photo, user))
        except psycopg2.errors.UniqueViolation:
            pass
        out.write(f"L {shard} {photo} {user}\n")
    elif kind < 0.85:
        out.write(f"C {shard} {call('SELECT ig_comment(%s, %s, %s)', (shard, photo, f'c{client}-{i}'))}\n")
    else:
        new = call("SELECT ig_photo(%s, %s)", (shard, client))
        photos.append((shard, new)); out.write(f"P {shard} {new}\n")
    out.flush()
PY
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
writers=()
for c in 1 2 3 4; do "$PYTHON" "$work/writer.py" "$dsn" "$c" "$work/photos" "$work/w$c.log" "$work/stop" 2>"$work/w$c.err" & writers+=($!); done
sleep 2

node_start node_d
template node_d
on node_d -c "CREATE EXTENSION snowflake_id" -f "$here/../router/examples/node.sql" >/dev/null 2>&1 || true
on router -c "SELECT add_node('node_d', '$(node_connstr node_d)')" >/dev/null
t0=$SECONDS
out=$(on router -c "CALL rebalance(batch_size => 16)" 2>&1) || fail "the rebalance failed: $out"
t_rebalance=$((SECONDS - t0))
on_d=$(on router -c "SELECT count(*) FROM shard_map m WHERE m.node = 'node_d' AND m.shard IN (SELECT shard FROM snowflake_id_router.shard)")
t0=$SECONDS
out=$(on router -c "CALL drain_node('node_a', batch_size => 16)" 2>&1) || fail "the drain failed: $out"
t_drain=$((SECONDS - t0))
while (( $(date +%s) <= boundary_at + 1 )); do sleep 0.5; done
sleep 1; touch "$work/stop"
for p in "${writers[@]}"; do wait "$p" || fail "a writer failed: $(cat "$work"/w*.err)"; done
acked=$(cat "$work"/w*.log | wc -l)
echo "rebalance onto node_d: ${t_rebalance} s; drain of node_a: ${t_drain} s; $acked writes acknowledged meanwhile"

ROUTER_NODES=(node_a node_b node_c node_d)
[[ $(on node_a -c "SELECT count(*) FROM snowflake_id_shards") == 0 ]] || fail "node_a still serves shards after its drain"
: >"$work/held"; bad=
for n in node_b node_c node_d; do
  on "$n" -c "SELECT string_agg(format('SELECT ''L'', %s, photo_id, user_id FROM %I.likes UNION ALL SELECT ''C'', %s, id, NULL FROM %I.comments
                                         UNION ALL SELECT ''P'', %s, id, NULL FROM %I.photos', shard, schema_name, shard, schema_name, shard, schema_name), ' UNION ALL ')
                FROM snowflake_id_shards" | on "$n" -F ' ' | sed 's/ $//' >>"$work/held"
  bad+=$(on "$n" -c "SELECT string_agg(format('SELECT %L || '' shard %s photo '' || p.id || '': like_count '' || p.like_count || '', likes '' || count(l.*)
                                                FROM %I.photos p LEFT JOIN %I.likes l ON l.photo_id = p.id
                                               GROUP BY p.id, p.like_count HAVING p.like_count <> count(l.*)', '$n', shard, schema_name, schema_name), ' UNION ALL ')
                  FROM snowflake_id_shards" | on "$n")
  bad+=$(on "$n" -c "SELECT string_agg(format('SELECT %L || '' shard %s: a like or comment of no photo '' || x.photo_id
                                                FROM (SELECT photo_id FROM %I.likes UNION ALL SELECT photo_id FROM %I.comments) x
                                               WHERE NOT EXISTS (SELECT FROM %I.photos p WHERE p.id = x.photo_id)', '$n', shard, schema_name, schema_name, schema_name), ' UNION ALL ')
                  FROM snowflake_id_shards" | on "$n")
  bad+=$(on "$n" -c "SELECT string_agg(conrelid::regclass || ' ' || conname || ' not valid', ', ') FROM pg_constraint
                     WHERE contype = 'f' AND NOT convalidated AND connamespace IN (SELECT schema_name::regnamespace FROM snowflake_id_shards)")
  bad+=$(on "$n" -c "SELECT string_agg(format('SELECT %L || '' shard %s: photo '' || p.id || '' in the wrong month'' FROM %I.photos_this_month p WHERE p.id >= $boundary
                                               UNION ALL SELECT %L || '' shard %s: photo '' || p.id || '' in the wrong month'' FROM %I.photos_next_month p WHERE p.id < $boundary',
                                              '$n', shard, schema_name, '$n', shard, schema_name), ' UNION ALL ') FROM snowflake_id_shards" | on "$n")
  on "$n" -c "SELECT string_agg(format('REFRESH MATERIALIZED VIEW CONCURRENTLY %I.top_photos;', schema_name), ' ') FROM snowflake_id_shards" | on "$n" >/dev/null \
    || fail "a materialized view on $n does not refresh"
  for s in $(on "$n" -c "SELECT schema_name FROM snowflake_id_shards"); do
    diff=$(on "$n" -c "SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('$s'), snowflake_id_node.fingerprint('ig'), 'the shard', 'the template')")
    [[ -z $diff ]] || fail "shard $s on $n differs from its template: $diff"
  done
done
[[ -z $bad ]] || fail "$(echo "$bad" | head -5)"
# (IDs compared as strings of digits: awk's numbers are doubles)
after() { awk -v b="$boundary" '$1 == "P" { n = length($3) > length(b) || (length($3) == length(b) && ($3 "") >= (b "")); if (n == '"$1"') c++ } END { print c + 0 }' "$work"/w*.log; }
new_month=$(after 1); this_month=$(after 0)
(( new_month > 0 && this_month > 0 )) || fail "the writers' new photos did not cross the month: $this_month before it, $new_month after"
sort "$work"/w*.log | sed 's/ $//' >"$work/acked"; sort "$work/held" >"$work/held_sorted"
missing=$(comm -23 "$work/acked" "$work/held_sorted" | head -3)
[[ -z $missing ]] || fail "acknowledged writes missing: $missing"
dup=$(uniq -d "$work/held_sorted" | head -3)
[[ -z $dup ]] || fail "rows held twice: $dup"
echo "  $(grep -c '^L' "$work/acked") likes, $(grep -c '^C' "$work/acked") comments, $(grep -c '^P' "$work/acked") photos acknowledged, each once where the map says (new photos: $this_month this month, $new_month in the next month's partition); every like_count equals its likes; every key valid, no orphan; every materialized view refreshed; every shard its template's ($on_d on node_d after the rebalance)"
router_invariants "$work"
