#!/usr/bin/env bash
# The one test command (README, CI): sets up what a fresh machine lacks,
# checks generated code and lint, then runs every test with the race
# detector against real PostgreSQL, and last the browser tests in Chromium.
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

# Chromium for the browser tests (web/e2e): Playwright cannot download its
# own browser here, so they run in Debian's.
chromium="${CONVO_E2E_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium" ]; then
  if [ "$(id -u)" = 0 ] && [ "$chromium" = /usr/bin/chromium ]; then
    echo "== installing Chromium (browser tests)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "Chromium not found at $chromium: the browser tests need it; install Debian's chromium package (apt-get install chromium)" >&2
    exit 1
  fi
fi

echo "== go modules"
go mod download

echo "== npm packages (web)"
# npm ci rejects this lockfile (npm 11 omits buf's optional per-platform
# packages from it); npm install installs the locked versions all the same.
npm install --prefix web --no-audit --no-fund --loglevel=error

# The npm packages @convo/client and @convo/react (clients/): each has its
# own dependencies, and @convo/react builds against @convo/client's build.
echo "== npm packages (clients), built"
for pkg in clients/typescript clients/react; do
  npm install --prefix "$pkg" --no-audit --no-fund --loglevel=error
  npm run build --prefix "$pkg" --silent
done

./scripts/lint.sh

echo "== unit tests of the client packages and the web app (vitest)"
npm test --prefix clients/typescript
npm test --prefix clients/react
npm test --prefix web

# The worker SDKs, @convo/worker (clients/worker) and convo-worker
# (clients/python): scripts/sdk-setup.sh packs each and installs it from
# its tarball into a scratch project (Python's over Debian's psycopg, with
# no network), with its conformance runner, and prints the runners' paths,
# which the conformance suite (./conformance, in go test below) reads.
# Then each SDK's own tests against real PostgreSQL: withdb prepares a
# migrated template, each test makes its own database from it.
echo "== worker SDKs: packed, installed into scratch projects"
sdk_env=$(scripts/sdk-setup.sh)
while IFS= read -r line; do
  export "${line?}" # CONVO_CONFORMANCE_TYPESCRIPT, CONVO_CONFORMANCE_PYTHON
done <<< "$sdk_env"
echo "== @convo/worker against PostgreSQL (vitest under withdb)"
go run ./internal/pgtest/withdb -- npm test --prefix clients/worker
echo "== convo-worker (Python) against PostgreSQL (pytest under withdb, on the installed sdist)"
CONVO_TEST_INSTALLED=1 go run ./internal/pgtest/withdb -- \
  "$(dirname "$CONVO_CONFORMANCE_PYTHON")/venv/bin/python" -m pytest -q -p no:cacheprovider clients/python/tests

echo "== go test -race"
go test -race -count=1 -timeout 20m -skip '^TestFaultSoak$' ./...

# The fault soak on its own (it loads both cores), both feeds one after
# the other, with its figures shown;
# docs/operations.md says how to run it longer.
echo "== fault soak (cmd/api TestFaultSoak)"
go test -race -count=1 -timeout 10m -run '^TestFaultSoak$' -v ./cmd/api/ 2>&1 |
  grep -E 'soak \(|--- (PASS|FAIL)|soak_test.go|^(ok|FAIL)'

# The web app in Chromium against the server built from this tree (with the
# race detector, and the web/dist rebuilt from web/src: a stale committed
# bundle fails here), real PostgreSQL and the demo model.
echo "== browser tests (Playwright, web/e2e)"
if ! npm run e2e --prefix web; then
  echo "browser tests failed: each test's final screenshot, the traces of failed ones (npx --prefix web playwright show-trace <trace.zip>)" >&2
  echo "and the server's log are under web/test-results/" >&2
  exit 1
fi
