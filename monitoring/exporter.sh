# The exporter as the tests and the benchmark run it (source after scripts/router_cluster.sh):
# Debian's prometheus-postgres-exporter with monitoring/queries.yaml, against the router
# database of scripts/router_cluster.sh as the role of monitoring/grants.sql, on a free
# loopback port, with only the queries file's metrics (the built-in ones read server
# statistics the role has no right to).
#   exporter_start LOG    starts it (its output appended to LOG); sets EXPORTER_PID and EXPORTER_URL
#   exporter_stop         stops it
#   scrape FILE           its /metrics into FILE; prints the seconds the scrape took
_monitoring_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
EXPORTER_PID= EXPORTER_URL=
MONITOR_DSN="host=$SF_TMP/sfrouter port=$ROUTER_PORT dbname=postgres user=snowflake_id_monitor sslmode=disable"

exporter_start() {
  local try http
  for try in 1 2 3; do   # (a port found free can be taken before the exporter binds it)
    http=127.0.0.1:$(free_ports 1)
    DATA_SOURCE_NAME=$MONITOR_DSN prometheus-postgres-exporter --web.listen-address="$http" \
      --extend.query-path="$_monitoring_here/queries.yaml" --disable-default-metrics --disable-settings-metrics \
      --no-collector.database --no-collector.bgwriter >>"$1" 2>&1 &
    EXPORTER_PID=$! EXPORTER_URL=http://$http
    for _ in $(seq 50); do
      curl -sf -o /dev/null "$EXPORTER_URL/" && return 0
      kill -0 "$EXPORTER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill "$EXPORTER_PID" 2>/dev/null || true; EXPORTER_PID=
  done
  echo "the exporter did not start: $(tail -5 "$1")" >&2
  return 1
}

exporter_stop() {
  [[ -n $EXPORTER_PID ]] || return 0
  kill "$EXPORTER_PID" 2>/dev/null || true
  wait "$EXPORTER_PID" 2>/dev/null || true
  EXPORTER_PID=
}

scrape() {
  curl -sf --max-time 60 -o "$1" -w '%{time_total}' "$EXPORTER_URL/metrics"
}
