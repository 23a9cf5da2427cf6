#!/usr/bin/env bash
# versions: 15
# The client recipes of docs/applications.md through real clients (psycopg 3 + SQLAlchemy 2,
# Django 5.2, node-postgres, pgjdbc, EclipseLink 2.7, tokio-postgres) against a throwaway
# server, and the docs' samples checked against the recipes' files: clients/run.sh.
set -euo pipefail
exec bash "$(cd "$(dirname "$0")" && pwd)/../clients/run.sh"
