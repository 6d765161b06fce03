#!/usr/bin/env bash
# Sets up both worker SDKs as a user would get them, for the conformance
# suite (conformance/README.md) and the SDKs' own tests: packs
# @convo/worker and convo-worker, installs each from its tarball into a
# scratch project under ${CONVO_SDK_SCRATCH:-<repo>/.cache/sdk}, with its
# conformance runner. Prints the two lines to export on stdout (progress
# on stderr):
#   CONVO_CONFORMANCE_TYPESCRIPT=<path>
#   CONVO_CONFORMANCE_PYTHON=<path>
# so that, by hand:  eval "export $(scripts/sdk-setup.sh | tr '\n' ' ')"
set -euo pipefail
cd "$(dirname "$0")/.."
# Side by side: the TypeScript one waits on npm, the Python one mostly on
# its own CPU. Each prints its line when it ends; they are printed in
# order here.
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
scripts/sdk-setup-typescript.sh >"$out/ts" &
ts=$!
scripts/sdk-setup-python.sh >"$out/py" &
py=$!
status=0
wait "$ts" || status=$?
wait "$py" || status=$?
[ "$status" -eq 0 ] || exit "$status"
cat "$out/ts" "$out/py"
