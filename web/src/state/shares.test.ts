import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import {
  BlockSchema,
  Code,
  ConnectError,
  ConversationSchema,
  GetSharedConversationResponseSchema,
  MessageSchema,
  ShareSchema,
} from "@convo/client";
import { expiresAt, expiryChoices, isShareGone, mayRevoke, shareModeLabel, shareStatus, sharedView } from "./shares";

const state = (title: string, replyText: string, replyStatus = "processing") =>
  create(GetSharedConversationResponseSchema, {
    share: { id: "s1", mode: "live" },
    conversation: { id: "c1", title },
    seq: 7n,
    messages: [
      create(MessageSchema, {
        id: "m1",
        role: "user",
        status: "completed",
        blocks: [create(BlockSchema, { id: "b1", blockType: "text", content: "Hello", status: "completed" })],
      }),
      create(MessageSchema, {
        id: "m2",
        role: "assistant",
        status: replyStatus,
        blocks: [create(BlockSchema, { id: "b2", blockType: "text", content: replyText, status: "streaming" })],
      }),
    ],
  });

describe("sharedView", () => {
  it("is the state the message components render, in-flight blocks included", () => {
    const v = sharedView(state("Trip", "Once upon"));
    expect(v.conversationId).toBe("c1");
    expect(v.conversation?.title).toBe("Trip");
    expect(v.messageIds).toEqual(["m1", "m2"]);
    expect(v.messages.m2.status).toBe("processing");
    expect(v.blocks.b2).toMatchObject({ messageId: "m2", content: "Once upon", status: "streaming" });
    expect(v.seq).toBe(7n);
  });

  it("each state is whole: a later one replaces the last, never folds into it", () => {
    const first = sharedView(state("Trip", "Once upon"));
    const later = sharedView(state("Trip", "Once upon a time", "completed"));
    expect(later.blocks.b2.content).toBe("Once upon a time");
    // A branch switched since: the path holds other messages, and the old ones are gone.
    const switched = sharedView(
      create(GetSharedConversationResponseSchema, {
        conversation: create(ConversationSchema, { id: "c1", title: "Trip" }),
        seq: 9n,
        messages: [create(MessageSchema, { id: "m3", role: "user", status: "completed" })],
      }),
    );
    expect(switched.messageIds).toEqual(["m3"]);
    expect(switched.blocks).toEqual({});
    expect(first.blocks.b2.content).toBe("Once upon");
  });
});

describe("shares in the dialog", () => {
  const now = Date.UTC(2026, 0, 10);
  it("shareStatus: revoked, expired at its expiry, else active", () => {
    expect(shareStatus(create(ShareSchema, {}), now)).toBe("active");
    expect(shareStatus(create(ShareSchema, { expiresAt: timestampFromMs(now + 1) }), now)).toBe("active");
    expect(shareStatus(create(ShareSchema, { expiresAt: timestampFromMs(now) }), now)).toBe("expired");
    expect(
      shareStatus(create(ShareSchema, { revokedAt: timestampFromMs(now - 5), expiresAt: timestampFromMs(now - 1) }), now),
    ).toBe("revoked");
  });

  it("shareModeLabel names the mode and the tool calls", () => {
    expect(shareModeLabel({ mode: "live", includeTools: false })).toBe("Live");
    expect(shareModeLabel({ mode: "snapshot", includeTools: true })).toBe("Snapshot, with tool calls");
  });

  it("mayRevoke: the owner any link, anyone else only their own", () => {
    const bobs = { createdBy: "bob" };
    expect(mayRevoke(bobs, "alice", "owner")).toBe(true);
    expect(mayRevoke(bobs, "bob", "participant")).toBe(true);
    expect(mayRevoke(bobs, "carol", "participant")).toBe(false);
    expect(mayRevoke(bobs, null, "participant")).toBe(false);
  });

  it("expiresAt: never, or the choice's lifetime from now, within the server's 366 days", () => {
    expect(expiresAt("", now)).toBeUndefined();
    expect(expiresAt("unknown", now)).toBeUndefined();
    expect(expiresAt("1h", now)?.getTime()).toBe(now + 3_600_000);
    expect(expiresAt("7d", now)?.getTime()).toBe(now + 7 * 86_400_000);
    for (const c of expiryChoices) expect(c.lifetime ?? 0).toBeLessThanOrEqual(366 * 86_400_000);
  });

  it("isShareGone: not_found (revoked, expired, unknown) and a malformed token; not a passing failure", () => {
    expect(isShareGone(new ConnectError("share does not exist", Code.NotFound))).toBe(true);
    expect(isShareGone(new ConnectError("token: is required", Code.InvalidArgument))).toBe(true);
    expect(isShareGone(new ConnectError("down", Code.Unavailable))).toBe(false);
    expect(isShareGone(new TypeError("fetch failed"))).toBe(false);
  });
});
