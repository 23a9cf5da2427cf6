#!/usr/bin/env bash
# Benchmark of a node split onto its streaming standby (not a test; issue 38):
#   bash bench/split.sh [OUT.json]
# node_a holds SHARDS shards (4,096) with SIZE_MB of rows (2,048) spread evenly; node_b is
# empty. In the same run:
#   1. CALL rebalance() moves half of node_a's shards (and about half its bytes) onto node_b:
#      its time; then CALL drain_node('node_b') brings them back (not timed);
#   2. a streaming standby of node_a is made (pg_basebackup -R) and caught up, then
#      split_node moves the same number of shards (half) onto it: its total time, and the
#      moved shards' write pause (the split's fence to its move's flip).
# Prints and writes (OUT.json, default bench/split.json) the sizes really used, both times,
# the pause and the ratio rebalance / split. SHARDS, SIZE_MB, BATCH (rebalance's batch size,
# 32), SEAL_TIMEOUT (below) are settable; a smaller SIZE_MB is reported as such.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh; source reliability/lib.sh; source scripts/router_cluster.sh; source bench/lib.sh
out=${1:-bench/split.json}
SHARDS=${SHARDS:-4096} SIZE_MB=${SIZE_MB:-2048} BATCH=${BATCH:-32}
work=$(mktemp -d); chmod 755 "$work"
ROUTER_NODES=(node_a node_b standby)
trap 'router_cluster_down; rm -rf "$work"' EXIT
now() { date +%s.%N; }
secs() { python3 -c "print(round($2 - $1, 3))"; }

start_nodes node_a node_b
make_shards node_a 0 "$SHARDS"
# Rows of about 840 bytes on disk (a 480-byte body, tuple and index overhead), SIZE_MB in all, per_shard in each, 256 shards to a transaction.
per_shard=$((SIZE_MB * 1024 * 1024 / 840 / SHARDS))
for ((from = 0; from < SHARDS; from += 256)); do
  on node_a -c "DO \$\$ BEGIN FOR s IN $from .. $((from + 255 < SHARDS ? from + 255 : SHARDS - 1)) LOOP
      EXECUTE format('INSERT INTO shard_%s.posts (user_id, body) SELECT g, repeat(''x'', 480) FROM generate_series(1, $per_shard) g', s);
    END LOOP; END \$\$" >/dev/null
done
on node_a -c "CHECKPOINT" >/dev/null
bytes=$(on node_a -c "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                      WHERE n.nspname ~ '^shard_' AND c.relkind = 'r'")
echo "node_a: $SHARDS shards, $per_shard rows each, $((bytes / 1024 / 1024)) MB of shard tables"
cluster_start sfrouter "$ROUTER_PORT"
on router -c "CREATE EXTENSION snowflake_id_router CASCADE" -f router/examples/router.sql >/dev/null
on router -c "SELECT add_node('node_a', '$(node_connstr node_a)'), add_node('node_b', '$(node_connstr node_b)')" \
  -c "SELECT assign_shards(0, 8192, 'node_a')" >/dev/null 2>&1
# SEAL_TIMEOUT (e.g. '300 s'): cutover_timeout and cleanup_timeout for the run, if given. (A
# split's bounds grow with its shards: 2,048 shards split at the default timeouts.)
[[ -z ${SEAL_TIMEOUT:-} ]] || on router -c "INSERT INTO snowflake_id_router.setting VALUES ('cutover_timeout', '$SEAL_TIMEOUT'),
                                              ('cleanup_timeout', '$SEAL_TIMEOUT')" >/dev/null

# 1. The rebalance, then back.
t0=$(now); on router -c "CALL rebalance(batch_size => $BATCH)" >/dev/null; t1=$(now)
rebalanced=$(on router -c "SELECT count(*) FROM shard_status WHERE node = 'node_b' AND mapped")
rebalance_s=$(secs "$t0" "$t1")
echo "rebalance: $rebalanced shards onto the empty node_b in $rebalance_s s"
on router -c "CALL drain_node('node_b', batch_size => $BATCH)" >/dev/null

# 2. The split onto a standby, caught up.
dir=$(node_dir standby); rm -rf "$dir"; mkdir -p "$dir"; chown postgres: "$dir"
t2=$(now)
sudo -u postgres "$PGBIN/pg_basebackup" -h "$(node_dir node_a)" -p "$(node_port node_a)" -U postgres -D "$dir/data" -R -X stream -c fast
echo "-p $(node_port standby) -k $dir -c listen_addresses='' -c hot_standby=on -c wal_level=logical -c fsync=off -c max_wal_senders=20 -c max_replication_slots=20 -c log_line_prefix='%m [%p] %e '" >"$dir/options"
: >"$dir/environment"; cluster_resume sfstandby
until [[ $(on standby -c "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'") == 1 ]]; do sleep 0.2; done
basebackup_s=$(secs "$t2" "$(now)")
t3=$(now)
on router -c "SELECT split_node('node_a', 'standby', '$(node_connstr standby)', $rebalanced)" >/dev/null
t4=$(now)
split_s=$(secs "$t3" "$t4")
read -r state pause <<<"$(on router -F ' ' -c "SELECT s.state, round(extract(epoch FROM m.flipped - s.fenced), 3)
                                               FROM snowflake_id_router.split s JOIN snowflake_id_router.move m ON m.id = s.move
                                              ORDER BY s.id DESC LIMIT 1")"
[[ $state == done ]] || { echo "the split is $state" >&2; exit 1; }
# Where its time goes (the record's "fenced" is the seal's commit): start to seal (checks, fence,
# seal), seal to promotion (replay, promote), promotion
# to flip (its copies of the kept shards dropped, registered, activated), flip to end (the
# node's sealed copies dropped).
steps=$(on router -F ' ' -c "SELECT round(extract(epoch FROM s.fenced) - $t3, 3), round(extract(epoch FROM s.promoted - s.fenced), 3),
                                    round(extract(epoch FROM m.flipped - s.promoted), 3), round(extract(epoch FROM s.ended - m.flipped), 3)
                               FROM snowflake_id_router.split s JOIN snowflake_id_router.move m ON m.id = s.move ORDER BY s.id DESC LIMIT 1")
read -r to_fence to_promoted to_flip to_end <<<"$steps"
echo "split steps (s): to the seal $to_fence, seal to promotion $to_promoted, promotion to flip $to_flip, flip to end $to_end"
ratio=$(python3 -c "print(round($rebalance_s / $split_s, 1))")
echo "split: $rebalanced shards onto the standby in $split_s s (standby made and caught up in $basebackup_s s before), writes paused $pause s from the seal to the flip; rebalance / split: ${ratio}x"
cat >"$out" <<JSON
{"shards": $SHARDS, "size_mb_asked": $SIZE_MB, "shard_table_bytes": $bytes, "rows_per_shard": $per_shard,
 "moved_shards": $rebalanced, "rebalance_seconds": $rebalance_s, "basebackup_seconds": $basebackup_s,
 "split_seconds": $split_s, "split_pause_seconds": $pause,
 "split_steps_seconds": {"to_seal": $to_fence, "seal_to_promotion": $to_promoted, "promotion_to_flip": $to_flip, "flip_to_end": $to_end}, "rebalance_over_split": $ratio,
 "seal_timeout": "${SEAL_TIMEOUT:-default}", "postgres": "$("$PGBIN/postgres" --version)"}
JSON
