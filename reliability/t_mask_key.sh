#!/usr/bin/env bash
# every version: the mask key file reading differs by version
# The server's mask key (id_mask(id), id_unmask(masked)) is read by the server from a file only
# its user can read, named by snowflake_id.mask_key_file, and shows up nowhere else. Set up with
# the recipe of docs/applications.md (the key made and written by the server: no statement
# holds it), with every statement logged and pg_stat_statements tracking them (where it is
# installed), it must not appear to a pg_monitor member or a plain role in any session
# (with the library loaded or not: SHOW ALL, current_setting, pg_settings, pg_file_settings,
# pg_stat_statements, pg_stat_activity, pg_db_role_setting), nor to a superuser there, nor
# in the server log. Every role masks with it. A new key takes effect at the next reload in
# sessions already open (the key a session holds cannot outlive a change of the file);
# a file that turns unreadable or too open keeps the key in force (refused, logged, with the
# library in shared_preload_libraries); 0.2.0's
# snowflake_id.mask_key is refused and its leftover placeholder removed where the library
# is loaded.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"; source "$here/lib.sh"
name=relmask
opts=(log_statement=all)
pgss=
if [[ -f $("$PG_CONFIG" --pkglibdir)/pg_stat_statements.so ]]; then
  pgss=1; opts+=(shared_preload_libraries=pg_stat_statements pg_stat_statements.track_utility=on)
fi
cluster_start $name 55454 "${opts[@]}"
trap 'cluster_stop $name' EXIT
data=$SF_TMP/$name/data
q -c "CREATE EXTENSION snowflake_id" -c "CREATE ROLE mon LOGIN IN ROLE pg_monitor" -c "CREATE ROLE plain LOGIN"
[[ -z $pgss ]] || q -c "CREATE EXTENSION pg_stat_statements"

# The recipe (docs/applications.md), as a superuser.
q >/dev/null <<'SQL'
COPY (SELECT replace(gen_random_uuid()::text, '-', ''))
  TO PROGRAM 'umask 077 && cat > snowflake_id.mask_key';
LOAD 'snowflake_id';
ALTER SYSTEM SET snowflake_id.mask_key_file = 'snowflake_id.mask_key';
SELECT pg_reload_conf();
SQL
key=$(tr -d '[:space:]' <"$data/snowflake_id.mask_key")
mode=$(stat -c %a "$data/snowflake_id.mask_key")
echo "key file written by the server: mode $mode, ${#key} hex digits"
[[ $mode == 600 && ${#key} == 32 ]] || fail "the recipe's key file: mode $mode, key of ${#key} characters"
sleep 0.5

# Everything each kind of session can see, with and without the library loaded.
as() { psql -X -q -At -U "$1" -d postgres 2>&1 || true; }
views() {
  cat <<'SQL'
SHOW ALL;
SELECT name, setting, reset_val, boot_val FROM pg_settings WHERE name LIKE 'snowflake%';
SELECT current_setting('snowflake_id.mask_key_file', true), current_setting('snowflake_id.mask_key', true);
SELECT * FROM pg_file_settings;
SELECT * FROM pg_db_role_setting;
SELECT query FROM pg_stat_activity;
SELECT query FROM pg_stat_statements;
SQL
}
seen=$SF_TMP/$name/seen.txt
: >"$seen"
for role in mon plain postgres; do
  views | as $role >>"$seen"
  { echo "SELECT id_mask(1);"; views; } | as $role >>"$seen"
done
grep -q "snowflake_id.mask_key_file" "$seen" || fail "the views were not read"
[[ -z $pgss ]] || grep -q "ALTER SYSTEM SET snowflake_id.mask_key_file" "$seen" \
  || fail "pg_stat_statements does not show the recipe"
found=$({ grep -c -i "$key" "$seen" "$SF_TMP/$name/server.log" || true; } | paste -sd' ')
echo "the key in every view, to mon, plain and a superuser, loaded or not, and in the log: $found"
[[ $found == *":0 "*":0" ]] || fail "the key leaked: $found"
[[ -n $pgss ]] || echo "(pg_stat_statements is not installed for PostgreSQL $PG_MAJOR: not checked)"

# Every role masks with the file's key (the comparison names the key: after the scans).
want=$(q -c "SELECT id_mask(4000000000000979520, '$key')")
for role in mon plain postgres; do
  got=$(echo "SELECT id_mask(4000000000000979520), id_unmask($want)" | as $role)
  [[ $got == "$want|4000000000000979520" ]] || fail "$role masks with another key: $got"
done
echo "mon, plain and a superuser mask and unmask with the file's key"

# A new key: a session already open uses it from the next reload on, not before.
new=00112233445566778899aabbccddeeff
out=$(as plain <<SQL
SELECT id_mask(5) AS before \gset
\! printf '%s\n' $new >$data/key.new && chown postgres: $data/key.new && chmod 600 $data/key.new && mv $data/key.new $data/snowflake_id.mask_key
SELECT id_mask(5) = :before AS unchanged_until_reload;
\! psql -X -q -U postgres -c 'SELECT pg_reload_conf()' >/dev/null
SELECT pg_sleep(0.5);
SELECT id_mask(5) = id_mask(5, '$new') AS new_key_after_reload;
SQL
)
echo "a file replaced, then a reload, in an open session: $(echo "$out" | grep -E '^[tf]$' | paste -sd' ')"
[[ $(echo "$out" | grep -E '^[tf]$' | paste -sd' ') == "t t" ]] || fail "the open session's key: $out"

# 0.2.0's setting: refused where the library is loaded; a leftover line in the configuration
# is removed from every session that loads the library (with a WARNING).
refused=$(echo '\set VERBOSITY sqlstate
SELECT id_mask(1, '"'$new'"') IS NOT NULL;
ALTER SYSTEM SET snowflake_id.mask_key = '"'$new'"';' | as postgres | tail -1)
[[ $refused == "ERROR:  42602" || $refused == "ERROR:  42704" ]] || fail "ALTER SYSTEM SET snowflake_id.mask_key: $refused"
echo "snowflake_id.mask_key = '$new'" >>"$data/postgresql.conf"
q -c "SELECT pg_reload_conf()" >/dev/null; sleep 0.5
loaded=$(echo "SELECT id_mask(1) IS NOT NULL; SELECT current_setting('snowflake_id.mask_key', true) IS NULL" | as mon)
echo "0.2.0's setting: ALTER SYSTEM refused ($refused); a leftover in postgresql.conf, once the library is loaded: $(echo "$loaded" | paste -sd' ')"
[[ $loaded == *"removing it"* && $(echo "$loaded" | tail -1) == t ]] || fail "the leftover setting: $loaded"

# With the library in shared_preload_libraries (as docs/applications.md advises), the
# postmaster reads the file too, so every new session starts with its key. A file open to
# others, or gone, at a reload: refused and logged by the postmaster; the key stays in force
# in open sessions and new ones; never a wrong key.
sed -i '/^snowflake_id.mask_key = /d' "$data/postgresql.conf"
opts_file=$SF_TMP/$name/options
sed -i 's/ -c shared_preload_libraries=[^ ]*//' "$opts_file"
echo "$(cat "$opts_file") -c shared_preload_libraries=snowflake_id${pgss:+,pg_stat_statements}" >"$opts_file"
cluster_restart $name
kept() { echo "SELECT id_mask(5) = id_mask(5, '$new')" | as plain; }
[[ $(kept) == t ]] || fail "a new session under shared_preload_libraries: $(kept)"
out=$(as plain <<SQL
SELECT id_mask(5) IS NOT NULL AS loaded \gset
\! chmod 644 $data/snowflake_id.mask_key
\! psql -X -q -U postgres -c 'SELECT pg_reload_conf()' >/dev/null
SELECT pg_sleep(0.5);
SELECT id_mask(5) = id_mask(5, '$new') AS key_kept;
SQL
)
[[ $(echo "$out" | grep -E '^[tf]$') == t ]] || fail "an open session lost its key to a bad file: $out"
[[ $(kept) == t ]] || fail "a new session after a bad file: $(kept)"
grep -q 'mask key file "snowflake_id.mask_key": its permissions are 0644' "$SF_TMP/$name/server.log" \
  || fail "the refusal is not logged"
mv "$data/snowflake_id.mask_key" "$data/moved.key"
q -c "SELECT pg_reload_conf()" >/dev/null; sleep 0.5
[[ $(kept) == t ]] || fail "a new session after the file is gone: $(kept)"
grep -q 'mask key file "snowflake_id.mask_key": could not read it: No such file' "$SF_TMP/$name/server.log" \
  || fail "the missing file is not logged"
echo "under shared_preload_libraries, a key file of mode 644, then none: each refused and logged, the key kept in open and new sessions"
