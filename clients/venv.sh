#!/usr/bin/env bash
# Makes clients/.venv, the Python clients' packages from PyPI (clients/requirements.txt), unless
# it is there for this requirements.txt already; run by clients/run.sh and by the tests that
# use the Python clients (reliability/t_app_routing.sh). One at a time (a lock beside it): two
# tests may start at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=$here/.venv
exec {fd}>"$here/.venv.lock"
flock "$fd"
if ! cmp -s "$here/requirements.txt" "$venv/requirements.txt" 2>/dev/null; then
  echo "clients: installing Python packages into $venv"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$venv/requirements.txt"
fi
