# Which PostgreSQL the scripts build for, install into and run (source this file).
# The one setting is PG_CONFIG; everything else (version, binaries, cargo feature) follows
# from it. The default is Debian 12's PostgreSQL 15. Another installation (a copy, a source
# build) is used by pointing PG_CONFIG at its pg_config.
#
# The supported versions are PG_VERSIONS; scripts/test runs every test on each of them.
# Debian 12 ships only 15, so scripts/setup makes the others once, under $SF_OPT:
#   17  Debian 13 (trixie)'s own binary packages in a chroot, $SF_OPT/trixie, where the
#       whole test pass for 17 runs (scripts/chroot.sh 17): /usr/lib/postgresql/17 inside it.
#   18  unstable's source package, built into $SF_OPT/pg18.
#   19  experimental's binary packages (19~rc1) in a Debian unstable (sid) chroot, $SF_OPT/sid
#       (scripts/chroot.sh 19): its sources are not on the registry, and its binaries need
#       a newer libc than Debian 12's or 13's.
PG_VERSIONS=${PG_VERSIONS:-"15 17 18 19"}
SF_OPT=${SF_OPT:-/opt/snowflake_id}
# The Debian archive this machine's apt already uses (its first "URIs:" entry).
# (`|| true`: the chroots have no such file, and sourcing must not fail there.)
DEBIAN_MIRROR=${DEBIAN_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
# Where Debian 12's own PostgreSQL 15 is, or the copy PG_CONFIG already names.
if [[ -z ${PG15_CONFIG:-} ]]; then
  if [[ ${PG_CONFIG:-} == */15/* ]]; then PG15_CONFIG=$PG_CONFIG; else PG15_CONFIG=/usr/lib/postgresql/15/bin/pg_config; fi
fi
# pg_config_of MAJOR: the pg_config of that version, as seen where its tests run (for 17
# and 19, inside their chroots).
pg_config_of() {
  case $1 in
    15) echo "$PG15_CONFIG" ;;
    17 | 19) echo "/usr/lib/postgresql/$1/bin/pg_config" ;;
    18) echo "$SF_OPT/pg18/bin/pg_config" ;;
    *) echo "pg.sh: PostgreSQL $1 is not supported (supported: $PG_VERSIONS)" >&2; return 1 ;;
  esac
}
# chroot_of MAJOR: the Debian release of that version's chroot under $SF_OPT, if it has one.
chroot_of() {
  case $1 in
    17) echo trixie ;;
    19) echo sid ;;
  esac
}

# in_chroot: true inside one of the chroots (scripts/chroot.sh).
in_chroot() { compgen -G '/.snowflake_id-*' >/dev/null; }

# The toolchain: Rust from rust-toolchain.toml (Debian's, scripts/setup says why), and
# cargo-pgrx of the version Cargo.toml pins, from $SF_OPT/cargo-pgrx-VERSION (scripts/setup),
# first on PATH: a cargo-pgrx of another version (in ~/.cargo/bin) can stay beside it.
PGRX_VERSION=$(sed -nE 's/^pgrx = "=([^"]+)"/\1/p' "$(dirname "${BASH_SOURCE[0]}")/../Cargo.toml")
PATH="$SF_OPT/cargo-pgrx-$PGRX_VERSION/bin:$HOME/.cargo/bin:$PATH"

PG_CONFIG=${PG_CONFIG:-$PG15_CONFIG}
# The major version, from the path when pg_config is not installed yet (a fresh machine).
if [[ -x $PG_CONFIG ]]; then
  PG_MAJOR=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
  PGBIN=$("$PG_CONFIG" --bindir)
else
  PG_MAJOR=$(echo "$PG_CONFIG" | sed -E 's|.*/(postgresql/\|pg)([0-9]+)/.*|\2|')
  PGBIN=$(dirname "$PG_CONFIG")
fi
PG_FEATURE=pg$PG_MAJOR
export PG_CONFIG PG_MAJOR PGBIN PG_FEATURE PG_VERSIONS SF_OPT DEBIAN_MIRROR PG15_CONFIG PGRX_VERSION PATH
