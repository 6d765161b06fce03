#!/usr/bin/env bash
# make bench-peer: convo in the peer measurement's shape (cmd/bench --run
# peer: 4 SQL writers, subscribers over 10 conversations as browser tabs,
# one HTTP/1.1 connection each; 10,000 idle subscribers), both feeds, run
# right after the peer in the same shape when CONVO_PEER_RUN names the
# script that measures it, with the ratios printed; each size is then
# measured again with convo's writers held to the peer's write rate, so
# that the latencies also compare at equal load. docs/performance.md
# says what the peer is and how to read the figures.
#
#   CONVO_PEER_RUN=/path/to/peer/run.sh make bench-peer
#   SECONDS_PER_SIZE=10 (default) make bench-peer
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${SECONDS_PER_SIZE:-10}"
args=(--run peer --fast=false --peer-duration "${secs}s")
if [ -n "${CONVO_PEER_RUN:-}" ]; then
  results="$(mktemp)"
  trap 'rm -f "$results"' EXIT
  echo "== the peer ($CONVO_PEER_RUN $secs)" >&2
  "$CONVO_PEER_RUN" "$secs" | tee "$results"
  args+=(--peer-results "$results" --peer-paced)
else
  echo "CONVO_PEER_RUN is not set: measuring convo alone (no ratios)" >&2
fi
echo "== convo" >&2
go run ./cmd/bench "${args[@]}"
