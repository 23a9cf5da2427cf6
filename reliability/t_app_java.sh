#!/usr/bin/env bash
# versions: 15
# Applications that route by shard themselves, in Java (docs/app-routing.md): the Spring Boot
# client of clients/java-spring (a routing DataSource, one HikariCP pool per node, use_shard at
# the start of every transaction, SF001 and 40001 retried) and its example app (Spring Data
# JPA), on Spring Boot 3.5 + Hibernate 6.6 and on Spring Boot 4.0 + Hibernate 7, against a
# router and three nodes that listen on loopback too (pgjdbc speaks TCP only), connecting as
# an application role with no right on the router. Each stack runs RoutingTest (the rules one
# by one; IDs taken in blocks by @ShardId keep Hibernate's JDBC batching: statements counted)
# and MovesTest: four writers while move_shards, drain_node and rebalance move their shards,
# no error reaching them, every post read back by ID. Then, over both runs
# (router_invariants, router_check.py): every write a writer saw acknowledged is present
# exactly once, on the node the map names, with its last body; no ID twice; the moved
# shards' new IDs above their old ones. TsidTest: 5,000 TSIDs of tsid-creator decode on a
# node with the tsid layout (time, text form, node and counter as the library made them). Maven's downloads are kept in ~/.m2 between runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
app=$here/../clients/java-spring
bash "$here/../scripts/setup" clients   # the JDK and Maven (waits while CI's set-up installs them)
work=$(mktemp -d); chmod 777 "$work"
ROUTER_TCP=127.0.0.1 ROUTER_PORT=$(free_ports 6)
trap 'router_cluster_down; rm -rf "$work"' EXIT
SHARDS_PER_NODE=16 router_cluster_up

# The application's role: on the router only what PUBLIC has (app_map); on the nodes the
# rights on the shards' tables, those made later (a move's copies) by default privileges.
on router -c "CREATE ROLE app LOGIN"
for n in "${ROUTER_NODES[@]}"; do
  on "$n" -c "CREATE ROLE app LOGIN" \
    -c "ALTER DEFAULT PRIVILEGES FOR ROLE postgres GRANT USAGE ON SCHEMAS TO app" \
    -c "ALTER DEFAULT PRIVILEGES FOR ROLE postgres GRANT SELECT, INSERT, UPDATE ON TABLES TO app" \
    -c "ALTER DEFAULT PRIVILEGES FOR ROLE postgres GRANT USAGE ON SEQUENCES TO app" >/dev/null
  on "$n" -At -c "SELECT format('GRANT USAGE ON SCHEMA %1\$I TO app; GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA %1\$I TO app;
                   GRANT USAGE ON ALL SEQUENCES IN SCHEMA %1\$I TO app;', schema_name) FROM snowflake_id_shards" | on "$n" >/dev/null
done

# The shards the writers use: the 16 made on each node.
shards=$(on router -c "SELECT string_agg(s::text, ',') FROM (SELECT generate_series(0, 15) UNION ALL
                        SELECT generate_series(2731, 2746) UNION ALL SELECT generate_series(5462, 5477)) g(s)")
export SF_ROUTER_URL="jdbc:postgresql://127.0.0.1:$ROUTER_PORT/postgres" SF_USER=app SF_ADMIN_USER=postgres \
       SF_NODE_URL="jdbc:postgresql://127.0.0.1:$(node_port node_a)/postgres" \
       SF_SHARDS=$shards SF_LOG_DIR=$work LOGGING_LEVEL_ROOT=WARN
# Spring Boot 3.5 drains node_b, Spring Boot 4.0 node_c (rebalance spreads the shards again).
run() {  # run PROFILE CLIENT_BASE DRAIN
  local t0=$SECONDS
  SF_CLIENT_BASE=$2 SF_DRAIN=$3 mvn -B -q -f "$app/pom.xml" -P "$1" test >"$work/$1.out" 2>&1 \
    || { cat "$work/$1.out"; fail "the Java client's tests on $1 failed (above)"; }
  grep -h "^moves:\|^batching:\|^IDENTITY:\|^tsid:" "$work/$1.out" | sed "s/^/$1 /"
  echo "$1: RoutingTest and MovesTest passed in $((SECONDS - t0)) s"
}
run boot3 0 node_b
run boot4 10 node_c
router_invariants "$work" "$work"/client*.log
