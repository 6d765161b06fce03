import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createConvoClient } from "./client.js";
import { backoffDelay, followConversation, type FollowUpdate } from "./follow.js";
import {
  ConversationService,
  SnapshotSchema,
  StreamConversationResponseSchema,
  type StreamConversationRequest,
  type StreamConversationResponse,
} from "./gen/convo/v1/conversation_service_pb.js";
import { EventSchema, type Event } from "./gen/convo/v1/events_pb.js";
import { FakeServer } from "./testing/fakeServer.js";

describe("backoffDelay", () => {
  it("doubles from the initial delay up to the cap, with jitter between half and all of it", () => {
    const lo = () => 0;
    const hi = () => 0.999999;
    expect([0, 1, 2, 3].map((n) => backoffDelay(n, 500, 10_000, hi))).toEqual([500, 1000, 2000, 4000]);
    expect(backoffDelay(0, 500, 10_000, lo)).toBe(250);
    expect(backoffDelay(10, 500, 10_000, hi)).toBe(10_000);
    expect(backoffDelay(50, 500, 10_000, lo)).toBe(5_000);
  });
});

const snapshotMsg = (srv: FakeServer, seq: bigint): StreamConversationResponse[] => {
  const { snapshot, replay } = srv.subscribe(seq);
  return [
    create(StreamConversationResponseSchema, {
      kind: { case: "snapshot", value: create(SnapshotSchema, { messages: snapshot.messages, seq: snapshot.seq }) },
    }),
    ...replay.map((e) => eventMsg(e)),
  ];
};
const eventMsg = (event: Event) => create(StreamConversationResponseSchema, { kind: { case: "event", value: event } });

/** A reply written in steps, so that streams can be cut between them. */
function replyScript(srv: FakeServer) {
  const { promptIds } = srv.sendMessage("Hello?");
  const p = promptIds[0];
  srv.startPrompt(p);
  const t = srv.startBlock(p, "text");
  return { p, t };
}

type Attempt = (req: StreamConversationRequest, signal: AbortSignal) => AsyncIterable<StreamConversationResponse>;

/** clientWith serves StreamConversation attempt by attempt, recording the requests. */
function clientWith(attempts: Attempt[]) {
  const requests: StreamConversationRequest[] = [];
  const released: boolean[] = [];
  const transport = createRouterTransport(({ service }) => {
    service(ConversationService, {
      async *streamConversation(req, ctx) {
        const i = requests.length;
        requests.push(req);
        released.push(false);
        ctx.signal.addEventListener("abort", () => (released[i] = true));
        const attempt = attempts[Math.min(i, attempts.length - 1)];
        yield* attempt(req, ctx.signal);
      },
    });
  });
  return { client: createConvoClient({ baseUrl: "http://convo.test", transport }), requests, released };
}

async function until(it: AsyncGenerator<FollowUpdate>, done: (u: FollowUpdate) => boolean): Promise<FollowUpdate> {
  for (;;) {
    const r = await it.next();
    if (r.done) throw new Error("followConversation ended");
    if (done(r.value)) return r.value;
  }
}

const waitAbort = (signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve());
  });

const textOf = (u: FollowUpdate, blockId: string) => u.state.blocks[blockId]?.content;

describe("followConversation", () => {
  it("folds a snapshot and live events, and ends when its signal aborts, releasing the server's stream", async () => {
    const srv = new FakeServer("c1");
    const { t } = replyScript(srv);
    srv.append(t, "Hi ");
    const at = srv.seq;
    srv.append(t, "there.");
    const { client, requests, released } = clientWith([
      async function* (_req, signal) {
        yield* snapshotMsg(srv, at);
        for (const e of srv.eventsAfter(at)) yield eventMsg(e);
        await waitAbort(signal);
      },
    ]);
    const ctl = new AbortController();
    const it = followConversation(client, "c1", { signal: ctl.signal });
    const u = await until(it, (u) => textOf(u, t) === "Hi there.");
    expect(u.status).toBe("live");
    expect(requests[0].afterSeq).toBeUndefined();
    ctl.abort();
    expect((await it.next()).done).toBe(true);
    await new Promise((r) => setTimeout(r, 10));
    expect(released[0]).toBe(true);
  });

  it("resumes after a drop with afterSeq = the last applied seq: nothing lost, nothing twice", async () => {
    const srv = new FakeServer("c1");
    const { t } = replyScript(srv);
    srv.append(t, "one ");
    const first = srv.seq;
    srv.append(t, "two ");
    const cut = srv.seq;
    srv.append(t, "three.");
    const { client, requests } = clientWith([
      async function* () {
        yield* snapshotMsg(srv, first);
        for (const e of srv.eventsAfter(first).filter((e) => e.seq <= cut)) yield eventMsg(e);
        throw new ConnectError("server is shutting down; reconnect and resume", Code.Unavailable);
      },
      async function* (req, signal) {
        for (const e of srv.eventsAfter(req.afterSeq ?? 0n)) yield eventMsg(e);
        await waitAbort(signal);
      },
    ]);
    const ctl = new AbortController();
    const it = followConversation(client, "c1", { signal: ctl.signal, initialBackoffMs: 1, maxBackoffMs: 2 });
    const u = await until(it, (u) => textOf(u, t) === "one two three.");
    expect(requests.map((r) => r.afterSeq)).toEqual([undefined, cut]);
    expect(u.state.seq).toBe(srv.seq);
    ctl.abort();
  });

  it("a stream cut between a snapshot and its replay starts over from a snapshot: no block loses its beginning", async () => {
    const srv = new FakeServer("c1");
    const { t } = replyScript(srv);
    srv.append(t, "one ");
    const at = srv.seq;
    srv.append(t, "two.");
    const { client, requests } = clientWith([
      async function* () {
        // The snapshot, then the cut: the replay of the streaming block never comes.
        yield snapshotMsg(srv, at)[0];
        throw new ConnectError("connection reset", Code.Unavailable);
      },
      async function* (req, signal) {
        const from = req.afterSeq ?? srv.seq;
        if (req.afterSeq === undefined) yield* snapshotMsg(srv, from);
        for (const e of srv.eventsAfter(from)) yield eventMsg(e);
        await waitAbort(signal);
      },
    ]);
    const ctl = new AbortController();
    const it = followConversation(client, "c1", { signal: ctl.signal, initialBackoffMs: 1, maxBackoffMs: 2 });
    const u = await until(it, (u) => textOf(u, t) === "one two.");
    expect(requests[1].afterSeq).toBeUndefined(); // not afterSeq = the snapshot's seq
    expect(textOf(u, t)).toBe("one two.");
    ctl.abort();
  });

  it("starts over from a snapshot when an event contradicts the state", async () => {
    const srv = new FakeServer("c1");
    const { t } = replyScript(srv);
    srv.append(t, "text");
    const { client, requests } = clientWith([
      async function* () {
        yield* snapshotMsg(srv, srv.seq);
        yield eventMsg(
          create(EventSchema, {
            seq: srv.seq + 1n,
            kind: { case: "blockDelta", value: { promptId: "p", messageId: "m", blockId: "unknown-block", content: "?" } },
          }),
        );
      },
      async function* (_req, signal) {
        yield* snapshotMsg(srv, srv.seq);
        await waitAbort(signal);
      },
    ]);
    const ctl = new AbortController();
    const it = followConversation(client, "c1", { signal: ctl.signal, initialBackoffMs: 1, maxBackoffMs: 2 });
    const u = await until(it, (u) => requests.length === 2 && !u.state.desync && textOf(u, t) === "text");
    expect(requests[1].afterSeq).toBeUndefined(); // a fresh snapshot, not a resume
    expect(u.state.blocks["unknown-block"]).toBeUndefined();
    ctl.abort();
  });

  it("stops with status unauthenticated instead of retrying", async () => {
    const { client, requests } = clientWith([
      // eslint-disable-next-line require-yield
      async function* () {
        throw new ConnectError("missing bearer token", Code.Unauthenticated);
      },
    ]);
    const updates: FollowUpdate[] = [];
    for await (const u of followConversation(client, "c1", { initialBackoffMs: 1, maxBackoffMs: 2 })) updates.push(u);
    expect(updates.at(-1)?.status).toBe("unauthenticated");
    expect(requests.length).toBe(1);
  });
});
