#!/usr/bin/env bash
# Builds convo-worker, the Python worker runtime (clients/python), with no
# network: a wheel and an sdist, with setuptools' own PEP 517 backend and
# Debian's /usr/bin/python3 (whatever python3 comes first on PATH), into
# the directory given (default: dist/python of the checkout). `make
# python-sdk` runs it; scripts/sdk-setup-python.sh builds with it too.
#
# Prints the two files' absolute paths on stdout, the wheel first (what
# to pip install), then the sdist; what it built, and how to install the
# wheel, on stderr (not with --quiet, the first argument).
#
#   scripts/python-sdk.sh [--quiet] [directory]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python=/usr/bin/python3
quiet=
if [ "${1:-}" = --quiet ]; then
  quiet=1
  shift
fi
out="${1:-$repo/dist/python}"

if ! "$python" -c 'import setuptools.build_meta, wheel' 2>/dev/null; then
  echo "building convo-worker needs Debian's python3 with setuptools and wheel: apt-get install python3 python3-setuptools python3-wheel (as root)" >&2
  exit 1
fi

mkdir -p "$out"
out="$(cd "$out" && pwd)"
rm -f "$out"/convo_worker-*.whl "$out"/convo-worker-*.tar.gz "$out"/convo_worker-*.tar.gz

# Build from a copy, so that the checkout gets no build files (build/,
# *.egg-info).
src="$(mktemp -d)"
trap 'rm -rf "$src"' EXIT
cp -r "$repo/clients/python/pyproject.toml" "$repo/clients/python/README.md" "$repo/clients/python/src" "$src/"
find "$src" \( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +
build() {
  (cd "$src" && "$python" -c 'import sys; from setuptools import build_meta; print(getattr(build_meta, sys.argv[1])(sys.argv[2]))' "$1" "$out" 2>"$src/build.log" | tail -n 1) ||
    { cat "$src/build.log" >&2; return 1; }
}
wheel="$out/$(build build_wheel)"
sdist="$out/$(build build_sdist)"

if [ -n "$quiet" ]; then
  printf '%s\n%s\n' "$wheel" "$sdist"
  exit 0
fi
shown="$wheel"
case "$wheel" in "$PWD"/*) shown="${wheel#"$PWD"/}" ;; esac
cat >&2 <<MSG
convo-worker built:
  $wheel
  $sdist
Install it (with no index: it needs only psycopg 3.1+, Debian's python3-psycopg)
into a virtualenv of your project that sees Debian's packages:
  /usr/bin/python3 -m venv --system-site-packages ~/my-agent/.venv
  ~/my-agent/.venv/bin/pip install --no-index $shown
docs/workers-python.md has the rest.
MSG
printf '%s\n%s\n' "$wheel" "$sdist"
