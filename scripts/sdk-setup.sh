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
scripts/sdk-setup-typescript.sh
scripts/sdk-setup-python.sh
