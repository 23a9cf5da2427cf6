#!/usr/bin/env bash
# Benchmark of the shard installer at Instagram's scale (not a test): bash bench/shards.sh [OUT.json]
#
# On one throwaway server, 8192 shards of a two-table template (primary keys, a DEFAULT now()
# column, two extra indexes) are made three ways, each in its own database, in batches of
# 1024 shards (one statement and transaction each), the three interleaved batch by batch
# (their order rotating) so that the machine's drift falls on all three alike:
#   many  create_shards(prefix, first, 1024, template)
#   one   create_shard(prefix || n, n, template) called 1024 times in one statement
#   hand  the same DDL written by hand in a PL/pgSQL loop: CREATE SCHEMA, CREATE SEQUENCE,
#         two CREATE TABLE ... (LIKE ... INCLUDING ALL), the next_id() defaults, a next_id()
#         function (the baseline: what create_shard issues, without its checks and catalog)
# then dropped the same way (drop_shard(schema, cascade => true) against DROP SCHEMA ...
# CASCADE), 1024 at a time in the order they were made. Between the two, `many` is dumped
# (pg_dump -Fc) and restored (pg_restore) into a fresh database, timed, and the restored
# shards checked (bench/shards_check.sql).
#
# Prints milliseconds per shard for each batch (wall clock, and the CPU time of the backend
# doing the work), each form's ratio to `hand` per batch and overall, and each form's last
# batch over its first; writes them to OUT.json (default bench/shards.json). SHARDS (default 8192) and BATCH (1024) make a shorter run,
# DUMP=0 one without the dump and restore.
# Expects scripts/install to have run. docs/speed.md has the figures and how to read them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh
out=${1:-bench/shards.json}
SHARDS=${SHARDS:-8192} BATCH=${BATCH:-1024}
(( SHARDS % BATCH == 0 )) || { echo "SHARDS must be a multiple of BATCH" >&2; exit 2; }
batches=$((SHARDS / BATCH))
# A transaction making a shard takes about 25 locks (its relations, their indexes, toast):
# the default lock table holds about 800 shards' worth.
cluster_start bench_shards 55460 max_locks_per_transaction=1024 shared_buffers=256MB
trap 'cluster_stop bench_shards' EXIT
work=$SF_TMP/bench_shards
q() { psql -X -q -v ON_ERROR_STOP=1 -At "$@"; }
now() { date +%s.%N; }

forms="many one hand"
for db in $forms; do
  q -c "CREATE DATABASE $db"
  q -d "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" -f - <<'SQL'
CREATE SCHEMA tpl;
CREATE TABLE tpl.posts (
    id bigint PRIMARY KEY,
    user_id bigint NOT NULL,
    body text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON tpl.posts (user_id, id);
CREATE TABLE tpl.likes (
    id bigint PRIMARY KEY,
    post_id bigint NOT NULL,
    user_id bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON tpl.likes (post_id);
-- The baseline: the DDL create_shard issues for one shard of this template, by hand.
CREATE FUNCTION hand_shard(s text, n integer) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE SCHEMA %I', s);
    EXECUTE format('CREATE SEQUENCE %I.table_id_seq AS bigint', s);
    EXECUTE format('CREATE FUNCTION %I.next_id(OUT result bigint) LANGUAGE sql VOLATILE PARALLEL UNSAFE '
                   'SET search_path = pg_catalog, pg_temp RETURN public.next_id(%s, %L::regclass)',
                   s, n, format('%I.table_id_seq', s));
    EXECUTE format('CREATE TABLE %I.posts (LIKE tpl.posts INCLUDING ALL)', s);
    EXECUTE format('ALTER TABLE %I.posts ALTER COLUMN id SET DEFAULT %I.next_id()', s, s);
    EXECUTE format('CREATE TABLE %I.likes (LIKE tpl.likes INCLUDING ALL)', s);
    EXECUTE format('ALTER TABLE %I.likes ALTER COLUMN id SET DEFAULT %I.next_id()', s, s);
END $$;
SQL
done

# run FORM PHASE BATCH: makes or drops that batch; prints its wall-clock and its backend's
# CPU milliseconds per shard (the CPU time, read from /proc, is what the machine's other load
# disturbs least).
run() {
  local a=$(($3 * BATCH)) b=$(($3 * BATCH + BATCH - 1)) sql
  case "$1/$2" in
    many/make) sql="SELECT create_shards('s', $a, $BATCH, 'tpl')" ;;
    one/make) sql="SELECT count(create_shard('s' || n, n, template => 'tpl')) FROM generate_series($a, $b) n" ;;
    hand/make) sql="SELECT count(hand_shard('s' || n, n)) FROM generate_series($a, $b) n" ;;
    many/drop | one/drop) sql="SELECT count(drop_shard('s' || n, cascade => true)) FROM generate_series($a, $b) n" ;;
    hand/drop) sql="DO \$\$ BEGIN FOR n IN $a .. $b LOOP EXECUTE format('DROP SCHEMA %I CASCADE', 's' || n); END LOOP; END \$\$" ;;
  esac
  psql -X -q -At -v ON_ERROR_STOP=1 -d "$1" <<SQL | awk -v n="$BATCH" '
      /^cpu0/ {c0 = $2} /^cpu1/ {c1 = $2} /^t0/ {t0 = $2} /^t1/ {t1 = $2}
      END {printf "%.3f %.3f\n", (t1 - t0) / 1e6 / n, (c1 - c0) * 1000 / ticks / n}' ticks="$(getconf CLK_TCK)"
SET client_min_messages = warning;
SELECT pg_backend_pid() AS pid \gset
\setenv BPID :pid
\! awk '{print "cpu0", \$14 + \$15}' /proc/\$BPID/stat; date +"t0 %s%N"
$sql;
\! date +"t1 %s%N"; awk '{print "cpu1", \$14 + \$15}' /proc/\$BPID/stat
SQL
}

declare -A ms cpu
rotate() { local -a f=($forms); local k=$(($1 % 3)); echo "${f[@]:$k} ${f[@]:0:$k}"; }
for phase in make dump drop; do
  if [[ $phase == dump && ${DUMP:-1} == 0 ]]; then
    dump_s=0 restore_s=0 dump_mb=0 check=skipped; continue
  elif [[ $phase == dump ]]; then
    t0=$(now); pg_dump -Fc -f "$work/many.dump" many; t1=$(now)
    q -c "CREATE DATABASE restored"
    t2=$(now); pg_restore -d restored "$work/many.dump"; t3=$(now)
    dump_s=$(echo "$t1 - $t0" | bc -l); restore_s=$(echo "$t3 - $t2" | bc -l)
    dump_mb=$(( $(stat -c %s "$work/many.dump") / 1048576 ))
    check=$(q -d restored -f bench/shards_check.sql)
    printf 'pg_dump -Fc of %d shards: %.1f s (%d MB); pg_restore: %.1f s; restored: %s\n' \
      "$SHARDS" "$dump_s" "$dump_mb" "$restore_s" "$check"
    continue
  fi
  for k in $(seq 0 $((batches - 1))); do
    line="$phase shards $((k * BATCH))-$((k * BATCH + BATCH - 1)), ms/shard wall (cpu):"
    for f in $(rotate "$k"); do read -r "ms[$phase/$f/$k]" "cpu[$phase/$f/$k]" <<<"$(run "$f" "$phase" "$k")"; done
    for f in $forms; do line+=$(printf ' %s %.2f (%.2f)' "$f" "${ms[$phase/$f/$k]}" "${cpu[$phase/$f/$k]}"); done
    echo "$line"
  done
done

# The figures.
python3 - "$out" "$forms" "$batches" "$BATCH" "$dump_s" "$restore_s" "$dump_mb" "$check" <<PY
import json, sys
out, forms, batches, batch = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), int(sys.argv[4])
ms, cpu = {}, {}
$(for key in "${!ms[@]}"; do echo "ms['$key'] = ${ms[$key]}; cpu['$key'] = ${cpu[$key]}"; done)
report = {"shards": batches * batch, "batch": batch}
for name, m in (("wall", ms), ("cpu", cpu)):
    r = report[name] = {"ms_per_shard": {}, "ratio_to_hand": {}, "last_over_first": {}}
    for phase in ("make", "drop"):
        hand = [m[f"{phase}/hand/{k}"] for k in range(batches)]
        for f in forms:
            series = [m[f"{phase}/{f}/{k}"] for k in range(batches)]
            r["ms_per_shard"][f"{phase}/{f}"] = [round(x, 3) for x in series]
            r["last_over_first"][f"{phase}/{f}"] = round(series[-1] / series[0], 3)
            if f != "hand":
                r["ratio_to_hand"][f"{phase}/{f}"] = {
                    "per_batch": [round(a / b, 3) for a, b in zip(series, hand)],
                    "overall": round(sum(series) / sum(hand), 3)}
    print(name, "ratio to hand (overall):", {k: v["overall"] for k, v in r["ratio_to_hand"].items()})
    print(name, "last batch over first:", r["last_over_first"])
report["dump"] = {"pg_dump_s": round(float(sys.argv[5]), 1), "pg_restore_s": round(float(sys.argv[6]), 1),
                  "dump_mb": int(sys.argv[7]), "restored": sys.argv[8]}
json.dump(report, open(out, "w"), indent=1)
PY
echo "written to $out"
