#!/usr/bin/env bash
# The record of what sqlc generated its three outputs from (sqlc.yaml: the
# store's postgres/dbq, the worker runtime's worker/internal/wdb, the
# tests' internal/pgtest/apiq): sqlc.sum lists sqlc's version and the
# SHA-256 of every input (sqlc.yaml, db/schema, db/queries and its
# subdirectories) and every generated file. Compiling sqlc takes minutes on a
# fresh machine (it carries PostgreSQL's parser in C, or in WebAssembly), so
# the lint checks the record first and runs sqlc itself only when it differs.
#
#   scripts/sqlc-sum.sh write   rewrite the record (make generate does, after sqlc generate)
#   scripts/sqlc-sum.sh check   generated code is current: the record matches the tree,
#                               or, when it does not, `sqlc diff` says why (exit 1 either way)
#
# The record proves what it lists: the generated files are the ones sqlc
# wrote from these inputs with this version. An edit to a query or to a
# generated file, or a new sqlc, changes a line, and then sqlc itself decides.
set -euo pipefail
cd "$(dirname "$0")/.."
record=sqlc.sum

list() {
  # go.mod's line for sqlc: "github.com/sqlc-dev/sqlc v1.31.1 // indirect".
  awk '$1 == "github.com/sqlc-dev/sqlc" { print "sqlc " $2 }' go.mod
  # Every output directory of sqlc.yaml ("out: …"), so that a new one is
  # covered, and a generated file left over in one (sqlc never deletes)
  # changes the record.
  outs=$(awk '$1 == "out:" { print $2 }' sqlc.yaml)
  sha256sum sqlc.yaml db/schema/*.sql db/queries/*.sql db/queries/*/*.sql $(for d in $outs; do ls "$d"/*.go; done)
}

case "${1:-}" in
write)
  list >"$record"
  ;;
check)
  now=$(list)
  if [ "$now" = "$(cat "$record" 2>/dev/null)" ]; then
    echo "sqlc's outputs ($(awk '$1 == "out:" { print $2 }' sqlc.yaml | paste -sd ' ')) were generated from these queries and schema by this sqlc ($record)"
    exit 0
  fi
  echo "$record differs from the tree (- recorded, + now):"
  diff "$record" <(printf '%s\n' "$now") | grep -E '^[<>]' | sed 's/^</-/; s/^>/+/' || true
  echo "running sqlc diff (compiling sqlc takes minutes the first time)"
  if ! go tool sqlc diff; then
    echo "generated code is stale: run 'make generate' and commit the result" >&2
    exit 1
  fi
  echo "generated code is current but its record is not: run 'make generate' (it rewrites $record) and commit the result" >&2
  exit 1
  ;;
*)
  echo "usage: $0 write|check" >&2
  exit 2
  ;;
esac
