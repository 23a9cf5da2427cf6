#!/usr/bin/env bash
# The client recipes of docs/applications.md, run through real clients against a throwaway server
# (and the routing clients of docs/app-routing.md: test_routing.py, node/test_routing.js,
# rust/src/bin/test_routing.rs):
# psycopg 3 + SQLAlchemy 2 and Django 5.2 (Python), node-postgres (Node), pgjdbc and
# EclipseLink 2.7 (Java), tokio-postgres (Rust); then checks that the docs show the recipes'
# code as it is. Expects the extension installed (scripts/install). Installs the clients
# itself, idempotently: Python packages from PyPI into clients/.venv (reused while
# requirements.txt is unchanged), Node packages from npm into clients/node/node_modules (npm
# ci, from the committed lock file), the JDK and jars from Debian (scripts/setup clients),
# the Rust client's crates from crates.io by clients/rust/Cargo.lock.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/cluster.sh"
bash "$here/../scripts/setup" clients

venv=$here/.venv
bash "$here/venv.sh"
bash "$here/node.sh"

# The Rust client, built before the server starts (its first build takes about 30 s), with
# the cargo on PATH (rustup's when none is).
command -v cargo >/dev/null || export PATH="$HOME/.cargo/bin:$PATH"
rust_target=$here/rust/target
cargo fmt --check --manifest-path "$here/rust/Cargo.toml"
cargo build --quiet --locked --manifest-path "$here/rust/Cargo.toml" --target-dir "$rust_target"
# The Java recipes, compiled against Debian's jars.
jars=/usr/share/java/postgresql.jar:/usr/share/java/eclipselink.jar:/usr/share/java/eclipselink-jpa-2.1-spec.jar
classes=$SF_TMP/clients-java
rm -rf "$classes" && mkdir -p "$classes"
javac -nowarn -d "$classes" -cp "$jars" "$here"/java/example/*.java "$here"/java/caught/*.java "$here/java/ClientTests.java"

# pgjdbc connects over TCP only: the server listens on loopback too, on a port that is free.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cluster_start clients "$port" "listen_addresses=127.0.0.1"
trap 'cluster_stop clients' EXIT
for db in py js java rs; do
  psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db" -d postgres
  psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION snowflake_id" -d $db
done
(cd "$here" && PGDATABASE=py "$venv/bin/python" test_python.py)
for orm in sqlalchemy django; do (cd "$here" && "$venv/bin/python" test_routing.py "$orm"); done
(cd "$here/node" && PGDATABASE=js node test.js && node test_routing.js)
JDBC_URL="jdbc:postgresql://127.0.0.1:$port/java?user=$PGUSER" java -cp "$classes:$here/java:$jars" ClientTests
PGDATABASE=rs "$rust_target/debug/snowflake_id_client_recipe"
"$rust_target/debug/test_routing"
python3 "$here/check_docs.py"
