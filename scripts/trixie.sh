#!/usr/bin/env bash
# Runs a command inside the Debian 13 (trixie) chroot where PostgreSQL 17 lives
# ($SF_OPT/trixie, made by `scripts/setup pg17`), with PG_CONFIG pointing at its 17:
#   bash scripts/trixie.sh bash scripts/test-one
# The host's ~/.cargo and ~/.rustup (rustup's proxies and the crate cache; the compiler is
# trixie's own Debian Rust, rust-toolchain.toml), cargo-pgrx ($SF_OPT/cargo-pgrx-*) and this
# checkout are bind-mounted at the same paths, so the command sees the same files; builds go
# to target/trixie (another libc, another PostgreSQL). The mounts are made private copies and
# removed on exit.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/pg.sh"
root=$SF_OPT/trixie
[[ -f $root/.snowflake_id-trixie ]] || { echo "trixie.sh: no chroot at $root (bash scripts/setup pg17)" >&2; exit 1; }

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
cp -f /etc/resolv.conf /etc/hosts "$root/etc/" 2>/dev/null || true   # sudo resolves the host name

# The environment inside: what the scripts read, nothing else of the host's.
pass=()
for v in SF_TMP SF_OPT RUST_BACKTRACE GEN GEN_SETUP_SQL RELIABILITY_LOAD_SECONDS UNIT_TESTS CARGO_BUILD_JOBS BENCH_STARTED; do
  [[ -n ${!v:-} ]] && pass+=("$v=${!v}")
done
chroot "$root" env -i HOME="$HOME" PATH="$HOME/.cargo/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
  LANG=C.UTF-8 PGRX_HOME="$HOME/.pgrx" CARGO_TARGET_DIR="$repo/target/trixie" \
  PG_CONFIG=/usr/lib/postgresql/17/bin/pg_config "${pass[@]}" \
  bash -c 'cd "$1" && shift && exec "$@"' - "$repo" "$@"
