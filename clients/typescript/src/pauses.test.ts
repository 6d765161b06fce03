import { create } from "@bufbuild/protobuf";
import { createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { answerInput, claimInput, createConvoClient } from "./client.js";
import { initialState, inputOf, reduce, type ConversationState, type SnapshotLike } from "./fold.js";
import { followConversation } from "./follow.js";
import {
  AnswerInputResponseSchema,
  ClaimInputResponseSchema,
  ConversationService,
  type AnswerInputRequest,
  type ClaimInputRequest,
  type StreamConversationRequest,
} from "./gen/convo/v1/conversation_service_pb.js";
import type { Event } from "./gen/convo/v1/events_pb.js";
import { InputRequestSchema } from "./gen/convo/v1/types_pb.js";
import { FakeServer } from "./testing/fakeServer.js";

const apply = (s: ConversationState, events: Event[]) => events.reduce((st, event) => reduce(st, { type: "event", event }), s);
const fromSnapshot = (snapshot: SnapshotLike) => reduce(initialState("c1"), { type: "snapshot", snapshot });

/** joinAt is a client that subscribed at seq and then received the events up to `upTo`. */
function joinAt(srv: FakeServer, seq: bigint, upTo = srv.seq): ConversationState {
  const { snapshot, replay } = srv.subscribe(seq);
  return apply(apply(fromSnapshot(snapshot), replay), srv.log.slice(Number(seq), Number(upTo)));
}

/**
 * pausedReply plays a reply that asks for an approval and a client tool,
 * parks, has the tool claimed and both answered, resumes, then asks a
 * question that expires. It returns the tool call ids and the seq after
 * each step.
 */
function pausedReply(srv: FakeServer) {
  const { promptIds } = srv.sendMessage("/approve and /client-tool");
  const p = promptIds[0];
  srv.startPrompt(p);
  const tu1 = srv.startBlock(p, "tool_use");
  const approval = srv.startToolCall(tu1, "publish_note", { text: "hello" });
  srv.requestInput(tu1, "approval", { message: "Publish it?" });
  srv.endBlock(tu1);
  const tu2 = srv.startBlock(p, "tool_use");
  const tool = srv.startToolCall(tu2, "browser_info", {});
  srv.requestInput(tu2, "client_tool", { outputSchema: { type: "object" } });
  srv.endBlock(tu2);
  srv.waitPrompt(p);
  const parked = srv.seq;
  srv.claimInput(tool, "tab-1", 1_000_000);
  const claimed = srv.seq;
  srv.answerInput(approval, "answered", { approved: true });
  srv.answerInput(tool, "answered", { output: '{"time": "now"}' });
  const answered = srv.seq;
  srv.startPrompt(p);
  srv.completeToolCall(tu1, "published");
  srv.completeToolCall(tu2, '{"time": "now"}');
  const tu3 = srv.startBlock(p, "tool_use");
  const question = srv.startToolCall(tu3, "ask_user", { question: "Which colour?", choices: ["red", "green"] });
  srv.requestInput(tu3, "question", { question: "Which colour?", choices: ["red", "green"] });
  srv.endBlock(tu3);
  srv.waitPrompt(p);
  const asked = srv.seq;
  srv.answerInput(question, "expired", { error: "the request expired" });
  srv.startPrompt(p);
  srv.failToolCall(tu3, "the request expired");
  srv.endPrompt(p, "completed");
  return { p, approval, tool, question, parked, claimed, answered, asked };
}

describe("the fold of pauses", () => {
  it("inputRequested adds a request, inputClaimed sets its claim, inputAnswered removes it", () => {
    const srv = new FakeServer();
    const r = pausedReply(srv);
    const at = (seq: bigint) => joinAt(srv, 0n, seq);

    const parked = at(r.parked);
    expect(parked.inputs.map((i) => [i.toolCallId, i.kind, i.claimedBy])).toEqual([
      [r.approval, "approval", ""],
      [r.tool, "client_tool", ""],
    ]);
    expect(inputOf(parked, r.approval)?.request).toEqual({ message: "Publish it?" });

    const claimed = at(r.claimed);
    expect(inputOf(claimed, r.tool)).toMatchObject({ claimedBy: "tab-1", claimExpiresAt: 1_000_000 });
    expect(claimed.inputs).toHaveLength(2);

    expect(at(r.claimed + 1n).inputs.map((i) => i.toolCallId)).toEqual([r.tool]); // approval answered
    expect(at(r.answered).inputs).toEqual([]);
    expect(at(r.asked).inputs.map((i) => [i.kind, i.request])).toEqual([
      ["question", { question: "Which colour?", choices: ["red", "green"] }],
    ]);
    expect(at(r.asked + 1n).inputs).toEqual([]); // expired
    expect(at(srv.seq).desync).toBe(false);
  });

  it("the end of a request's tool call or prompt removes it, and so does historyCleared", () => {
    const srv = new FakeServer();
    const { promptIds } = srv.sendMessage("/approve");
    const p = promptIds[0];
    srv.startPrompt(p);
    const tu = srv.startBlock(p, "tool_use");
    srv.startToolCall(tu, "publish_note", {});
    srv.requestInput(tu, "approval");
    const requested = srv.seq;
    srv.endPrompt(p, "cancelled"); // fails the open tool call first
    expect(joinAt(srv, 0n, requested).inputs).toHaveLength(1);
    expect(joinAt(srv, 0n).inputs).toEqual([]);

    // A prompt event alone (no tool call event) also removes its requests.
    const s = joinAt(srv, 0n, requested);
    const promptEnd = srv.log.find((e) => e.kind.case === "promptCancelled")!;
    expect(apply(s, [{ ...promptEnd, seq: requested + 1n }]).inputs).toEqual([]);

    const srv2 = new FakeServer();
    const q = srv2.sendMessage("/ask").promptIds[0];
    srv2.startPrompt(q);
    const tu2 = srv2.startBlock(q, "tool_use");
    srv2.startToolCall(tu2, "ask_user", {});
    srv2.requestInput(tu2, "question", { question: "?" });
    srv2.clearHistory();
    expect(joinAt(srv2, 0n, srv2.seq - 1n).inputs).toHaveLength(1);
    expect(joinAt(srv2, 0n).inputs).toEqual([]);
  });

  it("a snapshot's pendingInputs replace the requests; answered ones (waiting for the worker) are not open", () => {
    const srv = new FakeServer();
    const r = pausedReply(srv);
    const snap = srv.subscribe(r.claimed).snapshot;
    expect(snap.pendingInputs).toHaveLength(2);
    const s = fromSnapshot(snap);
    expect(s.inputs.map((i) => [i.toolCallId, i.claimedBy, i.claimExpiresAt])).toEqual([
      [r.approval, "", undefined],
      [r.tool, "tab-1", 1_000_000],
    ]);
    // At `answered` both are answered but their tool calls still open: the snapshot holds them, the fold does not.
    const answered = srv.subscribe(r.answered).snapshot;
    expect(answered.pendingInputs?.map((i) => i.status)).toEqual(["answered", "answered"]);
    expect(fromSnapshot(answered).inputs).toEqual([]);
    // A snapshot without pendingInputs (a stream that did not ask) holds none.
    expect(reduce(s, { type: "snapshot", snapshot: { ...snap, pendingInputs: undefined } }).inputs).toEqual([]);
  });

  it("is the same whatever the moment a client joined", () => {
    const srv = new FakeServer();
    const r = pausedReply(srv);
    const end = srv.seq;
    expect(joinAt(srv, 0n, r.claimed).inputs).toHaveLength(2);
    let runs = 0;
    for (let n = 0n; n <= end; n++) {
      const direct = joinAt(srv, n, n);
      for (let k = 0n; k < n; k++) {
        const joined = joinAt(srv, k, n);
        expect(joined.inputs, `joined at ${k}, at ${n}`).toEqual(direct.inputs);
        runs++;
      }
    }
    expect(runs).toBeGreaterThan(300);
    for (let k = 0n; k <= end; k++) expect(joinAt(srv, k).messages).toEqual(joinAt(srv, end).messages);
  });
});

describe("answerInput, claimInput and the follower", () => {
  it("send the typed answer and the claim, and the stream asks for the events of pauses by default", async () => {
    const answers: AnswerInputRequest[] = [];
    const claims: ClaimInputRequest[] = [];
    const streams: StreamConversationRequest[] = [];
    const transport = createRouterTransport(({ service }) => {
      service(ConversationService, {
        answerInput(req) {
          answers.push(req);
          return create(AnswerInputResponseSchema, { inputRequest: create(InputRequestSchema, { toolCallId: req.toolCallId, status: "answered" }) });
        },
        claimInput(req) {
          claims.push(req);
          return create(ClaimInputResponseSchema, { inputRequest: create(InputRequestSchema, { toolCallId: req.toolCallId, claimedBy: req.claimant }) });
        },
        // eslint-disable-next-line require-yield
        async *streamConversation(req, ctx) {
          streams.push(req);
          await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
        },
      });
    });
    const client = createConvoClient({ baseUrl: "http://x", transport });
    await answerInput(client, "t1", { approval: { approved: false, reason: "no" } });
    await answerInput(client, "t2", { clientTool: { output: "{}" } });
    await answerInput(client, "t3", { clientTool: { error: "boom" } });
    const res = await answerInput(client, "t4", { question: { answer: "green" } });
    expect(res?.status).toBe("answered");
    expect(answers.map((a) => [a.toolCallId, a.answer?.kind.case, a.answer?.kind.value])).toMatchObject([
      ["t1", "approval", { approved: false, reason: "no" }],
      ["t2", "clientTool", { result: { case: "output", value: "{}" } }],
      ["t3", "clientTool", { result: { case: "error", value: "boom" } }],
      ["t4", "question", { answer: "green" }],
    ]);
    const claimed = await claimInput(client, "t2", "tab-1");
    expect(claimed?.claimedBy).toBe("tab-1");
    expect(claims.map((c) => [c.toolCallId, c.claimant, c.leaseSeconds])).toEqual([["t2", "tab-1", 30]]);

    for (const include of [undefined, false]) {
      const ctl = new AbortController();
      const it = followConversation(client, "c1", { signal: ctl.signal, includePauseEvents: include });
      await it.next();
      while (streams.length < (include === undefined ? 1 : 2)) await new Promise((r) => setTimeout(r, 5));
      ctl.abort();
      await it.return(undefined);
    }
    expect(streams.map((s) => s.includePauseEvents)).toEqual([true, false]);
  });
});
