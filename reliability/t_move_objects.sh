#!/usr/bin/env bash
# What a move carries besides rows, and what it runs on the nodes (scripts/router_cluster.sh:
# a router and three data nodes, 4 shards made on each):
#   - the database of node_b belongs to a role that is not a superuser (dbown), which sets
#     `ALTER DATABASE ... SET search_path = dbown, public, pg_catalog` and makes `dbown.=(name,
#     name)`, a function that records who runs it and tries `ALTER ROLE dbown SUPERUSER`:
#     shard 1 moves onto node_b, shard 2731 off it, and shard 1 back; the function must never
#     run as a superuser (the target's copy connects to the source with the router's
#     settings in its startup packet, and every operator it names is schema-qualified;
#     the subscription's connections set an empty search_path first, PostgreSQL's own
#     rule). A run of the operator by a superuser session of the test's own shows the trap
#     works.
#   - shard 1's privileges name roles with awkward names (upper case, a quote, a space,
#     letters outside ASCII), one granted by a grantor other than the owner, a table owned
#     by one: after each move the shard's owners and privileges are what they were.
#   - tables added to every shard and the template by alter_shards, without primary key:
#     one with REPLICA IDENTITY FULL, one USING INDEX: their shards move (create_shard gives
#     the copy the template's replica identity), rows and identity intact, with updates and
#     deletes made during a move replicated by them.
#   - a table holding large object OIDs (the lo extension's type, or oid): the move is
#     refused (55000, naming table and column) before anything is made, and the large object
#     stays readable where it was.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
trap 'router_cluster_down; rm -rf "$work"' EXIT

SHARDS_PER_NODE=4 router_cluster_up
# The test's own sessions name their search_path at connection, as the router's do: the
# trap set on node_b below catches only sessions that take its database's.
on() {
  local who=$1 host port; shift
  if [[ $who == router ]]; then host=$SF_TMP/sfrouter port=$ROUTER_PORT; else host=$(node_dir "$who") port=$(node_port "$who"); fi
  PGOPTIONS="-c client_min_messages=warning -c search_path=pg_catalog,public -c role=none" \
    psql -X -q -At -v ON_ERROR_STOP=1 -h "$host" -p "$port" -U postgres -d postgres "$@"
}

# Awkward role names on every node (roles are per server); tables without primary key on the
# template and every shard of every node.
for n in node_a node_b node_c; do
  on "$n" -c 'CREATE ROLE "Reader"' -c 'CREATE ROLE "we""ird"' -c 'CREATE ROLE "with space"' \
          -c 'CREATE ROLE "ünï"' -c 'CREATE ROLE "Ünï Owner"' >/dev/null
done
on router -c "SELECT * FROM alter_shards(\$\$CREATE TABLE %I.audit (at timestamptz NOT NULL, line text)\$\$)" \
          -c "SELECT * FROM alter_shards(\$\$ALTER TABLE %I.audit REPLICA IDENTITY FULL\$\$)" \
          -c "SELECT * FROM alter_shards(\$\$CREATE TABLE %I.events (id bigint NOT NULL, kind text NOT NULL, note text)\$\$)" \
          -c "SELECT * FROM alter_shards(\$\$CREATE UNIQUE INDEX ON %I.events (kind, id)\$\$)" \
          -c "SELECT * FROM alter_shards(\$\$ALTER TABLE %I.events REPLICA IDENTITY USING INDEX events_kind_id_idx\$\$)" >/dev/null

# The database owner of node_b and its trap.
# (schema public stays a superuser's: the router refuses a node where it is not, t_node_owner)
on node_b -c "CREATE ROLE dbown LOGIN" -c "ALTER DATABASE postgres OWNER TO dbown" -c "ALTER SCHEMA public OWNER TO postgres" >/dev/null
psql -X -q -At -v ON_ERROR_STOP=1 -h "$(node_dir node_b)" -p "$(node_port node_b)" -U dbown -d postgres <<'SQL' >/dev/null
CREATE SCHEMA dbown;
CREATE TABLE dbown.seen (who name, super boolean, app text, backend text, at timestamptz DEFAULT now());
GRANT INSERT ON dbown.seen TO PUBLIC;
CREATE FUNCTION dbown.name_eq(a name, b name) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
    BEGIN
        INSERT INTO dbown.seen (who, super, app, backend)
        VALUES (current_user, (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user),
                pg_catalog.current_setting('application_name'),
                (SELECT s.backend_type FROM pg_catalog.pg_stat_activity s WHERE s.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()));
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'hostile = ran as % and could not record it: %', current_user, SQLERRM;
    END;
    IF pg_catalog.current_setting('application_name') OPERATOR(pg_catalog.<>) 'control' THEN
        BEGIN
            EXECUTE 'ALTER ROLE dbown SUPERUSER';
            RAISE WARNING 'hostile = made dbown a superuser, run as %', current_user;
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
    END IF;
    RETURN a OPERATOR(pg_catalog.=) b;
END $f$;
CREATE OPERATOR dbown.= (LEFTARG = name, RIGHTARG = name, FUNCTION = dbown.name_eq,
                          COMMUTATOR = OPERATOR(dbown.=), RESTRICT = eqsel, JOIN = eqjoinsel);
ALTER DATABASE postgres SET search_path = dbown, public, pg_catalog;
-- and every session there runs as dbown, a superuser's too, unless it says otherwise
ALTER DATABASE postgres SET role = dbown;
SQL
# The test's own sessions there say otherwise.
export PGOPTIONS="${PGOPTIONS:-} -c role=none"   # (psql by hand below)
# The trap works: a superuser session of the test's own, under the database's search_path.
PGAPPNAME=control psql -X -q -At -h "$(node_dir node_b)" -p "$(node_port node_b)" -U postgres -d postgres \
  -c "SELECT 'x'::name = 'x'::name" >/dev/null
[[ $(on node_b -c "SELECT count(*) FROM dbown.seen WHERE super AND app = 'control'") == 1 ]] \
  || fail "the trap on node_b did not catch the test's own superuser session"
echo "node_b: its database belongs to dbown, whose dbown.=(name, name) runs under the database's search_path, and sessions there run as dbown"

# Shard 1 on node_a: rows, awkward privileges and owners.
on node_a <<'SQL' >/dev/null
INSERT INTO shard_1.posts (user_id, body) SELECT g, 'post ' || g FROM generate_series(1, 50) g;
INSERT INTO shard_1.audit SELECT now(), 'line ' || g FROM generate_series(1, 20) g;
INSERT INTO shard_1.events SELECT g, 'kind ' || (g % 3), 'note ' || g FROM generate_series(1, 30) g;
GRANT USAGE ON SCHEMA shard_1 TO "we""ird", "Reader", "with space";
GRANT SELECT ON shard_1.posts TO "Reader" WITH GRANT OPTION;
SET ROLE "Reader";
GRANT SELECT ON shard_1.posts TO "with space";
RESET ROLE;
GRANT UPDATE (body) ON shard_1.posts TO "ünï";
ALTER TABLE shard_1.audit OWNER TO "Ünï Owner";
GRANT EXECUTE ON FUNCTION shard_1.next_id() TO "we""ird";
SQL
on node_b -c "INSERT INTO shard_2731.audit SELECT now(), 'line ' || g FROM generate_series(1, 7) g" >/dev/null

# grant_lines NODE SCHEMA: the schema's owners and privileges, each object's sorted.
grant_lines() {
  on "$1" -c "SELECT string_agg(l, E'\n' ORDER BY l) FROM (
                SELECT format('%s %s%s owner %s: %s', g.kind, g.object, ' ' || g.col, g.owner,
                              (SELECT string_agg(x::text, ' ' ORDER BY x::text) FROM unnest(g.acl::aclitem[]) x)) AS l
                  FROM json_to_recordset(snowflake_id_node.grants('{$2}')::json)
                       AS g(kind text, object text, col text, owned boolean, owner text, acl text)) x"
}
# contents NODE SCHEMA: rows of the shard's tables, and the tables' replica identities.
contents() {
  on "$1" -c "SELECT (SELECT count(*) || ' ' || sum(hashtext(id || body)) FROM $2.posts) || ' / '
                  || (SELECT count(*) || ' ' || sum(hashtext(line)) FROM $2.audit) || ' / '
                  || (SELECT count(*) || ' ' || sum(hashtext(id || kind || note)) FROM $2.events) || ' / '
                  || (SELECT string_agg(c.relname || ' ' || c.relreplident::text || coalesce(' ' || i.indexrelid::regclass::text, ''), ', ' ORDER BY c.relname)
                        FROM pg_class c LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisreplident
                       WHERE c.relnamespace = '$2'::regnamespace AND c.relkind = 'r')"
}
grants_before=$(grant_lines node_a shard_1)
contents_1=$(contents node_a shard_1)
contents_2731=$(contents node_b shard_2731)
echo "shard 1 on node_a: $contents_1"
echo "shard 1's owners and privileges:"; echo "$grants_before" | sed 's/^/  /'
[[ $grants_before == *'"we""ird"=U/postgres'* && $grants_before == *'"with space"=r/Reader'* && $grants_before == *'Ünï Owner'* ]] \
  || fail "shard 1's privileges are not those granted"

# move SHARD NODE: moves it, or fails the test with the router's message.
move() {
  local out
  out=$(on router -c "SELECT move_shard($1, '$2')" 2>&1) || fail "move of shard $1 to $2 failed: $out"
  echo "shard $1 moved to $2"
}
# While node_b's database sets role for every session, a move onto it (or off it) is
# refused before anything is made: its replication would run as dbown. Then reset.
if out=$(on router -v VERBOSITY=verbose -c "SELECT move_shard(1, 'node_b')" 2>&1); then fail "a move onto a database that sets role for all was accepted"; fi
[[ $out == *'ERROR:  55000'*'sets role = dbown for every session'* ]] || fail "the refusal of a move onto a database that sets role: $out"
echo "refused while node_b's database sets role: $(grep -m1 -o 'checking the target.*' <<<"$out" | cut -c1-150)"
psql -X -q -h "$(node_dir node_b)" -p "$(node_port node_b)" -U dbown -d postgres -c "ALTER DATABASE postgres RESET role" >/dev/null
move 1 node_b
[[ $(grant_lines node_b shard_1) == "$grants_before" ]] || fail "shard 1 on node_b has other privileges: $(grant_lines node_b shard_1)"
[[ $(contents node_b shard_1) == "$contents_1" ]] || fail "shard 1 on node_b holds $(contents node_b shard_1), not $contents_1"
move 2731 node_c
[[ $(contents node_c shard_2731) == "$contents_2731" ]] || fail "shard 2731 on node_c holds $(contents node_c shard_2731)"
move 1 node_a
[[ $(grant_lines node_a shard_1) == "$grants_before" ]] || fail "shard 1 back on node_a has other privileges: $(grant_lines node_a shard_1)"
[[ $(contents node_a shard_1) == "$contents_1" ]] || fail "shard 1 back on node_a holds $(contents node_a shard_1)"
echo "shards 1 and 2731 kept their rows, replica identities, owners and privileges"
# Changes replicated by those identities: shard 2731 moves back to node_b, held once its
# subscription is made; an update and a delete on each table without a primary key on the
# source meanwhile arrive on node_b.
on router -c "INSERT INTO snowflake_id_router.breakpoint (step) VALUES ('subscribed')"
on router -c "SELECT move_shard(2731, 'node_b')" >"$work/held.log" 2>&1 & mover=$!
for _ in $(seq 600); do
  [[ -n $(on router -c "SELECT pid FROM snowflake_id_router.breakpoint WHERE reached IS NOT NULL") ]] && break
  kill -0 "$mover" 2>/dev/null || fail "the move of shard 2731 ended before it subscribed: $(cat "$work/held.log")"
  sleep 0.05
done
on node_c -c "UPDATE shard_2731.audit SET line = line || ' (seen)' WHERE line = 'line 3'" \
          -c "DELETE FROM shard_2731.audit WHERE line = 'line 4'" \
          -c "INSERT INTO shard_2731.events VALUES (1, 'a', 'one'), (2, 'a', 'two')" \
          -c "UPDATE shard_2731.events SET note = 'one (seen)' WHERE id = 1" -c "DELETE FROM shard_2731.events WHERE id = 2" >/dev/null
changed=$(contents node_c shard_2731)
on router -c "DELETE FROM snowflake_id_router.breakpoint" >/dev/null
wait "$mover" || fail "the move of shard 2731 back to node_b failed: $(cat "$work/held.log")"
[[ $(contents node_b shard_2731) == "$changed" ]] || fail "shard 2731 back on node_b holds $(contents node_b shard_2731), not $changed"
echo "shard 2731 moved to node_b, with an update and a delete on each table without a primary key made during the move"

# A shard in a move refuses schema and privilege changes as it refuses writes (item 25):
# held at its fence (before the marker) and then just after its seal, a GRANT, a COMMENT, an
# ALTER TABLE and a DROP on shard 1 by its owner's role or a superuser are refused (55000);
# once it is done, the same GRANT goes through on the new node and its privileges are there.
# (step: a move's breakpoint; changes: what each session tries, one psql -c each)
changes=("GRANT SELECT ON shard_1.events TO \"Reader\"" "COMMENT ON TABLE shard_1.posts IS 'moving'"
         "ALTER TABLE shard_1.events ADD COLUMN extra text" "DROP TABLE shard_1.audit" "REVOKE ALL ON shard_1.posts FROM \"Reader\" CASCADE")
on node_a -c "GRANT USAGE ON SCHEMA shard_1 TO \"Ünï Owner\"" >/dev/null   # (so that its COMMENT reaches the guard)
grants_before=$(grant_lines node_a shard_1)
for step in fenced sealed; do
  on router -c "INSERT INTO snowflake_id_router.breakpoint (step) VALUES ('$step')"
  on router -c "SELECT move_shard(1, 'node_c')" >"$work/held.log" 2>&1 & mover=$!
  for _ in $(seq 600); do
    [[ -n $(on router -c "SELECT pid FROM snowflake_id_router.breakpoint WHERE reached IS NOT NULL") ]] && break
    kill -0 "$mover" 2>/dev/null || fail "the move of shard 1 ended before '$step': $(cat "$work/held.log")"
    sleep 0.05
  done
  for c in "${changes[@]}"; do
    if out=$(on node_a -v VERBOSITY=verbose -c "$c" 2>&1); then fail "25: '$c' went through on shard 1 held at '$step'"; fi
    [[ $out == *'ERROR:  55000:'*'the shard is being moved'* ]] || fail "25: '$c' at '$step': $out"
  done
  # (as the owner of shard_1.audit, a role that is not a superuser)
  if out=$(on node_a -v VERBOSITY=verbose -c "SET ROLE \"Ünï Owner\"" -c "COMMENT ON TABLE shard_1.audit IS 'mine'" 2>&1); then
    fail "25: the owner of shard_1.audit commented it, held at '$step'"
  fi
  [[ $out == *'ERROR:  55000:'* ]] || fail "25: the owner's COMMENT at '$step': $out"
  on router -c "DELETE FROM snowflake_id_router.breakpoint" >/dev/null
  wait "$mover" || fail "the move of shard 1 held at '$step' failed: $(cat "$work/held.log")"
  [[ $(grant_lines node_c shard_1) == "$grants_before" ]] || fail "25: shard 1 on node_c has other privileges: $(grant_lines node_c shard_1)"
  echo "25: shard 1 held at '$step': ${#changes[@]} changes and its owner's COMMENT refused (55000), its privileges as before on node_c"
  on router -c "SELECT move_shard(1, 'node_a')" >/dev/null
done
on node_a -c "${changes[0]}" >/dev/null
[[ $(grant_lines node_a shard_1) != "$grants_before" ]] || fail "25: the GRANT after the moves changed nothing"
on node_a -c "REVOKE SELECT ON shard_1.events FROM \"Reader\"" >/dev/null
echo "25: once the moves were done, the same GRANT went through"

# Whoever ran node_b's trap, no superuser did, but the test's own control session.
ran=$(on node_b -c "SELECT count(*) || ' runs, by ' || coalesce(string_agg(DISTINCT format('%s (%s, %s)', who, app, backend), ', '), 'no one')
                    FROM dbown.seen WHERE app IS DISTINCT FROM 'control'")
echo "node_b's dbown.=(name, name) outside the control: $ran"
supers=$(on node_b -c "SELECT string_agg(format('%s (application %s, %s)', who, app, backend), ', ') FROM dbown.seen
                       WHERE super AND app IS DISTINCT FROM 'control'")
[[ -z $supers ]] || fail "node_b's database owner's operator ran as a superuser: $supers"
! grep -a 'hostile = ' "$(node_dir node_b)/server.log" || fail "node_b's database owner's operator ran where it could not record it (above)"
[[ $(on node_b -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'dbown'") == f ]] || fail "dbown became a superuser"

# A table holding large objects' OIDs, on the template and every shard: refused before
# anything is made (a move would copy the OIDs, not the objects); the object stays.
# (alter_shards runs as the owner of a shard's tables, one owner per shard.)
on node_a -c 'ALTER TABLE shard_1.audit OWNER TO postgres' >/dev/null
lo_type=oid
if [[ $(on node_a -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'lo'") == 1 ]]; then
  for n in node_a node_b node_c; do on "$n" -c "CREATE EXTENSION lo" >/dev/null; done
  lo_type=lo
fi
on router -c "SELECT * FROM alter_shards(\$\$CREATE TABLE %I.files (id bigint PRIMARY KEY, content $lo_type)\$\$)" >/dev/null
loid=$(on node_a -c "INSERT INTO shard_2.files VALUES (1, lo_from_bytea(0, 'large object of shard 2'))" \
                 -c "SELECT content FROM shard_2.files")
if out=$(on router -c "SELECT move_shard(2, 'node_c')" 2>&1); then
  fail "shard 2 moved with its large object's OID ($loid), which node_c reads as: $(on node_c -c "SELECT convert_from(lo_get($loid), 'UTF8')" 2>&1)"
fi
echo "refused: $(head -1 <<<"$out")"
[[ $out == *'table shard_2.files cannot move: its column content of type '*' holds OIDs'* ]] \
  || fail "not the refusal of a column holding OIDs: $out"
[[ $(on node_a -c "SELECT convert_from(lo_get($loid), 'UTF8')") == 'large object of shard 2' ]] || fail "the large object is gone"
[[ $(on node_a -c "SELECT count(*) FROM snowflake_id_shards WHERE shard = 2") == 1 ]] || fail "shard 2 left node_a"

router_invariants "$work"
