# Throwaway PostgreSQL clusters (of the installation scripts/pg.sh names) for demos, tests and benchmarks (source this file).
# initdb refuses root, so clusters belong to the postgres user and live under $SF_TMP.
source "$(dirname "${BASH_SOURCE[0]}")/pg.sh"
SF_TMP=${SF_TMP:-/tmp/snowflake_id}
# psql, pg_dump, pg_restore, pgbench of the same version as the server.
export PATH="$PGBIN:$PATH"

# cluster_start NAME PORT [postgres -c options...]: a fresh cluster, started, with a socket
# in its own directory; exports PGHOST/PGPORT/PGUSER for psql. Extra environment for the
# postmaster (LD_PRELOAD for libfaketime) comes from $CLUSTER_ENV.
cluster_start() {
  local name=$1 port=$2; shift 2
  local dir=$SF_TMP/$name
  cluster_stop "$name" 2>/dev/null || true
  rm -rf "$dir"; mkdir -p "$dir"; chown postgres: "$SF_TMP" "$dir"
  sudo -u postgres "$PGBIN/initdb" -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1
  # Every line of the server log carries its SQLSTATE: the test runners look for XX000
  # (an internal error), which no user-reachable path may raise (xx000_in).
  local opts="-p $port -k $dir -c listen_addresses='' -c log_line_prefix='%m [%p] %e '"
  local o; for o in "$@"; do opts+=" -c $o"; done
  echo "$opts" >"$dir/options"; echo "${CLUSTER_ENV:-}" >"$dir/environment"
  echo "${CLUSTER_WRAP:-}" >"$dir/wrap"
  ${CLUSTER_WRAP:-} sudo -u postgres env ${CLUSTER_ENV:-} "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "$opts" -w start >/dev/null
  export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres
}

# xx000_in SINCE DIR...: the errors in the server logs under DIR..., logged at SINCE or later
# (UTC, 'YYYY-MM-DD HH:MM:SS'), whose SQLSTATE is XX000: an internal error. PL/Proxy's own
# errors are left out: it raises every failure to reach a partition (a node down, a shard
# assigned to no node: docs/cluster.md) as XX000, and that code is not ours.
xx000_in() {
  local since=$1; shift
  find "$@" -name server.log -print0 2>/dev/null | xargs -0r cat \
    | awk -v since="$since" 'substr($0, 1, 19) >= since && / XX000 (ERROR|FATAL|PANIC):/ && !/PL\/Proxy function /'
}

# cluster_stop NAME [MODE]: pg_ctl stop -m MODE (default fast; `immediate` is a crash).
# Tolerates a cluster that is not running.
cluster_stop() {
  local dir=$SF_TMP/$1
  if [[ -f $dir/data/postmaster.pid ]]; then
    sudo -u postgres "$PGBIN/pg_ctl" -D "$dir/data" -m "${2:-fast}" -w stop >/dev/null 2>&1 || true
  fi
  return 0
}

# cluster_resume NAME: starts a stopped cluster again, with the options and environment
# cluster_start gave it (a libfaketime clock file is read afresh).
cluster_resume() {
  local dir=$SF_TMP/$1
  sudo -u postgres env $(cat "$dir/environment") "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" \
    -o "$(cat "$dir/options")" -w start >/dev/null
}

# cluster_restart NAME [MODE]: cluster_stop, then cluster_resume.
cluster_restart() { cluster_stop "$1" "${2:-fast}"; cluster_resume "$1"; }
