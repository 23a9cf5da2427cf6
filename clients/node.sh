#!/usr/bin/env bash
# clients/node/node_modules: the Node packages of clients/node/package-lock.json from npm (npm
# ci), installed again only when the lock file changed; one installer at a time
# (clients/run.sh and reliability/t_app_node_rust.sh may start together).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec 9>"$here/.node.lock"
flock 9
if ! cmp -s "$here/node/package-lock.json" "$here/node/node_modules/.installed-from-lock" 2>/dev/null; then
  echo "clients: installing Node packages (npm ci)"
  (cd "$here/node" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$here/node/package-lock.json" "$here/node/node_modules/.installed-from-lock"
fi
