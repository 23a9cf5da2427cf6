#!/usr/bin/env bash
# pg_upgrade of servers whose databases have snowflake_id, with PostgreSQL's own pg_upgrade:
# 15 -> 17, 15 -> 18, 17 -> 18 and 18 -> 19. Run once per CI run (scripts/test, after every
# version has its extension installed), not per version. Each old server holds a database
# made at the current release and one made at 0.2.0 and updated: shards, rows, snowflake
# columns, next_id(seq) and next_id(shard, seq) defaults, views over the type's casts.
# pg_upgrade must succeed; on the new server every row is there, the extension's surface is
# the old one's, and new IDs continue above the old ones in every table.
#
# Where each version runs: 15 and 18 on this machine (Debian 12); 17 only in the trixie
# chroot, 19 only in the sid chroot (scripts/chroot.sh). So 15 -> 18 runs here, 15 -> 17 and
# 17 -> 18 in the trixie chroot with 15's and 18's installations bind-mounted at their own
# paths, 18 -> 19 in the sid chroot with 18's. 18 (built on Debian 12) runs on the newer
# libcs; 15's binaries need six libraries of Debian 12 that trixie has only in newer versions
# (ICU 72, OpenLDAP 2.5, libunistring 2): they are copied from this machine into a directory
# of the chroot, on LD_LIBRARY_PATH for the upgrades from 15 (their sonames differ from
# trixie's, so 17 and 18 never load them).
#
# A pair that this machine's packages block (not snowflake_id: shown on a database without
# it) is reported SKIPPED, with the reason, and never counts as passed; the run fails unless
# every other pair passed and at least one upgrade into 18 or 19 ran to the end.
#   bash reliability/pg_upgrade.sh               every pair, and a summary
#   bash reliability/pg_upgrade.sh 15 18         one pair, here or (inside a chroot) there: exit
#                                                0 passed, 77 skipped (blocked), else failed
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/pg.sh"
source "$here/lib.sh"
SF_TMP=${SF_TMP:-/tmp/snowflake_id}
SKIPPED=77
# The pg_config of each version, where this runs; PG17_CONFIG and PG18_CONFIG may name copies.
config_of() {
  case $1 in
    15) echo "$PG15_CONFIG" ;;
    17) echo "${PG17_CONFIG:-$(pg_config_of 17)}" ;;
    18) echo "${PG18_CONFIG:-$(pg_config_of 18)}" ;;
    19) pg_config_of 19 ;;
  esac
}
libs15=$SF_TMP/pg15-libs   # 15's Debian 12 libraries, inside the chroot

# prepare: 15's Debian 12 libraries that trixie lacks, copied into the chroot, and the
# installations to bind-mount there (into $SF_TMP/pg_upgrade_binds); for bench/ too.
prepare() {
  local root=$SF_OPT/trixie
  [[ -f $root/.snowflake_id-trixie ]] || fail "no trixie chroot at $root: 15 -> 17 and 17 -> 18 cannot run"
  mkdir -p "$root$libs15"
  for b in "$("$PG15_CONFIG" --bindir)"/*; do ldd "$b" 2>/dev/null || true; done \
    | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r so path; do
      ls "$root"/usr/lib/x86_64-linux-gnu/"$so" "$root"/lib/x86_64-linux-gnu/"$so" >/dev/null 2>&1 \
        || cp -L "$path" "$root$libs15/$so"
    done
  echo "15's libraries trixie lacks, copied into the chroot: $(ls "$root$libs15" | paste -sd' ')"
  # Debian's layout keeps 15's binaries and libraries under lib/postgresql/15, the rest under share.
  mkdir -p "$SF_TMP"
  realpath "$("$PG15_CONFIG" --bindir)/.." "$("$PG15_CONFIG" --sharedir)" "$(dirname "$(config_of 18)")/.." \
    | paste -sd' ' >"$SF_TMP/pg_upgrade_binds"
}
if [[ ${1:-} == prepare ]]; then prepare; exit 0; fi
if (($# == 0)); then
  summary=() failed=0 into_new=0
  # pair OLD NEW [WRAPPER...]: one pair (through WRAPPER: a chroot), its outcome noted.
  pair() {
    local rc=0
    "${@:3}" bash reliability/pg_upgrade.sh "$1" "$2" || rc=$?
    case $rc in
      0) summary+=("$1 -> $2: passed"); ((${2} < 18)) || into_new=1 ;;
      "$SKIPPED") summary+=("$1 -> $2: SKIPPED (blocked by this machine's packages, above)") ;;
      *) summary+=("$1 -> $2: FAILED"); failed=1 ;;
    esac
  }
  pair 15 18
  prepare
  binds=$(cat "$SF_TMP/pg_upgrade_binds")
  pair 15 17 env CHROOT_BINDS="$binds" PG15_CONFIG="$PG15_CONFIG" PG18_CONFIG="$(config_of 18)" \
    PG17_CONFIG="${PG17_CONFIG:-}" bash "$here/../scripts/trixie.sh"
  pair 17 18 env CHROOT_BINDS="$binds" PG15_CONFIG="$PG15_CONFIG" PG18_CONFIG="$(config_of 18)" \
    PG17_CONFIG="${PG17_CONFIG:-}" bash "$here/../scripts/trixie.sh"
  if [[ " $PG_VERSIONS " == *" 19 "* ]]; then
    pair 18 19 env CHROOT_BINDS="$(realpath "$(dirname "$(config_of 18)")/..")" PG18_CONFIG="$(config_of 18)" \
      bash "$here/../scripts/chroot.sh" 19
  else
    summary+=("18 -> 19: SKIPPED (19 is not in PG_VERSIONS)")
  fi
  printf 'pg_upgrade: %s\n' "${summary[@]}"
  ((failed == 0)) || fail "a pg_upgrade pair failed"
  ((into_new == 1)) || fail "no upgrade into 18 or 19 ran to the end"
  exit 0
fi

old=$1 new=$2
old_cfg=$(config_of "$old") new_cfg=$(config_of "$new")
old_bin=$("$old_cfg" --bindir) new_bin=$("$new_cfg" --bindir)
export PATH="$new_bin:$PATH"
[[ $old != 15 || ! -d $libs15 ]] || export LD_LIBRARY_PATH=$libs15
work=$SF_TMP/pg_upgrade_${old}_$new
rm -rf "$work"; mkdir -p "$work"; chown postgres: "$SF_TMP" "$work"
as_pg() { (cd "$work" && sudo -u postgres env ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH=$LD_LIBRARY_PATH} "$@"); }
for cfg in "$old_cfg" "$new_cfg"; do
  for f in "$here"/../released/*.sql; do install -m 644 "$f" "$("$cfg" --sharedir)/extension/"; done
done
start() {  # start BINDIR DATA PORT (no JIT: in the chroot, 15's llvmjit.so would need Debian 12's LLVM)
  as_pg "$1/pg_ctl" -D "$2" -l "$2.log" -o "-p $3 -k $work -c listen_addresses='' -c jit=off" -w start >/dev/null
}
stop() { as_pg "$1/pg_ctl" -D "$2" -m fast -w stop >/dev/null; }
export PGHOST=$work PGUSER=postgres
trap 'for d in old new; do [[ ! -f $work/$d/postmaster.pid ]] || as_pg "$old_bin/pg_ctl" -D "$work/$d" -m immediate -w stop >/dev/null 2>&1 || as_pg "$new_bin/pg_ctl" -D "$work/$d" -m immediate -w stop >/dev/null 2>&1 || true; done' EXIT
q_on() { local port=$1; shift; PGPORT=$port q "$@"; }

# The old server, with the data.
# 18's initdb turns data checksums on by default, and pg_upgrade needs both servers alike.
checksums=(); ((new < 18)) || checksums=(--data-checksums)
as_pg "$old_bin/initdb" -D "$work/old" -A trust -U postgres --no-sync "${checksums[@]}" >"$work/initdb_old.log"
start "$old_bin" "$work/old" 55491
for db in fresh from_020; do
  version=$([[ $db == fresh ]] && echo "" || echo "VERSION '0.2.0'")
  q_on 55491 -d postgres -c "CREATE DATABASE $db"
  q_on 55491 -d $db -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id $version" \
    -c "SELECT create_shards('insta', 1, 3)" \
    -c "CREATE TABLE insta2.t (id snowflake PRIMARY KEY DEFAULT insta2.next_id(), body text)" \
    -c "CREATE TABLE insta3.u (id snowflake PRIMARY KEY DEFAULT next_id('insta3.table_id_seq'), ids snowflake[], body text)" \
    -c "CREATE SEQUENCE s" \
    -c "CREATE TABLE plain (id bigint PRIMARY KEY DEFAULT next_id(7, 's'), ref snowflake REFERENCES insta2.t)" \
    -c "INSERT INTO insta2.t (body) SELECT 'old' FROM generate_series(1, 2000)" \
    -c "INSERT INTO insta3.u (ids, body) SELECT ARRAY[g, g + 1]::snowflake[], 'old' FROM generate_series(1, 2000) g" \
    -c "INSERT INTO plain (ref) SELECT id FROM insta2.t" >/dev/null
  [[ $db == fresh ]] || q_on 55491 -d $db -c "ALTER EXTENSION snowflake_id UPDATE"
  q_on 55491 -d $db -c "CREATE VIEW casts AS SELECT id::int AS i, id::numeric AS n, to_json(id) AS j FROM insta2.t"
done
surface() { q_on "$1" -d "$2" -v ext=snowflake_id -f "$here/surface.sql"; }
# comparable: a surface without what a major version changes by itself: the order of an
# operator family's members, a view's deparsed text and privileges (17 adds MAINTAIN), the
# deparsed bodies of functions (their text is not compared), and the row and array types pg_upgrade records
# as the extension's members.
comparable() {
  python3 -c '
import re, sys
for line in sys.stdin:
    obj, _, rest = line.rstrip("\n").partition("|")
    definition, _, comment = rest.rpartition("|")
    fields = definition.split(" | ")
    if obj.startswith("type ") and obj != "type snowflake":
        continue
    if obj.startswith("view "):
        fields = fields[2:3]
    elif obj.startswith("function "):
        fields = [f for f in fields if not re.fullmatch("[0-9a-f]{32}", f)]
    elif obj.startswith("operator family "):
        fields = [", ".join(sorted(f.split(", "))) for f in fields]
    print(obj, fields, comment)'
}
state() {  # state PORT DB: rows, the largest ID per table, the extension's version
  q_on "$1" -d "$2" -c "SELECT (SELECT count(*) FROM insta2.t), (SELECT max(id) FROM insta2.t),
                               (SELECT count(*) FROM insta3.u), (SELECT max(id) FROM insta3.u),
                               (SELECT count(*) FROM plain), (SELECT max(id) FROM plain),
                               (SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id')"
}
for db in fresh from_020; do
  state 55491 $db >"$work/$db.state"
  surface 55491 $db >"$work/$db.surface"
done
stop "$old_bin" "$work/old"

# pg_upgrade onto a new server with the extension installed.
as_pg "$new_bin/initdb" -D "$work/new" -A trust -U postgres --no-sync >"$work/initdb_new.log"
start=$SECONDS
if ! as_pg "$new_bin/pg_upgrade" -b "$old_bin" -B "$new_bin" -d "$work/old" -D "$work/new" \
       -p 55493 -P 55494 -s "$work" -U postgres --link -o "-c jit=off" >"$work/pg_upgrade.log" 2>&1; then
  logs=("$work"/new/pg_upgrade_output.d/*/log)
  errors=$(grep -h "ERROR:" "${logs[@]}"/*.log | sed 's/^.*ERROR: *//' | sort -u)
  if [[ $errors != 'unrecognized parameter "pg_attver"' ]]; then
    tail -5 "$work/pg_upgrade.log"; grep -h -B1 -A3 "ERROR:" "${logs[@]}"/*.log | head -30
    fail "pg_upgrade $old -> $new failed"
  fi
  # This machine's Debian 15.20 and 17.12 give every column of every table an attribute option
  # pg_attver (re-stamped by any ALTER ... SET or RESET), which 18.6 does not know: pg_upgrade
  # fails at the first table of any database. Shown on a database without snowflake_id; and
  # every cast of the extension (what failed before 0.3.0) was restored before that table.
  failed_log=$(grep -l "ERROR:" "${logs[@]}"/pg_upgrade_dump_*.log | head -1)
  casts=$(grep -c "^cast from " "$work/fresh.surface")
  restored=$(grep -c 'creating CAST "CAST (.*snowflake' "$failed_log" || true)
  first_table=$(grep -m1 'creating TABLE' "$failed_log" | sed 's/^.*creating TABLE //')
  [[ $restored == "$casts" ]] || fail "$old -> $new: $restored of the extension's $casts casts restored before the first table"
  mkdir -p "$work/control"; chown postgres: "$work/control"
  as_pg "$old_bin/initdb" -D "$work/control/old" -A trust -U postgres --no-sync "${checksums[@]}" >/dev/null
  start "$old_bin" "$work/control/old" 55495
  q_on 55495 -d postgres -c "CREATE TABLE plain (a int)"
  stop "$old_bin" "$work/control/old"
  as_pg "$new_bin/initdb" -D "$work/control/new" -A trust -U postgres --no-sync >/dev/null
  ! as_pg "$new_bin/pg_upgrade" -b "$old_bin" -B "$new_bin" -d "$work/control/old" -D "$work/control/new" \
      -p 55496 -P 55497 -s "$work" -U postgres --link >"$work/control.log" 2>&1 \
    || fail "$old -> $new: a database without snowflake_id upgrades, so the pg_attver failure is ours"
  grep -q 'unrecognized parameter "pg_attver"' "$work"/control/new/pg_upgrade_output.d/*/log/*.log \
    || fail "$old -> $new: the control database fails otherwise"
  echo "pg_upgrade $old -> $new: blocked by this machine's PostgreSQL $old, whose columns all carry an"
  echo "  attribute option (pg_attver) that $new does not know: a database with one plain table and no"
  echo "  extension fails alike. Restored before the first table ($first_table): all $casts of"
  echo "  snowflake_id's casts (operators, their families and aggregates come later: see 15 -> 17)."
  exit "$SKIPPED"
fi
echo "pg_upgrade $old -> $new: done in $((SECONDS - start)) s"

# On the new server: the same rows, surface and version; new IDs above the old.
start "$new_bin" "$work/new" 55492
for db in fresh from_020; do
  [[ $(state 55492 $db) == "$(cat "$work/$db.state")" ]] || fail "$old -> $new, $db: rows or version differ: $(state 55492 $db)"
  surface 55492 $db >"$work/$db.surface.new"
  diff -u <(comparable <"$work/$db.surface") <(comparable <"$work/$db.surface.new") \
    || fail "$old -> $new, $db: the extension's surface differs"
  IFS='|' read -r _ t_max _ u_max _ p_max version <"$work/$db.state"
  q_on 55492 -d $db -c "INSERT INTO insta2.t (body) SELECT 'new' FROM generate_series(1, 1000)" \
    -c "INSERT INTO insta3.u (body) SELECT 'new' FROM generate_series(1, 1000)" \
    -c "INSERT INTO plain (ref) SELECT id FROM insta2.t WHERE body = 'new'" >/dev/null
  above=$(q_on 55492 -d $db -c "SELECT (SELECT min(id) FROM insta2.t WHERE body = 'new') > $t_max
                                   AND (SELECT min(id) FROM insta3.u WHERE body = 'new') > $u_max
                                   AND (SELECT min(id) FROM plain WHERE ref IN (SELECT id FROM insta2.t WHERE body = 'new')) > $p_max
                                   AND (SELECT count(*) FROM casts) = 3000")
  [[ $above == t ]] || fail "$old -> $new, $db: new IDs not above the old ones"
  echo "$old -> $new, $db (snowflake_id $version): rows and surface ($(wc -l <"$work/$db.surface") objects) kept, new IDs above the old in 3 tables"
done
