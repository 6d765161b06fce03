#!/usr/bin/env bash
# Stalled readers: the server's RSS while clients that never read hold
# streams of a 10 MB conversation, and after they leave
# (docs/performance.md, "Stalled readers").
#
#   scripts/bench-stalled.sh [BINARY] [VAR=value ...]
#
# BINARY defaults to a fresh build of cmd/api; the VAR=value pairs are
# added to its environment (for example CONVO_SNAPSHOT_BYTES=67108864 to
# serve whole snapshots). The server runs on its embedded PostgreSQL, with
# no workers. 120 raw TCP clients with a 4 KiB receive buffer (60 SSE, 60
# Connect StreamConversation over HTTP/1.1) send their request and never
# read. Needs psql and python3. Takes about three minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${1:-}
if [ -z "$bin" ] || [[ "$bin" == *=* ]]; then
  bin=$(mktemp -d)/convo-api
  go build -o "$bin" ./cmd/api
else
  shift
fi
dir=$(mktemp -d /tmp/convo-stalled.XXXX)
chmod 755 "$dir" # the embedded PostgreSQL may run as another user
env "$@" CONVO_WORKERS=0 CONVO_MAX_STREAMS_PER_USER=1000 CONVO_MAX_STREAMS=1000 DATABASE_URL= \
  "$bin" --http-addr 127.0.0.1:0 --embed-port 0 --data-dir "$dir/pg" >/dev/null 2>"$dir/log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 240); do grep -q 'convo is serving' "$dir/log" && break; sleep 0.5; done
url=$(grep -o ' url=http[^ ]*' "$dir/log" | head -1 | cut -d= -f2)
dsn=$(grep -o 'database_url=[^ ]*' "$dir/log" | head -1 | cut -d= -f2- | tr -d '"')
[ -n "$url" ] && [ -n "$dsn" ] || { echo "the server did not start:" >&2; cat "$dir/log" >&2; exit 1; }

# 100 replies of 100 KB, written through the SQL worker API.
id=$(psql "$dsn" -Atc "SELECT id FROM convo.create_conversation('local', 'stalled')")
for i in $(seq 1 100); do
  psql "$dsn" -qc "DO \$\$ DECLARE p uuid; b uuid; BEGIN
    SELECT s.prompt_ids[1] INTO p FROM convo.send_message('local', '$id', 'question $i', '[{}]') s;
    PERFORM convo.claim_prompt('bench-stalled', 300); PERFORM convo.start_prompt(p);
    b := convo.start_block(p, 'text');
    PERFORM convo.append_block(b, left(repeat('lorem ipsum dolor sit amet $i ', 5000), 100000));
    PERFORM convo.end_block(b); PERFORM convo.complete_prompt(p); END \$\$"
done

rss() { awk '/VmRSS/ { printf "%d MB", $2 / 1024 }' "/proc/$pid/status"; }
open_streams() { ss -tn state established "( sport = :${url##*:} )" | tail -n +2 | wc -l; }
echo "before: RSS $(rss)"
python3 - "$url" "$id" <<'PY' &
import json, socket, struct, sys, time
host, port = sys.argv[1].removeprefix("http://").split(":")
cid = sys.argv[2]
body = json.dumps({"conversationId": cid}).encode()
envelope = b"\0" + struct.pack(">I", len(body)) + body
requests = [
    f"GET /v1/conversations/{cid}/events HTTP/1.1\r\nHost: localhost\r\n\r\n".encode(),
    (f"POST /convo.v1.ConversationService/StreamConversation HTTP/1.1\r\nHost: localhost\r\n"
     f"Content-Type: application/connect+json\r\nContent-Length: {len(envelope)}\r\n\r\n").encode() + envelope,
]
held = []
for _ in range(60):
    for request in requests:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((host, int(port)))
        s.sendall(request)
        held.append(s)
time.sleep(100)
PY
clients=$!
last=0
for t in 5 15 30 45 60 90; do
  sleep $((t - last)); last=$t
  echo "${t}s: RSS $(rss), $(open_streams) streams open"
done
kill $clients; wait $clients 2>/dev/null || true
sleep 5; echo "5 s after the clients left: RSS $(rss)"
sleep 60; echo "65 s after the clients left: RSS $(rss)"
