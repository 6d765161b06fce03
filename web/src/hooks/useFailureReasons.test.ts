// Which failed replies need their reason looked up: those the stream
// brought no promptFailed for (a snapshot carries no reason).

import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { MessageSchema, initialState, reduce, type ConversationState } from "@convo/client";
import { missingReasons } from "./useFailureReasons";

const msg = (id: string, role: string, status: string) =>
  create(MessageSchema, { id, conversationId: "c1", role, status, promptId: role === "assistant" ? `p-${id}` : "" });

function snapshot(): ConversationState {
  return reduce(initialState("c1"), {
    type: "snapshot",
    snapshot: {
      seq: 10n,
      messages: [
        msg("u1", "user", "completed"),
        msg("a1", "assistant", "failed"),
        msg("u2", "user", "completed"),
        msg("a2", "assistant", "completed"),
        msg("u3", "user", "completed"),
        msg("a3", "assistant", "failed"),
      ],
    },
  });
}

describe("missingReasons", () => {
  it("lists the failed replies of a snapshot, newest first: a snapshot carries no reason", () => {
    expect(missingReasons(snapshot(), {}, new Set())).toEqual(["a3", "a1"]);
  });

  it("leaves out the replies whose reason is known, looked up, or being looked up", () => {
    const st = snapshot();
    const withLive = { ...st, errors: { a3: "getaddrinfo ENOTFOUND api.openai.com" } };
    expect(missingReasons(withLive, {}, new Set())).toEqual(["a1"]);
    expect(missingReasons(st, { a1: "boom" }, new Set())).toEqual(["a3"]);
    expect(missingReasons(st, {}, new Set(["a3", "a1"]))).toEqual([]);
  });
});
