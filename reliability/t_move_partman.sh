#!/usr/bin/env bash
# versions: 15
# pg_partman's configuration moves with its shards (sql/node/partman.sql; PostgreSQL 15:
# Debian's pg_partman 4.7, which scripts/setup installs). A router and three data nodes
# (scripts/router_cluster.sh, 4 shards made on each), pg_partman on node_a and node_b only.
# alter_shards gives the template and every shard `events`, partitioned by ID range; on
# node_a and node_b pg_partman keeps the template's and every shard's (create_parent, two
# partitions made ahead). Shard 1 moves from node_a to node_b: afterwards node_a has no
# configuration naming shard_1 (its run_maintenance() runs: a row naming a table the node no
# longer has makes it fail for every table) and no template table of it; node_b has shard
# 1's configuration as node_a had it, and its run_maintenance() makes shard 1's next
# partitions ahead of its rows, and every table of the shard keeps its owner (the
# partitioned table's is not its partitions'). A move to node_c, which has no pg_partman, or
# from a node whose pg_partman another role may write, is refused before anything is made
# (55000), the configuration left on node_a. drop_shard by a superuser forgets the
# configuration of the dropped shard's tables (node_b's maintenance runs after it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
trap 'router_cluster_down; rm -rf "$work"' EXIT

SHARDS_PER_NODE=4 router_cluster_up
on router -c "SELECT * FROM alter_shards(\$\$CREATE TABLE %I.events (id bigint PRIMARY KEY, note text) PARTITION BY RANGE (id)\$\$)" >/dev/null \
  || fail "alter_shards could not make events"
for n in node_a node_b; do
  on "$n" >/dev/null <<'SQL'
CREATE SCHEMA partman;
CREATE EXTENSION pg_partman SCHEMA partman;
SELECT partman.create_parent(s || '.events', 'id', 'native', '1000', p_premake := 2, p_start_partition := '0')
  FROM (SELECT 'tpl' AS s UNION ALL SELECT schema_name FROM snowflake_id_shards) x;
SQL
done
config="SELECT parent_table, partition_interval, premake, template_table FROM partman.part_config WHERE parent_table = 'shard_1.events'"
before=$(on node_a -c "$config")
[[ -n $before ]] || fail "pg_partman does not keep shard_1.events on node_a"
on node_a -c "INSERT INTO shard_1.events SELECT g FROM generate_series(0, 2999, 7) g" >/dev/null

# A target without pg_partman: refused before anything is made, nothing taken off node_a.
err=$(on router -c "SELECT move_shard(1, 'node_c')" 2>&1 || true)
[[ $err == *'pg_partman 4.7'*'keeps the shards'"'"' tables on the source, and this node has no pg_partman'* ]] \
  || fail "a move onto a node without pg_partman was not refused: $err"
[[ $(on node_c -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_1'") == 0 ]] || fail "the refused move left shard_1 on node_c"
[[ $(on node_a -c "$config") == "$before" ]] || fail "the refused move changed shard 1's configuration on node_a"
echo "onto a node without pg_partman: refused (55000), nothing made, the configuration left"

# A pg_partman another role may change (here: write its configuration, which names the
# tables the move makes and drops): refused before anything is made.
for n in node_a node_b node_c; do on "$n" -c "CREATE ROLE pm_other; CREATE ROLE ev_owner" >/dev/null; done
on node_a -c "GRANT INSERT ON partman.part_config TO pm_other" >/dev/null
err=$(on router -c "SELECT move_shard(1, 'node_b')" 2>&1 || true)
[[ $err == *'pg_partman on this node is not only the superusers'"'"' to change: INSERT on table partman.part_config (granted to pm_other)'* ]] \
  || fail "a move over a pg_partman another role may write was not refused: $err"
on node_a -c "REVOKE INSERT ON partman.part_config FROM pm_other" >/dev/null
echo "a pg_partman another role may change: the move refused (55000), nothing made"

# The partitioned table's owner is not its partitions' (they keep the superuser's): each
# comes out of the move with its own.
on node_a -c "ALTER TABLE shard_1.events OWNER TO ev_owner" >/dev/null
owners="SELECT string_agg(format('%s:%s', relname, relowner::regrole), ' ' ORDER BY relname) FROM pg_class
         WHERE relnamespace = 'shard_1'::regnamespace AND relkind IN ('r', 'p', 'S')"
owners_before=$(on node_a -c "$owners")
on router -c "SELECT move_shard(1, 'node_b')" >/dev/null 2>"$work/move.log" || fail "move_shard(1, 'node_b') failed: $(cat "$work/move.log")"
[[ $(on node_b -c "$owners") == "$owners_before" ]] || fail "the owners of shard 1's tables changed in the move: $owners_before before, $(on node_b -c "$owners") after"
[[ $(on node_a -c "SELECT count(*) FROM partman.part_config WHERE parent_table LIKE 'shard\_1.%'") == 0 ]] \
  || fail "node_a still configures shard 1's tables after its move"
[[ $(on node_a -c "SELECT count(*) FROM pg_class WHERE relname = 'template_shard_1_events'") == 0 ]] \
  || fail "node_a kept shard 1's template table"
on node_a -c "SELECT partman.run_maintenance()" >/dev/null 2>"$work/maint.log" \
  || fail "run_maintenance() fails on the source after the move: $(cat "$work/maint.log")"
[[ $(on node_b -c "$config") == "$before" ]] || fail "node_b's configuration of shard 1 is not node_a's: $(on node_b -c "$config")"
[[ $(on node_b -c "SELECT count(*) FROM pg_class WHERE relname = 'template_shard_1_events'") == 1 ]] \
  || fail "node_b has no template table for shard 1's events"
parts=$(on node_b -c "SELECT count(*) FROM pg_inherits WHERE inhparent = 'shard_1.events'::regclass")
on node_b -c "SELECT partman.run_maintenance()" >/dev/null 2>"$work/maint.log" \
  || fail "run_maintenance() fails on the target after the move: $(cat "$work/maint.log")"
after=$(on node_b -c "SELECT count(*) FROM pg_inherits WHERE inhparent = 'shard_1.events'::regclass")
((after > parts)) || fail "node_b's run_maintenance() made no partition for shard 1 ($parts before, $after after)"
on node_b -c "INSERT INTO shard_1.events SELECT g FROM generate_series(3000, 4999, 7) g" >/dev/null
[[ $(on node_b -c "SELECT count(*) FROM shard_1.events_default") == 0 ]] || fail "shard 1's rows past its old partitions went to the default one"
echo "moved: node_a's configuration of shard 1 gone (its maintenance runs), node_b's the same; it made $((after - parts)) partition(s) ahead there"

# drop_shard by a superuser forgets pg_partman's configuration of the dropped tables.
on node_b -c "SELECT drop_shard('shard_2731', cascade => true)" >/dev/null
[[ $(on node_b -c "SELECT count(*) FROM partman.part_config WHERE parent_table LIKE 'shard\_2731.%'") == 0 ]] \
  || fail "drop_shard left pg_partman's configuration of shard 2731's tables"
on node_b -c "SELECT partman.run_maintenance()" >/dev/null 2>"$work/maint.log" \
  || fail "run_maintenance() fails after drop_shard: $(cat "$work/maint.log")"
echo "drop_shard('shard_2731'): its pg_partman configuration gone, node_b's maintenance runs"

router_invariants "$work"
