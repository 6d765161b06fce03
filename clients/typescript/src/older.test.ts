import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createConvoClient } from "./client.js";
import { initialState, reduce, type Action, type ConversationState } from "./fold.js";
import { followConversation } from "./follow.js";
import {
  ConversationService,
  SnapshotSchema,
  StreamConversationResponseSchema,
  type ListMessagesRequest,
} from "./gen/convo/v1/conversation_service_pb.js";
import { hasOlder, loadOlder, olderLoader } from "./older.js";
import { FakeServer } from "./testing/fakeServer.js";

/** conversation is a FakeServer with n finished exchanges. */
function conversation(n: number): FakeServer {
  const srv = new FakeServer();
  for (let i = 0; i < n; i++) {
    const { promptIds } = srv.sendMessage(`question ${i}`);
    srv.startPrompt(promptIds[0]);
    srv.append(srv.startBlock(promptIds[0], "text"), `answer ${i}`);
    srv.endPrompt(promptIds[0], "completed");
  }
  return srv;
}

/** clientOf serves srv's StreamConversation (a snapshot of its latest 2 messages, then nothing) and ListMessages, recording the ListMessages requests; gate, when set, holds each answer until it resolves. */
function clientOf(srv: FakeServer, o: { gate?: () => Promise<void>; fail?: boolean } = {}) {
  const requests: ListMessagesRequest[] = [];
  const transport = createRouterTransport(({ service }) => {
    service(ConversationService, {
      async *streamConversation(_req, ctx) {
        const { snapshot } = srv.subscribe(srv.seq, { window: 2 });
        yield create(StreamConversationResponseSchema, { kind: { case: "snapshot", value: create(SnapshotSchema, snapshot) } });
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve()));
      },
      async listMessages(req) {
        requests.push(req);
        await o.gate?.();
        if (o.fail) throw new ConnectError("page token is not a messages page token this server issued", Code.InvalidArgument);
        return srv.listMessages(req.pageToken);
      },
    });
  });
  return { client: createConvoClient({ baseUrl: "http://convo.test", transport }), requests };
}

const bounded = (srv: FakeServer): ConversationState =>
  reduce(initialState("c1"), { type: "snapshot", snapshot: srv.subscribe(srv.seq, { window: 2 }).snapshot });

describe("loadOlder", () => {
  it("asks for the page before the state's first message and returns the action that puts it in place", async () => {
    const srv = conversation(2);
    const { client, requests } = clientOf(srv);
    const s = bounded(srv);
    expect(hasOlder(s)).toBe(true);
    const action = await loadOlder(client, s);
    expect(requests.map((r) => [r.conversationId, r.pageToken])).toEqual([["c1", s.older]]);
    const next = reduce(s, action!);
    expect(next.messageIds).toEqual(srv.getConversation().messages.map((m) => m.id));
    expect(hasOlder(next)).toBe(false);
    // Nothing left: no call.
    expect(await loadOlder(client, next)).toBeNull();
    expect(requests).toHaveLength(1);
  });

  it("rejects with the call's error", async () => {
    const srv = conversation(2);
    const { client } = clientOf(srv, { fail: true });
    await expect(loadOlder(client, bounded(srv))).rejects.toMatchObject({ code: Code.InvalidArgument });
  });
});

describe("olderLoader", () => {
  it("loads one page at a time: a call while a page loads waits for it", async () => {
    const srv = conversation(4);
    let open: () => void = () => {};
    const { client, requests } = clientOf(srv, { gate: () => new Promise<void>((r) => (open = r)) });
    let state = bounded(srv);
    const dispatched: Action[] = [];
    const load = olderLoader(client, () => state, (a) => {
      dispatched.push(a);
      state = reduce(state, a);
    });
    const first = load();
    const second = load();
    expect(second).toBe(first);
    await new Promise((r) => setTimeout(r, 0));
    open();
    await Promise.all([first, second]);
    expect(requests).toHaveLength(1);
    expect(dispatched).toHaveLength(1);
    // The next call asks for the next page.
    const third = load();
    await new Promise((r) => setTimeout(r, 0));
    open();
    await third;
    expect(requests).toHaveLength(2);
    expect(requests[1].pageToken).not.toBe(requests[0].pageToken);
  });

  it("dispatches nothing when the call fails, and a later call tries again", async () => {
    const srv = conversation(2);
    const { client, requests } = clientOf(srv, { fail: true });
    const dispatched: Action[] = [];
    const load = olderLoader(client, () => bounded(srv), (a) => dispatched.push(a));
    await expect(load()).rejects.toBeInstanceOf(ConnectError);
    await expect(load()).rejects.toBeInstanceOf(ConnectError);
    expect(requests).toHaveLength(2);
    expect(dispatched).toEqual([]);
  });
});

describe("followConversation's loadOlder", () => {
  it("pages the older messages into the followed state", async () => {
    const srv = conversation(3);
    const { client } = clientOf(srv);
    const stop = new AbortController();
    const all = srv.getConversation().messages.map((m) => m.id);
    try {
      const it = followConversation(client, "c1", { signal: stop.signal });
      let u = (await it.next()).value!;
      while (u.state.seq === null) u = (await it.next()).value!;
      expect(u.state.messageIds).toEqual(all.slice(-2));
      while (u.state.older !== null) {
        await u.loadOlder();
        u = (await it.next()).value!;
      }
      expect(u.state.messageIds).toEqual(all);
    } finally {
      stop.abort();
    }
  });
});
