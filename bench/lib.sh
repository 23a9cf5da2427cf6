# Shared by the benchmarks that make thousands of shards (sourced after scripts/cluster.sh,
# reliability/lib.sh and scripts/router_cluster.sh).

# make_shards NODE FIRST COUNT: shards FIRST.. on NODE, each a posts table (the DDL
# create_shard(..., template => 'tpl') runs, in a loop) with 3 rows; 500 to a transaction
# (each table takes locks until its transaction ends).
make_shards() {
  local from to
  for ((from = $2; from < $2 + $3; from += 500)); do
    to=$((from + 500 < $2 + $3 ? from + 499 : $2 + $3 - 1))
    on "$1" -c "SELECT count(create_shard('shard_' || s, s)) FROM generate_series($from, $to) s" \
      -c "DO \$\$ BEGIN FOR s IN $from .. $to LOOP
            EXECUTE format('CREATE TABLE shard_%s.posts (LIKE tpl.posts INCLUDING ALL)', s);
            EXECUTE format('ALTER TABLE shard_%s.posts ALTER COLUMN id SET DEFAULT shard_%s.next_id()', s, s);
            EXECUTE format('INSERT INTO shard_%s.posts (user_id, body) SELECT g, ''preload'' FROM generate_series(1, 3) g', s);
          END LOOP; END \$\$" >/dev/null
  done
}

# start_nodes NODE...: each node started with snowflake_id and the example template (tpl).
start_nodes() {
  local n
  for n in "$@"; do
    node_start "$n"
    on "$n" -c "CREATE EXTENSION snowflake_id" -f router/examples/node.sql >/dev/null
  done
}
