#!/usr/bin/env bash
# Bad input: property tests of the decoders and make_id over the whole bigint and
# timestamptz ranges (random values plus the extremes). Valid input round-trips exactly;
# invalid input raises SQLSTATE 22003 and nothing else; the server never crashes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
cluster_start relinput 55449
trap 'cluster_stop relinput' EXIT
setup_generator postgres
result=$(q 2>&1 <<'SQL'
DO $$
DECLARE
  extremes bigint[] := ARRAY[-9223372036854775808, -1, 0, 1, 1023, 1024, 8388607, 8388608,
                             9223372036854775807, 9223372036854775806, -8388608];
  x bigint; ts timestamptz; sh int; sq int; got bigint; valid bool;
  round_trips int := 0; refused int := 0;
BEGIN
  PERFORM setseed(0.42);  -- the same values every run
  -- IDs over the whole bigint range.
  FOR i IN 1..20000 LOOP
    x := CASE WHEN i <= cardinality(extremes) THEN extremes[i]
              WHEN i % 3 = 0 THEN (random() * 100000000)::bigint * (CASE WHEN random() < 0.5 THEN -1 ELSE 1 END)
              ELSE ((random() * 2 - 1) * 9.2e18)::bigint END;
    BEGIN
      IF make_id(id_timestamp(x), id_shard(x), id_sequence(x)) <> x
         OR (SELECT (d.ts, d.shard, d.seq) <> (id_timestamp(x), id_shard(x), id_sequence(x)) FROM id_decode(x) d) THEN
        RAISE EXCEPTION 'round trip failed for %', x;
      END IF;
      IF x < 0 THEN RAISE EXCEPTION 'negative ID % accepted', x; END IF;
      round_trips := round_trips + 1;
    EXCEPTION WHEN numeric_value_out_of_range THEN
      IF x >= 0 THEN RAISE EXCEPTION 'valid ID % refused', x; END IF;
      refused := refused + 1;
    END;
  END LOOP;
  -- Times over the whole timestamptz range, shards and counters over the whole int range.
  FOR i IN 1..20000 LOOP
    ts := CASE i WHEN 1 THEN '-infinity' WHEN 2 THEN 'infinity' WHEN 3 THEN '4714-11-24 00:00:00+00 BC'
                 WHEN 4 THEN '294276-12-31 23:59:59.999999+00' WHEN 5 THEN '2011-08-24 21:07:01.720999+00'
                 WHEN 6 THEN '2046-06-27 17:00:49.496999+00' WHEN 7 THEN '2046-06-27 17:00:49.497+00'
          ELSE CASE WHEN i % 2 = 0
                    THEN timestamptz '2011-08-24 21:07:01.721+00' + random() * interval '35 years'
                    ELSE timestamptz '4714-11-24 00:00:00+00 BC' + random() * interval '298000 years' END END;
    sh := CASE WHEN i % 5 = 0 THEN (random() * 4294967295 - 2147483648)::bigint ELSE (random() * 8191)::int END;
    sq := CASE WHEN i % 7 = 0 THEN (random() * 4294967295 - 2147483648)::bigint ELSE (random() * 1023)::int END;
    valid := ts >= '2011-08-24 21:07:01.721+00' AND ts < '2046-06-27 17:00:49.497+00'
             AND sh BETWEEN 0 AND 8191 AND sq BETWEEN 0 AND 1023;
    BEGIN
      got := make_id(ts, sh, sq);
      IF NOT valid THEN RAISE EXCEPTION 'invalid input (%, %, %) accepted', ts, sh, sq; END IF;
      IF id_timestamp(got) <> date_trunc('milliseconds', ts) OR id_shard(got) <> sh OR id_sequence(got) <> sq THEN
        RAISE EXCEPTION 'make_id(%, %, %) does not decode back', ts, sh, sq;
      END IF;
      round_trips := round_trips + 1;
    EXCEPTION WHEN numeric_value_out_of_range THEN
      IF valid THEN RAISE EXCEPTION 'valid input (%, %, %) refused', ts, sh, sq; END IF;
      refused := refused + 1;
    END;
  END LOOP;
  RAISE NOTICE 'bad input: % round trips, % refused with 22003, nothing else', round_trips, refused;
END $$;
SQL
) || fail "property test failed: $result"
echo "$result" | sed 's/^.*NOTICE: *//'
[[ $(q -c "SELECT 1") == 1 ]] || fail "server not answering"
! grep -q "terminated by signal" "$SF_TMP/relinput/server.log" || fail "a backend crashed"
