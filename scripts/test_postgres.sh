#!/usr/bin/env bash
# A local PostgreSQL server for the session-store tests (they also run on SQLite without it).
# Installs Debian's postgresql when missing, starts its cluster and creates a role that may
# create databases; writes the connection URL to the file given as $1 for `make test`.
# Needs root; without it the PostgreSQL variants of the store tests are skipped.
set -euo pipefail
url_file="$1"
rm -f "$url_file"
if [ "$(id -u)" != "0" ]; then
  echo "Not root: PostgreSQL store tests will be skipped (set DASHBOARD_TEST_PG_URL to run them)."
  exit 0
fi
if ! command -v pg_lsclusters >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
read -r version cluster port _ < <(pg_lsclusters -h | head -n 1)
pg_ctlcluster "$version" "$cluster" start 2>/dev/null || true  # already running is fine
pg_isready -q -h localhost -p "$port" -t 30
psql_admin() { su postgres -c "psql -p $port -qtAc \"$1\""; }
if [ -z "$(psql_admin "SELECT 1 FROM pg_roles WHERE rolname = 'dashboard_test'")" ]; then
  psql_admin "CREATE ROLE dashboard_test LOGIN CREATEDB PASSWORD 'dashboard_test'"
fi
if [ -z "$(psql_admin "SELECT 1 FROM pg_database WHERE datname = 'dashboard_test'")" ]; then
  psql_admin "CREATE DATABASE dashboard_test OWNER dashboard_test"
fi
echo "postgresql://dashboard_test:dashboard_test@localhost:$port/dashboard_test" > "$url_file"
echo "PostgreSQL $version ready on port $port for the store tests."
