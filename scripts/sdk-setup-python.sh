#!/usr/bin/env bash
# Sets up convo-worker (clients/python) as a user would install it, with no
# network: builds its sdist (scripts/python-sdk.sh, as `make python-sdk`
# does), installs it
# with pip --no-index --no-build-isolation into a virtualenv that sees
# Debian's psycopg (--system-site-packages), copies the conformance runner
# next to it and writes run-worker, an executable that starts the runner
# with the virtualenv's python. Prints the variable the conformance driver
# reads:
#
#   CONVO_CONFORMANCE_PYTHON=<absolute path of run-worker>
#
# Everything goes under ${CONVO_SDK_SCRATCH:-<repo>/.cache/sdk}/python.
# Debian's python3 (/usr/bin/python3, 3.11+) is used whatever python3 is
# first on PATH; its packages python3-psycopg, python3-venv, python3-pytest
# and python3-pytest-asyncio are installed with apt-get when missing and
# the script runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
python=/usr/bin/python3
scratch="${CONVO_SDK_SCRATCH:-$repo/.cache/sdk}/python"

missing() {
  "$python" - <<'PY' 2>/dev/null
import importlib.util, sys
need = ["psycopg", "venv", "ensurepip", "pytest", "pytest_asyncio", "setuptools", "wheel"]
sys.exit(1 if all(importlib.util.find_spec(m) for m in need) else 0)
PY
}

if [ ! -x "$python" ] || missing; then
  if [ "$(id -u)" = 0 ]; then
    echo "== installing Debian's Python packages (python3-psycopg python3-venv python3-pytest python3-pytest-asyncio)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-psycopg python3-venv python3-pytest \
      python3-pytest-asyncio python3-setuptools python3-wheel python3-pip >/dev/null
  else
    echo "convo-worker needs Debian's python3 with python3-psycopg, python3-venv, python3-pytest and python3-pytest-asyncio: apt-get install them (as root)" >&2
    exit 1
  fi
fi

rm -rf "$scratch"
mkdir -p "$scratch/dist"
scratch=$(cd "$scratch" && pwd)
sdist=$(scripts/python-sdk.sh --quiet "$scratch/dist" | tail -n 1)
echo "== built $sdist" >&2

"$python" -m venv --system-site-packages "$scratch/venv"
"$scratch/venv/bin/python" -m pip install --quiet --no-index --no-build-isolation --disable-pip-version-check "$sdist" >&2
echo "== installed $("$scratch/venv/bin/python" -c 'import importlib.metadata as m; print("convo-worker", m.version("convo-worker"))') in $scratch/venv" >&2

cp conformance/runners/python/worker.py "$scratch/worker.py"
cat >"$scratch/run-worker" <<SH
#!/bin/sh
# The conformance runner of convo-worker, with the virtualenv it is installed in.
exec "$scratch/venv/bin/python" "$scratch/worker.py" "\$@"
SH
chmod +x "$scratch/run-worker"
echo "CONVO_CONFORMANCE_PYTHON=$scratch/run-worker"
