#!/usr/bin/env bash
# Sets up the TypeScript runtime's conformance runner as a user would get
# it: builds and packs @convo/worker (clients/worker), installs the tarball
# with the AI SDK (ai, at the version clients/worker is tested with) from
# the npm registry into a scratch project, copies the runner
# (conformance/runners/typescript/worker.mjs) there, and writes
# run-worker, which starts it. Prints one line on stdout:
#   CONVO_CONFORMANCE_TYPESCRIPT=<absolute path of run-worker>
# (progress goes to stderr). The scratch project is
# ${CONVO_SDK_SCRATCH:-<repo>/.cache/sdk}/typescript. A second run with
# clients/worker unchanged builds its dist again but installs nothing.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
pkg="$repo/clients/worker"
# A relative CONVO_SDK_SCRATCH is relative to where the script was started.
scratch_root="${CONVO_SDK_SCRATCH:-$repo/.cache/sdk}"
mkdir -p "$scratch_root"
scratch="$(cd "$scratch_root" && pwd)/typescript"
mkdir -p "$scratch"
cd "$repo"

say() { echo "sdk-setup-typescript: $*" >&2; }
# npm's output is shown only when it fails.
quiet_npm() {
  local log
  log="$(mktemp)"
  if ! npm --no-audit --no-fund --loglevel=error "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

node_bin="$(command -v node)" || { say "node not found: install Node.js 20 or later"; exit 1; }

# The versions the runner installs beside the tarball: those clients/worker
# is built and tested with (its devDependencies).
dev_version() { node -p "require('$pkg/package.json').devDependencies['$1']"; }
ai_version="$(dev_version ai)"
zod_version="$(dev_version zod)"

# What the scratch project was installed from: the package's sources and
# lockfile, and the versions beside it. Unchanged, nothing is rebuilt.
stamp="$( (cd "$pkg" && cat package.json package-lock.json tsconfig.json tsconfig.build.json && find src -type f ! -path 'src/testing/*' ! -name '*.test.ts' | LC_ALL=C sort | xargs cat) | sha256sum | cut -d' ' -f1) ai@$ai_version zod@$zod_version"

if [ ! -f "$pkg/node_modules/.package-lock.json" ] || [ "$pkg/package-lock.json" -nt "$pkg/node_modules/.package-lock.json" ]; then
  say "installing clients/worker's dependencies"
  quiet_npm install --prefix "$pkg"
fi
# Built every time (its dist is what the tarball holds, and what
# clients/worker's own tests run as a child process: scripts/sdk-tests.sh
# runs them without building it again).
say "building @convo/worker"
npm run build --prefix "$pkg" --silent >&2

if [ "$(cat "$scratch/.installed" 2>/dev/null || true)" != "$stamp" ] || [ ! -d "$scratch/node_modules/@convo/worker" ]; then
  say "packing @convo/worker"
  rm -f "$scratch"/convo-worker-*.tgz
  tarball="$(cd "$pkg" && npm pack --silent --pack-destination "$scratch" | tail -n 1)"
  say "installing $tarball, ai@$ai_version and zod@$zod_version into $scratch"
  cat >"$scratch/package.json" <<'JSON'
{
  "name": "convo-conformance-typescript",
  "private": true,
  "type": "module"
}
JSON
  # A tarball of the same name with new contents: npm would keep the
  # integrity it locked, so the old install goes first.
  rm -rf "$scratch/package-lock.json" "$scratch/node_modules/@convo"
  (cd "$scratch" && quiet_npm install --save-exact "./$tarball" "ai@$ai_version" "zod@$zod_version")
  echo "$stamp" >"$scratch/.installed"
else
  say "@convo/worker unchanged since the last setup: refreshing the runner only"
fi

cp conformance/runners/typescript/worker.mjs "$scratch/worker.mjs"
# exec: the driver's SIGTERM must reach node itself.
cat >"$scratch/run-worker" <<SH
#!/bin/sh
# Starts the TypeScript conformance runner (written by scripts/sdk-setup-typescript.sh).
cd "$scratch" || exit 1
exec "$node_bin" worker.mjs "\$@"
SH
chmod +x "$scratch/run-worker"
echo "CONVO_CONFORMANCE_TYPESCRIPT=$scratch/run-worker"
