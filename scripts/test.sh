#!/usr/bin/env bash
# The one test command (README, CI): sets up what a fresh machine lacks,
# checks generated code and lint, then runs every test with the race
# detector against real PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."

# PostgreSQL server binaries: the tests start a private cluster from them
# (unless CONVO_TEST_DATABASE_URL names a server to use instead).
if [ -z "${CONVO_TEST_DATABASE_URL:-}" ] && ! command -v initdb >/dev/null 2>&1 \
   && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "== installing PostgreSQL server binaries"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "PostgreSQL server binaries not found: install postgresql (apt-get install postgresql) or set CONVO_TEST_DATABASE_URL" >&2
    exit 1
  fi
fi

echo "== go modules"
go mod download

echo "== npm packages (web)"
# npm ci rejects this lockfile (npm 11 omits buf's optional per-platform
# packages from it); npm install installs the locked versions all the same.
npm install --prefix web --no-audit --no-fund --loglevel=error

./scripts/lint.sh

echo "== web unit tests (vitest)"
npm test --prefix web

echo "== go test -race"
go test -race -count=1 -timeout 20m ./...
