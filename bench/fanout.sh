#!/usr/bin/env bash
# Benchmark of the node side of a RUN ON ALL fan-out at Instagram's scale (not a test):
#   bash bench/fanout.sh [OUT.json]
# One node holding SHARDS (default 2730, the router examples' third of 8192) shards of
# router/examples/node.sql's template, POSTS posts each (default 20, users 1-500). Two
# versions of node.sql's user_feed(for_user, lim), called in turn for the same users in one
# session, CALLS times each (default 40), interleaved:
#   query     one UNION ALL over every shard, built and planned on every call (node.sql as
#             it was in 0.2.0)
#   prepared  the same query, prepared once per session for the shards snowflake_id_shards
#             lists, with a generic plan (node.sql's user_feed since 0.3.0)
# Prints, per version, milliseconds per call (mean, and the first call of the session), and
# the planning and execution time EXPLAIN ANALYZE gives the UNION ALL. Writes OUT.json
# (default bench/fanout.json). Expects scripts/install to have run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh
out=${1:-bench/fanout.json}
SHARDS=${SHARDS:-2730} POSTS=${POSTS:-20} CALLS=${CALLS:-40}
cluster_start bench_fanout 55461 max_locks_per_transaction=1024 shared_buffers=256MB
trap 'cluster_stop bench_fanout' EXIT
q() { psql -X -q -v ON_ERROR_STOP=1 -At "$@"; }

q -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" -f router/examples/node.sql
q -c "SELECT create_shards('s', 0, $SHARDS, 'tpl')"
q -c "DO \$\$ BEGIN FOR s IN 0 .. $SHARDS - 1 LOOP
        EXECUTE format('INSERT INTO s%s.posts (user_id, body) SELECT 1 + (random() * 499)::int, ''post'' FROM generate_series(1, $POSTS)', s);
      END LOOP; END \$\$" -c "VACUUM ANALYZE"
# The 0.2.0 version, under another name.
q -c "CREATE FUNCTION user_feed_query(for_user bigint, lim integer) RETURNS TABLE (id bigint, user_id bigint, body text)
LANGUAGE plpgsql STABLE AS \$\$
DECLARE q text;
BEGIN
    SELECT string_agg(format('(SELECT id, user_id, body FROM %I.posts WHERE user_id = \$1 ORDER BY id DESC LIMIT \$2)',
                             schema_name), ' UNION ALL ')
      INTO q FROM snowflake_id_shards;
    IF q IS NOT NULL THEN
        RETURN QUERY EXECUTE q USING for_user, lim;
    END IF;
END \$\$"

# One session: the first call of each, then CALLS calls of each in turn (users 1, 2, ...);
# then EXPLAIN ANALYZE of the UNION ALL for planning and execution time.
result=$(q <<SQL
CREATE FUNCTION pg_temp.ms(f text, u bigint) RETURNS float8 LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz := clock_timestamp(); n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM %s(%s, 20)', f, u) INTO n;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1000;
END \$\$;
CREATE TEMP TABLE t (f text, first boolean, ms float8);
INSERT INTO t SELECT 'query', true, pg_temp.ms('user_feed_query', 1);
INSERT INTO t SELECT 'prepared', true, pg_temp.ms('user_feed', 1);
DO \$\$ BEGIN FOR u IN 2 .. $CALLS + 1 LOOP
    INSERT INTO t SELECT 'query', false, pg_temp.ms('user_feed_query', u);
    INSERT INTO t SELECT 'prepared', false, pg_temp.ms('user_feed', u);
END LOOP; END \$\$;
SELECT f || ' ' || round(avg(ms) FILTER (WHERE NOT first)::numeric, 2) || ' ' || round(max(ms) FILTER (WHERE first)::numeric, 2)
  FROM t GROUP BY f ORDER BY f;
SQL
)
explain=$(q -c "SELECT string_agg(format('(SELECT id, user_id, body FROM %I.posts WHERE user_id = 7 ORDER BY id DESC LIMIT 20)',
                  schema_name), ' UNION ALL ') FROM snowflake_id_shards" | sed 's/^/EXPLAIN (ANALYZE, SUMMARY) /' |
          q | sed -n 's/^\(Planning\|Execution\) Time: \([0-9.]*\) ms/\1 \2/p')
echo "$result"
echo "$explain"
python3 - "$out" "$SHARDS" "$POSTS" "$CALLS" <<PY
import json, sys
out, shards, posts, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows = {l.split()[0]: (float(l.split()[1]), float(l.split()[2])) for l in """$result""".splitlines()}
ex = {l.split()[0].lower(): float(l.split()[1]) for l in """$explain""".splitlines()}
report = {"shards": shards, "posts_per_shard": posts, "calls": calls,
          "ms_per_call": {k: v[0] for k, v in rows.items()},
          "first_call_ms": {k: v[1] for k, v in rows.items()},
          "union_all_explain_ms": ex}
json.dump(report, open(out, "w"), indent=1)
print(json.dumps(report))
PY
