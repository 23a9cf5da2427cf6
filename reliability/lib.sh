# Shared helpers for reliability/t_*.sh (source after scripts/cluster.sh).
# GEN is the generator under test: an SQL expression issuing one ID from sequence `s`.
# Point it at a deliberately broken generator to see the suite fail, e.g.
#   GEN_SETUP_SQL="$(cat reliability/broken_generator.sql)" GEN="broken_next_id()" bash reliability/run
#
# A test that needs something only some PostgreSQL versions have (PL/Proxy, say) declares
# them in a comment line of its own, `# versions: 15 17`; reliability/run skips it on others.
GEN=${GEN:-"next_id(5, 's')"}
GEN_SETUP_SQL=${GEN_SETUP_SQL:-}
# GEN_TS: the time of an ID in GEN's layout, as an SQL expression where %s is the ID, e.g.
# "id_timestamp(%s, 'twitter', '2026-01-01+00')" when GEN is Twitter's layout with that epoch.
GEN_TS=${GEN_TS:-"id_timestamp(%s)"}
# gen_ts ID: GEN_TS for the SQL expression ID.
gen_ts() { printf "$GEN_TS" "$1"; }

fail() { echo "FAIL: $*" >&2; exit 1; }
# A test stopped by set -e says where: a failure without a message is a defect of its own.
# (errtrace: inside functions and command substitutions too; an if, while, || or && condition
# is not a failure, as for set -e.)
set -E
trap 'echo "FAIL: ${BASH_SOURCE[0]##*/} line $LINENO: \`$BASH_COMMAND\` exited $?" >&2' ERR
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

# start_writers DSN SECONDS SHARDS [FIRST]: four writers through a router (router_client.py,
# client numbers FIRST.. FIRST+3, default 1; logs $work/clientN.log), their PIDs added to pids.
start_writers() {
  local c first=${4:-1}
  for c in $(seq "$first" $((first + 3))); do
    "$PYTHON" "$here/router_client.py" "$1" "$c" "$2" "$3" "$work/client$c.log" & pids+=($!)
  done
}
# wait_writers: every process of pids ended well (else the writers' last lines).
wait_writers() {
  local p
  for p in "${pids[@]}"; do wait "$p" || fail "a client failed: $(tail -n 3 "$work"/client*.log)"; done
}

# setup_generator DB: the extension, sequence s, and the broken generator if one is given.
setup_generator() {
  q -d "$1" -c "CREATE EXTENSION IF NOT EXISTS snowflake_id" -c "CREATE SEQUENCE IF NOT EXISTS s"
  [[ -z $GEN_SETUP_SQL ]] || q -d "$1" -c "$GEN_SETUP_SQL"
}

# faketime_env FILE: the environment that puts a postmaster under libfaketime, its clock
# offset read from FILE ("+0", "-10s", "-1h") on every call, for every backend at once.
# For CLUSTER_ENV (scripts/cluster.sh). FILE is made readable by the postgres user.
faketime_env() {
  local lib
  lib=$(ls /usr/lib/*/faketime/libfaketimeMT.so.1 2>/dev/null | head -1)
  [[ -n $lib ]] || fail "libfaketime is not installed (scripts/setup installs it)"
  [[ -f $1 ]] || echo "+0" >"$1"
  chmod 644 "$1"; chmod o+x "$(dirname "$1")"
  echo "LD_PRELOAD=$lib FAKETIME_TIMESTAMP_FILE=$1 FAKETIME_NO_CACHE=1"
}

# faketime_set FILE OFFSET: steps the clock of a server running under faketime_env FILE.
# Written aside and renamed into place: libfaketime rereads FILE on every call, and a
# truncated-then-written file read in between is empty, which it cannot parse (trixie's
# libfaketime then stalls the backend).
faketime_set() {
  printf '%s\n' "$2" >"$1.new"; chmod 644 "$1.new"; mv -f "$1.new" "$1"
}

# assert_new_ids_above WHAT OLD_MAX MIN_NEW DUPLICATES: the promise every durability test
# checks: each ID issued after the event (restore, crash, failover, upgrade) is above
# every ID issued before it, and no ID repeats.
assert_new_ids_above() {
  local what=$1 old_max=$2 min_new=$3 dup=$4
  echo "$what: max ID before $old_max, min ID after $min_new, $dup duplicates"
  [[ $dup == 0 ]] || fail "$what: $dup duplicate IDs"
  [[ -n $min_new ]] || fail "$what: no ID issued after"
  ((min_new > old_max)) || fail "$what: an ID issued after ($min_new) is not above the max before ($old_max)"
}
