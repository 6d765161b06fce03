import { describe, expect, it } from "vitest";
import { initialState, type MessageState } from "@convo/client";
import { sendRequest } from "../components/ConversationView";
import { SentLeaf, expectedLeaf } from "./leaf";

const message = (id: string, comparisonId = "", slot = ""): MessageState => ({
  id,
  role: id.startsWith("u") ? "user" : "assistant",
  status: "completed",
  promptId: "",
  comparisonId,
  comparisonSlot: slot,
  parentId: "",
  siblingCount: 1,
  siblingIndex: 0,
  blockIds: [],
});

const stateOf = (...messages: MessageState[]) => ({
  ...initialState("c"),
  seq: 7n,
  messageIds: messages.map((m) => m.id),
  messages: Object.fromEntries(messages.map((m) => [m.id, m])),
});

describe("expectedLeaf", () => {
  it("is the last message the state shows, slot a of a comparison that ends it", () => {
    expect(expectedLeaf(stateOf(message("u1"), message("r1")), null)).toBe("r1");
    expect(expectedLeaf(stateOf(message("u1"), message("ra", "cmp", "a"), message("rb", "cmp", "b")), null)).toBe("ra");
  });

  it("is none before the first snapshot and for a conversation without messages: no check", () => {
    expect(expectedLeaf(initialState("c"), null)).toBe("");
    expect(expectedLeaf(stateOf(), null)).toBe("");
  });

  it("is this tab's last reply until the stream brings it", () => {
    const before = stateOf(message("u1"), message("r1"));
    expect(expectedLeaf(before, "r2")).toBe("r2");
    const after = stateOf(message("u1"), message("r1"), message("u2"), message("r2"), message("u3"), message("r3"));
    expect(expectedLeaf(after, "r2")).toBe("r3");
  });
});

describe("SentLeaf", () => {
  it("names this tab's reply until the state holds it, then the state's leaf: a regeneration, an edit, a switch or a clear after it", () => {
    const u1 = message("u1");
    const r1 = message("r1");
    const u2 = message("u2");
    const r2 = message("r2");
    for (const [what, after] of [
      ["a regeneration of the reply", stateOf(u1, r1, u2, message("r2b"))],
      ["an edit of the message", stateOf(u1, r1, message("u2b"), message("r2c"))],
      ["a switch to another version", stateOf(u1, message("r1b"))],
      ["a clear", stateOf()],
    ] as const) {
      const leaf = new SentLeaf();
      const before = stateOf(u1, r1);
      expect(leaf.parent(before), what).toBe("r1");
      leaf.replied(before, "r2");
      expect(leaf.parent(before), what).toBe("r2"); // sent again before the stream brings it
      leaf.observe(stateOf(u1, r1, u2, r2));
      const want = after.messageIds.length ? after.messageIds[after.messageIds.length - 1] : "";
      expect(leaf.parent(after), what).toBe(want);
    }
  });

  it("forgets a reply the state already held when the send answered, and one the server refused", () => {
    const held = stateOf(message("u1"), message("r1"));
    const leaf = new SentLeaf();
    leaf.replied(held, "r1");
    expect(leaf.parent(stateOf(message("u1"), message("r1b")))).toBe("r1b");
    leaf.replied(stateOf(), "r9");
    leaf.refused();
    expect(leaf.parent(held)).toBe("r1");
  });
});

describe("sendRequest", () => {
  it("names the leaf the tab shows as the message's parent", () => {
    const req = sendRequest("c", { text: "hi" }, "r1");
    expect([req.conversationId, req.text, req.parentMessageId]).toEqual(["c", "hi", "r1"]);
    expect(sendRequest("", { text: "first" }).parentMessageId).toBe("");
    const ab = sendRequest("c", { text: "pick", compare: { modelA: "x", modelB: "y" } }, "r1");
    expect([ab.model?.model, ab.compareModel?.model, ab.parentMessageId]).toEqual(["x", "y", "r1"]);
  });
});
