#!/usr/bin/env bash
# PostgreSQL 17's chroot: `bash scripts/trixie.sh CMD...` is `bash scripts/chroot.sh 17 CMD...`.
exec bash "$(dirname "$0")/chroot.sh" 17 "$@"
