#!/usr/bin/env bash
# How long pg_upgrade takes on a node that holds all 8192 logical shards, each made by
# create_shard from a template schema of two tables (so 8192 schemas, 16384 tables with their
# indexes, 8192 sequences and next_id() functions): the schema dump and restore, which
# dominates pg_upgrade and grows with the number of objects, not rows. Not part of CI.
#   bash bench/pg_upgrade_shards.sh               15 -> 17 (in the trixie chroot, as reliability/pg_upgrade.sh runs it)
#   bash bench/pg_upgrade_shards.sh 15 18         another pair (18: see docs/versions.md on this machine's 15)
#   bash bench/pg_upgrade_shards.sh 15 17 1024    fewer shards, for a shorter run
# Prints the time the shards took to make and pg_upgrade's, then checks the upgraded node: every
# shard listed, and a new post in each gets an ID of its own shard above its old post's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
old=${1:-15} new=${2:-17} shards=${3:-8192}
source "$here/../scripts/pg.sh"
if [[ $old == 17 || $new == 17 ]] && ! in_chroot; then
  # Run inside the chroot, as reliability/pg_upgrade.sh does (15's libraries, 18 bind-mounted).
  bash "$here/../reliability/pg_upgrade.sh" prepare
  exec env CHROOT_BINDS="$(cat "${SF_TMP:-/tmp/snowflake_id}/pg_upgrade_binds")" PG15_CONFIG=$PG15_CONFIG \
    PG18_CONFIG=${PG18_CONFIG:-} bash "$here/../scripts/trixie.sh" bash bench/pg_upgrade_shards.sh "$old" "$new" "$shards"
fi
source "$here/../reliability/lib.sh"
SF_TMP=${SF_TMP:-/tmp/snowflake_id}
config_of() { case $1 in 15) echo "$PG15_CONFIG" ;; 17) echo "${PG17_CONFIG:-$(pg_config_of 17)}" ;; 18) echo "${PG18_CONFIG:-$(pg_config_of 18)}" ;; esac; }
old_bin=$("$(config_of "$old")" --bindir) new_bin=$("$(config_of "$new")" --bindir)
[[ $old != 15 || ! -d $SF_TMP/pg15-libs ]] || export LD_LIBRARY_PATH=$SF_TMP/pg15-libs
work=$SF_TMP/bench_pg_upgrade
rm -rf "$work"; mkdir -p "$work"; chown postgres: "$SF_TMP" "$work"
as_pg() { (cd "$work" && sudo -u postgres env ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH=$LD_LIBRARY_PATH} "$@"); }
export PGHOST=$work PGPORT=55498 PGUSER=postgres PATH="$new_bin:$PATH"
checksums=(); ((new < 18)) || checksums=(--data-checksums)
as_pg "$old_bin/initdb" -D "$work/old" -A trust -U postgres --no-sync "${checksums[@]}" >/dev/null
# Enough lock slots for one transaction per batch of shards (and for pg_dump's); no JIT (in the
# chroot, 15's llvmjit.so would need Debian 12's LLVM).
as_pg "$old_bin/pg_ctl" -D "$work/old" -l "$work/old.log" -w start \
  -o "-p 55498 -k $work -c listen_addresses='' -c max_locks_per_transaction=1024 -c jit=off" >/dev/null
trap 'as_pg "$old_bin/pg_ctl" -D "$work/old" -m immediate stop >/dev/null 2>&1 || true' EXIT
q -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
  -c "CREATE SCHEMA tpl" \
  -c "CREATE TABLE tpl.posts (id bigint PRIMARY KEY, author bigint NOT NULL, body text)" \
  -c "CREATE TABLE tpl.likes (id bigint PRIMARY KEY, post_id bigint NOT NULL REFERENCES tpl.posts, at timestamptz DEFAULT now())"
start=$SECONDS
for ((first = 0; first < shards; first += 256)); do
  q -c "SET client_min_messages = warning" \
    -c "SELECT create_shard('s' || n, n, template => 'tpl') FROM generate_series($first, least($first + 255, $shards - 1)) n" >/dev/null
done
made=$((SECONDS - start))
# One post in every shard, through the template's DEFAULT: the IDs the new server must exceed.
q -c "DO \$\$ BEGIN FOR n IN 0 .. $shards - 1 LOOP
        EXECUTE format('INSERT INTO %I.posts (author, body) VALUES (1, %L)', 's' || n, 'old'); END LOOP; END \$\$" >/dev/null
objects=$(q -c "SELECT count(*) FROM pg_class WHERE relnamespace IN (SELECT oid FROM pg_namespace WHERE nspname ~ '^s[0-9]+$')")
echo "create_shard x $shards with a two-table template ($old): $made s; $objects relations"
as_pg "$old_bin/pg_ctl" -D "$work/old" -m fast -w stop >/dev/null
trap - EXIT
as_pg "$new_bin/initdb" -D "$work/new" -A trust -U postgres --no-sync >/dev/null
start=$SECONDS
as_pg "$new_bin/pg_upgrade" -b "$old_bin" -B "$new_bin" -d "$work/old" -D "$work/new" -p 55498 -P 55499 \
  -s "$work" -U postgres --link -o "-c max_locks_per_transaction=1024 -c jit=off" -O "-c max_locks_per_transaction=1024" \
  >"$work/pg_upgrade.log" 2>&1 \
  || { tail -20 "$work/pg_upgrade.log"; exit 1; }
echo "pg_upgrade --link $old -> $new of $shards shards: $((SECONDS - start)) s"
grep -E "^(Creating dump|Restoring database schemas|Copying|Linking|Adding)" "$work/pg_upgrade.log" || true
# The upgraded node works: every shard is there and its next post gets an ID of its own shard,
# above the old one.
as_pg "$new_bin/pg_ctl" -D "$work/new" -l "$work/new.log" -w start \
  -o "-p 55498 -k $work -c listen_addresses='' -c max_locks_per_transaction=1024" >/dev/null
trap 'as_pg "$new_bin/pg_ctl" -D "$work/new" -m immediate stop >/dev/null 2>&1 || true' EXIT
q -c "DO \$\$ BEGIN FOR n IN 0 .. $shards - 1 LOOP
        EXECUTE format('INSERT INTO %I.posts (author, body) VALUES (1, %L)', 's' || n, 'new'); END LOOP; END \$\$" >/dev/null
listed=$(q -c "SELECT count(*) FROM snowflake_id_shards")
[[ $listed == "$shards" ]] || { echo "after pg_upgrade: $listed shards listed, not $shards"; exit 1; }
q -c "DO \$\$ DECLARE o bigint; nw bigint; BEGIN FOR n IN 0 .. $shards - 1 LOOP
        EXECUTE format('SELECT max(id) FILTER (WHERE body = %L), max(id) FILTER (WHERE body = %L) FROM %I.posts',
                       'old', 'new', 's' || n) INTO o, nw;
        IF NOT (nw > o AND id_shard(o) = n AND id_shard(nw) = n) THEN
          RAISE EXCEPTION 'shard %: old post %, new post %', n, o, nw; END IF; END LOOP; END \$\$" >/dev/null
echo "after pg_upgrade: all $shards shards listed; a new post in each has an ID of its shard, above its old post's"
as_pg "$new_bin/pg_ctl" -D "$work/new" -m fast -w stop >/dev/null
trap - EXIT
