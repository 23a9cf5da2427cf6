#!/usr/bin/env bash
# Foreign keys between a shard's tables and user triggers, made by alter_shards, then moved
# under load (scripts/router_cluster.sh: a router and three data nodes, 4 shards made on
# each). alter_shards adds to the template and every shard `photos` and `likes` with a
# foreign key (likes.photo_id REFERENCES photos ON DELETE CASCADE), a trigger keeping
# photos.like_count and one setting photos.updated_at (their functions in schema public,
# the caller's), a view of each photo's likes (security_barrier, readable by PUBLIC) and a
# view on it of the photos miscounted, and a serial column numbering each shard's likes
# (its sequence the shard's own). create_shard from that template, which a move's target
# runs, copies them; a function of the shard counting a photo's likes (an SQL-standard
# body over the shard's table); and a materialized view of the likes, which the target refreshes
# under the fence before the seal.
# Four client sessions like photos through the router (each like a new row, 40001 retried)
# while shards move a->c, b->a and c->b. Afterwards: every acknowledged like is present
# exactly once, on the node the map names; each photo's like_count equals its likes there
# (each trigger fired once per row: on the source before the fence, on the target after the
# flip, never for the rows a move copies); no like lacks its photo; the key and the triggers
# work on the target (an orphan like is refused, 23503; a cascade deletes likes and the
# counter follows); the serial's sequence continues above every number the source gave; the views there read the target's tables, with the source's privileges;
# each moved shard's layout is its template's; and a trigger enabled
# ALWAYS is refused by a move (55000), nothing made; a materialized view whose owner cannot
# read the shard's table undoes the move before the seal, the shard writable.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
trap 'kill $(jobs -p) 2>/dev/null || true; router_cluster_down; rm -rf "$work"' EXIT

SHARDS_PER_NODE=4 router_cluster_up
for n in node_a node_b node_c; do
  on "$n" >/dev/null <<'SQL'
CREATE FUNCTION public.count_like() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('UPDATE %I.photos SET like_count = like_count + $2 WHERE id = $1', TG_TABLE_SCHEMA)
      USING CASE TG_OP WHEN 'DELETE' THEN OLD.photo_id ELSE NEW.photo_id END, CASE TG_OP WHEN 'DELETE' THEN -1 ELSE 1 END;
    RETURN NULL;
END $$;
CREATE FUNCTION public.stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := clock_timestamp();
    RETURN NEW;
END $$;
-- A like routed by shard (the router's like_photo below runs this on the shard's node).
CREATE FUNCTION public.like_photo(shard integer, photo bigint, by_user bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE s text;
BEGIN
    SELECT schema_name INTO s FROM snowflake_id_shards x WHERE x.shard = like_photo.shard;
    IF s IS NULL THEN
        RAISE EXCEPTION 'shard % is not on this node', shard USING ERRCODE = 'serialization_failure';
    END IF;
    EXECUTE format('INSERT INTO %I.likes (user_id, photo_id) VALUES ($1, $2)', s) USING by_user, photo;
END $$;
SQL
done
on router -c "CREATE FUNCTION like_photo(shard integer, photo bigint, by_user bigint) RETURNS void
              LANGUAGE plproxy AS \$\$ CLUSTER 'snowflake_id'; RUN ON shard; \$\$" >/dev/null
for change in \
  "CREATE TABLE %I.photos (id bigint PRIMARY KEY, like_count integer NOT NULL DEFAULT 0, updated_at timestamptz)" \
  "CREATE TABLE %I.likes (user_id bigint NOT NULL, photo_id bigint NOT NULL, no bigserial, PRIMARY KEY (user_id, photo_id))" \
  "ALTER TABLE %I.likes ADD FOREIGN KEY (photo_id) REFERENCES %I.photos ON DELETE CASCADE" \
  "CREATE TRIGGER count_like AFTER INSERT OR DELETE ON %I.likes FOR EACH ROW EXECUTE FUNCTION public.count_like()" \
  "CREATE TRIGGER stamp BEFORE UPDATE ON %I.photos FOR EACH ROW EXECUTE FUNCTION public.stamp()" \
  "CREATE VIEW %I.photo_likes WITH (security_barrier) AS SELECT p.id, p.like_count, count(l.photo_id) AS likes
     FROM %I.photos p LEFT JOIN %I.likes l ON l.photo_id = p.id GROUP BY p.id" \
  "CREATE VIEW %I.miscounted AS SELECT v.id, v.like_count, v.likes FROM %I.photo_likes v WHERE v.like_count <> v.likes" \
  "GRANT SELECT ON %I.photo_likes TO PUBLIC" \
  "CREATE FUNCTION %I.likes_of(photo bigint) RETURNS bigint LANGUAGE sql STABLE RETURN (SELECT count(*) FROM %I.likes WHERE photo_id = photo)"; do
  on router -c "SELECT * FROM alter_shards(\$\$$change\$\$)" >/dev/null || fail "alter_shards($change) failed"
done
# A materialized view of each photo's likes, with the unique index REFRESH ... CONCURRENTLY
# needs, made in the template and every shard (alter_shards refuses statements that run a
# query in every shard).
for n in node_a node_b node_c; do
  on "$n" -c "SELECT string_agg(format('CREATE MATERIALIZED VIEW %I.like_totals AS SELECT photo_id, count(*) AS n FROM %I.likes GROUP BY photo_id;
                                        CREATE UNIQUE INDEX like_totals_photo ON %I.like_totals (photo_id);', s, s, s), ' ')
                FROM (SELECT 'tpl' AS s UNION ALL SELECT schema_name FROM snowflake_id_shards) x" | on "$n" >/dev/null
done
# Ten photos in every shard (IDs shard * 1000 + n).
shards="0 1 2 3 2731 2732 2733 2734 5462 5463 5464 5465"
for n in node_a node_b node_c; do
  on "$n" -c "SELECT string_agg(format('INSERT INTO %I.photos (id) SELECT %s * 1000 + g FROM generate_series(1, 10) g;', schema_name, shard), ' ')
                FROM snowflake_id_shards" | on "$n" >/dev/null
done

# The writers: each likes random photos of the shards as its own users (client c, user
# c * 1000000 + i), retrying a like refused with 40001 (a fence, a router that has not seen
# a flip yet); a retry that finds the like there (23505: the first try committed and its
# answer was lost) counts as acknowledged.
cat >"$work/liker.py" <<'PY'
import random, sys, time, psycopg2, psycopg2.errors
dsn, client, seconds, shards, log = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), [int(s) for s in sys.argv[4].split()], sys.argv[5]
conn = psycopg2.connect(dsn); conn.autocommit = True
out = open(log, "w"); end = time.time() + seconds; i = 0
while time.time() < end:
    i += 1; shard = random.choice(shards); photo = shard * 1000 + random.randint(1, 10); user = client * 1000000 + i
    for attempt in range(400):
        try:
            conn.cursor().execute("SELECT like_photo(%s, %s, %s)", (shard, photo, user)); break
        except psycopg2.errors.UniqueViolation:
            break
        except psycopg2.errors.SerializationFailure:
            time.sleep(0.02)
    else:
        sys.exit(f"like ({shard}, {photo}, {user}) refused 400 times")
    out.write(f"{shard} {photo} {user}\n"); out.flush()
PY
dsn="host=$SF_TMP/sfrouter port=$ROUTER_PORT user=postgres dbname=postgres"
pids=()
for c in 1 2 3 4; do "$PYTHON" "$work/liker.py" "$dsn" "$c" 16 "$shards" "$work/likes$c.log" & pids+=($!); done
sleep 2
for m in "1 node_c" "2731 node_a" "5462 node_b" "2 node_c"; do
  set -- $m
  on router -c "SELECT move_shard($1, '$2')" >/dev/null 2>"$work/move.log" || fail "move_shard($1, '$2') failed: $(cat "$work/move.log")"
  sleep 1
done
for p in "${pids[@]}"; do wait "$p" || fail "a writer failed"; done
acked=$(cat "$work"/likes*.log | wc -l)

# Every acknowledged like once, on the node the map names; the counters equal the likes.
: >"$work/held"; bad=
for n in node_a node_b node_c; do
  on "$n" -c "SELECT string_agg(format('SELECT %s, photo_id, user_id FROM %I.likes', shard, schema_name), ' UNION ALL ')
                FROM snowflake_id_shards" | on "$n" -F ' ' >>"$work/held"
  bad+=$(on "$n" -c "SELECT string_agg(format('SELECT %L || '' shard %s photo '' || p.id || '': like_count '' || p.like_count || '', likes '' || count(l.*)
                                                FROM %I.photos p LEFT JOIN %I.likes l ON l.photo_id = p.id
                                               GROUP BY p.id, p.like_count HAVING p.like_count <> count(l.*)', '$n', shard, schema_name, schema_name), ' UNION ALL ')
                  FROM snowflake_id_shards" | on "$n")
  bad+=$(on "$n" -c "SELECT string_agg(format('SELECT %L || '' shard %s: like of no photo '' || l.photo_id FROM %I.likes l
                                               WHERE NOT EXISTS (SELECT FROM %I.photos p WHERE p.id = l.photo_id)', '$n', shard, schema_name, schema_name), ' UNION ALL ')
                  FROM snowflake_id_shards" | on "$n")
done
[[ -z $bad ]] || fail "counters or keys wrong: $(echo "$bad" | head -5)"
on router -F ' ' -c "SELECT shard, node FROM shard_map" >"$work/map"
sort "$work"/likes*.log >"$work/acked"; sort "$work/held" | awk '{ print $1, $2, $3 }' >"$work/held_sorted"
missing=$(comm -23 "$work/acked" "$work/held_sorted" | head -3)
[[ -z $missing ]] || fail "acknowledged likes missing: $missing"
dup=$(uniq -d "$work/held_sorted" | head -3)
[[ -z $dup ]] || fail "likes held twice: $dup"
echo "likes: $acked acknowledged, each once; every like_count equals its likes; no like without its photo"

# On the targets the key and triggers work: an orphan is refused, a cascade counts down.
for m in "1 node_c" "2731 node_a" "5462 node_b"; do
  set -- $m
  s=$(on "$2" -c "SELECT schema_name FROM snowflake_id_shards WHERE shard = $1")
  [[ -n $s ]] || fail "shard $1 is not served by $2"
  [[ $(on "$2" -c "SELECT coalesce(sum(n), 0) > 0 AND sum(n) <= (SELECT count(*) FROM $s.likes) FROM $s.like_totals") == t ]] \
    || fail "the materialized view of $2's shard $1 was not refreshed from its rows by the move"
  [[ $(on "$2" -c "SELECT bool_and($s.likes_of(id) = like_count) FROM $s.photos") == t ]] \
    || fail "the function of $2's shard $1 does not count the shard's likes"
  [[ $(on "$2" -c "SELECT (SELECT max(no) FROM $s.likes) < nextval('$s.likes_no_seq') AND count(DISTINCT no) = count(*) FROM $s.likes") == t ]] \
    || fail "the serial's sequence of $2's shard $1 did not continue above the source's numbers, or repeated one"
  err=$(on "$2" -c "INSERT INTO $s.likes VALUES (1, 999999)" 2>&1 || true)
  [[ $err == *'violates foreign key constraint'* ]] || fail "the key is not enforced on $2's shard $1: $err"
  on "$2" -c "INSERT INTO $s.photos (id) VALUES ($1 * 1000 + 500)" \
          -c "INSERT INTO $s.likes VALUES (1, $1 * 1000 + 500), (2, $1 * 1000 + 500)" -c "DELETE FROM $s.likes WHERE user_id = 1 AND photo_id = $1 * 1000 + 500" >/dev/null
  [[ $(on "$2" -c "SELECT like_count || ' ' || (updated_at IS NOT NULL) FROM $s.photos WHERE id = $1 * 1000 + 500") == "1 true" ]] \
    || fail "the triggers did not fire once on $2's shard $1"
  on "$2" -c "DELETE FROM $s.photos WHERE id = $1 * 1000 + 500" >/dev/null
  [[ $(on "$2" -c "SELECT count(*) || ' ' || (SELECT count(*) FROM $s.miscounted) || ' ' || has_table_privilege('public', '$s.photo_likes', 'SELECT')
                   FROM $s.photo_likes") == "$(on "$2" -c "SELECT count(*) FROM $s.photos") 0 true" ]] \
    || fail "the views on $2's shard $1 do not read its tables, or lost their privileges"
  [[ $(on "$2" -c "SELECT count(*) FROM $s.likes WHERE photo_id = $1 * 1000 + 500") == 0 ]] || fail "no cascade on $2's shard $1"
  diff=$(on "$2" -c "SELECT snowflake_id_node.fingerprint_difference(snowflake_id_node.fingerprint('$s'), snowflake_id_node.fingerprint('tpl'), 'the shard', 'the template')")
  [[ -z $diff ]] || fail "moved shard $1 differs from its template on $2: $diff"
done
echo "on the targets: the key refuses an orphan, the counter follows likes and cascades, the serial continues, the function counts the shard's likes, the materialized view was refreshed, the views read the shard, the layout is the template's"

# A trigger enabled ALWAYS would fire again on the target: the move is refused, nothing made.
on node_a -c "ALTER TABLE shard_3.likes ENABLE ALWAYS TRIGGER count_like" >/dev/null
err=$(on router -c "SELECT move_shard(3, 'node_b')" 2>&1 || true)
[[ $err == *'trigger count_like on table shard_3.likes cannot move: it is enabled ALWAYS'* ]] || fail "a trigger enabled ALWAYS moved: $err"
[[ $(on node_b -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_3'") == 0 ]] || fail "the refused move left shard_3 on node_b"
on node_a -c "ALTER TABLE shard_3.likes ENABLE TRIGGER count_like" >/dev/null
echo "a trigger enabled ALWAYS: the move refused, nothing made"

# A materialized view whose owner may not read the shard's table (a table owner's REVOKE is
# enough): its refresh on the target fails before the seal, so the move is undone, naming
# the view and its owner, and the shard stays writable where it was.
for n in node_a node_b node_c; do on "$n" -c "CREATE ROLE mv_owner" >/dev/null; done
on node_a -c "GRANT USAGE ON SCHEMA shard_3 TO mv_owner; ALTER MATERIALIZED VIEW shard_3.like_totals OWNER TO mv_owner" >/dev/null
err=$(on router -c "SELECT move_shard(3, 'node_b')" 2>&1 || true)
[[ $err == *'the copy of materialized view shard_3.like_totals could not be refreshed as its owner mv_owner: permission denied'* ]] \
  || fail "a materialized view its owner cannot refresh was not refused before the seal: $err"
[[ $(on node_b -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_3'") == 0 ]] || fail "the undone move left shard_3 on node_b"
on node_a -c "INSERT INTO shard_3.photos (id) VALUES (3999)" >/dev/null || fail "shard 3 refuses writes after its undone move"
on node_a -c "DELETE FROM shard_3.photos WHERE id = 3999; ALTER MATERIALIZED VIEW shard_3.like_totals OWNER TO CURRENT_USER;
              REVOKE USAGE ON SCHEMA shard_3 FROM mv_owner" >/dev/null
for n in node_a node_b node_c; do on "$n" -c "DROP ROLE mv_owner" >/dev/null; done
echo "a materialized view its owner cannot refresh: the move undone before the seal, the shard writable"

router_invariants "$work"
