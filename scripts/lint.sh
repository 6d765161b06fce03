#!/usr/bin/env bash
# Fails when code is unformatted, vet complains, the proto API breaks its
# lint rules, or generated code (sqlc, protobuf) is stale.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== generated code is current (sqlc: sqlc.sum, scripts/sqlc-sum.sh)"
scripts/sqlc-sum.sh check

echo "== buf lint, and generated protobuf code is current"
buf=web/node_modules/.bin/buf
"$buf" lint
"$buf" generate
if ! git diff --quiet -- gen clients/typescript/src/gen || [ -n "$(git ls-files --others --exclude-standard -- gen clients/typescript/src/gen)" ]; then
  echo "protobuf code is stale: run 'make generate' and commit the result" >&2
  git status --short -- gen clients/typescript/src/gen >&2
  exit 1
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

# scripts/test.sh runs go vet on its own (-race, once the tests are compiled).
if [ "${CONVO_LINT_VET:-yes}" != no ]; then
  echo "== go vet"
  go vet ./...
fi
