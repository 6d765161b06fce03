import { Code, ConnectError, initialState, type BlockState, type ConversationState, type ConvoClient } from "@convo/client";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ClientToolRunner, type ClientTool } from "./clientTools.js";
import { pendingInputs } from "./useConversation.js";

/**
 * A fake server of one conversation with client_tool requests: ClaimInput
 * and AnswerInput as docs/api.md describes them, and the state every tab
 * folds (a claim sets claimedBy/claimExpiresAt, an answer removes the request).
 */
class FakeServer {
  state: ConversationState;
  claims: string[] = [];
  answers: { toolCallId: string; answer: unknown }[] = [];

  constructor(tools: string[]) {
    const s = initialState("c1");
    const blocks: Record<string, BlockState> = {};
    const inputs: ConversationState["inputs"][number][] = [];
    tools.forEach((name, i) => {
      const id = `t${i + 1}`;
      blocks[`b${i + 1}`] = {
        id: `b${i + 1}`,
        messageId: "m1",
        blockType: "tool_use",
        content: "",
        metadata: {},
        status: "completed",
        position: i,
        toolCall: { id, blockId: `b${i + 1}`, name, status: "started", input: { n: i }, output: "", error: "" },
      };
      inputs.push({ toolCallId: id, promptId: "p1", kind: "client_tool", request: {}, claimedBy: "" });
    });
    this.state = { ...s, seq: 1n, blocks, inputs };
  }

  client = {
    claimInput: async (req: { toolCallId: string; claimant: string; leaseSeconds: number }) => {
      this.claims.push(req.claimant);
      const i = this.state.inputs.find((x) => x.toolCallId === req.toolCallId);
      if (!i) throw new ConnectError(`the input request of tool call ${req.toolCallId} was already answered`, Code.FailedPrecondition);
      if (i.claimedBy && i.claimedBy !== req.claimant && (i.claimExpiresAt ?? 0) > Date.now()) {
        throw new ConnectError(`the input request is claimed by ${i.claimedBy} until …`, Code.FailedPrecondition);
      }
      this.claim(req.toolCallId, req.claimant, Date.now() + req.leaseSeconds * 1000);
      return {};
    },
    answerInput: async (req: { toolCallId: string; answer: unknown }) => {
      if (!this.state.inputs.some((x) => x.toolCallId === req.toolCallId)) {
        throw new ConnectError("already answered", Code.FailedPrecondition);
      }
      this.answers.push({ toolCallId: req.toolCallId, answer: req.answer });
      this.state = { ...this.state, inputs: this.state.inputs.filter((x) => x.toolCallId !== req.toolCallId) };
      return {};
    },
  } as unknown as ConvoClient;

  claim(toolCallId: string, claimant: string, until: number) {
    this.state = {
      ...this.state,
      inputs: this.state.inputs.map((x) => (x.toolCallId === toolCallId ? { ...x, claimedBy: claimant, claimExpiresAt: until } : x)),
    };
  }

  tab(claimant: string, tools: Record<string, ClientTool>) {
    return new ClientToolRunner({ client: this.client, getState: () => this.state, getTools: () => tools, claimant });
  }
}

const flush = () => vi.advanceTimersByTimeAsync(0);

describe("ClientToolRunner", () => {
  afterEach(() => vi.useRealTimers());

  it("runs a client tool once across two tabs that see it at the same moment; the other shows it elsewhere", async () => {
    vi.useFakeTimers();
    const srv = new FakeServer(["browser_info"]);
    let runs = 0;
    const tool: ClientTool = (input) => {
      runs++;
      return new Promise((resolve) => setTimeout(() => resolve({ time: "now", input }), 1000));
    };
    const a = srv.tab("tab-a", { browser_info: tool });
    const b = srv.tab("tab-b", { browser_info: tool });
    a.start();
    b.start();
    await flush();
    expect(runs).toBe(1);
    expect(a.getSnapshot().t1).toEqual({ status: "here" });
    expect(b.getSnapshot().t1).toEqual({ status: "elsewhere", claimedBy: "tab-a" });
    a.sync();
    b.sync();
    await vi.advanceTimersByTimeAsync(1000);
    expect(runs).toBe(1);
    expect(srv.answers).toEqual([
      { toolCallId: "t1", answer: { kind: { case: "clientTool", value: { result: { case: "output", value: '{"time":"now","input":{"n":0}}' } } } } },
    ]);
    expect(a.getSnapshot().t1).toEqual({ status: "done", output: '{"time":"now","input":{"n":0}}' });
    b.sync(); // the request is answered: the other tab's run is over
    expect(b.getSnapshot().t1).toBeUndefined();
    // Syncing again, later, runs nothing more.
    await vi.advanceTimersByTimeAsync(60_000);
    a.sync();
    b.sync();
    await flush();
    expect(runs).toBe(1);
    a.stop();
    b.stop();
  });

  it("renews the claim at half its lease while the tool runs, so another tab never takes it", async () => {
    vi.useFakeTimers();
    const srv = new FakeServer(["slow"]);
    let runs = 0;
    const slow: ClientTool = () => {
      runs++;
      return new Promise((resolve) => setTimeout(() => resolve("late"), 70_000));
    };
    const a = srv.tab("tab-a", { slow });
    a.start();
    await flush();
    expect(a.getSnapshot().t1).toEqual({ status: "here" });
    const b = srv.tab("tab-b", { slow });
    b.start();
    for (let t = 0; t < 7; t++) {
      await vi.advanceTimersByTimeAsync(10_000);
      b.sync();
    }
    await flush();
    expect(runs).toBe(1);
    expect(srv.claims.filter((c) => c === "tab-a")).toHaveLength(5); // at 0, 15, 30, 45, 60 s
    expect(srv.answers).toHaveLength(1);
    expect(a.getSnapshot().t1).toEqual({ status: "done", output: "late" });
    a.stop();
    b.stop();
  });

  it("a claim that lapsed (its tab closed) is taken by another tab", async () => {
    vi.useFakeTimers();
    const srv = new FakeServer(["browser_info"]);
    srv.claim("t1", "tab-closed", Date.now() + 30_000);
    let runs = 0;
    const b = srv.tab("tab-b", { browser_info: () => (runs++, "ok") });
    b.start();
    await flush();
    expect(b.getSnapshot().t1).toEqual({ status: "elsewhere", claimedBy: "tab-closed" });
    expect(pendingInputs(srv.state, b.getSnapshot())[0]).toMatchObject({
      toolName: "browser_info",
      input: { n: 0 },
      blockId: "b1",
      claimedBy: "tab-closed",
      run: { status: "elsewhere" },
    });
    await vi.advanceTimersByTimeAsync(29_000);
    expect(runs).toBe(0);
    await vi.advanceTimersByTimeAsync(2_000); // the timer set at the claim's end looks again
    expect(runs).toBe(1);
    expect(b.getSnapshot().t1).toEqual({ status: "done", output: "ok" });
    expect(srv.state.inputs).toEqual([]);
    b.stop();
  });

  it("answers a tool's error, and leaves tools it does not know to other tabs", async () => {
    vi.useFakeTimers();
    const srv = new FakeServer(["broken", "unknown"]);
    const a = srv.tab("tab-a", {
      broken: () => {
        throw new Error("no geolocation");
      },
    });
    a.start();
    await flush();
    expect(srv.answers).toEqual([
      { toolCallId: "t1", answer: { kind: { case: "clientTool", value: { result: { case: "error", value: "no geolocation" } } } } },
    ]);
    expect(a.getSnapshot()).toEqual({ t1: { status: "failed", error: "no geolocation" } });
    expect(srv.state.inputs.map((i) => [i.toolCallId, i.claimedBy])).toEqual([["t2", ""]]);
    expect(srv.claims).toEqual(["tab-a"]);
    a.stop();
  });
});
