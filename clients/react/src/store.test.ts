import {
  BlockSchema,
  create,
  EventSchema,
  MessageSchema,
  type ConvoClient,
  type ListMessagesRequest,
  type ListMessagesResponse,
} from "@convo/client";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ConversationStore } from "./store.js";

describe("ConversationStore", () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.unstubAllGlobals();
  });

  it("publishes to React at most once per animation frame, however many events arrive", () => {
    vi.useFakeTimers();
    const frames: FrameRequestCallback[] = [];
    vi.stubGlobal("requestAnimationFrame", (cb: FrameRequestCallback) => frames.push(cb));
    const store = new ConversationStore("c1");
    let renders = 0;
    store.subscribe(() => renders++);
    const block = create(BlockSchema, { id: "b1", blockType: "text", status: "streaming", position: 0 });
    store.dispatch({
      type: "snapshot",
      snapshot: { messages: [create(MessageSchema, { id: "m1", role: "assistant", blocks: [] })], seq: 1n },
    });
    store.dispatch({
      type: "event",
      event: create(EventSchema, {
        seq: 2n,
        kind: { case: "blockStart", value: { promptId: "p1", messageId: "m1", blockId: block.id, blockType: "text", position: 0 } },
      }),
    });
    for (let i = 0; i < 100; i++) {
      store.dispatch({
        type: "event",
        event: create(EventSchema, {
          seq: BigInt(3 + i),
          kind: { case: "blockDelta", value: { promptId: "p1", messageId: "m1", blockId: "b1", content: "x" } },
        }),
      });
    }
    expect(renders).toBe(0);
    expect(store.current().blocks.b1.content).toBe("x".repeat(100)); // the stream sees every change at once
    for (const f of frames.splice(0)) f(0);
    expect(renders).toBe(1);
    expect(store.getSnapshot().blocks.b1.content).toBe("x".repeat(100));
    vi.advanceTimersByTime(100); // the hidden-tab timer finds nothing left to publish
    expect(renders).toBe(1);
  });
});

describe("ConversationStore.loadOlder", () => {
  /** A conversation of three messages whose snapshot holds the last one, and a client that answers ListMessages with the two before it. */
  function setup(o: { fail?: boolean } = {}) {
    const requests: ListMessagesRequest[] = [];
    let open: () => void = () => {};
    const message = (id: string) =>
      create(MessageSchema, {
        id,
        role: "user",
        status: "completed",
        blocks: [create(BlockSchema, { id: `b-${id}`, blockType: "text", content: id, status: "completed", position: 0 })],
      });
    // Only the call the store makes.
    const client = {
      async listMessages(req: ListMessagesRequest): Promise<Partial<ListMessagesResponse>> {
        requests.push(req);
        await new Promise<void>((r) => (open = r));
        if (o.fail) throw new Error("no such page");
        return { messages: [message("m1"), message("m2")], nextPageToken: "" };
      },
    } as unknown as ConvoClient;
    const store = new ConversationStore("c1");
    store.dispatch({ type: "snapshot", snapshot: { messages: [message("m3")], seq: 5n, olderPageToken: "t3" } });
    const answer = async () => {
      await vi.waitFor(() => expect(requests.length).toBeGreaterThan(0));
      await new Promise((r) => setTimeout(r, 0));
      open();
    };
    return { client, store, requests, answer };
  }

  it("loads the page before the first message once, however often it is called meanwhile", async () => {
    const { client, store, requests, answer } = setup();
    const first = store.loadOlder(client);
    const second = store.loadOlder(client);
    await answer();
    await Promise.all([first, second]);
    expect(requests.map((r) => [r.conversationId, r.pageToken])).toEqual([["c1", "t3"]]);
    expect(store.current().messageIds).toEqual(["m1", "m2", "m3"]);
    expect(store.current().older).toBeNull();
    // Nothing older: no call.
    await store.loadOlder(client);
    expect(requests).toHaveLength(1);
  });

  it("rejects with the call's error and changes nothing; a later call asks again", async () => {
    const { client, store, requests, answer } = setup({ fail: true });
    const before = store.current();
    const load = store.loadOlder(client);
    await answer();
    await expect(load).rejects.toThrow("no such page");
    expect(store.current()).toBe(before);
    void store.loadOlder(client).catch(() => {});
    expect(requests).toHaveLength(2);
  });
});
