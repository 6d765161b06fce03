import { create } from "@bufbuild/protobuf";
import { createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createConvoClient } from "./client.js";
import { initialState, reduce } from "./fold.js";
import {
  ConversationService,
  PresenceSchema,
  PresentUserSchema,
  SetTypingResponseSchema,
  type SetTypingRequest,
} from "./gen/convo/v1/conversation_service_pb.js";
import { TYPING_REPEAT_MS, typingReporter } from "./presence.js";

const presence = (...users: [string, boolean, boolean][]) =>
  create(PresenceSchema, { users: users.map(([userId, viewing, typing]) => create(PresentUserSchema, { userId, viewing, typing })) });

describe("presence fold", () => {
  it("starts empty and each presence replaces both lists", () => {
    let s = initialState("c1");
    expect(s.present).toEqual([]);
    expect(s.typing).toEqual([]);
    s = reduce(s, { type: "presence", presence: presence(["bob", true, true], ["alice", true, false], ["carol", false, true]) });
    expect(s.present).toEqual(["alice", "bob"]);
    expect(s.typing).toEqual(["bob", "carol"]);
    s = reduce(s, { type: "presence", presence: presence(["alice", true, false]) });
    expect(s.present).toEqual(["alice"]);
    expect(s.typing).toEqual([]);
  });

  it("keeps the state when nothing changed, and the seq untouched", () => {
    const s = reduce(initialState("c1"), { type: "presence", presence: presence(["alice", true, false]) });
    expect(reduce(s, { type: "presence", presence: presence(["alice", true, false]) })).toBe(s);
    const typing = reduce(s, { type: "presence", presence: presence(["alice", true, true]) });
    expect(typing.present).toBe(s.present);
    expect(typing.seq).toBe(s.seq);
    expect(typing.desync).toBe(false);
  });
});

describe("typingReporter", () => {
  it("reports typing once per interval and the end once", async () => {
    const calls: boolean[] = [];
    const transport = createRouterTransport(({ service }) => {
      service(ConversationService, {
        setTyping(req: SetTypingRequest) {
          expect(req.conversationId).toBe("c1");
          calls.push(req.typing);
          return create(SetTypingResponseSchema, {});
        },
      });
    });
    let t = 0;
    const r = typingReporter(createConvoClient({ baseUrl: "http://convo.test", transport }), "c1", () => t);
    r.stopped(); // nothing reported yet: nothing to end
    r.typed();
    t += 100;
    r.typed();
    t += TYPING_REPEAT_MS;
    r.typed();
    r.stopped();
    r.stopped();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(calls).toEqual([true, true, false]);
  });
});
