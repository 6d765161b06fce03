#!/usr/bin/env bash
# The one test command (README, CI): sets up what a fresh machine lacks,
# checks generated code and lint, then runs every test with the race
# detector against real PostgreSQL, and last the browser tests in Chromium.
#
# Each phase prints its time ("-- phase: 1m05s") and a table of them ends
# the run. What waits on the network (apt-get, npm) overlaps with what
# waits on the CPU (compiling the Go code and its tests); README, "Tests",
# gives how long each phase takes on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/phases.sh

cleanup() {
  local status=$?
  # Background jobs still running when a phase failed.
  jobs -p | xargs -r kill 2>/dev/null || true
  phases_summary "$status"
}
trap cleanup EXIT
# Stopped by a signal, the run has not passed: exit as the shell would
# have (128 + the signal), so that the summary says FAILED.
trap 'exit 130' INT
trap 'exit 143' TERM

phase "system packages"
# The rolling-upgrade test (internal/upgradetest) builds the previous
# release from git history: a shallow clone fetches the rest first.
if [ "$(git rev-parse --is-shallow-repository 2>/dev/null)" = true ]; then
  git fetch --quiet --unshallow || echo "git fetch --unshallow failed: internal/upgradetest will say what it lacks" >&2
fi
# Debian's packages the tests need, installed with one apt-get (as root)
# while the Go code compiles: PostgreSQL's server binaries (the tests start
# private clusters from them, unless CONVO_TEST_DATABASE_URL names a
# server), PgBouncer (the tests that run convo through a transaction
# pooler start one in front of it), Chromium (Playwright cannot download its
# own browser here), and Python with psycopg for the Python worker SDK
# (scripts/sdk-setup-python.sh).
debs=()
if [ -z "${CONVO_TEST_DATABASE_URL:-}" ] && ! command -v initdb >/dev/null 2>&1 \
   && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  debs+=(postgresql)
fi
if [ -z "${CONVO_TEST_PGBOUNCER:-}" ] && ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then
  debs+=(pgbouncer)
fi
chromium="${CONVO_E2E_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium" ]; then
  if [ "$chromium" != /usr/bin/chromium ]; then
    echo "Chromium not found at CONVO_E2E_CHROMIUM=$chromium" >&2
    exit 1
  fi
  debs+=(chromium)
fi
if ! /usr/bin/python3 -c 'import psycopg, venv, ensurepip, pytest, pytest_asyncio, setuptools, wheel' 2>/dev/null; then
  debs+=(python3 python3-psycopg python3-venv python3-pytest python3-pytest-asyncio python3-setuptools python3-wheel python3-pip)
fi
if [ "${#debs[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "missing Debian packages: ${debs[*]}: install them (apt-get install ${debs[*]}) or run this as root" >&2
    exit 1
  fi
  background "apt-get install ${debs[*]}" \
    sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${debs[*]}"
fi

phase "npm packages, and the Go build in the background"
# Compiling is most of a fresh machine's CPU time, and it starts first:
# every test binary with the race detector (run by /bin/true, so none of it
# runs yet), the Go modules they need downloaded as they go; then go vet
# with the same flags, which finds every package compiled and only
# analyses. One build tree: the commands tests run as processes are built
# with -race too (internal/testbin), and so is the browser tests' server.
# It fills the build cache that the phases below use, while npm and the
# phases before go test run.
background "compile the Go tests (-race), then go vet -race" \
  sh -c "go test -race -count=1 -run '^\$' -exec /bin/true ./... && go vet -race ./..."
# The S3 tests' server, VersityGW's versitygw, built from the Go module
# proxy (not a dependency in go.mod) into a cache directory keyed by its
# version (internal/s3test/gwbin): minutes of CPU the first time, nothing
# after. The tests would build it themselves, under a lock, if it were
# missing.
background "build versitygw (the S3 tests' server)" go run ./internal/s3test/gwbin/build

# The three npm installs wait on the network, side by side. web's also
# brings the packages the Go tests' protocol verifiers (web/*-verify) run:
# @ag-ui/client, ai and openai, OpenAI's Node SDK. (npm ci
# rejects web's lockfile, as npm 11 omits buf's optional per-platform
# packages from it; npm install installs the locked versions all the same.)
npm_install() { npm install --prefix "$1" --no-audit --no-fund --loglevel=error --no-update-notifier; }
npm_install web & web_npm=$!
npm_install clients/typescript & ts_npm=$!
npm_install clients/react & react_npm=$!
wait "$web_npm"
wait "$ts_npm"
wait "$react_npm"

phase "build @convo/client and @convo/react"
# @convo/react builds against @convo/client's build.
npm run build --prefix clients/typescript --silent
npm run build --prefix clients/react --silent

phase "lint"
CONVO_LINT_VET=no ./scripts/lint.sh # go vet runs after the compile, above

phase "unit tests: client packages and web app (vitest)"
npm test --prefix clients/typescript
npm test --prefix clients/react
npm test --prefix web

if [ "${#debs[@]}" -gt 0 ]; then
  await "apt-get install ${debs[*]}"
fi

# The worker SDKs, @convo/worker (clients/worker) and convo-worker
# (clients/python): scripts/sdk-setup.sh packs each and installs it from
# its tarball into a scratch project (Python's over Debian's psycopg, with
# no network), with its conformance runner, the two side by side, and
# prints the runners' paths, which the conformance suite (./conformance, in
# go test below) reads. Then each SDK's own tests against real PostgreSQL
# (scripts/sdk-tests.sh): withdb prepares one migrated template for both
# suites, each test makes its own database from it.
phase "worker SDKs: packed, installed, tested against PostgreSQL"
sdk_env=$(scripts/sdk-setup.sh)
while IFS= read -r line; do
  export "${line?}" # CONVO_CONFORMANCE_TYPESCRIPT, CONVO_CONFORMANCE_PYTHON
done <<< "$sdk_env"
go run ./internal/pgtest/withdb -- scripts/sdk-tests.sh

await "compile the Go tests (-race), then go vet -race"
await "build versitygw (the S3 tests' server)"

# -parallel 4: most tests wait (on PostgreSQL, on a server process, on a
# model's pace), so four of a package's tests at a time, not one per core.
# internal/testreport prints what plain go test would, then the slowest
# tests and packages.
phase "go test -race"
go test -json -race -count=1 -parallel 4 -timeout 20m -skip '^TestFaultSoak$' ./... | go run ./internal/testreport

# The fault soak on its own (it loads both cores), both feeds one after
# the other, with its figures shown; docs/operations.md says how to run it
# longer.
phase "fault soak (cmd/api TestFaultSoak)"
go test -race -count=1 -timeout 10m -run '^TestFaultSoak$' -v ./cmd/api/ 2>&1 |
  grep -E 'soak \(|--- (PASS|FAIL)|soak_test.go|^(ok|FAIL)'

# The Connect and worker suites again, and the fault soak (NOTIFY feed),
# with their pools behind a real PgBouncer in transaction mode and their
# listeners direct, as a deployment with CONVO_DB_POOL_MODE=transaction
# runs (internal/pgtest: CONVO_TEST_POOLER). In the background, beside the
# browser tests, which spend most of their time waiting on the demo
# model's pace (they use about 40% of two cores): the two together take
# some two minutes less than one after the other. Its log is printed
# after the browser tests, whole when it failed.
through_pgbouncer() {
  CONVO_TEST_POOLER=pgbouncer go test -json -race -count=1 -parallel 4 -timeout 15m ./connectapi/ ./worker/ |
    go run ./internal/testreport || return $?
  CONVO_TEST_POOLER=pgbouncer CONVO_SOAK_FEEDS=notify go test -race -count=1 -timeout 10m -run '^TestFaultSoak$' -v ./cmd/api/ 2>&1 |
    grep -E 'soak \(|--- (PASS|FAIL)|soak_test.go|^(ok|FAIL)' | tee "$pgbouncer_soak"
}
pgbouncer_soak=$(mktemp)
background "through PgBouncer: the Connect and worker suites, the fault soak" through_pgbouncer

# The web app in Chromium against the server built from this tree (with the
# race detector, and the web/dist rebuilt from web/src: a stale committed
# bundle fails here), real PostgreSQL and the demo model.
phase "browser tests (Playwright, web/e2e)"
if ! npm run e2e --prefix web; then
  echo "browser tests failed: each test's final screenshot, the traces of failed ones (npx --prefix web playwright show-trace <trace.zip>)" >&2
  echo "and the server's log are under web/test-results/" >&2
  exit 1
fi
phase_end
await "through PgBouncer: the Connect and worker suites, the fault soak"
cat "$pgbouncer_soak"
rm -f "$pgbouncer_soak"
