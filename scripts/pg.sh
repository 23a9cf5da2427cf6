# Which PostgreSQL the scripts build for, install into and run (source this file).
# The one setting is PG_CONFIG; everything else (version, binaries, cargo feature) follows
# from it. The default is Debian 12's PostgreSQL 15. Another installation (a copy, a source
# build) is used by pointing PG_CONFIG at its pg_config.
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
# The major version, from the path when pg_config is not installed yet (a fresh machine).
if [[ -x $PG_CONFIG ]]; then
  PG_MAJOR=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
  PGBIN=$("$PG_CONFIG" --bindir)
else
  PG_MAJOR=$(echo "$PG_CONFIG" | sed -E 's|.*/postgresql/([0-9]+)/.*|\1|')
  PGBIN=$(dirname "$PG_CONFIG")
fi
PG_FEATURE=pg$PG_MAJOR
export PG_CONFIG PG_MAJOR PGBIN PG_FEATURE
