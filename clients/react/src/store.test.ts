import { BlockSchema, create, EventSchema, MessageSchema } from "@convo/client";
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
