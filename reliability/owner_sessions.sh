#!/usr/bin/env bash
# The sessions the router opened for the router session whose pid is $ME (named
# 'snowflake_id_router[ <what>] <pid>[ ...]' in pg_stat_activity), on the router and on every
# node of scripts/router_cluster.sh's cluster. Run from inside that session (psql's
# \setenv ME, then \!), it shows what the session still holds once a call returned:
#   owner_sessions.sh              how many are open now
#   owner_sessions.sh SECONDS      how many, once none are or SECONDS have passed (a closed
#                                  connection's backend leaves pg_stat_activity a moment later)
#   owner_sessions.sh list         which: server, pid, application_name, one a line
#   owner_sessions.sh signal cancel|terminate N
#                                  (started in the background just before a statement that
#                                  begins with '/* call */') sends pg_cancel_backend or
#                                  pg_terminate_backend to $ME at the Nth time it sees it
#                                  waiting on a remote call (wait event Extension) while that
#                                  statement runs; prints when (a WARNING),
#                                  or that the statement ended first. Touches $READY once it
#                                  watches.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"
source "$here/../scripts/router_cluster.sh"
[[ $ME =~ ^[0-9]+$ ]] || { echo "owner_sessions.sh: ME is not a pid: '$ME'" >&2; exit 2; }
pattern="^snowflake_id_router( [a-z]+)? $ME( |\$)"

# One psql, one connection to each server in turn: the router, then the nodes.
each_server() {
  local n
  {
    echo "$1"
    for n in "${ROUTER_NODES[@]}"; do
      echo "\\c \"host=$(node_dir "$n") port=$(node_port "$n") dbname=postgres user=postgres\""
      echo "$1"
    done
  } | PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 \
        -h "$SF_TMP/sfrouter" -p "$ROUTER_PORT" -U postgres -d postgres
}
count() {
  each_server "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE application_name ~ '$pattern';" \
    | awk '{ n += $1 } END { print n + 0 }'
}

case ${1:-} in
  list)
    each_server "SELECT format('%s %s %s', current_setting('port'), pid, application_name)
                   FROM pg_catalog.pg_stat_activity WHERE application_name ~ '$pattern';" ;;
  signal)
    [[ ${2:-} == cancel || ${2:-} == terminate ]] || { echo "owner_sessions.sh signal cancel|terminate N" >&2; exit 2; }
    PGOPTIONS="-c client_min_messages=warning" psql -X -q -At -v ON_ERROR_STOP=1 \
      -h "$SF_TMP/sfrouter" -p "$ROUTER_PORT" -U postgres -d postgres <<SQL
SELECT 1;
\! touch ${READY:-/dev/null}
DO \$\$
DECLARE
    seen integer := 0;
    waiting boolean;
    began timestamptz := pg_catalog.clock_timestamp();
BEGIN
    WHILE pg_catalog.clock_timestamp() < began + interval '60 s' LOOP
        PERFORM pg_catalog.pg_stat_clear_snapshot();
        SELECT a.state = 'active' AND a.wait_event_type = 'Extension' INTO waiting
          FROM pg_catalog.pg_stat_activity a WHERE a.pid = $ME AND a.query LIKE '/* call */%';
        IF waiting IS NULL THEN
            IF EXISTS (SELECT FROM pg_catalog.pg_stat_activity a WHERE a.pid = $ME AND a.query LIKE '/* call */%' AND a.state <> 'active')
               OR NOT EXISTS (SELECT FROM pg_catalog.pg_stat_activity a WHERE a.pid = $ME) THEN
                RAISE WARNING 'signal: the call ended before remote wait %', $3;
                RETURN;
            END IF;
        ELSIF waiting THEN
            seen := seen + 1;
            IF seen >= $3 THEN
                PERFORM pg_catalog.pg_${2}_backend($ME);
                RAISE WARNING 'signal: ${2} at remote wait % (% ms into the call)', seen,
                    round(extract(epoch FROM pg_catalog.clock_timestamp() - began) * 1000);
                RETURN;
            END IF;
            -- Past this wait before counting the next.
            WHILE EXISTS (SELECT FROM pg_catalog.pg_stat_activity a
                           WHERE a.pid = $ME AND a.state = 'active' AND a.wait_event_type = 'Extension') LOOP
                PERFORM pg_catalog.pg_stat_clear_snapshot();
                PERFORM pg_catalog.pg_sleep(0.0005);
            END LOOP;
        END IF;
        PERFORM pg_catalog.pg_sleep(0.0005);
    END LOOP;
    RAISE WARNING 'signal: gave up after 60 s';
END
\$\$;
SQL
    ;;
  '') count ;;
  *)
    n=$(count)
    for _ in $(seq $(( $1 * 20 ))); do
      ((n == 0)) && break
      sleep 0.05; n=$(count)
    done
    echo "$n" ;;
esac
