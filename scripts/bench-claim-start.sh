#!/usr/bin/env bash
# A reply's claim, start and first text in PostgreSQL alone, this tree's
# db/functions against another revision's, side by side
# (docs/performance.md, "What a claim and a start cost"). Run it under a
# private cluster with a migrated template:
#
#   go run ./internal/pgtest/withdb -- scripts/bench-claim-start.sh REV [CLIENTS] [PER_CLIENT] [MODE]
#
# Two databases from the template, one with REV's db/functions applied
# over it ("before"), one with this tree's ("after"), each with
# CLIENTS * PER_CLIENT prompts queued by a user each, and a worker w0 …
# under a live process lease per client. Both run at once, each through
# pgbench (-M prepared, CLIENTS clients, sessions that live for the run as
# a worker's connections do), so the machine's load weighs on both alike.
# Each transaction claims one prompt as the Go worker does
# (PromptClaimMany, max_prompts 1), then, by MODE:
#   split  (default) start_prompt in one write_batch, then start_block and
#          the first append in a second, as the Go runtime's urgent lane
#          writes them when the model's first token comes after the start;
#   one    the three ops in one write_batch;
#   claim  nothing more.
# It prints each side's backend CPU per transaction (/proc/<pid>/stat of
# its backends, sampled every 0.1 s) and pgbench's mean latency.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: bench-claim-start.sh REV [CLIENTS] [PER_CLIENT] [split|one|claim]}
clients=${2:-1}; per=${3:-2000}; mode=${4:-split}
: "${CONVO_TEST_ADMIN_URL:?run it under go run ./internal/pgtest/withdb}"
bin=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
admin="$CONVO_TEST_ADMIN_URL"
base="${admin%/*}"; q="${admin#*\?}"; [ "$q" = "$admin" ] && q=""
n=$(( clients * per ))
work=$(mktemp -d)
declare -A url
cleanup() {
  for side in before after; do
    "$bin/psql" -qX "$admin" -c "DROP DATABASE IF EXISTS bench_${side}_$$ WITH (FORCE)" >/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/before" "$work/after"
files=$(sed -n '/^var FunctionFiles = \[\]string{/,/^}/p' db/migrate.go | grep -o '"[a-z_]*\.sql"' | tr -d '"')
for f in $files; do
  git show "$rev:db/functions/$f" > "$work/before/$f" 2>/dev/null || rm -f "$work/before/$f"
  cp "db/functions/$f" "$work/after/$f"
done
for side in before after; do
  db="bench_${side}_$$"
  url[$side]="$base/$db${q:+?$q}"
  "$bin/psql" -qX "$admin" -c "CREATE DATABASE $db TEMPLATE $CONVO_TEST_TEMPLATE" >/dev/null
  for f in $files; do
    [ -f "$work/$side/$f" ] && "$bin/psql" -qX -v ON_ERROR_STOP=1 "${url[$side]}" -f "$work/$side/$f" >/dev/null 2>&1
  done
  "$bin/psql" -qX -v ON_ERROR_STOP=1 "${url[$side]}" >/dev/null <<SQL
SELECT convo.worker_heartbeat('w' || c, 3600, true) FROM generate_series(0, $clients - 1) c;
SELECT count(*) FROM generate_series(1, $n) g, convo.send_message('u' || g, NULL, 'hi', '[{}]') s;
VACUUM ANALYZE;
SQL
done
batch="(extract(epoch FROM clock_timestamp()) * 1e6)::bigint"
start="jsonb_build_object('op', 'start_prompt', 'prompt', (:pid)::uuid)"
block="jsonb_build_object('op', 'start_block', 'prompt', (:pid)::uuid, 'block', g.b, 'type', 'text')"
text="jsonb_build_object('op', 'append', 'prompt', (:pid)::uuid, 'block', g.b, 'text', 'Hello', 'seq', 1)"
{
  # db/queries/worker/worker.sql, PromptClaimMany
  cat <<'SQL'
SELECT c.prompt_id::uuid AS pid FROM (SELECT c.prompt_id::uuid AS prompt_id, c.conversation_id::uuid AS conversation_id, c.message_id::uuid AS message_id, c.model_config::jsonb AS model_config, c.attempts::int AS attempts, EXISTS (SELECT 1 FROM convo.prompt_inputs(c.prompt_id, 'w' || :client_id)) AS resumed, '{}'::jsonb AS trace_context, 0::float8 AS queued_seconds FROM convo.claim_prompts('w' || :client_id, 30, 1, 0) c) c \gset
SQL
  case $mode in
  split)
    echo "SELECT count(*) FROM convo.write_batch('w' || :client_id, $batch, jsonb_build_array($start), 2) b;"
    echo "SELECT count(*) FROM (SELECT gen_random_uuid() AS b) g, convo.write_batch('w' || :client_id, $batch, jsonb_build_array($block, $text), 2) b;" ;;
  one)
    echo "SELECT count(*) FROM (SELECT gen_random_uuid() AS b) g, convo.write_batch('w' || :client_id, $batch, jsonb_build_array($start, $block, $text), 2) b;" ;;
  claim) ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
  esac
} > "$work/script.sql"
declare -A pg
for side in before after; do
  "$bin/pgbench" -n -M prepared -c "$clients" -j "$clients" -t "$per" -f "$work/script.sql" "${url[$side]}" > "$work/$side.out" 2>&1 &
  pg[$side]=$!
done
declare -A last
while kill -0 "${pg[before]}" 2>/dev/null || kill -0 "${pg[after]}" 2>/dev/null; do
  for side in before after; do
    for p in $(pgrep -f "postgres: .* bench_${side}_$$ " || true); do
      if s=$(cat "/proc/$p/stat" 2>/dev/null); then
        s=${s##*) }; set -- $s; last[$side:$p]=$(( ${12} + ${13} ))
      fi
    done
  done
  sleep 0.1
done
wait "${pg[before]}" "${pg[after]}" || true
for side in before after; do
  grep -q "processed: $n/" "$work/$side.out" || { echo "$side: pgbench did not finish"; cat "$work/$side.out"; exit 1; }
  t=0
  for k in "${!last[@]}"; do [[ $k == $side:* ]] && t=$(( t + ${last[$k]} )); done
  lat=$(sed -n 's/latency average = \([0-9.]*\) ms/\1/p' "$work/$side.out")
  # Clock ticks of 10 ms.
  echo "$side: $(awk -v t="$t" -v n="$n" 'BEGIN { printf "%.2f", t * 10 / n }') ms of backend CPU per reply ($mode, $n replies, $clients clients), latency $lat ms"
  "$bin/psql" -AtX "${url[$side]}" -c "SELECT '  prompts: ' || string_agg(s, ', ') FROM (SELECT status || coalesce(' (' || error || ')', '') || ' ' || count(*) AS s FROM convo.prompts GROUP BY status, error) x"
done
