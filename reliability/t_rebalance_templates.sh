#!/usr/bin/env bash
# A drain moves shards made from different templates in one batch, each copy made from its
# own template (issue 35). A router and three data nodes (scripts/router_cluster.sh, 2
# shards made on each from template tpl); every node also has template tpl_likes (posts and
# likes, a foreign key between them), from which node_a makes shards 10 and 11 with rows.
# drain_node('node_a') with batches of 8 puts all four of node_a's shards in one batch: it
# moves as one move_shards per template, the rebalance's template (tpl, the default) only
# for shards that record none. Before it, a move_shard naming another template than the
# shard's is refused (22023). Then every shard of node_a is on another node, with its own
# tables and rows, and its new node records the template it was made from; nothing is left
# on any node (router_invariants).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
trap 'router_cluster_down; rm -rf "$work"' EXIT
SHARDS_PER_NODE=2 router_cluster_up >/dev/null 2>&1

for n in "${ROUTER_NODES[@]}"; do
  on "$n" >/dev/null <<'SQL'
CREATE SCHEMA tpl_likes;
CREATE TABLE tpl_likes.posts (LIKE tpl.posts INCLUDING ALL);
CREATE TABLE tpl_likes.likes (post_id bigint NOT NULL REFERENCES tpl_likes.posts (id) ON DELETE CASCADE,
                              who text NOT NULL, PRIMARY KEY (post_id, who));
SQL
done
on node_a >/dev/null <<'SQL'
SELECT create_shard('shard_10', 10, template => 'tpl_likes'), create_shard('shard_11', 11, template => 'tpl_likes');
INSERT INTO shard_10.posts (user_id, body) SELECT 1, 'p' || g FROM generate_series(1, 50) g;
INSERT INTO shard_11.posts (user_id, body) SELECT 1, 'p' || g FROM generate_series(1, 30) g;
INSERT INTO shard_10.likes SELECT id, 'who' || w FROM shard_10.posts, generate_series(1, 3) w;
INSERT INTO shard_11.likes SELECT id, 'who' || w FROM shard_11.posts, generate_series(1, 2) w;
SELECT count(*) FROM (SELECT insert_post(shard, 1, 'row') FROM snowflake_id_shards, generate_series(1, 20) WHERE shard < 10) x;
SQL
served=$(on node_a -c "SELECT string_agg(shard || ':' || coalesce(template, '-'), ' ' ORDER BY shard) FROM snowflake_id_shard")
echo "node_a serves (shard:template) $served"

# A move names the template its shard was made from, or is refused (22023) before anything
# is made: a copy made from another schema of the same tables (any role's that may make one
# on the target), which the definitions' comparison cannot tell from it,
# would be recorded as made from it, and left out of every later alter_shards of its own.
on node_b -c "CREATE SCHEMA other" -c "CREATE TABLE other.posts (LIKE tpl_likes.posts INCLUDING ALL)" \
  -c "CREATE TABLE other.likes (LIKE tpl_likes.likes INCLUDING ALL, FOREIGN KEY (post_id) REFERENCES other.posts (id) ON DELETE CASCADE)" >/dev/null
out=$(on router -v VERBOSITY=sqlstate -c "SELECT move_shard(10, 'node_b', 'other')" 2>&1) && fail "shard 10 moved with template other"
[[ $out == *22023* ]] || fail "a move naming another template than the shard's was not refused with 22023: $out"
out=$(on router -c "SELECT move_shard(10, 'node_b', 'other')" 2>&1 || true)
[[ $out == *"shard 10 was made from template tpl_likes, not other"* ]] || fail "the refusal does not say so: $out"
[[ $(on router -c "SELECT node FROM shard_map WHERE shard = 10") == node_a ]] || fail "shard 10 left node_a"
echo "  move_shard(10, 'node_b', 'other'): refused (22023: $(grep -o 'ERROR: .*' <<<"$out" | cut -c8-))"

out=$(on router -c "CALL drain_node('node_a', batch_size => 8)" 2>&1) || fail "the drain failed: $out"
batches=$(on router -c "SELECT count(*) FROM snowflake_id_router.rebalance_batch b JOIN snowflake_id_router.rebalance r ON r.id = b.rebalance
                        WHERE r.kind = 'drain' AND b.state = 'done' AND 10 = ANY (b.shards)")
[[ $batches == 1 ]] || fail "shards 10 and 11 did not move in a done batch: $batches"
[[ $(on router -c "SELECT count(*) FROM shard_map WHERE node = 'node_a'") == 0 ]] || fail "node_a still serves shards"
for s in 10 11; do
  node=$(on router -c "SELECT node FROM shard_map WHERE shard = $s")
  got=$(on "$node" -c "SELECT (SELECT template FROM snowflake_id_shard WHERE shard = $s) || ' ' || (SELECT count(*) FROM shard_$s.posts)
                       || ' ' || (SELECT count(*) FROM shard_$s.likes)")
  want=$([[ $s == 10 ]] && echo "tpl_likes 50 150" || echo "tpl_likes 30 60")
  [[ $got == "$want" ]] || fail "shard $s on $node: template, posts, likes = $got, not $want"
  echo "  shard $s: on $node, made from tpl_likes, its rows and likes with it ($got)"
done
for s in 0 1; do
  node=$(on router -c "SELECT node FROM shard_map WHERE shard = $s")
  [[ $(on "$node" -c "SELECT count(*) FROM shard_$s.posts") == 20 ]] || fail "shard $s on $node lost rows"
done
echo "  shards 0 and 1 (tpl): on other nodes with their rows, moved in the same batch"
router_invariants "$work"
