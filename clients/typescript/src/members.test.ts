// Members in the state: who sent each user message, which messages wait
// their turn (queued), and the caller's role, kept through events that
// carry none.

import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { initialState, reduce } from "./fold.js";
import { ConversationUpdatedSchema, EventSchema, MessageUpdatedSchema, type Event } from "./gen/convo/v1/events_pb.js";
import { ConversationSchema, MessageSchema } from "./gen/convo/v1/types_pb.js";

const conversation = (role: string, title = "Shared") => create(ConversationSchema, { id: "c1", title, role });
const message = (id: string, fields: { senderId?: string; queued?: boolean; role?: string; status?: string } = {}) =>
  create(MessageSchema, {
    id,
    conversationId: "c1",
    role: fields.role ?? "user",
    status: fields.status ?? "completed",
    senderId: fields.senderId ?? "",
    queued: fields.queued ?? false,
  });

const ev = (seq: number, kind: Event["kind"]): Event => create(EventSchema, { seq: BigInt(seq), kind });

describe("members in the fold", () => {
  it("keeps each user message's sender and queued mark from the snapshot", () => {
    const s = reduce(initialState("c1"), {
      type: "snapshot",
      snapshot: {
        conversation: conversation("participant"),
        seq: 5n,
        messages: [
          message("m1", { senderId: "alice" }),
          message("m2", { senderId: "bob", queued: true }),
          message("m3", { role: "assistant", status: "pending", queued: true }),
          message("m0"),
        ],
      },
    });
    expect(s.conversation?.role).toBe("participant");
    expect(s.messages.m1.senderId).toBe("alice");
    expect(s.messages.m1.queued).toBeUndefined();
    expect(s.messages.m2).toMatchObject({ senderId: "bob", queued: true });
    expect(s.messages.m3.queued).toBe(true);
    // A message from before members: no sender.
    expect(s.messages.m0.senderId).toBeUndefined();
  });

  it("a messageUpdated without queued clears it; a conversationUpdated keeps the role", () => {
    let s = reduce(initialState("c1"), {
      type: "snapshot",
      snapshot: { conversation: conversation("viewer"), seq: 1n, messages: [message("m2", { senderId: "bob", queued: true })] },
    });
    s = reduce(s, { type: "event", event: ev(2, { case: "messageUpdated", value: create(MessageUpdatedSchema, { message: message("m2", { senderId: "bob" }) }) }) });
    expect(s.messages.m2.queued).toBeUndefined();
    expect(s.messages.m2.senderId).toBe("bob");
    s = reduce(s, {
      type: "event",
      event: ev(3, { case: "conversationUpdated", value: create(ConversationUpdatedSchema, { conversation: conversation("", "Renamed") }) }),
    });
    expect(s.conversation).toMatchObject({ title: "Renamed", role: "viewer" });
  });
});
