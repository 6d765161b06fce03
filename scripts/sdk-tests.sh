#!/usr/bin/env bash
# Runs the two worker SDKs' own tests against the PostgreSQL that withdb
# prepared (one migrated template for both; each test makes its own
# database from it), after scripts/sdk-setup.sh installed them:
#
#   go run ./internal/pgtest/withdb -- scripts/sdk-tests.sh
#
# @convo/worker's vitest (its dist built by sdk-setup-typescript.sh, so not
# again by npm's pretest), then convo-worker's pytest on the sdist
# installed in the virtualenv (CONVO_CONFORMANCE_PYTHON names its runner).
# One after the other: their lease and heartbeat tests wait on timers, and
# side by side on a loaded machine both missed a deadline once.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CONVO_CONFORMANCE_PYTHON:?run scripts/sdk-setup.sh first and export what it prints}"
echo "@convo/worker (vitest)"
npm test --prefix clients/worker --ignore-scripts
echo "convo-worker (pytest on the installed sdist)"
CONVO_TEST_INSTALLED=1 "$(dirname "$CONVO_CONFORMANCE_PYTHON")/venv/bin/python" -m pytest -q -p no:cacheprovider \
  clients/python/tests
