#!/usr/bin/env bash
# Thousands of shards on one node (issue 24): 2048 shards of a two-table template (primary
# keys, a DEFAULT now() column, two more indexes), made by create_shards in eight
# transactions of 256 (each shard takes about 20 locks until its transaction ends: 256 fit
# the default lock table), every shard complete (both tables, their indexes, its catalog
# row), then one row written through each shard's own next_id() default: every ID carries
# its own shard and none repeats; a create_shard onto the full node is as complete; then all
# of them dropped (drop_shard, cascade) and nothing is left.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
SHARDS=${SHARDS:-2048} BATCH=${BATCH:-256}
cluster_start manyshards 55463
trap 'cluster_stop manyshards' EXIT
q -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" -f - <<'SQL'
CREATE SCHEMA tpl;
CREATE TABLE tpl.posts (id bigint PRIMARY KEY, user_id bigint NOT NULL, body text NOT NULL,
                        created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX ON tpl.posts (user_id, id);
CREATE TABLE tpl.likes (id bigint PRIMARY KEY, post_id bigint NOT NULL, user_id bigint NOT NULL,
                        created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX ON tpl.likes (post_id);
SQL
start=$SECONDS
for ((first = 0; first < SHARDS; first += BATCH)); do
  q -c "SELECT create_shards('s', $first, $BATCH, 'tpl')"
done
made=$((SECONDS - start))

# Complete: per shard, two tables, four indexes (two keys, two more), a catalog row. (One
# pass over pg_class, grouped: a lookup per shard by namespace would scan it per shard.)
read -r listed complete <<<"$(q -F ' ' -c "
  SELECT count(*), count(*) FILTER (WHERE c.tables = 2 AND c.indexes = 4)
    FROM snowflake_id_shards s
    LEFT JOIN (SELECT relnamespace, count(*) FILTER (WHERE relkind = 'r') AS tables,
                      count(*) FILTER (WHERE relkind = 'i') AS indexes
                 FROM pg_class GROUP BY relnamespace) c ON c.relnamespace = to_regnamespace(s.schema_name)")"
[[ $listed == "$SHARDS" && $complete == "$SHARDS" ]] || fail "$listed shards listed, $complete complete; expected $SHARDS"

# One row in each shard's posts and likes through the table's own default.
q -c "CREATE TABLE ids (shard integer, id bigint)" -c "
  DO \$\$ DECLARE s record; id bigint; BEGIN
    FOR s IN SELECT schema_name, shard FROM snowflake_id_shards LOOP
      EXECUTE format('INSERT INTO %I.posts (user_id, body) VALUES (1, ''x'') RETURNING id', s.schema_name) INTO id;
      INSERT INTO ids VALUES (s.shard, id);
      EXECUTE format('INSERT INTO %I.likes (post_id, user_id) VALUES (\$1, 1) RETURNING id', s.schema_name) INTO id USING id;
      INSERT INTO ids VALUES (s.shard, id);
    END LOOP; END \$\$"
# And a shard made onto the full node, one call.
q -c "SELECT create_shard('late', 8191, template => 'tpl')" \
  -c "WITH x AS (INSERT INTO late.posts (user_id, body) VALUES (1, 'x') RETURNING id) INSERT INTO ids SELECT 8191, id FROM x"
read -r rows own distinct <<<"$(q -F ' ' -c "SELECT count(*), count(*) FILTER (WHERE id_shard(id) = shard), count(DISTINCT id) FROM ids")"
echo "many shards: $SHARDS made in ${made} s ($((SHARDS / BATCH)) transactions), all complete; $rows IDs, $own of their own shard, $distinct distinct"
[[ $rows == $((2 * SHARDS + 1)) && $own == "$rows" && $distinct == "$rows" ]] || fail "IDs: $rows written, $own of their own shard, $distinct distinct"

# What the router's shard_status asks of a node, in its chunks of 128 shards, each within its
# status_timeout (10 s): every shard listed, with the rows just written through its next_id()
# defaults counted as made in the last minute. (Found by the shard's next_id() looked up by
# name, a lookup that reads every next_id() of the node, once per catalog row scanned: over a
# minute a chunk here, and the router listed none of the node's shards.)
read -r listed recent <<<"$( { echo "SET statement_timeout = '10s';"
    for ((after = -1; after < SHARDS; after += 128)); do
      echo "SELECT count(*), sum(ids_last_minute) FROM snowflake_id_node.shard_stats(true, $after, 128);"
    done; } | q -F ' ' -f - | awk '{n += $1; r += $2} END {print n, r}')"
echo "many shards: shard_stats lists $listed shards, $recent rows made in the last minute"
[[ $listed == $((SHARDS + 1)) && $recent == "$rows" ]] || fail "shard_stats listed $listed shards and $recent recent rows (want $((SHARDS + 1)) and $rows)"

for ((first = 0; first < SHARDS; first += BATCH)); do
  q -c "SET client_min_messages = warning" \
    -c "SELECT count(drop_shard(schema_name, cascade => true)) FROM snowflake_id_shards WHERE shard BETWEEN $first AND $((first + BATCH - 1))" >/dev/null
done
q -c "SET client_min_messages = warning" -c "SELECT drop_shard('late', cascade => true)" >/dev/null
read -r left schemas <<<"$(q -F ' ' -c "SELECT (SELECT count(*) FROM snowflake_id_shards), (SELECT count(*) FROM pg_namespace WHERE nspname ~ '^s[0-9]+$' OR nspname = 'late')")"
[[ $left == 0 && $schemas == 0 ]] || fail "after dropping every shard: $left catalog rows, $schemas schemas left"
echo "many shards: all dropped, nothing left"
