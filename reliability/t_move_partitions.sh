#!/usr/bin/env bash
# every version: moves: a shard with a partitioned table, written through its root and its partitions
# A shard following docs/applications.md's advice: `photos` partitioned by ID range (monthly
# partitions bounded by make_id, plus a default one), `likes.photo_id REFERENCES photos`, a
# row trigger on `photos` counting its firings (cloned into every partition), all made by
# alter_shards on the template and every shard (scripts/router_cluster.sh: a router and three
# data nodes, 4 shards made on each). Four client sessions add photos through the router,
# each with a like in the same transaction, into four months (three partitions and the
# default one), a third of them straight into the month's partition rather than through the
# root (the fence must refuse both), 40001 retried, while shards move a->c, b->a and c->b
# with content verification on (the default). Afterwards: every acknowledged photo is present
# exactly once, on the node the map names, in the partition its month names, its trigger
# fired once (on the source before the fence or on the target after the flip, never for the
# rows a move copies), its like there; nothing of a moved shard left on its source; each
# moved shard's layout is its template's. And a target whose template bounds a partition
# otherwise is refused before any row moves (55000 naming the partition), nothing made. A
# move held at its fence refuses a write straight into a partition, as one through the root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
trap 'kill $(jobs -p) 2>/dev/null || true; router_cluster_down; rm -rf "$work"' EXIT

SHARDS_PER_NODE=4 router_cluster_up
for n in node_a node_b node_c; do
  on "$n" >/dev/null <<'SQL'
CREATE FUNCTION public.count_fired() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.fired := NEW.fired + 1;
    RETURN NEW;
END $$;
-- A photo of month `month` and its like, in one transaction, into the root or straight into
-- partition `leaf` of the shard's photos; its ID made for that month and shard.
CREATE FUNCTION public.add_photo(shard integer, month text, n bigint, leaf text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE s text; id bigint;
BEGIN
    SELECT schema_name INTO s FROM snowflake_id_shards x WHERE x.shard = add_photo.shard;
    IF s IS NULL THEN
        RAISE EXCEPTION 'shard % is not on this node', shard USING ERRCODE = 'serialization_failure';
    END IF;
    id := make_id(month::timestamptz + n * interval '1 ms', shard, 0);
    EXECUTE format('INSERT INTO %I.%I (id) VALUES ($1)', s, coalesce(leaf, 'photos')) USING id;
    EXECUTE format('INSERT INTO %I.likes (user_id, photo_id) VALUES ($1, $2)', s) USING n, id;
    RETURN id;
END $$;
SQL
done
on router -c "CREATE FUNCTION add_photo(shard integer, month text, n bigint, leaf text) RETURNS bigint
              LANGUAGE plproxy AS \$\$ CLUSTER 'snowflake_id'; RUN ON shard; \$\$" >/dev/null
for change in \
  "CREATE TABLE %I.photos (id bigint PRIMARY KEY, fired integer NOT NULL DEFAULT 0, note text) PARTITION BY RANGE (id)" \
  "CREATE TABLE %I.photos_2024_01 PARTITION OF %I.photos FOR VALUES FROM (public.make_id('2024-01-01+00')) TO (public.make_id('2024-02-01+00'))" \
  "CREATE TABLE %I.photos_2024_02 PARTITION OF %I.photos FOR VALUES FROM (public.make_id('2024-02-01+00')) TO (public.make_id('2024-03-01+00'))" \
  "CREATE TABLE %I.photos_2024_03 PARTITION OF %I.photos FOR VALUES FROM (public.make_id('2024-03-01+00')) TO (public.make_id('2024-04-01+00'))" \
  "CREATE TABLE %I.photos_rest PARTITION OF %I.photos DEFAULT" \
  "CREATE TABLE %I.likes (user_id bigint NOT NULL, photo_id bigint NOT NULL REFERENCES %I.photos, PRIMARY KEY (user_id, photo_id))" \
  "CREATE TRIGGER count_fired BEFORE INSERT ON %I.photos FOR EACH ROW EXECUTE FUNCTION public.count_fired()"; do
  on router -c "SELECT * FROM alter_shards(\$\$$change\$\$)" >/dev/null || fail "alter_shards($change) failed"
done

# The writers: client c's i-th photo (n = c * 1000000 + i) goes to month i % 4 (the last one
# past every bound: the default partition), every third straight into that partition; a
# retry that finds it there (23505: the first try committed, its answer lost) counts.
cat >"$work/writer.py" <<'PY'
import random, sys, time, psycopg2, psycopg2.errors
dsn, client, seconds, shards, log = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), [int(s) for s in sys.argv[4].split()], sys.argv[5]
months = [("2024-01-01+00", "photos_2024_01"), ("2024-02-01+00", "photos_2024_02"),
          ("2024-03-01+00", "photos_2024_03"), ("2025-06-01+00", "photos_rest")]
conn = psycopg2.connect(dsn); conn.autocommit = True
out = open(log, "w"); end = time.time() + seconds; i = 0
while time.time() < end:
    i += 1; shard = random.choice(shards); n = client * 1000000 + i; month, leaf = months[i % 4]
    direct = leaf if i % 3 == 0 else None
    for attempt in range(400):
        try:
            cur = conn.cursor(); cur.execute("SELECT add_photo(%s, %s, %s, %s)", (shard, month, n, direct)); break
        except psycopg2.errors.UniqueViolation:
            break
        except psycopg2.errors.SerializationFailure:
            time.sleep(0.02)
    else:
        sys.exit(f"photo ({shard}, {n}) refused 400 times")
    out.write(f"{shard} {n} {leaf}\n"); out.flush()
PY
shards="0 1 2 3 2731 2732 2733 2734 5462 5463 5464 5465"
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
pids=()
for c in 1 2 3 4; do "$PYTHON" "$work/writer.py" "$dsn" "$c" 16 "$shards" "$work/photos$c.log" & pids+=($!); done
sleep 2
for m in "1 node_a node_c" "2731 node_b node_a" "5462 node_c node_b"; do
  set -- $m
  on router -c "SELECT move_shard($1, '$3')" >/dev/null 2>"$work/move.log" || fail "move_shard($1, '$3') failed: $(cat "$work/move.log")"
  [[ $(on "$2" -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_$1'") == 0 ]] || fail "shard $1 left on its source $2"
  sleep 1
done
for p in "${pids[@]}"; do wait "$p" || fail "a writer failed"; done
acked=$(cat "$work"/photos*.log | wc -l)
direct=$(awk 'FNR % 3 == 0' "$work"/photos*.log | wc -l)

# Every acknowledged photo once, in its month's partition, fired once, with its like; on
# the node the map names (each shard served there only: router_invariants).
: >"$work/held"; bad=
for n in node_a node_b node_c; do
  on "$n" -c "SELECT string_agg(format('SELECT %s, l.user_id, p.tableoid::regclass::text, p.fired FROM %I.photos p
                                         LEFT JOIN %I.likes l ON l.photo_id = p.id', shard, schema_name, schema_name), ' UNION ALL ')
                FROM snowflake_id_shards" | on "$n" -F ' ' >>"$work/held"
done
sort "$work"/photos*.log >"$work/acked"
awk '{ sub(/^[^.]*\./, "", $3); print $1, $2, $3 }' "$work/held" | sort >"$work/held_sorted"
missing=$(comm -23 "$work/acked" "$work/held_sorted" | head -3)
[[ -z $missing ]] || fail "acknowledged photos missing or in the wrong partition (shard n partition): $missing"
dup=$(uniq -d "$work/held_sorted" | head -3)
[[ -z $dup ]] || fail "photos held twice: $dup"
bad=$(awk '$4 != 1 { print "shard " $1 " photo " $2 " fired " $4 " times" }' "$work/held" | head -3)
[[ -z $bad ]] || fail "the trigger did not fire once per photo: $bad"
echo "photos: $acked acknowledged ($direct straight into a partition), each once, in its month's partition, fired once, with its like"

for m in "1 node_c" "2731 node_a" "5462 node_b"; do
  set -- $m
  s=shard_$1
  diff=$(on "$2" -c "SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('$s'), snowflake_id_node.fingerprint('tpl'), 'the shard', 'the template')")
  [[ -z $diff ]] || fail "moved shard $1 differs from its template on $2: $diff"
  err=$(on "$2" -c "INSERT INTO $s.likes VALUES (1, 1)" 2>&1 || true)
  [[ $err == *'violates foreign key constraint'* ]] || fail "the key is not enforced on $2's shard $1: $err"
done
echo "moved shards: partitioned as their template, the key to the partitioned table enforced"

# A target whose template bounds a partition otherwise: refused before any row moves.
on node_b -c "ALTER TABLE tpl.photos DETACH PARTITION tpl.photos_2024_03" -c "DROP TABLE tpl.photos_2024_03" \
          -c "CREATE TABLE tpl.photos_2024_03 PARTITION OF tpl.photos FOR VALUES FROM (make_id('2024-03-01+00')) TO (make_id('2024-03-15+00'))" >/dev/null
err=$(on router -c "SELECT move_shard(3, 'node_b')" 2>&1 || true)
[[ $err == *'table photos_2024_03: (table, partition of %I.photos FOR VALUES FROM'* ]] \
  || fail "a copy bounded otherwise was not refused by its partition: $err"
[[ $(on node_b -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_3'") == 0 ]] || fail "the refused move left shard_3 on node_b"
[[ $(on router -c "SELECT node FROM shard_map WHERE shard = 3") == node_a ]] || fail "the refused move changed the map"
echo "a target bounding a partition otherwise: refused ($(grep -o 'table photos_2024_03: .*' <<<"$err" | head -1)), nothing made"

# The fence on every partition: a move held at its fence refuses a write straight into a
# partition as it refuses one through the root (40001), and completes with nothing lost.
held fenced "SELECT move_shard(2, 'node_c')"
id=$(on node_a -c "SELECT make_id('2024-01-15+00', 2, 0)")
before=$(on node_a -c "SELECT count(*) FROM shard_2.photos")
for t in photos_2024_01 photos; do
  err=$(on node_a -v VERBOSITY=sqlstate -c "INSERT INTO shard_2.$t (id) VALUES ($id)" 2>&1 || true)
  [[ $err == *40001* ]] || fail "a write into shard_2.$t was not refused under the move's fence: ${err:-it was taken}"
done
release
wait "$mover" || fail "the move held at its fence failed: $(cat "$work/mover.log")"
[[ $(on node_c -c "SELECT count(*) FROM shard_2.photos") == "$before" ]] || fail "shard 2's photos changed across its held move"
echo "a move held at its fence: writes into a partition and through the root refused (40001), the move done, $before photos kept"

router_invariants "$work"
