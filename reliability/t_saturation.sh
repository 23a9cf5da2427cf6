#!/usr/bin/env bash
# every version: sequence state at the layout's ceiling
# Saturation: 8 sessions issue IDs from ONE shard's sequence as fast as they can for 10 s
# (pgbench, 1,000 IDs per statement), far past the layout's 1,024,000 IDs per second.
# Asserts: no error, IDs never more than snowflake_id.max_lead (1000 ms) + 20 ms ahead of
# the clock (sampled every 0.2 s), and the shard still issues at >= 90% of the ceiling.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
work=$(mktemp -d)
cluster_start relsat 55440
trap 'cluster_stop relsat; rm -rf "$work"' EXIT
setup_generator postgres
echo "SELECT count($GEN) FROM generate_series(1, 1000);" > "$work/sat.sql"
"$PGBIN/pgbench" -n -c 8 -j 2 -T 10 -f "$work/sat.sql" postgres >"$work/pgbench.log" 2>&1 &
bench=$!
max_lead=-1000000
while kill -0 "$bench" 2>/dev/null; do
  lead=$(q -c "SELECT round(extract(epoch FROM id_timestamp(last_value) - clock_timestamp()) * 1000) FROM s" 2>/dev/null || echo -1000000)
  ((lead > max_lead)) && max_lead=$lead
  sleep 0.2
done
wait "$bench" || { cat "$work/pgbench.log"; fail "pgbench failed"; }
tps=$(grep -Eo 'tps = [0-9.]+' "$work/pgbench.log" | grep -Eo '[0-9.]+' | head -1)
rate=$(python3 -c "print(int(float('$tps') * 1000))")
echo "saturation: 8 sessions on one shard: $rate IDs/s (ceiling 1024000), largest lead over the clock $max_lead ms (bound 1000 ms)"
((max_lead <= 1020)) || fail "IDs ran $max_lead ms ahead of the clock, past max_lead"
((rate >= 921600)) || fail "a saturated shard issued only $rate IDs/s, under 90% of the ceiling"
