#!/usr/bin/env bash
# every version: the rules privileged code relies on change by version (restricted operations, search_path in maintenance commands since 17, dblink and libpq)
# Class 2 of issue 33, as a class: no privileged operation of either extension runs, as a
# superuser, code that a less-privileged role defines (docs/security.md). A role mallory owns
#   - shard 0 (node_a): its schema, tables and sequence (no code of hers at first: its moves
#     go through; code she adds during a move, on the source or on the target's copy once
#     it is hers, is met by what the move does next);
#   - shard 1 (node_a): its tables and sequence, with every kind of code PostgreSQL runs
#     implicitly: an expression index calling an IMMUTABLE function that calls a volatile
#     one, a partial index through an operator of hers, a CHECK constraint, a column
#     default, a generated column, a domain with a check, BEFORE and AFTER row and statement
#     triggers (ENABLE ALWAYS and ENABLE REPLICA too), a rule, a forced RLS policy;
#   - node_c's template tables, with the same code, and node_c's database (schema public
#     kept a superuser's, as the router requires), whose search_path (ALTER DATABASE ...
#     SET) puts her mallory.=(name,name) and other operators before pg_catalog's;
#   - shard 2 (node_a), made by her from her template mtpl, which node_c has too, with a
#     materialized view calling her code;
#   - shards 2731 and 2732 (node_b) and node_c's templates tpl2 and tpl3, with code that calls
#     only PostgreSQL's own functions, each harmless as her and not as a superuser (setval of
#     a superuser's sequence, pg_notify), when current_setting('is_superuser') says so: a
#     CHECK constraint (tpl2, shard 2732) and a domain's check (tpl3, shard 2731). Moving
#     2732 onto node_c copies and applies rows into tables carrying that CHECK: from
#     PostgreSQL 16 on as her (the move goes through), on 15, whose apply worker cannot switch
#     to her, the move is refused (42501) before any row moves.
# Every function of hers logs (current_user, session_user, superuser) to a table everyone may
# insert into, counts runs as a superuser in a sequence and in the server log (neither rolls
# back), and tries ALTER ROLE mallory SUPERUSER. Then the router's superuser runs every
# privileged operation over those shards: the status views, rebalance_plan (both
# strategies), moves in and out of shard 0 and 1 and onto and off node_c, rebalance,
# drain_node, alter_shards (a type change, a column with a default, a CHECK), repair_moves,
# create_shard from node_c's template. Each may run her code as mallory, or refuse: printed.
# None may run it as a superuser, and mallory never becomes one.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
source "$here/../scripts/router_cluster.sh"
work=$(mktemp -d); chmod 755 "$work"
bg=()
trap 'kill "${bg[@]}" 2>/dev/null || true; router_cluster_down; rm -rf "$work"' EXIT
SHARDS_PER_NODE=2 router_cluster_up >/dev/null 2>&1
# This test's own sessions on the nodes never run mallory's operators: pg_catalog comes first.
on() {
  local who=$1; shift
  local opts="-c client_min_messages=warning -c search_path=pg_catalog,public,pg_temp"
  if [[ $who == router ]]; then
    PGOPTIONS=$opts psql -X -q -At -v ON_ERROR_STOP=1 -h "$SF_TMP/sfrouter" -p "$ROUTER_PORT" -U postgres -d postgres "$@"
  else
    PGOPTIONS=$opts psql -X -q -At -v ON_ERROR_STOP=1 -h "$(node_dir "$who")" -p "$(node_port "$who")" -U postgres -d postgres "$@"
  fi
}
on_all() { local n; for n in "${ROUTER_NODES[@]}"; do on "$n" "$@"; done; }
served_by() { on router -c "SELECT node FROM shard_map WHERE shard = $1"; }
for n in "${ROUTER_NODES[@]}"; do
  on "$n" -c "ALTER SYSTEM SET autovacuum = off" -c "SELECT pg_reload_conf()" \
    -c "SELECT count(*) FROM (SELECT public.insert_post(shard, 1, 'row') FROM public.snowflake_id_shards, generate_series(1, 20)) x" >/dev/null
done

echo "mallory's code, on every node"
setup_sql=$(cat <<'SQL'
CREATE ROLE mallory LOGIN;
CREATE TABLE public.hostile_log (id bigint GENERATED ALWAYS AS IDENTITY, who name, sess name, su boolean, what text,
                                 app text, query text);
GRANT INSERT, SELECT ON public.hostile_log TO PUBLIC;
GRANT USAGE ON SEQUENCE public.hostile_log_id_seq TO PUBLIC;
CREATE SEQUENCE public.hostile_su;
GRANT USAGE, UPDATE ON SEQUENCE public.hostile_su TO PUBLIC;
CREATE SCHEMA mallory AUTHORIZATION mallory;
SET ROLE mallory;
GRANT USAGE ON SCHEMA mallory TO PUBLIC;
-- What every piece of her code does: log, count a superuser's run where no rollback undoes
-- it, and try to become a superuser.
CREATE FUNCTION mallory.escalate(what text) RETURNS boolean LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    su boolean := (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user);
BEGIN
    RAISE LOG 'hostile: % ran as % (session %, superuser %)', what, current_user, session_user, su;
    IF su THEN
        PERFORM pg_catalog.nextval('public.hostile_su');
    END IF;
    INSERT INTO public.hostile_log (who, sess, su, what, app, query)
    VALUES (current_user, session_user, su, what, pg_catalog.current_setting('application_name'), pg_catalog.left(pg_catalog.current_query(), 300));
    BEGIN
        EXECUTE 'ALTER ROLE mallory SUPERUSER';
    EXCEPTION WHEN OTHERS THEN
        NULL;
    END;
    RETURN true;
END $$;
CREATE FUNCTION mallory.k(integer) RETURNS bigint LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM mallory.escalate('index expression'); RETURN 0; END $$;
CREATE FUNCTION mallory.chk(text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN mallory.escalate('check constraint'); END $$;
CREATE FUNCTION mallory.def() RETURNS integer LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM mallory.escalate('column default'); RETURN 0; END $$;
CREATE FUNCTION mallory.gen(bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM mallory.escalate('generated column'); RETURN $1; END $$;
CREATE FUNCTION mallory.dchk(text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN mallory.escalate('domain check'); END $$;
CREATE DOMAIN mallory.dom AS text CHECK (mallory.dchk(VALUE));
CREATE FUNCTION mallory.pol(bigint) RETURNS boolean LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN mallory.escalate('policy'); END $$;
CREATE FUNCTION mallory.opf(bigint, bigint) RETURNS boolean LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM mallory.escalate('operator of an index'); RETURN true; END $$;
CREATE OPERATOR mallory.=== (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = mallory.opf);
CREATE FUNCTION mallory.trg() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM mallory.escalate(pg_catalog.format('trigger %s %s %s', TG_NAME, TG_WHEN, TG_LEVEL));
          RETURN CASE WHEN TG_LEVEL = 'ROW' AND TG_OP <> 'DELETE' THEN NEW ELSE OLD END; END $$;
CREATE FUNCTION mallory.rule_fn() RETURNS boolean LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN mallory.escalate('rule'); END $$;
RESET ROLE;
SQL
)
for n in "${ROUTER_NODES[@]}"; do on "$n" <<<"$setup_sql" >/dev/null; done
# code TABLE: the code of hers that a table's copy would carry (what CREATE TABLE ... LIKE
# copies), added as mallory; all_code TABLE: that and what a copy would not.
code() {
  cat <<SQL
SET ROLE mallory;
CREATE INDEX hostile_k ON $1 ((id + mallory.k(0)));
CREATE INDEX hostile_op ON $1 (id) WHERE (id OPERATOR(mallory.===) 0);
ALTER TABLE $1 ADD CONSTRAINT posts_chk CHECK (mallory.chk(body));
ALTER TABLE $1 ALTER COLUMN edits SET DEFAULT mallory.def();
ALTER TABLE $1 ADD COLUMN g bigint GENERATED ALWAYS AS (mallory.gen(id)) STORED;
ALTER TABLE $1 ADD COLUMN d mallory.dom;
RESET ROLE;
SQL
}
all_code() {
  code "$1"
  cat <<SQL
SET ROLE mallory;
CREATE TRIGGER b_row BEFORE INSERT OR UPDATE OR DELETE ON $1 FOR EACH ROW EXECUTE FUNCTION mallory.trg();
CREATE TRIGGER a_row AFTER INSERT OR UPDATE OR DELETE ON $1 FOR EACH ROW EXECUTE FUNCTION mallory.trg();
CREATE TRIGGER b_stmt BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON $1 FOR EACH STATEMENT EXECUTE FUNCTION mallory.trg();
CREATE TRIGGER a_stmt AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON $1 FOR EACH STATEMENT EXECUTE FUNCTION mallory.trg();
CREATE TRIGGER always_row BEFORE INSERT OR UPDATE OR DELETE ON $1 FOR EACH ROW EXECUTE FUNCTION mallory.trg();
ALTER TABLE $1 ENABLE ALWAYS TRIGGER always_row;
CREATE TRIGGER replica_row BEFORE INSERT OR UPDATE OR DELETE ON $1 FOR EACH ROW EXECUTE FUNCTION mallory.trg();
ALTER TABLE $1 ENABLE REPLICA TRIGGER replica_row;
CREATE RULE posts_rule AS ON UPDATE TO $1 DO ALSO SELECT mallory.rule_fn();
ALTER TABLE $1 ENABLE ROW LEVEL SECURITY;
ALTER TABLE $1 FORCE ROW LEVEL SECURITY;
CREATE POLICY posts_policy ON $1 USING (mallory.pol(id));
RESET ROLE;
SQL
}
# Shard 0: hers, without code. Shard 1: hers, with all of it (and rows written through it, as her).
on node_a >/dev/null <<SQL
ALTER SCHEMA shard_0 OWNER TO mallory;
ALTER TABLE shard_0.posts OWNER TO mallory;
ALTER SEQUENCE shard_0.table_id_seq OWNER TO mallory;
GRANT USAGE, CREATE ON SCHEMA shard_1 TO mallory;
ALTER TABLE shard_1.posts OWNER TO mallory;
ALTER SEQUENCE shard_1.table_id_seq OWNER TO mallory;
$(all_code shard_1.posts)
SET ROLE mallory;
UPDATE shard_1.posts SET edits = edits + 1 WHERE id IN (SELECT id FROM shard_1.posts LIMIT 3);
RESET ROLE;
SQL
# node_c: her template, her database, her operators first on its search_path.
# Her code of PostgreSQL's own functions only (issue 33, F2): a superuser running it moves a
# superuser's sequence back to 1 and tells whoever listens on channel pwn. (is_superuser is
# the session's: code switched to her by a superuser's session still reads 'on'. She then
# looks before she leaps, so that where her code runs as her, the rows go in.)
pwn="CASE WHEN pg_catalog.current_setting('is_superuser') = 'on'
       AND pg_catalog.has_sequence_privilege('public.victim_seq', 'UPDATE')
  THEN pg_catalog.setval('public.victim_seq'::regclass, 1) > 0
   AND pg_catalog.length(pg_catalog.pg_notify('pwn', 'ran as ' || current_user)::text) = 0 ELSE true END"
on_all -c "CREATE SEQUENCE public.victim_seq" -c "SELECT setval('public.victim_seq', 1000)" \
  -c "SET ROLE mallory" -c "CREATE DOMAIN mallory.pwn_dom AS text CHECK ($pwn)" >/dev/null
pwn_code() { echo "SET ROLE mallory; ALTER TABLE $1 ADD CONSTRAINT pwn CHECK ($pwn); RESET ROLE;"; }
pwn_dom() { echo "SET ROLE mallory; ALTER TABLE $1 ADD COLUMN pd mallory.pwn_dom; RESET ROLE;"; }
on node_c >/dev/null <<SQL
CREATE SCHEMA tpl2; CREATE SCHEMA tpl3;
GRANT USAGE ON SCHEMA tpl2, tpl3 TO mallory;
CREATE TABLE tpl2.posts (LIKE tpl.posts INCLUDING ALL);
CREATE TABLE tpl3.posts (LIKE tpl.posts INCLUDING ALL);
ALTER TABLE tpl2.posts OWNER TO mallory;
ALTER TABLE tpl3.posts OWNER TO mallory;
$(pwn_code tpl2.posts)
$(pwn_dom tpl3.posts)
SQL
on node_b >/dev/null <<SQL
-- (recorded as made from node_c's tpl3 and tpl2, whose tables they get: a move makes its copy
-- from the template its shard records)
UPDATE snowflake_id_shard SET template = 'tpl3' WHERE shard = 2731;
UPDATE snowflake_id_shard SET template = 'tpl2' WHERE shard = 2732;
GRANT USAGE ON SCHEMA shard_2731, shard_2732 TO mallory;
ALTER TABLE shard_2731.posts OWNER TO mallory;
ALTER TABLE shard_2732.posts OWNER TO mallory;
ALTER SEQUENCE shard_2731.table_id_seq OWNER TO mallory;
ALTER SEQUENCE shard_2732.table_id_seq OWNER TO mallory;
$(pwn_code shard_2732.posts)
$(pwn_dom shard_2731.posts)
SQL
on node_c >/dev/null <<SQL
ALTER DATABASE postgres OWNER TO mallory;
-- (schema public stays a superuser's: the router refuses a node where it is not, t_node_owner)
ALTER SCHEMA public OWNER TO postgres;
GRANT USAGE, CREATE ON SCHEMA tpl TO mallory;
ALTER TABLE tpl.posts OWNER TO mallory;
$(code tpl.posts)
SET ROLE mallory;
ALTER DATABASE postgres SET search_path = mallory, public, pg_catalog;
CREATE FUNCTION mallory.hostile_eq(name, name) RETURNS boolean LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS \$\$ BEGIN PERFORM mallory.escalate('operator =(name, name)'); RETURN \$1::text OPERATOR(pg_catalog.=) \$2::text; END \$\$;
CREATE OPERATOR mallory.= (LEFTARG = name, RIGHTARG = name, FUNCTION = mallory.hostile_eq);
CREATE FUNCTION mallory.hostile_eq(text, text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS \$\$ BEGIN PERFORM mallory.escalate('operator =(text, text)'); RETURN \$1 OPERATOR(pg_catalog.=) \$2; END \$\$;
CREATE OPERATOR mallory.= (LEFTARG = text, RIGHTARG = text, FUNCTION = mallory.hostile_eq);
CREATE FUNCTION mallory.hostile_eq(oid, oid) RETURNS boolean LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS \$\$ BEGIN PERFORM mallory.escalate('operator =(oid, oid)'); RETURN \$1 OPERATOR(pg_catalog.=) \$2; END \$\$;
CREATE OPERATOR mallory.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = mallory.hostile_eq);
CREATE FUNCTION mallory.hostile_eq(integer, integer) RETURNS boolean LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS \$\$ BEGIN PERFORM mallory.escalate('operator =(integer, integer)'); RETURN \$1 OPERATOR(pg_catalog.=) \$2; END \$\$;
CREATE OPERATOR mallory.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = mallory.hostile_eq);
CREATE FUNCTION mallory.hostile_ne(text, text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS \$\$ BEGIN PERFORM mallory.escalate('operator <>(text, text)'); RETURN \$1 OPERATOR(pg_catalog.<>) \$2; END \$\$;
CREATE OPERATOR mallory.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = mallory.hostile_ne);
CREATE FUNCTION mallory.hostile_like(text, text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS \$\$ BEGIN PERFORM mallory.escalate('operator ~~(text, text)'); RETURN \$1 OPERATOR(pg_catalog.~~) \$2; END \$\$;
CREATE OPERATOR mallory.~~ (LEFTARG = text, RIGHTARG = text, FUNCTION = mallory.hostile_like);
-- Types found by name before pg_catalog's: a cast to one runs its check.
CREATE FUNCTION mallory.hostile_domain(anyelement) RETURNS boolean LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS \$\$ BEGIN RETURN mallory.escalate('a domain named like a type of pg_catalog'); END \$\$;
CREATE DOMAIN mallory.text AS pg_catalog.text CHECK (mallory.hostile_domain(VALUE));
CREATE DOMAIN mallory.oid AS pg_catalog.oid CHECK (mallory.hostile_domain(VALUE));
CREATE DOMAIN mallory.regclass AS pg_catalog.regclass CHECK (mallory.hostile_domain(VALUE));
CREATE DOMAIN mallory.jsonb AS pg_catalog.jsonb CHECK (mallory.hostile_domain(VALUE));
CREATE DOMAIN mallory.json AS pg_catalog.json CHECK (mallory.hostile_domain(VALUE));
RESET ROLE;
SQL

# == What must hold after every operation ==
declare -A mark
marks() { local n; for n in "${ROUTER_NODES[@]}"; do mark[$n]=$(on "$n" -c "SELECT coalesce(max(id), 0) FROM public.hostile_log"); done; }
# safe WHAT: no run of hers as a superuser (logged, counted, or in the server log), and she is
# no superuser anywhere; sets ran to what of hers ran since marks, as whom.
safe() {
  local n r; ran=""
  for n in "${ROUTER_NODES[@]}"; do
    r=$(on "$n" -c "SELECT (SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory')
                          OR (SELECT last_value > 1 OR is_called FROM public.hostile_su)
                          OR EXISTS (SELECT FROM public.hostile_log WHERE su)")
    [[ $r == f ]] || fail "$1: mallory's code ran as a superuser on $n: $(on "$n" -c "SELECT string_agg(DISTINCT format('%s as %s (session %s, %s): %s', what, who, sess, app, query), E'\\n') FROM public.hostile_log WHERE su")"
    if grep -q "hostile: .*superuser true" "$(node_dir "$n")/server.log"; then
      fail "$1: mallory's code ran as a superuser on $n (server log): $(grep -m3 "hostile: .*superuser true" "$(node_dir "$n")/server.log")"
    fi
    r=$(on "$n" -c "SELECT string_agg(DISTINCT format('%s as %s', what, who), ', ') FROM public.hostile_log WHERE id > ${mark[$n]}")
    [[ -z $r ]] || ran+="${ran:+; }$n: $r"
  done
  ran=${ran:-none}
}
# op WHAT SQL: runs SQL on the router as its superuser; prints whether it ran or refused, and
# what of mallory's ran.
op() {
  local what=$1 sql=$2 out outcome
  marks
  if out=$(on router -v VERBOSITY=verbose -c "$sql" 2>&1); then outcome=done
  else outcome="refused: $(grep -m1 -o 'ERROR: .*' <<<"$out" | cut -c8- | cut -c1-150)"; fi
  safe "$what"; echo "  $what: $outcome; mallory's code ran: $ran"
}
# held STEP SQL MALLORY_SQL NODE [ROLE]: SQL on the router, paused at STEP while mallory (or
# ROLE) runs MALLORY_SQL on NODE, then let go.
held() {
  local step=$1 sql=$2 node=$4 out outcome mover
  marks
  on router -c "INSERT INTO snowflake_id_router.breakpoint (step) VALUES ('$step')"
  on router -v VERBOSITY=verbose -c "$sql" >"$work/held.log" 2>&1 & mover=$!; bg+=($mover)
  for _ in $(seq 600); do
    [[ -n $(on router -c "SELECT pid FROM snowflake_id_router.breakpoint WHERE reached IS NOT NULL") ]] && break
    kill -0 "$mover" 2>/dev/null || break; sleep 0.05
  done
  [[ -n $(on router -c "SELECT pid FROM snowflake_id_router.breakpoint WHERE reached IS NOT NULL") ]] \
    || fail "'$sql' did not reach step '$step': $(cat "$work/held.log")"
  # (a change of a shard in its fence, or of a target's copy not serving yet, is refused:
  # sql/node/guard.sql; before the fence it is made, and the move must deal with it)
  change=made
  if ! change=$(psql -X -q -At -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h "$(node_dir "$node")" -p "$(node_port "$node")" \
                  -U "${5:-mallory}" -d postgres -c "$3" 2>&1 </dev/null); then
    if [[ $change == *'ERROR:  42501:'* && $PG_MAJOR -lt 16 ]]; then
      change="refused (42501: before 16 a copy gets its owners and grants at the flip)"
    else
      [[ $change == *'ERROR:  55000:'*'the shard is being moved'* ]] || fail "${5:-mallory}'s change on $node at step $step failed: $change"
      change="refused (55000: the shard is being moved)"
    fi
  else
    change=made
  fi
  on router -c "DELETE FROM snowflake_id_router.breakpoint"
  if wait "$mover"; then outcome=done
  else outcome="refused: $(grep -m1 -o 'ERROR: .*' "$work/held.log" | cut -c8- | cut -c1-150)"; fi
  safe "$sql at $step"; echo "  $sql, mallory's change on node $node at '$step' $change; the move: $outcome; mallory's code ran: $ran"
}
marks; safe setup

echo "status and plans"
op "node_status" "SELECT * FROM node_status"
op "shard_status" "SELECT * FROM shard_status"
op "template_status" "SELECT * FROM template_status('tpl', true)"
op "rebalance_plan by_shard_count" "SELECT * FROM rebalance_plan('by_shard_count', 1)"
op "rebalance_plan by_disk_size" "SELECT * FROM rebalance_plan('by_disk_size', 1)"

echo "moves"
op "move_shard out of her shard 0" "SELECT move_shard(0, 'node_b')"
op "move_shard back into node_a" "SELECT move_shard(0, 'node_a')"
op "move_shard of her shard 1 (code in it)" "SELECT move_shard(1, 'node_b')"
op "move_shard onto node_c (her template and database)" "SELECT move_shard(2731, 'node_c')"
op "move_shard off node_c (her database)" "SELECT move_shard(5462, 'node_a')"
op "move_shards off node_c" "SELECT move_shards('{5463}', 'node_b')"
# During a move of shard 0: she adds code to the source (seen by the seal), and to the
# target's copy once it is hers (after it was given its owners).
shard0=$(served_by 0); other=$( [[ $shard0 == node_a ]] && echo node_b || echo node_a )
held subscribed "SELECT move_shard(0, '$other')" "$(code shard_0.posts | grep -v ROLE)" "$shard0"
# (she takes it back: only the next move's target copy gets it)
uncode() {
  cat <<SQL
SET ROLE mallory;
DROP INDEX IF EXISTS shard_0.hostile_k, shard_0.hostile_op;
ALTER TABLE shard_0.posts DROP CONSTRAINT IF EXISTS posts_chk, DROP COLUMN IF EXISTS g, DROP COLUMN IF EXISTS d,
    ALTER COLUMN edits SET DEFAULT 0;
DROP TRIGGER IF EXISTS b_row ON shard_0.posts; DROP TRIGGER IF EXISTS a_row ON shard_0.posts;
DROP TRIGGER IF EXISTS b_stmt ON shard_0.posts; DROP TRIGGER IF EXISTS a_stmt ON shard_0.posts;
DROP TRIGGER IF EXISTS always_row ON shard_0.posts; DROP TRIGGER IF EXISTS replica_row ON shard_0.posts;
DROP RULE IF EXISTS posts_rule ON shard_0.posts; DROP POLICY IF EXISTS posts_policy ON shard_0.posts;
ALTER TABLE shard_0.posts NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY;
SQL
}
on "$shard0" -c "$(uncode)" >/dev/null
held sealing "SELECT move_shard(0, '$other')" "$(all_code shard_0.posts | grep -v ROLE)" "$other"
op "move_shard back of shard 0 (code in it now)" "SELECT move_shard(0, '$shard0')"
on "$(served_by 0)" -c "$(uncode)" >/dev/null
# Sealed, she takes her table, or her schema, out of the shard's name (what PostgreSQL reports
# of such a command names where the object is now): refused, so the old copy cannot outlive
# the move with its fence and record (issue 33, F13).
for take in "ALTER TABLE shard_0.posts SET SCHEMA mallory" "ALTER SCHEMA shard_0 RENAME TO shard_0_kept"; do
  source_node=$(served_by 0); target_node=$( [[ $source_node == node_a ]] && echo node_b || echo node_a )
  on "$source_node" -c "GRANT CREATE ON DATABASE postgres TO mallory"   # (a schema's rename needs it)
  held sealed "SELECT move_shard(0, '$target_node')" "SET ROLE mallory; $take" "$source_node"
  [[ $change == refused* ]] || fail "sealed, mallory's '$take' on $source_node went through"
  left=$(on "$source_node" -c "SELECT concat_ws('; ', (SELECT string_agg(x, '; ') FROM snowflake_id_node.leftovers() x),
                                 CASE WHEN to_regclass('mallory.posts') IS NOT NULL THEN 'mallory.posts' END,
                                 CASE WHEN to_regnamespace('shard_0_kept') IS NOT NULL THEN 'shard_0_kept' END)")
  [[ -z $left && $(served_by 0) == "$target_node" ]] || fail "after '$take' while sealed: shard 0 on $(served_by 0), left on $source_node: $left"
done

echo "writes and DDL on a target's copy not serving yet"
# Paused once subscribed, the target's copy of shard 0 has her (its owner's) and a granted
# role's privileges (from PostgreSQL 16 on): every write path into it, as either, and every
# DDL command on it, a rule among them, is refused (55000); the move then completes with the
# rows the source had, none written past it (issue 33, F4: such a write was lost when the
# move was undone, and a rule rode along with it).
on_all -c "CREATE ROLE appwriter LOGIN" >/dev/null
on "$(served_by 0)" -c "GRANT USAGE ON SCHEMA shard_0 TO appwriter" \
  -c "GRANT INSERT, UPDATE, DELETE, TRUNCATE, SELECT ON shard_0.posts TO appwriter" \
  -c "GRANT USAGE ON SEQUENCE shard_0.table_id_seq TO appwriter" >/dev/null
for attempt in "appwriter|INSERT INTO shard_0.posts (user_id, body) VALUES (99, 'direct')" \
               "appwriter|UPDATE shard_0.posts SET body = 'direct'" \
               "appwriter|DELETE FROM shard_0.posts" \
               "appwriter|TRUNCATE shard_0.posts" \
               "appwriter|COPY shard_0.posts (user_id, body) FROM STDIN" \
               "mallory|INSERT INTO shard_0.posts (user_id, body) VALUES (99, 'direct')" \
               "mallory|TRUNCATE shard_0.posts" \
               "mallory|CREATE RULE swallow AS ON INSERT TO shard_0.posts DO INSTEAD NOTHING" \
               "mallory|CREATE TRIGGER late BEFORE INSERT ON shard_0.posts FOR EACH ROW EXECUTE FUNCTION mallory.trg()" \
               "mallory|CREATE POLICY late ON shard_0.posts USING (true)"; do
  who=${attempt%%|*}; sql=${attempt#*|}
  source_node=$(served_by 0); target_node=$( [[ $source_node == node_a ]] && echo node_b || echo node_a )
  before=$(on "$source_node" -c "SELECT count(*) || ' rows, ' || count(*) FILTER (WHERE body = 'direct') || ' direct' FROM shard_0.posts")
  echo "  as $who on the target's copy: $sql"
  held subscribed "SELECT move_shard(0, '$target_node')" "$sql" "$target_node" "$who"
  [[ $change == refused* ]] || fail "$who's '$sql' on the target's copy ($target_node) went through"
  [[ $(served_by 0) == "$target_node" ]] || fail "after $who's '$sql', the move of shard 0 did not complete: $(cat "$work/held.log")"
  after=$(on "$target_node" -c "SELECT count(*) || ' rows, ' || count(*) FILTER (WHERE body = 'direct') || ' direct' FROM shard_0.posts")
  [[ $after == "$before" ]] || fail "after $who's '$sql': shard 0 had $before on $source_node, has $after on $target_node"
  left=$(on "$target_node" -c "SELECT concat_ws(', ', (SELECT string_agg(rulename, ', ') FROM pg_rules WHERE schemaname = 'shard_0'),
                                 (SELECT string_agg(policyname, ', ') FROM pg_policies WHERE schemaname = 'shard_0'),
                                 (SELECT string_agg(tgname, ', ') FROM pg_trigger WHERE tgrelid = 'shard_0.posts'::regclass AND NOT tgisinternal))")
  [[ -z $left ]] || fail "after $who's '$sql', shard 0's copy on $target_node carries $left"
done

echo "her code of PostgreSQL's own functions in a move's copy and apply"
# victims: no superuser ran it on any node (the sequence kept its value, nobody was told)
victims() {
  local n v
  for n in "${ROUTER_NODES[@]}"; do
    v=$(on "$n" -c "SELECT last_value FROM public.victim_seq")
    [[ $v == 1000 ]] || fail "$1: her CHECK ran as a superuser on $n: victim_seq is $v"
  done
  if grep -q 'Asynchronous notification "pwn"' "$work/listen.log"; then
    fail "$1: her CHECK ran as a superuser: $(grep -m1 'Asynchronous notification "pwn"' "$work/listen.log")"
  fi
}
# a listener on node_c, the target, for as long as these moves run
{ echo "LISTEN pwn; LISTEN probe;"; for _ in $(seq 3000); do echo "SELECT pg_sleep(0.1);"; done; } 2>/dev/null \
  | psql -X -q -At -h "$(node_dir node_c)" -p "$(node_port node_c)" -U postgres -d postgres >"$work/listen.log" 2>&1 & bg+=($!)
version=$(on node_c -c "SHOW server_version_num")
if (( version >= 160000 )); then
  # (rows written by her on the source while the move copies: the target's apply writes them)
  held subscribed "SELECT move_shard(2732, 'node_c', template => 'tpl2')" \
    "INSERT INTO shard_2732.posts (user_id, body) SELECT 1, 'applied' FROM generate_series(1, 5)" node_b
  [[ $(served_by 2732) == node_c ]] || fail "shard 2732 (her CHECK) did not move onto node_c: $(cat "$work/held.log")"
  [[ $(on node_c -c "SELECT count(*) FROM shard_2732.posts WHERE body = 'applied'") == 5 ]] || fail "the rows applied are not on node_c"
else
  # (15's apply worker writes as a superuser: refused before any row, naming the code)
  marks
  out=$(on router -v VERBOSITY=verbose -c "SELECT move_shard(2732, 'node_c', template => 'tpl2')" 2>&1) \
    && fail "PostgreSQL $version: the move of shard 2732 (her CHECK) went through"
  [[ $out == *'ERROR:  42501:'*'table shard_2732.posts of role mallory: its CHECK constraint pwn calls function'* ]] \
    || fail "PostgreSQL $version: the move of shard 2732 was not refused with 42501 naming her CHECK: $out"
  safe "move_shard(2732)"
  echo "  move_shard of shard 2732 (her CHECK) onto node_c: refused: $(grep -m1 -o '42501: .*' <<<"$out" | sed 's/.*on node .node_c.: //')"
fi
victims "move_shard(2732) onto node_c"
op "move_shard of shard 2731 (her domain) onto node_c" "SELECT move_shard(2731, 'node_c', template => 'tpl3')"
victims "move_shard(2731) onto node_c"
# (the listener hears what is sent: a probe of the superuser's own)
on node_c -c "NOTIFY probe, 'heard'"; sleep 0.5
grep -q 'Asynchronous notification "probe"' "$work/listen.log" || fail "the listener on node_c heard nothing: $(cat "$work/listen.log")"
victims "after the moves"

# A template of hers with a materialized view calling her code, on node_a and node_c, and a
# shard she makes from it on node_a: its move onto node_c makes the copy from node_c's
# template as the mover, a superuser, and must run none of her code as such (the template's
# own functions are copied, not judged, as hers; the copy's materialized view is filled
# under the fence by its owner, her).
echo "a template of hers with a materialized view"
for n in node_a node_c; do
  on "$n" >/dev/null <<'SQL'
GRANT CREATE ON DATABASE postgres TO mallory;
GRANT SELECT, INSERT, UPDATE, DELETE ON public.snowflake_id_shard TO mallory;
CREATE SCHEMA mtpl AUTHORIZATION mallory;
SET ROLE mallory;
CREATE TABLE mtpl.t (id bigint PRIMARY KEY, body text);
CREATE FUNCTION mtpl.esc() RETURNS boolean LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN mallory.escalate('materialized view'); END $$;
CREATE MATERIALIZED VIEW mtpl.mv AS SELECT count(*) AS n, mtpl.esc() AS e FROM mtpl.t;
RESET ROLE;
SQL
done
out=$(on node_a -c "SET ROLE mallory" -c "SELECT public.create_shard('shard_2', 2, template => 'mtpl')" 2>&1) \
  || fail "mallory could not make shard 2 from her template: $out"
op "move_shard of her shard 2 (her template's materialized view) onto node_c" "SELECT move_shard(2, 'node_c', template => 'mtpl')"
[[ $(served_by 2) == node_c ]] || fail "her shard 2 was not moved onto node_c"

echo "rebalance and drain"
op "CALL rebalance()" "CALL rebalance(batch_size => 1)"
op "CALL drain_node('node_c')" "CALL drain_node('node_c', batch_size => 1)"
op "CALL rebalance() by_disk_size" "CALL rebalance('by_disk_size', 1)"

echo "schema changes"
op "alter_shards ALTER COLUMN TYPE" "SELECT * FROM alter_shards('ALTER TABLE %I.posts ALTER COLUMN body TYPE varchar')"
op "alter_shards ADD COLUMN with default" "SELECT * FROM alter_shards('ALTER TABLE %I.posts ADD COLUMN flag integer NOT NULL DEFAULT 1')"
op "alter_shards ADD CHECK" "SELECT * FROM alter_shards('ALTER TABLE %I.posts ADD CHECK (edits >= 0)')"
op "repair_moves" "SELECT * FROM repair_moves()"

echo "create_shard from node_c's template"
marks
if out=$(on node_c -v VERBOSITY=verbose -c "SELECT public.create_shard('shard_7000', 7000, template => 'tpl')" 2>&1); then outcome=done
else outcome="refused: $(grep -m1 -o 'ERROR: .*' <<<"$out" | cut -c8- | cut -c1-150)"; fi
safe create_shard; echo "  create_shard('shard_7000', 7000, template => 'tpl') on node_c: $outcome; mallory's code ran: $ran"

on router -c "SELECT count(*) FROM repair_moves()" >/dev/null
victims "the end"
router_invariants "$work"
