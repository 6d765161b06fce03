import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { initialState, reduce, type ConversationState } from "@convo/client";
import { FakeServer } from "@convo/client/testing";
import { stopReplies } from "./stop";

/** following is a client's state after subscribing to srv now. */
function following(srv: FakeServer): ConversationState {
  const { snapshot, replay } = srv.subscribe();
  const s = reduce(initialState(srv.conversationId), { type: "snapshot", snapshot });
  return replay.reduce((st, event) => reduce(st, { type: "event", event }), s);
}

/** fakeClient records CancelPrompt calls and fails those named in failures. */
function fakeClient(failures: Record<string, Code> = {}) {
  const cancelled: string[] = [];
  return {
    cancelled,
    cancelPrompt: async ({ promptId = "" }: { promptId?: string }) => {
      cancelled.push(promptId);
      if (failures[promptId] !== undefined) throw new ConnectError("no", failures[promptId]);
      return {} as never;
    },
  };
}

describe("stopReplies", () => {
  it("cancels both sides of an A/B comparison, the running one and the queued one", async () => {
    const srv = new FakeServer();
    const { promptIds } = srv.sendMessage("tea or coffee?", { id: "cmp1", slots: ["a", "b"] });
    srv.startPrompt(promptIds[0]);
    srv.append(srv.startBlock(promptIds[0], "text"), "Tea");
    const client = fakeClient();
    expect(await stopReplies(client, following(srv))).toBeNull();
    expect(client.cancelled.sort()).toEqual([...promptIds].sort());
  });

  it("cancels both sides when both run", async () => {
    const srv = new FakeServer();
    const { promptIds } = srv.sendMessage("tea or coffee?", { id: "cmp1", slots: ["a", "b"] });
    for (const p of promptIds) srv.startPrompt(p);
    const client = fakeClient();
    await stopReplies(client, following(srv));
    expect(client.cancelled.sort()).toEqual([...promptIds].sort());
  });

  it("skips a side that already ended, and a side ending meanwhile is not an error", async () => {
    const srv = new FakeServer();
    const { promptIds } = srv.sendMessage("tea or coffee?", { id: "cmp1", slots: ["a", "b"] });
    for (const p of promptIds) srv.startPrompt(p);
    srv.endPrompt(promptIds[0], "completed");
    const client = fakeClient({ [promptIds[1]]: Code.FailedPrecondition });
    expect(await stopReplies(client, following(srv))).toBeNull();
    expect(client.cancelled).toEqual([promptIds[1]]);
  });

  it("reports another failure, after trying every prompt", async () => {
    const srv = new FakeServer();
    const { promptIds } = srv.sendMessage("tea or coffee?", { id: "cmp1", slots: ["a", "b"] });
    const client = fakeClient({ [promptIds[0]]: Code.Unavailable });
    expect(await stopReplies(client, following(srv))).toMatch(/unavailable/i);
    expect(client.cancelled.sort()).toEqual([...promptIds].sort());
  });
});
