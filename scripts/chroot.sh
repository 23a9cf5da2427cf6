#!/usr/bin/env bash
# Runs a command inside the Debian chroot of a PostgreSQL version that Debian 12 cannot run
# (made by `scripts/setup pg17|pg19`; scripts/pg.sh's chroot_of), with PG_CONFIG pointing
# at that version:
#   bash scripts/chroot.sh 17 bash scripts/test-one     Debian 13 (trixie), $SF_OPT/trixie
#   bash scripts/chroot.sh 19 bash scripts/test-one     Debian unstable (sid), $SF_OPT/sid
# The host's ~/.cargo and ~/.rustup (rustup's proxies and the crate cache; the compiler is
# the chroot's own Debian Rust, rust-toolchain.toml), cargo-pgrx ($SF_OPT/cargo-pgrx-*) and
# this checkout are bind-mounted at the same paths, so the command sees the same files;
# builds go to target/<release> (another libc, another PostgreSQL). The mounts are made
# private copies and removed on exit.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/pg.sh"
major=${1:?usage: chroot.sh MAJOR COMMAND...}; shift
dist=$(chroot_of "$major")
[[ -n $dist ]] || { echo "chroot.sh: PostgreSQL $major has no chroot" >&2; exit 1; }
root=$SF_OPT/$dist
[[ -f $root/.snowflake_id-$dist ]] || { echo "chroot.sh: no chroot at $root (bash scripts/setup pg$major)" >&2; exit 1; }

mounted=()
bind() {  # bind SRC: at the same path inside the chroot, unless something is there already
  local dst=$root$1
  mkdir -p "$dst"
  mountpoint -q "$dst" && return 0
  mount --rbind "$1" "$dst" && mount --make-rslave "$dst"
  mounted=("$dst" "${mounted[@]}")
}
cleanup() { local m; for m in "${mounted[@]}"; do umount -R "$m" 2>/dev/null || umount -lR "$m"; done; }
trap cleanup EXIT
mkdir -p "$root/proc"
if ! mountpoint -q "$root/proc"; then mount -t proc proc "$root/proc"; mounted=("$root/proc" "${mounted[@]}"); fi
bind /dev
bind "$HOME/.cargo"
bind "$HOME/.rustup"
[[ ! -d $SF_OPT/cargo-pgrx-$PGRX_VERSION ]] || bind "$SF_OPT/cargo-pgrx-$PGRX_VERSION"
bind "$repo"
# More of the host, at the same paths (reliability/pg_upgrade.sh: the other versions' installations).
for dir in ${CHROOT_BINDS:-}; do bind "$dir"; done
cp -f /etc/resolv.conf /etc/hosts "$root/etc/" 2>/dev/null || true   # sudo resolves the host name

# The environment inside: what the scripts read, nothing else of the host's.
pass=()
for v in SF_TMP SF_OPT RUST_BACKTRACE GEN GEN_SETUP_SQL RELIABILITY_LOAD_SECONDS RELIABILITY_JOBS RELIABILITY_SUITE UNIT_TESTS LINT PG_TESTS PART CARGO_BUILD_JOBS BENCH_STARTED \
         PG15_CONFIG PG17_CONFIG PG18_CONFIG; do
  [[ -n ${!v:-} ]] && pass+=("$v=${!v}")
done
chroot "$root" env -i HOME="$HOME" PATH="$HOME/.cargo/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
  LANG=C.UTF-8 PGRX_HOME="$HOME/.pgrx" CARGO_TARGET_DIR="$repo/target/$dist" \
  PG_CONFIG="$(pg_config_of "$major")" "${pass[@]}" \
  bash -c 'cd "$1" && shift && exec "$@"' - "$repo" "$@"
