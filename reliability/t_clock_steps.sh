#!/usr/bin/env bash
# every version: sequence state under clock steps
# Clock faults: the server runs under libfaketime while 4 sessions generate continuously;
# the clock steps back 5 s, forward again, back 1 h, and forward again. Asserts: no error, no
# duplicate, each session's IDs strictly increasing in issue order, IDs never more than
# (backward step + snowflake_id.max_lead + 5 ms) ahead of the server's clock, and, once the
# clock is back, within max_lead + 5 ms of it again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
work=$(mktemp -d); chmod 755 "$work"
clock=$work/faketime
CLUSTER_ENV=$(faketime_env "$clock") cluster_start relclock 55444
trap 'cluster_stop relclock; rm -rf "$work"' EXIT
setup_generator postgres
q -c "CREATE UNLOGGED TABLE ids (session int, n bigint, id bigint, at timestamptz, phase text)"
echo steady > "$work/phase"   # labels the batches for the report (taken as each batch starts)
generate() {  # one session: batches of 2,000 IDs until told to stop
  local s=$1 i=0
  while [[ ! -e $work/stop ]]; do
    q -c "INSERT INTO ids SELECT $s, $i * 2000 + g, $GEN, clock_timestamp(), '$(cat "$work/phase")' FROM generate_series(1, 2000) g" \
      || { echo "session $s: error" > "$work/error.$s"; return 1; }
    i=$((i + 1))
  done
}
pids=(); for s in 1 2 3 4; do generate "$s" & pids+=($!); done
step() { sleep 2; echo "$2" > "$work/phase"; faketime_set "$clock" "$1"; }
step -5s back5s; step +0 forward; step -1h back1h; step +0 recovered
recovered_at=$(date -u +%FT%T.%3NZ)   # the server's clock is true again from here
sleep 2
touch "$work/stop"
for p in "${pids[@]}"; do wait "$p" || true; done
! ls "$work"/error.* >/dev/null 2>&1 || fail "a session got an error: $(cat "$work"/error.*)"
q -c "SELECT phase, count(*), round(extract(epoch FROM max($(gen_ts id) - at)) * 1000) AS max_lead_ms
        FROM ids GROUP BY phase ORDER BY min(n)" | sed 's/^/  /'
read -r total distinct out_of_order lead_1h lead_after <<<"$(q -F ' ' -c "
  SELECT count(*), count(DISTINCT id),
         (SELECT count(*) FROM (SELECT id, lag(id) OVER (PARTITION BY session ORDER BY n) prev FROM ids) x WHERE id <= prev),
         max($(gen_ts id) - at) <= interval '1 hour 1005 ms',
         max($(gen_ts id) - at) FILTER (WHERE at > timestamptz '$recovered_at' + interval '100 ms') <= interval '1005 ms'
    FROM ids")"
echo "clock steps: $total IDs, $distinct distinct, $out_of_order out of order; lead within 1 h + max_lead: $lead_1h; back within max_lead after recovery: $lead_after"
((total > 100000)) || fail "too few IDs issued ($total) to exercise the steps"
[[ $distinct == "$total" ]] || fail "$((total - distinct)) duplicate IDs"
[[ $out_of_order == 0 ]] || fail "$out_of_order IDs not increasing within their session"
[[ $lead_1h == t ]] || fail "IDs ran more than 1 h + max_lead ahead of the clock"
[[ $lead_after == t ]] || fail "IDs did not come back within max_lead of the clock"
