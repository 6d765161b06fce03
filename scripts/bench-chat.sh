#!/usr/bin/env bash
# make bench-chat: a chat product's load on convo (cmd/bench --run chat):
# N conversations, each with its own reply of the demo model streaming at
# 40 tokens/s at the same time, each read by one tab (SSE, and Connect
# StreamConversation over HTTP/1.1, measured separately), on cmd/api with
# N in-process workers, on a private PostgreSQL with fsync on (as
# deployed). For each size the peer runs first in the same
# shape when CONVO_PEER_CHAT_RUN names its script ("$CONVO_PEER_CHAT_RUN"
# N 40 400 prints one JSON line), then convo; at the end the table of
# every size and the ratios convo / peer are printed. Without the
# variable, convo alone.
#
# CHAT_ORDER picks how each reply starts: readers-first (each reader
# subscribed before the messages are sent; the peer's reader is its POST's
# response) and/or send-first (each reader subscribes once its send has
# answered, resuming when its stream ends early; the peer's reader is
# READER=resume). CHAT_USERS: one user for every reply, and/or one each.
#
#   CONVO_PEER_CHAT_RUN=/path/to/peer/run.sh make bench-chat
#   CHAT_SIZES="100 1000 2000" (default)  CHAT_VIA=sse,connect (default; or openai:
#   POST /v1/responses, background and streamed, whose answer is the stream)
#   CHAT_ORDER=readers-first,send-first (default readers-first)
#   CHAT_USERS=one,per-reply (default one)
#   CHAT_SERVER_ENV="NAME=value …"  more cmd/api settings (--server-env)
set -euo pipefail
cd "$(dirname "$0")/.."
sizes="${CHAT_SIZES:-100 1000 2000}"
via="${CHAT_VIA:-sse,connect}"
order="${CHAT_ORDER:-readers-first}"
users="${CHAT_USERS:-one}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
go build -o "$work/bench" ./cmd/bench
args=(--run chat --feeds notify --fast=false --chat-via "$via" --chat-order "$order" --chat-users "$users" --chat-tps 40 --timeout 2h)
for kv in ${CHAT_SERVER_ENV:-}; do
  args+=(--server-env "$kv")
done
if [ -z "${CONVO_PEER_CHAT_RUN:-}" ]; then
  echo "CONVO_PEER_CHAT_RUN is not set: measuring convo alone (no ratios)" >&2
fi
: >"$work/peer.jsonl"
: >"$work/convo.jsonl"
for n in $sizes; do
  if [ -n "${CONVO_PEER_CHAT_RUN:-}" ]; then
    case ",$order," in *,readers-first,*)
      echo "== the peer ($CONVO_PEER_CHAT_RUN $n 40 400)" >&2
      READER=post "$CONVO_PEER_CHAT_RUN" "$n" 40 400 | tee -a "$work/peer.jsonl"
    esac
    case ",$order," in *,send-first,*)
      echo "== the peer, resuming (READER=resume $CONVO_PEER_CHAT_RUN $n 40 400)" >&2
      READER=resume "$CONVO_PEER_CHAT_RUN" "$n" 40 400 | tee -a "$work/peer.jsonl"
    esac
  fi
  echo "== convo, $n replies" >&2
  "$work/bench" "${args[@]}" --chat-replies "$n" | tee -a "$work/convo.jsonl"
done
echo "== every size" >&2
report=(--chat-report "$work/convo.jsonl")
if [ -s "$work/peer.jsonl" ]; then
  report+=(--peer-chat-results "$work/peer.jsonl")
fi
"$work/bench" "${report[@]}"
