#!/usr/bin/env bash
# clients/.venv: the Python packages of clients/requirements.txt from PyPI, made again only
# when requirements.txt changed; one maker at a time (clients/run.sh and the reliability tests
# that run Python clients may start together).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=$here/.venv
exec 9>"$here/.venv.lock"
flock 9
if ! cmp -s "$here/requirements.txt" "$venv/requirements.txt" 2>/dev/null; then
  echo "clients: installing Python packages into $venv"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$venv/requirements.txt"
fi
