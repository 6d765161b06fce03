import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { EventSchema, type Event } from "./gen/convo/v1/events_pb.js";
import { BlockSchema, MessageSchema, Rating } from "./gen/convo/v1/types_pb.js";
import {
  activePromptIds,
  hasGap,
  initialState,
  messageBlocks,
  reduce,
  resumeSeq,
  type ConversationState,
  type SnapshotLike,
} from "./fold.js";
import { FakeServer } from "./testing/fakeServer.js";

const apply = (s: ConversationState, events: Event[]) =>
  events.reduce((st, event) => reduce(st, { type: "event", event }), s);

const fromSnapshot = (snapshot: SnapshotLike, s = initialState("c1")) => reduce(s, { type: "snapshot", snapshot });

/** subscribeAt is a client that subscribed at seq and then received every later event. */
function subscribeAt(srv: FakeServer, seq: bigint, s = initialState("c1")): ConversationState {
  const { snapshot, replay } = srv.subscribe(seq);
  return apply(apply(fromSnapshot(snapshot, s), replay), srv.eventsAfter(seq));
}

/** view is the part of the state that GetConversation describes. */
const view = (s: ConversationState) => ({
  conversation: s.conversation,
  messageIds: s.messageIds,
  messages: s.messages,
  blocks: s.blocks,
  seq: s.seq,
});

/** expected is GetConversation's answer at seq, as a state. */
const expected = (srv: FakeServer, seq = srv.seq) => view(fromSnapshot(srv.getConversation(seq)));

/** script plays a reply with reasoning, a tool call and text; it returns the text block's id. */
function script(srv: FakeServer, opts: { finish?: boolean } = {}) {
  const { promptIds } = srv.sendMessage("What is the weather in Paris?");
  const p = promptIds[0];
  srv.startPrompt(p);
  const r = srv.startBlock(p, "reasoning");
  for (const d of ["The user ", "wants the ", "weather."]) srv.append(r, d);
  srv.endBlock(r, { tokens: 5 });
  const tu = srv.startBlock(p, "tool_use", { tool: "weather" });
  srv.startToolCall(tu, "get_weather", { city: "Paris", units: "metric" });
  srv.toolProgress(tu, "fetching…\n");
  srv.toolProgress(tu, "18°C, sunny\n");
  srv.completeToolCall(tu);
  srv.endBlock(tu);
  const tr = srv.startBlock(p, "tool_result");
  srv.append(tr, '{"temp": 18}');
  srv.endBlock(tr);
  const t = srv.startBlock(p, "text");
  for (const d of ["It is **18°C** ", "and sunny ", "in Paris. ", "Enjoy 🌞!"]) srv.append(t, d);
  if (opts.finish !== false) {
    srv.endBlock(t);
    srv.endPrompt(p, "completed");
  }
  return { promptId: p, textBlock: t, toolBlock: tu, reasoningBlock: r };
}

describe("snapshot, replay and live events", () => {
  it("subscribing at any seq converges on GetConversation", () => {
    const srv = new FakeServer();
    script(srv);
    script(srv, { finish: false });
    for (let k = 0n; k <= srv.seq; k++) {
      expect(view(subscribeAt(srv, k)), `subscribed at seq ${k}`).toEqual(expected(srv));
    }
  });

  it("snapshot plus replay equals GetConversation at the snapshot's seq", () => {
    const srv = new FakeServer();
    script(srv, { finish: false });
    for (let k = 0n; k <= srv.seq; k++) {
      const { snapshot, replay } = srv.subscribe(k);
      expect(view(apply(fromSnapshot(snapshot), replay)), `at seq ${k}`).toEqual(expected(srv, k));
    }
  });

  it("the snapshot leaves out streaming blocks and replay brings them back with their text", () => {
    const srv = new FakeServer();
    const { textBlock } = script(srv, { finish: false });
    const { snapshot, replay } = srv.subscribe();
    const s0 = fromSnapshot(snapshot);
    expect(s0.blocks[textBlock]).toBeUndefined();
    expect(replay.map((e) => e.kind.case)).toEqual(["blockStart", "blockDelta"]);
    const s1 = apply(s0, replay);
    expect(s1.blocks[textBlock]).toMatchObject({
      status: "streaming",
      content: "It is **18°C** and sunny in Paris. Enjoy 🌞!",
    });
    // The next live delta continues from the first character not yet seen.
    srv.append(textBlock, " Bye.");
    const s2 = apply(s1, srv.eventsAfter(snapshot.seq));
    expect(s2.blocks[textBlock].content).toBe("It is **18°C** and sunny in Paris. Enjoy 🌞! Bye.");
    expect(view(s2)).toEqual(expected(srv));
  });

  it("text grows delta by delta", () => {
    const srv = new FakeServer();
    const { promptIds } = srv.sendMessage("hi");
    srv.startPrompt(promptIds[0]);
    let s = subscribeAt(srv, srv.seq);
    const b = srv.startBlock(promptIds[0], "text");
    s = apply(s, srv.eventsAfter(s.seq!));
    expect(s.blocks[b]).toMatchObject({ content: "", status: "streaming", blockType: "text" });
    const seen: string[] = [];
    for (const d of ["Hel", "lo", ", ", "world"]) {
      srv.append(b, d);
      s = apply(s, srv.eventsAfter(s.seq!));
      seen.push(s.blocks[b].content);
    }
    expect(seen).toEqual(["Hel", "Hello", "Hello, ", "Hello, world"]);
    const msg = s.messages[s.messageIds[1]];
    expect(msg.blockIds).toEqual([b]);
    expect(messageBlocks(s, msg.id).map((x) => x.id)).toEqual([b]);
  });

  it("a user message arrives with its blocks", () => {
    const srv = new FakeServer();
    srv.sendMessage("Hello there");
    const s = subscribeAt(srv, 0n);
    const user = s.messages[s.messageIds[0]];
    expect(user.role).toBe("user");
    expect(messageBlocks(s, user.id).map((b) => b.content)).toEqual(["Hello there"]);
    expect(s.messages[s.messageIds[1]]).toMatchObject({ role: "assistant", status: "pending" });
    expect(s.conversation?.title).toBe("Hello there");
  });

  it("messageUpdated merges fields and keeps blocks", () => {
    const srv = new FakeServer();
    const { promptId } = script(srv, { finish: false });
    let s = subscribeAt(srv, srv.seq);
    const id = s.messageIds[1];
    const before = s.messages[id].blockIds;
    const ev = create(EventSchema, {
      seq: s.seq! + 1n,
      kind: {
        case: "messageUpdated",
        value: {
          message: create(MessageSchema, {
            id,
            role: "assistant",
            status: "processing",
            promptId,
            feedback: { rating: Rating.UP, comment: "nice" },
          }),
        },
      },
    });
    s = apply(s, [ev]);
    expect(s.messages[id].blockIds).toEqual(before);
    expect(s.messages[id].feedback).toEqual({ rating: Rating.UP, comment: "nice" });
  });
});

describe("block positions", () => {
  const block = (id: string, position: number) =>
    create(BlockSchema, { id, blockType: "text", content: `block ${position}`, status: "completed", position });
  /** A snapshot at seq 10 of a reply whose completed blocks sit at positions 0 and 2: 1 still streams. */
  const snapshot: SnapshotLike = {
    messages: [
      create(MessageSchema, { id: "m1", role: "assistant", status: "processing", promptId: "p1", blocks: [block("b2", 2), block("b0", 0)] }),
    ],
    seq: 10n,
  };
  const blockStart = (seq: bigint, blockId: string, position: number, replay = false) =>
    create(EventSchema, {
      seq,
      replay,
      kind: { case: "blockStart", value: { promptId: "p1", messageId: "m1", blockId, blockType: "text", position } },
    });
  const order = (s: ConversationState) => messageBlocks(s, "m1").map((b) => b.id);

  it("the snapshot orders blocks by position", () => {
    expect(order(fromSnapshot(snapshot))).toEqual(["b0", "b2"]);
  });

  it("a replayed in-flight block lands at its position, before the later completed block", () => {
    const delta = create(EventSchema, {
      seq: 10n,
      replay: true,
      kind: { case: "blockDelta", value: { promptId: "p1", messageId: "m1", blockId: "b1", content: "so far" } },
    });
    const s = apply(fromSnapshot(snapshot), [blockStart(10n, "b1", 1, true), delta]);
    expect(order(s)).toEqual(["b0", "b1", "b2"]);
    expect(s.blocks.b1).toMatchObject({ status: "streaming", content: "so far", position: 1 });
  });

  it("a live blockStart goes to its position whatever order blocks arrive in", () => {
    let s = apply(fromSnapshot(snapshot), [blockStart(11n, "b1", 1)]);
    expect(order(s)).toEqual(["b0", "b1", "b2"]);
    // Position 4 starts before position 3 is heard of.
    s = apply(s, [blockStart(12n, "b4", 4), blockStart(13n, "b3", 3)]);
    expect(order(s)).toEqual(["b0", "b1", "b2", "b3", "b4"]);
    // A block of a message not seen yet starts the message.
    s = apply(s, [
      create(EventSchema, {
        seq: 14n,
        kind: { case: "blockStart", value: { promptId: "p2", messageId: "m2", blockId: "c1", blockType: "text", position: 1 } },
      }),
      create(EventSchema, {
        seq: 15n,
        kind: { case: "blockStart", value: { promptId: "p2", messageId: "m2", blockId: "c0", blockType: "text", position: 0 } },
      }),
    ]);
    expect(messageBlocks(s, "m2").map((b) => b.id)).toEqual(["c0", "c1"]);
  });

  it("blocks streaming side by side: subscribing at any seq converges on GetConversation", () => {
    const srv = new FakeServer();
    const { promptIds } = srv.sendMessage("Weather in Paris and in Rome?");
    const p = promptIds[0];
    srv.startPrompt(p);
    const r = srv.startBlock(p, "reasoning");
    srv.append(r, "Two cities: two calls.");
    srv.endBlock(r);
    // Two tool calls at once (positions 1 and 2); the second ends first.
    const paris = srv.startBlock(p, "tool_use", { tool: "weather" });
    const rome = srv.startBlock(p, "tool_use", { tool: "weather" });
    srv.startToolCall(paris, "get_weather", { city: "Paris" });
    srv.startToolCall(rome, "get_weather", { city: "Rome" });
    srv.toolProgress(rome, "22°C\n");
    srv.completeToolCall(rome);
    srv.endBlock(rome);
    srv.toolProgress(paris, "fetching…\n");
    const t = srv.startBlock(p, "text");
    srv.append(t, "Rome is warm; ");
    srv.toolProgress(paris, "18°C\n");
    srv.completeToolCall(paris);
    srv.endBlock(paris);
    srv.append(t, "Paris is mild.");
    srv.endBlock(t);
    srv.endPrompt(p, "completed");

    const final = subscribeAt(srv, srv.seq);
    expect(messageBlocks(final, final.messageIds[1]).map((b) => b.id)).toEqual([r, paris, rome, t]);
    for (let k = 0n; k <= srv.seq; k++) {
      const { snapshot: snap, replay } = srv.subscribe(k);
      expect(view(apply(fromSnapshot(snap), replay)), `snapshot and replay at seq ${k}`).toEqual(expected(srv, k));
      expect(view(subscribeAt(srv, k)), `subscribed at seq ${k}`).toEqual(expected(srv));
    }
  });
});

describe("idempotency and ordering", () => {
  it("a repeated or older seq changes nothing", () => {
    const srv = new FakeServer();
    script(srv);
    const { snapshot } = srv.subscribe(0n);
    let s = fromSnapshot(snapshot);
    for (const ev of srv.log) {
      s = apply(s, [ev]);
      const again = apply(s, [ev, ...srv.log.slice(0, Number(ev.seq))]);
      expect(again).toBe(s); // the very same object: nothing changed
    }
    expect(view(s)).toEqual(expected(srv));
  });

  it("every event delivered twice gives the same state", () => {
    const srv = new FakeServer();
    script(srv);
    script(srv, { finish: false });
    const doubled = srv.log.flatMap((e) => [e, e]);
    const s = apply(fromSnapshot(srv.subscribe(0n).snapshot), doubled);
    expect(view(s)).toEqual(expected(srv));
  });

  it("out-of-order delivery is held until the gap fills", () => {
    const srv = new FakeServer();
    const { textBlock } = script(srv, { finish: false });
    const k = 3n;
    let s = subscribeAt(srv, k, initialState("c1"));
    s = fromSnapshot(srv.subscribe(k).snapshot);
    const rest = srv.eventsAfter(k);
    // Swap neighbours pairwise: 5,4,7,6,…
    const shuffled: Event[] = [];
    for (let i = 0; i < rest.length; i += 2) {
      if (i + 1 < rest.length) shuffled.push(rest[i + 1], rest[i]);
      else shuffled.push(rest[i]);
    }
    s = apply(s, shuffled);
    expect(hasGap(s)).toBe(false);
    expect(view(s)).toEqual(expected(srv));
    expect(s.blocks[textBlock].content).toBe("It is **18°C** and sunny in Paris. Enjoy 🌞!");
  });

  it("an event ahead of its turn waits and is not applied alone", () => {
    const srv = new FakeServer();
    const { promptIds } = srv.sendMessage("x");
    srv.startPrompt(promptIds[0]);
    const b = srv.startBlock(promptIds[0], "text");
    const base = subscribeAt(srv, srv.seq);
    srv.append(b, "one ");
    srv.append(b, "two");
    const [first, second] = srv.eventsAfter(base.seq!);
    const held = apply(base, [second]);
    expect(hasGap(held)).toBe(true);
    expect(held.blocks[b].content).toBe("");
    expect(held.seq).toBe(base.seq);
    const filled = apply(held, [second, first]);
    expect(hasGap(filled)).toBe(false);
    expect(filled.blocks[b].content).toBe("one two");
    expect(filled.seq).toBe(srv.seq);
  });

  it("replay events are applied only right after their snapshot", () => {
    const srv = new FakeServer();
    const { textBlock } = script(srv, { finish: false });
    const { snapshot, replay } = srv.subscribe();
    let s = apply(fromSnapshot(snapshot), replay);
    // A repeated replay does not double the text.
    s = apply(s, replay);
    expect(s.blocks[textBlock].content).toBe("It is **18°C** and sunny in Paris. Enjoy 🌞!");
    srv.append(textBlock, "!");
    s = apply(s, srv.eventsAfter(snapshot.seq));
    // Once live events flow, a stray replay changes nothing.
    expect(apply(s, replay)).toBe(s);
    expect(view(s)).toEqual(expected(srv));
  });

  it("events before any snapshot are ignored", () => {
    const srv = new FakeServer();
    script(srv);
    const s = apply(initialState("c1"), srv.log);
    expect(s).toEqual(initialState("c1"));
  });
});

describe("reconnecting", () => {
  it("resumes with afterSeq: the events after the last applied seq continue the state", () => {
    const srv = new FakeServer();
    const { promptIds } = srv.sendMessage("count");
    srv.startPrompt(promptIds[0]);
    const b = srv.startBlock(promptIds[0], "text");
    srv.append(b, "1 ");
    let s = subscribeAt(srv, srv.seq); // snapshot with the block in replay
    const lastSeq = s.seq!;
    // The connection drops; meanwhile the worker goes on.
    srv.append(b, "2 ");
    srv.append(b, "3 ");
    srv.endBlock(b);
    srv.endPrompt(promptIds[0], "completed");
    // The server resends from afterSeq; a few already-applied events come too.
    s = apply(s, srv.log.slice(Number(lastSeq) - 2));
    expect(s.blocks[b].content).toBe("1 2 3 ");
    expect(view(s)).toEqual(expected(srv));
  });

  it("resumes after a snapshot's seq only once its replay is known to be whole", () => {
    const srv = new FakeServer();
    const { textBlock } = script(srv, { finish: false });
    const { snapshot, replay } = srv.subscribe(srv.seq);
    expect(replay.length).toBeGreaterThan(1);
    // A reply streams: until a live event, the replay may be cut short.
    let s = fromSnapshot(snapshot);
    expect(resumeSeq(s)).toBeNull();
    s = apply(s, replay.slice(0, 1));
    expect(resumeSeq(s)).toBeNull();
    s = apply(s, replay);
    expect(resumeSeq(s)).toBeNull();
    srv.append(textBlock, " More.");
    s = apply(s, srv.eventsAfter(s.seq!));
    expect(resumeSeq(s)).toBe(srv.seq);

    // Nothing streams: the snapshot alone is whole.
    const quiet = new FakeServer();
    script(quiet);
    expect(resumeSeq(fromSnapshot(quiet.subscribe(quiet.seq).snapshot))).toBe(quiet.seq);
  });

  it("falls back to a fresh snapshot that replaces the state", () => {
    const srv = new FakeServer();
    const first = script(srv, { finish: false });
    let s = subscribeAt(srv, srv.seq);
    // While away: the reply finishes, the history is cleared, a new reply streams.
    srv.endBlock(first.textBlock);
    srv.endPrompt(first.promptId, "completed");
    srv.clearHistory();
    const second = script(srv, { finish: false });
    // The server no longer holds the events after s.seq: a new snapshot comes.
    s = subscribeAt(srv, srv.seq, s);
    expect(view(s)).toEqual(expected(srv));
    expect(s.blocks[first.textBlock]).toBeUndefined();
    expect(s.blocks[second.textBlock].content).toBe("It is **18°C** and sunny in Paris. Enjoy 🌞!");
  });

  it("a fresh snapshot clears events held for a gap", () => {
    const srv = new FakeServer();
    script(srv);
    const early = fromSnapshot(srv.subscribe(2n).snapshot);
    const held = apply(early, [srv.log[9]]);
    expect(hasGap(held)).toBe(true);
    const s = subscribeAt(srv, srv.seq, held);
    expect(hasGap(s)).toBe(false);
    expect(view(s)).toEqual(expected(srv));
  });

  it("two clients (tabs) that subscribed at different times agree", () => {
    const srv = new FakeServer();
    const a = script(srv, { finish: false });
    const tab1 = subscribeAt(srv, 4n);
    const tab2 = subscribeAt(srv, srv.seq - 3n);
    expect(view(tab1)).toEqual(view(tab2));
    srv.append(a.textBlock, " More.");
    srv.endBlock(a.textBlock);
    srv.endPrompt(a.promptId, "completed");
    expect(view(apply(tab1, srv.eventsAfter(tab1.seq!)))).toEqual(view(apply(tab2, srv.eventsAfter(tab2.seq!))));
  });
});

describe("tool calls", () => {
  it("goes through started, running and completed with its output", () => {
    const srv = new FakeServer();
    const { promptIds } = srv.sendMessage("ls");
    const p = promptIds[0];
    srv.startPrompt(p);
    let s = subscribeAt(srv, srv.seq);
    const step = () => (s = apply(s, srv.eventsAfter(s.seq!)));
    const tu = srv.startBlock(p, "tool_use");
    step();
    expect(s.blocks[tu].toolCall).toBeUndefined();
    srv.startToolCall(tu, "shell", { cmd: "ls -l" });
    step();
    expect(s.blocks[tu].toolCall).toMatchObject({ name: "shell", status: "started", input: { cmd: "ls -l" }, output: "" });
    srv.toolProgress(tu, "a.txt\n");
    step();
    expect(s.blocks[tu].toolCall).toMatchObject({ status: "running", output: "a.txt\n" });
    srv.toolProgress(tu, "b.txt\n");
    step();
    expect(s.blocks[tu].toolCall?.output).toBe("a.txt\nb.txt\n");
    srv.completeToolCall(tu);
    step();
    expect(s.blocks[tu].toolCall).toMatchObject({ status: "completed", output: "a.txt\nb.txt\n", input: { cmd: "ls -l" } });
    srv.endBlock(tu);
    step();
    expect(s.blocks[tu].status).toBe("completed");
    expect(view(s)).toEqual(expected(srv));
  });

  it("a failed call keeps its output and carries the error", () => {
    const srv = new FakeServer();
    const { promptIds } = srv.sendMessage("curl");
    const p = promptIds[0];
    srv.startPrompt(p);
    const tu = srv.startBlock(p, "tool_use");
    srv.startToolCall(tu, "http_get", { url: "https://example.com" });
    srv.toolProgress(tu, "connecting…");
    const mid = subscribeAt(srv, srv.seq);
    // Joining mid-call: replay brings back the call and its output so far.
    expect(mid.blocks[tu].toolCall).toMatchObject({ name: "http_get", status: "running", output: "connecting…" });
    srv.failToolCall(tu, "connection refused");
    const s = apply(mid, srv.eventsAfter(mid.seq!));
    expect(s.blocks[tu].toolCall).toMatchObject({ status: "failed", error: "connection refused", output: "connecting…" });
    expect(view(s)).toEqual(expected(srv));
  });
});

describe("prompt lifecycle", () => {
  it("cancel keeps the partial reply and ends the prompt", () => {
    const srv = new FakeServer();
    const { promptId, textBlock } = script(srv, { finish: false });
    let s = subscribeAt(srv, srv.seq);
    expect(activePromptIds(s)).toEqual([promptId]);
    srv.endPrompt(promptId, "cancelled");
    s = apply(s, srv.eventsAfter(s.seq!));
    const msg = s.messages[s.blocks[textBlock].messageId];
    expect(msg.status).toBe("cancelled");
    expect(s.blocks[textBlock]).toMatchObject({ status: "completed", content: "It is **18°C** and sunny in Paris. Enjoy 🌞!" });
    expect(activePromptIds(s)).toEqual([]);
    expect(view(s)).toEqual(expected(srv));
  });

  it("a failed prompt records why", () => {
    const srv = new FakeServer();
    const { promptIds, messageIds } = srv.sendMessage("x");
    srv.startPrompt(promptIds[0]);
    let s = subscribeAt(srv, srv.seq);
    srv.endPrompt(promptIds[0], "failed", "model overloaded");
    s = apply(s, srv.eventsAfter(s.seq!));
    expect(s.messages[messageIds[0]].status).toBe("failed");
    expect(s.errors[messageIds[0]]).toBe("model overloaded");
    expect(s.messages[messageIds[0]].error).toBe("model overloaded");
  });

  it("a failed reply's error comes in a later snapshot, with no promptFailed seen", () => {
    const srv = new FakeServer();
    const { promptIds, messageIds } = srv.sendMessage("x");
    srv.startPrompt(promptIds[0]);
    srv.endPrompt(promptIds[0], "failed", "getaddrinfo ENOTFOUND api.openai.com");
    const { snapshot } = srv.subscribe();
    expect(snapshot.messages.find((m) => m.id === messageIds[0])?.error).toBe("getaddrinfo ENOTFOUND api.openai.com");
    const s = reduce(initialState("c1"), { type: "snapshot", snapshot });
    expect(s.messages[messageIds[0]].error).toBe("getaddrinfo ENOTFOUND api.openai.com");
    expect(s.errors[messageIds[0]]).toBe("getaddrinfo ENOTFOUND api.openai.com");
    expect(s.messages[snapshot.messages[0].id].error).toBe("");
  });

  it("a reason learnt live survives a snapshot without one (an older server)", () => {
    const srv = new FakeServer();
    const { promptIds, messageIds } = srv.sendMessage("x");
    srv.startPrompt(promptIds[0]);
    let s = subscribeAt(srv, srv.seq);
    srv.endPrompt(promptIds[0], "failed", "model overloaded");
    s = apply(s, srv.eventsAfter(s.seq!));
    const { snapshot } = srv.subscribe();
    const old = { ...snapshot, messages: snapshot.messages.map((m) => create(MessageSchema, { ...m, error: "" })) };
    s = reduce(s, { type: "snapshot", snapshot: old });
    expect(s.messages[messageIds[0]].error).toBe("model overloaded");
    expect(s.errors[messageIds[0]]).toBe("model overloaded");
  });

  it("an A/B comparison has two replies with their slots", () => {
    const srv = new FakeServer();
    const { promptIds, messageIds } = srv.sendMessage("compare", { id: "cmp1", slots: ["a", "b"] });
    for (const p of promptIds) srv.startPrompt(p);
    const ta = srv.startBlock(promptIds[0], "text");
    const tb = srv.startBlock(promptIds[1], "text");
    srv.append(ta, "A says hi");
    srv.append(tb, "B says hello");
    const s = subscribeAt(srv, 2n);
    expect(messageIds.map((id) => [s.messages[id].comparisonId, s.messages[id].comparisonSlot])).toEqual([
      ["cmp1", "a"],
      ["cmp1", "b"],
    ]);
    expect(activePromptIds(s).sort()).toEqual([...promptIds].sort());
    expect(view(s)).toEqual(expected(srv));
  });

  it("stop covers both sides of an A/B comparison, queued or running, and only those still going", () => {
    const srv = new FakeServer();
    const { promptIds } = srv.sendMessage("compare", { id: "cmp1", slots: ["a", "b"] });
    // One worker: slot a runs while slot b still waits in the queue.
    srv.startPrompt(promptIds[0]);
    let s = subscribeAt(srv, srv.seq);
    expect(activePromptIds(s).sort()).toEqual([...promptIds].sort());
    srv.endPrompt(promptIds[0], "completed");
    srv.startPrompt(promptIds[1]);
    s = apply(s, srv.eventsAfter(s.seq!));
    expect(activePromptIds(s)).toEqual([promptIds[1]]);
  });

  it("historyCleared empties the messages", () => {
    const srv = new FakeServer();
    script(srv);
    let s = subscribeAt(srv, srv.seq);
    srv.clearHistory();
    s = apply(s, srv.eventsAfter(s.seq!));
    expect(s.messageIds).toEqual([]);
    expect(s.blocks).toEqual({});
    expect(view(s)).toEqual(expected(srv));
  });

  it("local feedback patches the message", () => {
    const srv = new FakeServer();
    script(srv);
    const s = subscribeAt(srv, srv.seq);
    const id = s.messageIds[1];
    const next = reduce(s, { type: "feedback", messageId: id, feedback: { rating: Rating.DOWN, comment: "" } });
    expect(next.messages[id].feedback?.rating).toBe(Rating.DOWN);
    expect(next.messages[id].blockIds).toBe(s.messages[id].blockIds);
  });
});

describe("bad input", () => {
  it("skips and counts events of unknown kinds, and their seq still counts", () => {
    const srv = new FakeServer("c1");
    script(srv);
    const s = fromSnapshot(srv.getConversation(srv.seq));
    const unknown = create(EventSchema, { seq: srv.seq + 1n }); // no kind: what a newer server's kind decodes to
    const next = reduce(s, { type: "event", event: unknown });
    expect(next.unknownEvents).toBe(1);
    expect(next.seq).toBe(srv.seq + 1n);
    expect(view({ ...next, seq: s.seq })).toEqual(view(s));
    expect(next.desync).toBe(false);
  });

  it("marks the state desync when an event contradicts it (a delta for a block it never saw start)", () => {
    const srv = new FakeServer("c1");
    script(srv);
    const s = fromSnapshot(srv.getConversation(srv.seq));
    const delta = create(EventSchema, {
      seq: srv.seq + 1n,
      kind: { case: "blockDelta", value: { promptId: "p", messageId: "m", blockId: "never-started", content: "x" } },
    });
    const next = reduce(s, { type: "event", event: delta });
    expect(next.desync).toBe(true);
    // A fresh snapshot clears it.
    expect(fromSnapshot(srv.getConversation(srv.seq), next).desync).toBe(false);
  });

  it("never throws, whatever the event holds", () => {
    const srv = new FakeServer("c1");
    script(srv);
    const s = fromSnapshot(srv.getConversation(srv.seq));
    const broken = [
      { seq: srv.seq + 1n, kind: { case: "blockStart", value: null } },
      { seq: srv.seq + 1n, kind: { case: "messageCreated", value: { message: { blocks: null } } } },
      { seq: undefined, kind: undefined },
      null,
    ] as unknown as Event[];
    for (const event of broken) {
      expect(() => reduce(s, { type: "event", event })).not.toThrow();
    }
  });
});

describe("replace", () => {
  it("takes another follower's whole state for the same conversation only", () => {
    const srv = new FakeServer("c1");
    script(srv);
    const other = fromSnapshot(srv.getConversation(srv.seq));
    const mine = initialState("c1");
    expect(reduce(mine, { type: "replace", state: other })).toBe(other);
    expect(reduce(initialState("c2"), { type: "replace", state: other })).toEqual(initialState("c2"));
  });
});

describe("older messages (a bounded snapshot and ListMessages pages)", () => {
  /** exchanges writes n finished question-and-reply pairs; it returns the reply message ids. */
  function exchanges(srv: FakeServer, n: number): string[] {
    const replies: string[] = [];
    for (let i = 0; i < n; i++) {
      const { messageIds, promptIds } = srv.sendMessage(`question ${i}`);
      srv.startPrompt(promptIds[0]);
      const t = srv.startBlock(promptIds[0], "text");
      srv.append(t, `answer ${i}`);
      srv.endPrompt(promptIds[0], "completed");
      replies.push(messageIds[0]);
    }
    return replies;
  }

  /** page is the action of a ListMessages answer to the state's token, read at seq. */
  const page = (srv: FakeServer, s: ConversationState, seq = srv.seq, size = 2) => ({
    type: "older" as const,
    pageToken: s.older!,
    ...srv.listMessages(s.older!, { seq, size }),
  });

  /** subscribeBounded is a client that subscribed at seq with a snapshot of the latest `window` messages. */
  function subscribeBounded(srv: FakeServer, seq: bigint, window: number): ConversationState {
    const { snapshot, replay } = srv.subscribe(seq, { window });
    return apply(fromSnapshot(snapshot), replay);
  }

  it("a bounded snapshot keeps its token; pages put older messages first, in order, until none remain", () => {
    const srv = new FakeServer();
    exchanges(srv, 4);
    const all = srv.getConversation().messages.map((m) => m.id);
    let s = subscribeBounded(srv, srv.seq, 3);
    expect(s.messageIds).toEqual(all.slice(5));
    expect(s.older).not.toBeNull();

    s = reduce(s, page(srv, s));
    expect(s.messageIds).toEqual(all.slice(3));
    s = reduce(s, page(srv, s));
    expect(s.messageIds).toEqual(all.slice(1));
    expect(s.older).not.toBeNull();
    // The last page: nothing before it.
    s = reduce(s, page(srv, s));
    expect(s.messageIds).toEqual(all);
    expect(s.older).toBeNull();
    expect(view(s)).toEqual(expected(srv));
    expect(s.desync).toBe(false);
  });

  it("an unbounded snapshot (or GetConversation) has nothing older", () => {
    const srv = new FakeServer();
    exchanges(srv, 2);
    expect(subscribeAt(srv, srv.seq).older).toBeNull();
    expect(fromSnapshot(srv.getConversation()).older).toBeNull();
  });

  it("a page skips the messages the state already holds", () => {
    const srv = new FakeServer();
    exchanges(srv, 3);
    const all = srv.getConversation().messages.map((m) => m.id);
    const s = subscribeBounded(srv, srv.seq, 2);
    // A page that reaches into the window (the window moved back after a
    // reconnect to a server with a larger snapshot size, say).
    const { messages } = srv.listMessages(`before:${all[5]}`, { size: 4 });
    const next = reduce(s, { type: "older", pageToken: s.older!, messages, nextPageToken: "before:" + all[1] });
    expect(next.messageIds).toEqual(all.slice(1));
    expect(new Set(next.messageIds).size).toBe(next.messageIds.length);
    expect(next.messages[all[4]]).toBe(s.messages[all[4]]);
  });

  it("a page asked for before a snapshot moved the window is dropped, and so is one before any snapshot", () => {
    const srv = new FakeServer();
    exchanges(srv, 3);
    const s = subscribeBounded(srv, srv.seq, 2);
    const stale = page(srv, s);
    exchanges(srv, 1);
    const moved = subscribeBounded(srv, srv.seq, 2);
    expect(moved.older).not.toBe(s.older);
    expect(reduce(moved, stale)).toBe(moved);
    expect(reduce(initialState("c1"), stale)).toEqual(initialState("c1"));
  });

  it("a snapshot after pages replaces the state with its own window and token", () => {
    const srv = new FakeServer();
    exchanges(srv, 4);
    let s = subscribeBounded(srv, srv.seq, 2);
    s = reduce(s, page(srv, s));
    s = reduce(s, page(srv, s));
    exchanges(srv, 1);
    const { snapshot } = srv.subscribe(srv.seq, { window: 2 });
    s = reduce(s, { type: "snapshot", snapshot });
    expect(s.messageIds).toEqual(snapshot.messages.map((m) => m.id));
    expect(s.older).toBe(snapshot.olderPageToken);
    // …and pages load again from there.
    while (s.older !== null) s = reduce(s, page(srv, s));
    expect(view(s)).toEqual(expected(srv));
  });

  it("replace keeps the pages this tab loaded before the other tab's window", () => {
    const srv = new FakeServer();
    exchanges(srv, 4);
    let mine = subscribeBounded(srv, srv.seq, 2);
    mine = reduce(mine, page(srv, mine));
    mine = reduce(mine, page(srv, mine));
    // Another tab joins: the leader sends its state (its own window) to every tab.
    exchanges(srv, 1);
    const leader = subscribeBounded(srv, srv.seq, 2);
    mine = apply(mine, srv.eventsAfter(mine.seq!));
    const next = reduce(mine, { type: "replace", state: leader });
    expect(next.messageIds).toEqual(mine.messageIds);
    expect(next.older).toBe(mine.older);
    expect(next.seq).toBe(leader.seq);
    expect(view(next)).toEqual(view(mine));
    // A leader that loaded further back than this tab gives its pages.
    expect(reduce(subscribeBounded(srv, srv.seq, 2), { type: "replace", state: next })).toBe(next);
  });

  it("feedback on a message before the window neither adds it nor desyncs; the page that brings it takes it", () => {
    const srv = new FakeServer();
    const replies = exchanges(srv, 4);
    let s = subscribeBounded(srv, srv.seq, 2);
    const before = s;
    // Read before the feedback commits…
    const early = page(srv, s);
    srv.setFeedback(replies[2], Rating.UP);
    // …which arrives before the page does.
    s = apply(s, srv.eventsAfter(s.seq!));
    expect(s.messageIds).toEqual(before.messageIds);
    expect(s.desync).toBe(false);
    expect(s.seq).toBe(srv.seq);
    s = reduce(s, early);
    expect(s.messages[replies[2]].feedback?.rating).toBe(Rating.UP);
    // Once it is held, feedback applies as to any message.
    srv.setFeedback(replies[2], Rating.DOWN);
    s = apply(s, srv.eventsAfter(s.seq!));
    while (s.older !== null) s = reduce(s, page(srv, s));
    expect(view(s)).toEqual(expected(srv));
  });

  it("other events about a message the state does not hold are harmless", () => {
    const srv = new FakeServer();
    const replies = exchanges(srv, 3);
    const s = subscribeBounded(srv, srv.seq, 2);
    const old = replies[0];
    const ev = (kind: Event["kind"]) => create(EventSchema, { seq: srv.seq + 1n, kind });
    const prompt = { id: "p-old", conversationId: "c1", messageId: old, status: "completed" };
    for (const event of [
      ev({ case: "promptCompleted", value: { prompt } as never }),
      ev({ case: "promptCancelled", value: { prompt } as never }),
    ]) {
      const next = reduce(s, { type: "event", event });
      expect(next.desync).toBe(false);
      expect(next.messageIds).toEqual(s.messageIds);
    }
    expect(reduce(s, { type: "feedback", messageId: old, feedback: { rating: Rating.UP, comment: "" } })).toBe(s);
  });

  it("historyCleared leaves nothing older", () => {
    const srv = new FakeServer();
    exchanges(srv, 3);
    let s = subscribeBounded(srv, srv.seq, 2);
    srv.clearHistory();
    s = apply(s, srv.eventsAfter(s.seq!));
    expect(s.older).toBeNull();
    expect(view(s)).toEqual(expected(srv));
  });

  it("subscribing at any seq and loading every page at any moment converges on GetConversation", () => {
    const srv = new FakeServer();
    const replies = exchanges(srv, 3);
    srv.setFeedback(replies[0], Rating.UP);
    script(srv);
    srv.setFeedback(replies[1], Rating.DOWN);
    srv.setFeedback(replies[0], Rating.DOWN);
    script(srv, { finish: false });
    srv.setFeedback(replies[2], Rating.UP);
    const end = srv.seq;
    let runs = 0;
    for (let k = 0n; k <= end; k++) {
      for (const window of [1, 3]) {
        // A page is read at seq `read` and arrives when the client has
        // applied the events up to `at`: before or after it, by `lag`.
        for (const lag of [-2n, 0n, 3n]) {
          let s = subscribeBounded(srv, k, window);
          let at = k;
          while (s.older !== null && at <= end) {
            const read = at + lag < k ? k : at + lag > end ? end : at + lag;
            const p = page(srv, s, read, 2);
            s = apply(s, srv.log.slice(Number(s.seq), Number(at)));
            s = reduce(s, p);
            at += 2n;
          }
          s = apply(s, srv.eventsAfter(s.seq!));
          while (s.older !== null) s = reduce(s, page(srv, s, end, 2));
          expect(view(s), `subscribed at ${k}, window ${window}, lag ${lag}`).toEqual(expected(srv));
          expect(s.desync).toBe(false);
          runs++;
        }
      }
    }
    expect(runs).toBeGreaterThan(100);
  });
});
