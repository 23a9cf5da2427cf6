# Shared helpers for reliability/t_*.sh (source after scripts/cluster.sh).
# GEN is the generator under test: an SQL expression issuing one ID from sequence `s`.
# Point it at a deliberately broken generator to see the suite fail, e.g.
#   GEN_SETUP_SQL="$(cat reliability/broken_generator.sql)" GEN="broken_next_id()" bash reliability/run
GEN=${GEN:-"next_id(5, 's')"}
GEN_SETUP_SQL=${GEN_SETUP_SQL:-}
# GEN_TS: the time of an ID in GEN's layout, as an SQL expression where %s is the ID, e.g.
# "id_timestamp(%s, 'twitter', '2026-01-01+00')" when GEN is Twitter's layout with that epoch.
GEN_TS=${GEN_TS:-"id_timestamp(%s)"}
# gen_ts ID: GEN_TS for the SQL expression ID.
gen_ts() { printf "$GEN_TS" "$1"; }

fail() { echo "FAIL: $*" >&2; exit 1; }
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

# setup_generator DB: the extension, sequence s, and the broken generator if one is given.
setup_generator() {
  q -d "$1" -c "CREATE EXTENSION IF NOT EXISTS snowflake_id" -c "CREATE SEQUENCE IF NOT EXISTS s"
  [[ -z $GEN_SETUP_SQL ]] || q -d "$1" -c "$GEN_SETUP_SQL"
}
