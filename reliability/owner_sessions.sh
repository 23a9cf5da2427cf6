#!/usr/bin/env bash
# Prints how many sessions the router opened for the router session whose pid is $ME (named
# 'snowflake_id_router[ <what>] <pid>[ ...]' in pg_stat_activity) are open now, on the router
# and on every node of scripts/router_cluster.sh's cluster: run from inside that session
# (psql's \setenv ME, then \!), it shows what the session still holds once a call returned.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"
source "$here/../scripts/router_cluster.sh"
n=0
for who in router node_a node_b node_c; do
  c=$(on "$who" -c "SELECT count(*) FROM pg_stat_activity
                     WHERE application_name ~ '^snowflake_id_router( [a-z]+)? $ME( |\$)'" 2>/dev/null || echo 0)
  n=$((n + c))
done
echo "$n"
