// A mock ConversationService for looking at the UI without a server
// (`npm run dev:mock`). It is never part of a production build nor of the
// tests: it only lets a developer see streaming, tool calls and A/B replies.

import { create } from "@bufbuild/protobuf";
import { timestampFromMs, timestampNow } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createRouterTransport, type Transport } from "@connectrpc/connect";
import {
  ConversationService,
  StreamConversationResponseSchema,
  type StreamConversationResponse,
} from "@convo/client";
import { ConversationSchema, Rating, ShareSchema } from "@convo/client";
import type { Event, Share } from "@convo/client";
import { FakeServer } from "@convo/client/testing";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Conv {
  srv: FakeServer;
  title: string;
  created: number;
  last: number;
  listeners: Set<(ev: Event) => void>;
  cancelled: Set<string>;
  feedback: Map<string, Rating>;
}

const convs = new Map<string, Conv>();
let nextConv = 1;

/** The mock's share links by token (the server keeps only hashes; the mock need not). */
interface MockShare {
  token: string;
  share: Share;
}
const shares: MockShare[] = [];

function shareByToken(token: string): { s: MockShare; c: Conv } {
  const s = shares.find((x) => x.token === token && !x.share.revokedAt);
  const c = s && convs.get(s.share.conversationId);
  if (!s || !c) throw new ConnectError("share does not exist", Code.NotFound);
  return { s, c };
}

/** sharedState is what a share shows: the mock shows the active path, as a live share does. */
function sharedState(s: MockShare, c: Conv) {
  const { messages, seq } = c.srv.getConversation();
  return { share: s.share, conversation: conversationOf(s.share.conversationId, c), messages, seq, older: false };
}

function newConv(): [string, Conv] {
  const id = `conv${nextConv++}`;
  const c: Conv = {
    srv: new FakeServer(id),
    title: "",
    created: Date.now(),
    last: Date.now(),
    listeners: new Set(),
    cancelled: new Set(),
    feedback: new Map(),
  };
  c.srv.onEmit = (ev) => c.listeners.forEach((l) => l(ev));
  convs.set(id, c);
  return [id, c];
}

function get(id: string): Conv {
  const c = convs.get(id);
  if (!c) throw new ConnectError("conversation not found", Code.NotFound);
  return c;
}

const answer = `Here is what I found:

- **Paris**: 18 °C and sunny
- **Berlin**: 12 °C, light rain

| city | °C |
|------|----|
| Paris | 18 |
| Berlin | 12 |

\`\`\`python
print("hello from convo")
\`\`\`

<script>alert("this must show as text")</script> and a [bad link](javascript:alert(1)).`;

async function play(c: Conv, promptId: string, variant: string) {
  const s = c.srv;
  const alive = () => !c.cancelled.has(promptId);
  await sleep(400);
  if (!alive()) return;
  s.startPrompt(promptId);
  const r = s.startBlock(promptId, "reasoning");
  for (const w of "The user asks about the weather. I should call the weather tool for both cities, then summarise.".split(" ")) {
    if (!alive()) return;
    s.append(r, w + " ");
    await sleep(40);
  }
  s.endBlock(r);
  const tu = s.startBlock(promptId, "tool_use");
  s.startToolCall(tu, "get_weather", { cities: ["Paris", "Berlin"], units: "metric" });
  for (const line of ["resolving cities…\n", "GET /v1/weather?q=Paris\n", "GET /v1/weather?q=Berlin\n", "done\n"]) {
    await sleep(350);
    if (!alive()) return;
    s.toolProgress(tu, line);
  }
  s.completeToolCall(tu);
  s.endBlock(tu);
  const tr = s.startBlock(promptId, "tool_result", { name: "get_weather" });
  s.append(tr, JSON.stringify({ Paris: { c: 18, sky: "sunny" }, Berlin: { c: 12, sky: "rain" } }));
  s.endBlock(tr);
  const st = s.startBlock(promptId, "structured");
  s.append(st, '{"summary":"mild","cities":2,"ok":true}');
  s.endBlock(st);
  const t = s.startBlock(promptId, "text");
  const text = variant ? `(${variant}) ${answer}` : answer;
  for (let i = 0; i < text.length; i += 4) {
    if (!alive()) return;
    s.append(t, text.slice(i, i + 4));
    await sleep(25);
  }
  s.endBlock(t);
  s.endPrompt(promptId, "completed");
}

function conversationOf(id: string, c: Conv) {
  const cur = c.srv.getConversation().conversation!;
  return create(ConversationSchema, {
    id,
    title: c.title || cur.title,
    activePromptId: cur.activePromptId,
    createdAt: timestampNow(),
    lastMessageAt: { seconds: BigInt(Math.floor(c.last / 1000)), nanos: 0 },
  });
}

export function mockTransport(): Transport {
  return createRouterTransport(({ service }) => {
    service(ConversationService, {
      async sendMessage(req) {
        let id = req.conversationId;
        let c: Conv;
        if (id) c = get(id);
        else [id, c] = newConv();
        c.last = Date.now();
        const cmp = req.compareModel ? { id: `cmp-${id}-${c.srv.seq}`, slots: ["a", "b"] } : undefined;
        const { messageIds, promptIds } = c.srv.sendMessage(req.text, cmp);
        promptIds.forEach((p, i) => void play(c, p, cmp ? `model ${cmp.slots[i].toUpperCase()}` : ""));
        return {
          conversationId: id,
          userMessageId: "",
          assistantMessageId: messageIds[0],
          promptId: promptIds[0],
          comparisonId: cmp?.id ?? "",
          compareAssistantMessageId: messageIds[1] ?? "",
          comparePromptId: promptIds[1] ?? "",
        };
      },
      async *streamConversation(req, ctx) {
        const c = get(req.conversationId);
        const queue: StreamConversationResponse[] = [];
        let wake: (() => void) | null = null;
        const push = (r: StreamConversationResponse) => {
          queue.push(r);
          wake?.();
        };
        const listener = (event: Event) => push(create(StreamConversationResponseSchema, { kind: { case: "event", value: event } }));
        c.listeners.add(listener);
        try {
          if (req.afterSeq !== undefined && req.afterSeq <= c.srv.seq) {
            for (const event of c.srv.eventsAfter(req.afterSeq)) yield { kind: { case: "event", value: event } };
          } else {
            const { snapshot, replay } = c.srv.subscribe();
            yield { kind: { case: "snapshot", value: { ...snapshot, conversation: conversationOf(req.conversationId, c) } } };
            for (const event of replay) yield { kind: { case: "event", value: event } };
          }
          while (!ctx.signal.aborted) {
            while (queue.length) yield queue.shift()!;
            await new Promise<void>((r) => {
              wake = r;
              ctx.signal.addEventListener("abort", () => r(), { once: true });
            });
            wake = null;
          }
        } finally {
          c.listeners.delete(listener);
        }
      },
      async getConversation(req) {
        const c = get(req.conversationId);
        return { ...c.srv.getConversation(), conversation: conversationOf(req.conversationId, c) };
      },
      async listConversations() {
        const conversations = [...convs.entries()].sort((a, b) => b[1].last - a[1].last).map(([id, c]) => conversationOf(id, c));
        return { conversations, nextPageToken: "" };
      },
      async cancelPrompt(req) {
        for (const c of convs.values()) {
          if (c.srv.getConversation().messages.some((m) => m.promptId === req.promptId)) {
            c.cancelled.add(req.promptId);
            c.srv.endPrompt(req.promptId, "cancelled");
          }
        }
        return { cancelled: true };
      },
      async createConversation() {
        const [id, c] = newConv();
        return { conversation: conversationOf(id, c) };
      },
      async renameConversation(req) {
        const c = get(req.conversationId);
        c.title = req.title;
        return { conversation: conversationOf(req.conversationId, c) };
      },
      async deleteConversation(req) {
        convs.delete(req.conversationId);
        return {};
      },
      async clearConversation(req) {
        const c = get(req.conversationId);
        c.srv.clearHistory();
        return { conversation: conversationOf(req.conversationId, c) };
      },
      // One user, the owner: no members, nobody else here.
      async listMembers(req) {
        get(req.conversationId);
        return { members: [{ userId: "local", role: "owner" }] };
      },
      async setTyping() {
        return {};
      },
      // Share links: made, listed and revoked; read by token (the active
      // path, live), the stream sending the whole state on every event.
      async createShare(req) {
        get(req.conversationId);
        const token = `mock-${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
        const share = create(ShareSchema, {
          id: `share${shares.length + 1}`,
          conversationId: req.conversationId,
          createdBy: "local",
          mode: req.mode || "live",
          includeTools: req.includeTools,
          expiresAt: req.expiresAt,
          createdAt: timestampNow(),
        });
        shares.unshift({ token, share });
        return { share, token };
      },
      async listShares(req) {
        return { shares: shares.filter((s) => s.share.conversationId === req.conversationId).map((s) => s.share) };
      },
      async revokeShare(req) {
        const s = shares.find((x) => x.share.id === req.shareId);
        if (!s) throw new ConnectError("share not found", Code.NotFound);
        s.share.revokedAt ??= timestampNow();
        return { share: s.share };
      },
      async getSharedConversation(req) {
        const { s, c } = shareByToken(req.token);
        return sharedState(s, c);
      },
      async *streamSharedConversation(req, ctx) {
        const { s, c } = shareByToken(req.token);
        let changed = true;
        let wake: (() => void) | null = null;
        const listener = () => {
          changed = true;
          wake?.();
        };
        c.listeners.add(listener);
        try {
          while (!ctx.signal.aborted) {
            if (s.share.revokedAt) throw new ConnectError("share does not exist", Code.NotFound);
            if (changed) {
              changed = false;
              yield { state: sharedState(s, c) };
            }
            await new Promise<void>((r) => {
              wake = r;
              setTimeout(r, 200);
              ctx.signal.addEventListener("abort", () => r(), { once: true });
            });
            wake = null;
          }
        } finally {
          c.listeners.delete(listener);
        }
      },
      async submitFeedback(req) {
        for (const c of convs.values()) c.feedback.set(req.messageId, req.rating);
        return {};
      },
      async voteComparison(req) {
        return { comparison: { id: req.comparisonId, preference: req.preference } };
      },
      async getServerInfo() {
        // The mock answers as the demo model does.
        return { demoModel: true };
      },
      async listComparisons() {
        return { comparisons: [], nextPageToken: "" };
      },
      async getTrace(req) {
        const messageId = req.target.case === "messageId" ? req.target.value : "";
        for (const c of convs.values()) {
          const events = c.srv.log.filter((e) => {
            const v = e.kind.value as { messageId?: string; message?: { id: string }; prompt?: { messageId: string } };
            return v.messageId === messageId || v.message?.id === messageId || v.prompt?.messageId === messageId;
          });
          if (events.length) {
            const t0 = Date.now() - events.length * 40;
            return {
              trace: {
                prompt: { id: "p-demo", messageId, status: "completed", modelConfig: { provider: "demo" } },
                duration: { seconds: 3n, nanos: 250_000_000 },
                queueTime: { seconds: 0n, nanos: 400_000_000 },
                events: events.map((e, i) => ({ ...e, createdAt: timestampFromMs(t0 + i * 40) })),
              },
            };
          }
        }
        throw new ConnectError("no trace", Code.NotFound);
      },
      async searchMessages(req) {
        const q = req.query.toLowerCase();
        const results = [];
        for (const [id, c] of convs) {
          for (const m of c.srv.getConversation().messages) {
            const text = m.blocks.filter((b) => b.blockType === "text").map((b) => b.content).join(" ");
            const at = text.toLowerCase().indexOf(q);
            if (at < 0) continue;
            const start = Math.max(0, at - 30);
            const snippet = text.slice(start, at + q.length + 40);
            const s = Array.from(text.slice(start, at)).length;
            results.push({
              conversationId: id,
              conversationTitle: c.title || c.srv.getConversation().conversation!.title,
              messageId: m.id,
              role: m.role,
              snippet,
              highlights: [{ start: s, end: s + Array.from(q).length }],
            });
          }
        }
        return { results };
      },
    });
  });
}
