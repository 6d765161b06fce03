import { describe, expect, it } from "vitest";
import { activeLeaf, initialState, reduce, type ConversationState, type MessageState } from "@convo/client";
import { FakeServer } from "@convo/client/testing";
import { sendRequest } from "../components/ConversationView";
import { afterSend, expectedLeaf, type SentReplies } from "./leaf";

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
  error: "",
  blockIds: [],
});

const stateOf = (...messages: MessageState[]) => ({
  ...initialState("c"),
  seq: 7n,
  messageIds: messages.map((m) => m.id),
  messages: Object.fromEntries(messages.map((m) => [m.id, m])),
});

/** The state of srv's conversation as a tab that has read all of it shows it. */
const fold = (srv: FakeServer): ConversationState => reduce(initialState("c1"), { type: "snapshot", snapshot: srv.getConversation() });

function answer(srv: FakeServer, promptId: string, text = "ok") {
  srv.startPrompt(promptId);
  srv.append(srv.startBlock(promptId, "text"), text);
  srv.endPrompt(promptId, "completed");
}

/**
 * A tab of the web app: its state is what it last read of the
 * conversation (catchUp), and it sends as ConversationView does, naming
 * expectedLeaf as the parent. The server refuses a parent other than its
 * active leaf ("" is no check), as send_message does.
 */
class Tab {
  state: ConversationState;
  sent: SentReplies | null = null;
  constructor(private readonly srv: FakeServer) {
    this.state = fold(srv);
  }
  catchUp() {
    this.state = fold(this.srv);
  }
  /** Sends text; returns the reply's prompt, or throws the refusal. */
  send(text: string): string {
    const parent = expectedLeaf(this.state, this.sent);
    const leaf = activeLeaf(fold(this.srv));
    if (parent !== "" && parent !== leaf) {
      this.sent = null;
      throw new Error(`refused: parentMessageId ${parent} is not the active leaf: the active leaf is now ${leaf || "none"}`);
    }
    const res = this.srv.sendMessage(text);
    this.sent = afterSend(this.state, this.sent, parent, res.messageIds[0]);
    return res.promptIds[0];
  }
}

describe("expectedLeaf", () => {
  it("is the last message the state shows, slot a of a comparison that ends it", () => {
    expect(expectedLeaf(stateOf(message("u1"), message("r1")), null)).toBe("r1");
    expect(expectedLeaf(stateOf(message("u1"), message("ra", "cmp", "a"), message("rb", "cmp", "b")), null)).toBe("ra");
  });

  it("is none before the first snapshot and for a conversation without messages: no check", () => {
    expect(expectedLeaf(initialState("c"), null)).toBe("");
    expect(expectedLeaf(stateOf(), null)).toBe("");
  });

  it("is this tab's last reply until the stream brings it: messages sent fast go each below the one before", () => {
    const srv = new FakeServer();
    answer(srv, srv.sendMessage("zero").promptIds[0]);
    const tab = new Tab(srv);
    for (const text of ["one", "two", "three"]) tab.send(text); // the tab reads nothing meanwhile
    tab.catchUp();
    expect(tab.state.messageIds).toHaveLength(8);
    tab.send("four");
  });

  it("is the leaf the state shows once the stream brought this tab's reply and a change dropped it: a regeneration, an edit, a switch", () => {
    const srv = new FakeServer();
    const tab = new Tab(srv);
    const changes: Array<[string, () => void]> = [
      ["a regeneration", () => answer(srv, srv.regenerate().promptId)],
      ["an edit", () => answer(srv, srv.editMessage(srv.getConversation().messages.at(-2)!.id, "again").promptId)],
      ["a switch back", () => srv.switchTo(srv.getConversation().messages.at(-2)!.id, 0)],
    ];
    answer(srv, tab.send("first"));
    for (const [what, change] of changes) {
      answer(srv, tab.send(`before ${what}`));
      tab.catchUp();
      change(); // in this tab or another: the stream brings it
      tab.catchUp();
      expect(() => answer(srv, tab.send(`after ${what}`)), what).not.toThrow();
    }
  });

  it("is none in a conversation this tab cleared after sending into it empty", () => {
    const srv = new FakeServer();
    const tab = new Tab(srv);
    answer(srv, tab.send("one"));
    tab.catchUp();
    srv.clearHistory();
    tab.catchUp();
    expect(expectedLeaf(tab.state, tab.sent)).toBe("");
    answer(srv, tab.send("two"));
  });

  it("is the leaf the state shows after a refusal", () => {
    const srv = new FakeServer();
    answer(srv, srv.sendMessage("zero").promptIds[0]);
    const tab = new Tab(srv);
    answer(srv, tab.send("one"));
    answer(srv, srv.sendMessage("from another tab").promptIds[0]);
    expect(() => tab.send("two")).toThrow(/refused/);
    tab.catchUp();
    answer(srv, tab.send("two"));
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
