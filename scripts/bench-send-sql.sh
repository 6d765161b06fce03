#!/usr/bin/env bash
# bench-send-sql.sh: what a send costs PostgreSQL, without Go or the
# network (docs/performance.md, "What a send costs"). Run it under withdb,
# which starts a private cluster and migrates a template from this tree:
#
#   go run ./internal/pgtest/withdb -- scripts/bench-send-sql.sh [BEFORE]
#
# Each shape is pgbench (one client, prepared statements) of one statement:
#   new         send_message to a new conversation
#   follow      send_message to a conversation of 2 turns, then the reply ended
#   long        send_message to a conversation of 50 turns, then the reply ended
#   batch-new   send_messages of 10 new conversations (as the server's sender calls it)
#   batch-follow send_messages of 10 follow-ups, then their replies ended
# A follow-up's reply is ended by a plain UPDATE of its prompt (not
# cancel_prompt, whose own cost would swamp the send's), in the same
# transaction's count: compare shapes before and after, not with each other.
#
# With BEFORE (a git ref), a second database gets BEFORE's db/functions
# (CREATE OR REPLACE over this tree's schema, without the indexes this tree
# added since: SEND_BEFORE_DROP, default the index of migration 00040) and
# the two are run alternately, SEND_ROUNDS times (default 5) for
# SEND_SECONDS each (default 4). Printed per run: the load average, the
# transactions, pgbench's latency, and, when perf can attach to the backend,
# its CPU time per transaction (task-clock), which a loaded machine
# disturbs far less than the latency; then per shape and database the least
# and the median CPU time.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CONVO_TEST_ADMIN_URL:?run under go run ./internal/pgtest/withdb --}"
: "${CONVO_TEST_TEMPLATE:?run under go run ./internal/pgtest/withdb --}"
before="${1:-}"
rounds="${SEND_ROUNDS:-5}"
seconds="${SEND_SECONDS:-4}"
drop="${SEND_BEFORE_DROP:-convo.prompts_conversation_active_idx}"
pgbench="$(command -v pgbench || echo /usr/lib/postgresql/15/bin/pgbench)"
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

url() { # the connection string of database $1 on the test server
	local base="${CONVO_TEST_ADMIN_URL%%\?*}" query=""
	[[ "$CONVO_TEST_ADMIN_URL" == *\?* ]] && query="?${CONVO_TEST_ADMIN_URL#*\?}"
	echo "${base%/*}/$1$query"
}

cat > "$work/setup.sql" <<'EOF'
CREATE TABLE bench_convs (u int PRIMARY KEY, id uuid);
INSERT INTO bench_convs SELECT u, (SELECT s.conversation_id FROM convo.send_message('f' || u, NULL, 'first question', '[{}]', NULL, '{}') s)
  FROM generate_series(1, 400) u;
CREATE TABLE bench_long (u int PRIMARY KEY, id uuid);
INSERT INTO bench_long SELECT u, (SELECT s.conversation_id FROM convo.send_message('l' || u, NULL, 'first question', '[{}]', NULL, '{}') s)
  FROM generate_series(1, 100) u;
UPDATE convo.prompts SET status = 'completed', ended_at = now() WHERE status = 'queued';
DO $$
BEGIN
  FOR t IN 1 .. 49 LOOP
    PERFORM convo.send_message('l' || b.u, b.id, 'another question of some length', '[{}]', NULL, '{}') FROM bench_long b;
    UPDATE convo.prompts SET status = 'completed', ended_at = now() WHERE status = 'queued';
  END LOOP;
END $$;
VACUUM ANALYZE;
EOF
cat > "$work/new.sql" <<'EOF'
\set u random(1, 200)
SELECT convo.send_message('user' || :u, NULL, 'hello there, a question of some length', '[{}]', NULL, '{}');
EOF
cat > "$work/follow.sql" <<'EOF'
\set u random(1, 200)
SELECT s.prompt_ids[1] AS p FROM convo.send_message('f' || :u, (SELECT b.id FROM bench_convs b WHERE b.u = :u), 'hello there, a question of some length', '[{}]', NULL, '{}') s \gset
UPDATE convo.prompts SET status = 'completed', ended_at = now() WHERE id = :p::uuid;
EOF
cat > "$work/long.sql" <<'EOF'
\set u random(1, 100)
SELECT s.prompt_ids[1] AS p FROM convo.send_message('l' || :u, (SELECT b.id FROM bench_long b WHERE b.u = :u), 'hello there, a question of some length', '[{}]', NULL, '{}') s \gset
UPDATE convo.prompts SET status = 'completed', ended_at = now() WHERE id = :p::uuid;
EOF
cat > "$work/batch-new.sql" <<'EOF'
\set u random(0, 1000000)
SELECT count(*) FROM convo.send_messages((SELECT array_agg('m' || (:u * 10 + i)) FROM generate_series(1, 10) i), array_fill(NULL::uuid, ARRAY[10]), array_fill('hello there, a question of some length'::text, ARRAY[10]), array_fill('[{"model":"demo"}]'::text, ARRAY[10]), array_fill(NULL::uuid, ARRAY[10]), array_fill('{}'::text, ARRAY[10]), array_fill(''::text, ARRAY[10]), array_fill(''::text, ARRAY[10])) s WHERE s.error_code IS NULL;
EOF
cat > "$work/batch-follow.sql" <<'EOF'
\set u random(0, 19)
SELECT array_agg(p) AS ps FROM (SELECT unnest(s.prompt_ids) p FROM convo.send_messages((SELECT array_agg('f' || (:u * 10 + i) ORDER BY i) FROM generate_series(201, 210) i), (SELECT array_agg(b.id ORDER BY b.u) FROM bench_convs b WHERE b.u BETWEEN 201 + :u * 10 AND 210 + :u * 10), array_fill('hello there, a question of some length'::text, ARRAY[10]), array_fill('[{"model":"demo"}]'::text, ARRAY[10]), array_fill(NULL::uuid, ARRAY[10]), array_fill('{}'::text, ARRAY[10]), array_fill(''::text, ARRAY[10]), array_fill(''::text, ARRAY[10])) s) x \gset
UPDATE convo.prompts SET status = 'completed', ended_at = now() WHERE id = ANY (:ps::uuid[]);
EOF

make_db() { # make_db NAME [REF]
	psql -q "$CONVO_TEST_ADMIN_URL" -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1 TEMPLATE $CONVO_TEST_TEMPLATE"
	if [ -n "${2:-}" ]; then
		{
			echo "BEGIN;"
			[ -n "$drop" ] && echo "DROP INDEX IF EXISTS $drop;"
			for f in $(sed -n '/^var FunctionFiles/,/^}/p' db/migrate.go | grep -o '"[a-z_]*\.sql"' | tr -d '"'); do
				git show "$2:db/functions/$f"
				echo
			done
			echo "COMMIT;"
		} > "$work/functions.sql"
		psql -q -v ON_ERROR_STOP=1 "$(url "$1")" -f "$work/functions.sql" > /dev/null
	fi
	psql -q -v ON_ERROR_STOP=1 "$(url "$1")" -f "$work/setup.sql" > /dev/null
}

dbs=(send_after)
make_db send_after
if [ -n "$before" ]; then
	make_db send_before "$before"
	dbs=(send_before send_after)
fi

for shape in new follow long batch-new batch-follow; do
	: > "$work/runs"
	for _ in $(seq "$rounds"); do
		for db in "${dbs[@]}"; do
			app="bench_send_$$"
			PGAPPNAME=$app "$pgbench" -n -M prepared -c 1 -T "$seconds" -r -f "$work/$shape.sql" "$(url "$db")" > "$work/out" 2>&1 &
			bench=$!
			cpu=""
			if command -v perf > /dev/null; then
				pid=""
				for _ in $(seq 100); do
					pid=$(psql -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = '$app'" "$CONVO_TEST_ADMIN_URL")
					[ -n "$pid" ] && break
					sleep 0.02
				done
				[ -n "$pid" ] && cpu=$(perf stat -e task-clock -x, -p "$pid" 2>&1 | grep task-clock | cut -d, -f1 || true)
			fi
			wait "$bench"
			n=$(sed -n 's/number of transactions actually processed: //p' "$work/out")
			lat=$(sed -n 's/latency average = //p' "$work/out")
			per=""
			[ -n "$cpu" ] && [ "${n:-0}" -gt 0 ] && per=$(awk -v c="$cpu" -v n="$n" 'BEGIN { printf "%.3f", c / n }')
			echo "$shape $db load $(cut -d' ' -f1 /proc/loadavg) transactions $n latency $lat cpu_ms_per_transaction ${per:-n/a}"
			echo "$db ${per:-}" >> "$work/runs"
		done
	done
	for db in "${dbs[@]}"; do
		awk -v db="$db" '$1 == db && $2 != "" { print $2 }' "$work/runs" | sort -n |
			awk -v db="$db" -v shape="$shape" '{ c[NR] = $1 } END { if (NR) printf "%s %s: cpu ms per transaction least %.3f, median %.3f (%d runs)\n", shape, db, c[1], c[int((NR + 1) / 2)], NR }'
	done
done
