// SendMessage's parentMessageId (docs/branches.md "Sending below the leaf
// a client shows"): the leaf a folded state shows, sent with the message,
// and the refusal when another tab moved the conversation on.

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createConvoClient, errorMessage, isLeafMoved, isReplyInProgress, sendMessage } from "./client.js";
import { activeLeaf, initialState, reduce, type ConversationState } from "./fold.js";
import { ConversationService, SendMessageResponseSchema, type SendMessageRequest } from "./gen/convo/v1/conversation_service_pb.js";
import { FakeServer } from "./testing/fakeServer.js";

const fold = (srv: FakeServer): ConversationState =>
  reduce(initialState("c1"), { type: "snapshot", snapshot: srv.getConversation() });

function answer(srv: FakeServer, promptId: string, text: string) {
  srv.startPrompt(promptId);
  srv.append(srv.startBlock(promptId, "text"), text);
  srv.endPrompt(promptId, "completed");
}

/** The parent the server gave the latest user message. */
const lastUserParent = (srv: FakeServer) =>
  srv
    .getConversation()
    .messages.filter((m) => m.role === "user")
    .at(-1)!.parentId;

describe("activeLeaf", () => {
  it("is none before the first snapshot and for a conversation without messages", () => {
    expect(activeLeaf(initialState("c1"))).toBe("");
    expect(activeLeaf(fold(new FakeServer()))).toBe("");
  });

  it("is the parent the server gives the next message, after sends, a comparison, an edit and switches", () => {
    const srv = new FakeServer();
    const steps: Array<() => void> = [
      () => answer(srv, srv.sendMessage("one").promptIds[0], "re: one"),
      () => {
        const ab = srv.sendMessage("pick", { id: "cmp1", slots: ["a", "b"] });
        answer(srv, ab.promptIds[0], "A");
        answer(srv, ab.promptIds[1], "B");
      },
      () => answer(srv, srv.editMessage(srv.getConversation().messages[0].id, "uno").promptId, "re: uno"),
      () => srv.switchTo(srv.getConversation().messages[0].id, 0),
      () => answer(srv, srv.regenerate().promptId, "encore"),
    ];
    for (const step of steps) {
      step();
      const shown = activeLeaf(fold(srv));
      expect(shown).not.toBe("");
      answer(srv, srv.sendMessage("next").promptIds[0], "re: next");
      expect(lastUserParent(srv)).toBe(shown);
    }
  });

  it("is slot a of a comparison that ends the path", () => {
    const srv = new FakeServer();
    const ab = srv.sendMessage("pick", { id: "cmp1", slots: ["a", "b"] });
    const s = fold(srv);
    expect(s.messageIds.at(-1)).toBe(ab.messageIds[1]);
    expect(activeLeaf(s)).toBe(ab.messageIds[0]);
  });

  it("is slot b when the window holds only it (slot a did not fit), which the server takes for the pair", () => {
    const srv = new FakeServer();
    answer(srv, srv.sendMessage("one").promptIds[0], "re: one");
    const ab = srv.sendMessage("pick", { id: "cmp1", slots: ["a", "b"] });
    answer(srv, ab.promptIds[0], "A".repeat(5000));
    answer(srv, ab.promptIds[1], "B");
    const snap = srv.getConversation();
    const window = { ...snap, messages: snap.messages.slice(-1), olderPageToken: "older" };
    const s = reduce(initialState("c1"), { type: "snapshot", snapshot: window });
    expect(s.messageIds).toEqual([ab.messageIds[1]]);
    expect(activeLeaf(s)).toBe(ab.messageIds[1]);
  });
});

describe("sendMessage", () => {
  /** A client whose SendMessage records its requests, or refuses as the server does when refuse is set. */
  function recording(refuse?: string) {
    const requests: SendMessageRequest[] = [];
    const transport = createRouterTransport(({ service }) => {
      service(ConversationService, {
        sendMessage(req) {
          requests.push(req);
          if (refuse) throw new ConnectError(refuse, Code.FailedPrecondition);
          return create(SendMessageResponseSchema, { conversationId: req.conversationId || "c1" });
        },
      });
    });
    return { client: createConvoClient({ baseUrl: "http://x", transport }), requests };
  }

  it("sends parentMessageId when given, and leaves it empty (no check) when not", async () => {
    const { client, requests } = recording();
    await sendMessage(client, "hello", { conversationId: "c1", parentMessageId: "m7" });
    await sendMessage(client, "again", { conversationId: "c1" });
    expect(requests.map((r) => [r.conversationId, r.text, r.parentMessageId])).toEqual([
      ["c1", "hello", "m7"],
      ["c1", "again", ""],
    ]);
  });

  it("tells a refusal for a moved leaf apart, with a message that says what happened", async () => {
    const { client } = recording(
      "send_message: parentMessageId m7 is not the active leaf of conversation c1: the active leaf is now m9 (the conversation changed since it was read: read it again)",
    );
    const err = await sendMessage(client, "hello", { conversationId: "c1", parentMessageId: "m7" }).catch((e: unknown) => e);
    expect(isLeafMoved(err)).toBe(true);
    expect(isReplyInProgress(err)).toBe(false);
    expect(errorMessage(err)).toMatch(/changed in another tab or window, so your message was not sent/);
    expect(isLeafMoved(new ConnectError("edit_message: a reply of conversation c1 is still being written (prompt p1)", Code.FailedPrecondition))).toBe(false);
  });
});
