#!/usr/bin/env bash
# The client recipes of docs/applications.md, run through real clients against a throwaway server:
# psycopg 3 + SQLAlchemy 2 and Django 5.2 (Python), node-postgres (Node). Expects the
# extension installed (scripts/install). Installs the clients itself, idempotently: Python
# packages from PyPI into clients/.venv (reused while requirements.txt is unchanged), Node
# packages from npm into clients/node/node_modules (npm ci, from the committed lock file).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"

venv=$here/.venv
if ! cmp -s "$here/requirements.txt" "$venv/requirements.txt" 2>/dev/null; then
  echo "clients: installing Python packages into $venv"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$venv/requirements.txt"
fi
if ! cmp -s "$here/node/package-lock.json" "$here/node/node_modules/.installed-from-lock" 2>/dev/null; then
  echo "clients: installing Node packages (npm ci)"
  (cd "$here/node" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$here/node/package-lock.json" "$here/node/node_modules/.installed-from-lock"
fi

cluster_start clients 55480
trap 'cluster_stop clients' EXIT
for db in py js; do
  psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db" -d postgres
  psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION snowflake_id" -d $db
done
(cd "$here" && PGDATABASE=py "$venv/bin/python" test_python.py)
(cd "$here/node" && PGDATABASE=js node test.js)
