import { describe, expect, it } from "vitest";
import { initialState, type MessageState } from "@convo/client";
import { groupMessages } from "./groupMessages";

const message = (id: string, comparisonId = "", slot = ""): MessageState => ({
  id,
  role: comparisonId ? "assistant" : "user",
  status: "completed",
  promptId: comparisonId ? `p-${id}` : "",
  comparisonId,
  comparisonSlot: slot,
  parentId: "",
  siblingCount: 1,
  siblingIndex: 0,
  error: "",
  blockIds: [],
});

const stateOf = (...messages: MessageState[]) => ({
  ...initialState("c"),
  messageIds: messages.map((m) => m.id),
  messages: Object.fromEntries(messages.map((m) => [m.id, m])),
});

describe("groupMessages", () => {
  it("keeps single messages in order", () => {
    const items = groupMessages(stateOf(message("u1"), message("u2")));
    expect(items.map((i) => (i.kind === "message" ? i.message.id : i.comparisonId))).toEqual(["u1", "u2"]);
  });

  it("shows a comparison once, where its first reply is, sides by slot", () => {
    const items = groupMessages(
      stateOf(message("u1"), message("b1", "cmp1", "b"), message("a1", "cmp1", "a"), message("u2")),
    );
    expect(items).toHaveLength(3);
    expect(items[0]).toMatchObject({ kind: "message", message: { id: "u1" } });
    expect(items[1]).toMatchObject({ kind: "comparison", comparisonId: "cmp1" });
    const sides = items[1].kind === "comparison" ? items[1].sides.map((s) => s.id) : [];
    expect(sides).toEqual(["a1", "b1"]);
    expect(items[2]).toMatchObject({ kind: "message", message: { id: "u2" } });
  });

  it("keeps two comparisons apart", () => {
    const items = groupMessages(
      stateOf(message("a1", "x", "a"), message("b1", "x", "b"), message("a2", "y", "a"), message("b2", "y", "b")),
    );
    expect(items.map((i) => (i.kind === "comparison" ? i.comparisonId : "?"))).toEqual(["x", "y"]);
  });
});
