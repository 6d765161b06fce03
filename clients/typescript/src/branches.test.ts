// The fold of branchSwitched (docs/branches.md, docs/events.md
// "branchSwitched"): edits, regenerations and switches, checked against
// the fake server's GetConversation for clients that join at any seq,
// with whole and bounded snapshots.

import { describe, expect, it } from "vitest";
import type { Event } from "./gen/convo/v1/events_pb.js";
import { initialState, reduce, siblingsOf, type ConversationState, type SnapshotLike } from "./fold.js";
import { FakeServer } from "./testing/fakeServer.js";

const apply = (s: ConversationState, events: Event[]) => events.reduce((st, event) => reduce(st, { type: "event", event }), s);
const fromSnapshot = (snapshot: SnapshotLike) => reduce(initialState("c1"), { type: "snapshot", snapshot });

/** view is the part of the state that GetConversation describes. */
const view = (s: ConversationState) => ({
  conversation: s.conversation,
  messageIds: s.messageIds,
  messages: s.messages,
  blocks: s.blocks,
  seq: s.seq,
});
const expected = (srv: FakeServer, seq = srv.seq) => view(fromSnapshot(srv.getConversation(seq)));

/** answer writes a whole reply to a queued prompt, in deltas. */
function answer(srv: FakeServer, promptId: string, text: string, finish = true): string {
  srv.startPrompt(promptId);
  const b = srv.startBlock(promptId, "text");
  for (const word of text.split(" ")) srv.append(b, word + " ");
  if (finish) srv.endPrompt(promptId, "completed");
  return b;
}

/** texts is the active path as its messages' texts, "‹i/n›" after one with versions. */
function texts(s: ConversationState): string[] {
  return s.messageIds.map((id) => {
    const m = s.messages[id];
    const t = m.blockIds.map((b) => s.blocks[b].content.trim()).join("") || `(${m.status})`;
    return m.siblingCount > 1 ? `${t} ‹${m.siblingIndex + 1}/${m.siblingCount}›` : t;
  });
}

/**
 * conversationWithBranches plays two turns, a regeneration (streamed), an
 * edit of the first message (streamed), switches back and forth by id and
 * by place, an A/B comparison, an edit below it and a switch back through
 * its slot b.
 */
function conversationWithBranches(switchWindow?: number): FakeServer {
  const srv = new FakeServer();
  srv.switchWindow = switchWindow;
  const one = srv.sendMessage("one");
  answer(srv, one.promptIds[0], "re: one");
  const two = srv.sendMessage("two");
  answer(srv, two.promptIds[0], "re: two");
  const re = srv.regenerate();
  answer(srv, re.promptId, "encore two");
  const u1 = srv.getConversation().messages[0].id;
  const ed = srv.editMessage(u1, "uno");
  answer(srv, ed.promptId, "re: uno");
  srv.switchTo(ed.userMessageId, 0); // ‹ back to "one", down to "encore two"
  srv.switchTo(re.messageId, 0); // ‹ to "re: two"
  srv.switchTo(two.messageIds[0]); // the branch shown: nothing
  const pick = srv.sendMessage("pick", { id: "cmp1", slots: ["a", "b"] });
  answer(srv, pick.promptIds[0], "A");
  answer(srv, pick.promptIds[1], "B");
  const next = srv.sendMessage("next");
  answer(srv, next.promptIds[0], "re: next");
  const user = srv.getConversation().messages.at(-2)!.id;
  const then = srv.editMessage(user, "then");
  answer(srv, then.promptId, "re: then");
  srv.switchTo(then.userMessageId, 0); // ‹ to "next"
  srv.switchTo(pick.messageIds[1]); // slot b: the newest below the pair, "re: then"
  srv.switchTo(u1, 1); // › to "uno" again
  return srv;
}

describe("branchSwitched", () => {
  it("keeps the path up to the fork, drops the rest with its blocks, and appends the new messages with theirs", () => {
    const srv = new FakeServer();
    const one = srv.sendMessage("one");
    answer(srv, one.promptIds[0], "re: one");
    const two = srv.sendMessage("two");
    const oldBlock = answer(srv, two.promptIds[0], "re: two");
    let s = fromSnapshot(srv.getConversation());
    const before = srv.seq;
    const re = srv.regenerate();
    s = apply(s, srv.eventsAfter(before));
    expect(texts(s)).toEqual(["one", "re: one", "two", "(pending) ‹2/2›"]);
    expect(s.blocks[oldBlock]).toBeUndefined();
    expect(s.messages[re.messageId].parentId).toBe(s.messageIds[2]);
    expect(siblingsOf(s, re.messageId)).toEqual({ index: 1, count: 2 });
    expect(s.conversation?.activePromptId).toBe(re.promptId);

    answer(srv, re.promptId, "encore two");
    const at = srv.seq;
    srv.switchTo(two.messageIds[0]);
    s = apply(apply(s, srv.log.slice(Number(s.seq), Number(at))), srv.eventsAfter(at));
    expect(texts(s)).toEqual(["one", "re: one", "two", "re: two ‹1/2›"]);
    expect(s.blocks[oldBlock]?.content).toBe("re: two ");
    expect(view(s)).toEqual(expected(srv));
    expect(s.desync).toBe(false);
  });

  it("an edit of the first message replaces every message, and nothing is older", () => {
    const srv = new FakeServer();
    for (const q of ["one", "two", "three"]) answer(srv, srv.sendMessage(q).promptIds[0], `re: ${q}`);
    const first = srv.getConversation().messages[0].id;
    const at = srv.seq;
    let s = fromSnapshot(srv.subscribe(at, { window: 2 }).snapshot);
    expect(s.older).not.toBeNull();
    srv.editMessage(first, "uno");
    s = apply(s, srv.eventsAfter(at));
    expect(texts(s)).toEqual(["uno ‹2/2›", "(pending)"]);
    expect(s.older).toBeNull();
    expect(view(s)).toEqual(expected(srv));
  });

  it("a fork before the window keeps no message and the token; the pages bring the fork and what precedes it", () => {
    const srv = new FakeServer();
    for (const q of ["one", "two", "three"]) answer(srv, srv.sendMessage(q).promptIds[0], `re: ${q}`);
    const second = srv.getConversation().messages[2].id;
    srv.editMessage(second, "deux");
    srv.switchTo(second); // back to "two … three": the fork, "re: one", is kept
    const at = srv.seq;
    let s = fromSnapshot(srv.subscribe(at, { window: 1 }).snapshot);
    srv.switchTo(second, 1);
    s = apply(s, srv.eventsAfter(at));
    expect(texts(s)).toEqual(["deux ‹2/2›", "(pending)"]);
    expect(s.older).not.toBeNull();
    while (s.older !== null) s = reduce(s, { type: "older", pageToken: s.older, ...srv.listMessages(s.older, { size: 1 }) });
    expect(texts(s)).toEqual(["one", "re: one", "deux ‹2/2›", "(pending)"]);
    expect(view(s)).toEqual(expected(srv));
  });

  it("a page read before a switch whose fork is before the window is dropped, not put before the new path", () => {
    const srv = new FakeServer();
    for (const q of ["one", "two", "three"]) answer(srv, srv.sendMessage(q).promptIds[0], `re: ${q}`);
    const second = srv.getConversation().messages[2].id;
    srv.editMessage(second, "deux");
    srv.switchTo(second); // back to "two … three"
    const at = srv.seq;
    let s = fromSnapshot(srv.subscribe(at, { window: 1 }).snapshot);
    // loadOlder asks for a page; ListMessages reads it (the old path:
    // "re: two", "three") before the switch commits, and the page comes
    // back after the stream brought the switch.
    const inFlight = { type: "older" as const, pageToken: s.older!, ...srv.listMessages(s.older!, { seq: at }) };
    expect(inFlight.messages.length).toBe(2);
    srv.switchTo(second, 1);
    s = apply(s, srv.eventsAfter(at));
    s = reduce(s, inFlight);
    expect(texts(s)).toEqual(["deux ‹2/2›", "(pending)"]);
    expect(s.older).not.toBeNull();
    // A page read after the switch brings the fork and what precedes it.
    while (s.older !== null) s = reduce(s, { type: "older", pageToken: s.older, ...srv.listMessages(s.older, { size: 1 }) });
    expect(texts(s)).toEqual(["one", "re: one", "deux ‹2/2›", "(pending)"]);
    expect(view(s)).toEqual(expected(srv));
  });

  it("subscribing at any seq and following every event equals GetConversation after every change", () => {
    const srv = conversationWithBranches();
    const end = Number(srv.seq);
    expect(srv.log.filter((e) => e.kind.case === "branchSwitched").length).toBe(8);
    let checks = 0;
    for (let k = 0; k <= end; k++) {
      const { snapshot, replay } = srv.subscribe(BigInt(k));
      let s = apply(fromSnapshot(snapshot), replay);
      for (let j = k + 1; j <= end; j++) {
        s = apply(s, [srv.log[j - 1]]);
        // The fake records its state as each event is written, so a
        // change of several events is whole at its last one: compare
        // there, and at every branchSwitched.
        const kind = srv.log[j - 1].kind.case;
        if (j === end || kind === "branchSwitched" || kind === "conversationUpdated") {
          expect(view(s), `joined at ${k}, at ${j}`).toEqual(expected(srv, BigInt(j)));
          checks++;
        }
      }
      expect(s.desync).toBe(false);
    }
    expect(checks).toBeGreaterThan(300);
    expect(texts(fromSnapshot(srv.getConversation()))).toEqual(["uno ‹2/2›", "re: uno"]);
  });

  it("a switch larger than a snapshot replaces every message; its token pages in the rest, and a page in flight is dropped", () => {
    const srv = new FakeServer();
    srv.switchWindow = 2;
    for (const q of ["one", "two", "three", "four"]) answer(srv, srv.sendMessage(q).promptIds[0], `re: ${q}`);
    const second = srv.getConversation().messages[2].id;
    const ed = srv.editMessage(second, "deux");
    answer(srv, ed.promptId, "re: deux");
    const at = srv.seq;
    let s = fromSnapshot(srv.subscribe(at, { window: 3 }).snapshot);
    expect(texts(s)).toEqual(["re: one", "deux ‹2/2›", "re: deux"]);
    const inFlight = { type: "older" as const, pageToken: s.older!, ...srv.listMessages(s.older!, { seq: at }) };
    srv.switchTo(second); // back to "two … four": five messages after the fork "re: one"
    const switched = srv.eventsAfter(at)[0];
    expect(switched.kind.case === "branchSwitched" && switched.kind.value.olderPageToken).toBeTruthy();
    s = apply(s, srv.eventsAfter(at));
    // Not "re: one" (the fork) kept before the two latest: they replace it.
    expect(texts(s)).toEqual(["four", "re: four"]);
    expect(s.older).not.toBeNull();
    s = reduce(s, inFlight);
    expect(texts(s)).toEqual(["four", "re: four"]);
    while (s.older !== null) s = reduce(s, { type: "older", pageToken: s.older, ...srv.listMessages(s.older, { size: 1 }) });
    expect(texts(s)).toEqual(["one", "re: one", "two ‹1/2›", "re: two", "three", "re: three", "four", "re: four"]);
    expect(view(s)).toEqual(expected(srv));
  });

  it("bounded snapshots and pages loaded at any moment converge on GetConversation", () => {
    const srv = conversationWithBranches();
    converges(srv);
  });

  it("so do they when switches are bounded too", () => {
    const srv = conversationWithBranches(1);
    expect(srv.log.some((e) => e.kind.case === "branchSwitched" && e.kind.value.olderPageToken)).toBe(true);
    converges(srv);
  });
});

/**
 * converges checks that a client joining at any seq with a bounded
 * snapshot, loading one page before the events and the rest after them,
 * ends equal to GetConversation.
 */
function converges(srv: FakeServer) {
  const end = srv.seq;
  for (let k = 0n; k <= end; k++) {
    for (const window of [1, 3]) {
      let s = apply(fromSnapshot(srv.subscribe(k, { window }).snapshot), srv.subscribe(k, { window }).replay);
      // One page at once, as a reader scrolled up, then the events, then the rest.
      if (s.older !== null) s = reduce(s, { type: "older", pageToken: s.older, ...srv.listMessages(s.older, { seq: k }) });
      s = apply(s, srv.eventsAfter(k));
      while (s.older !== null) s = reduce(s, { type: "older", pageToken: s.older, ...srv.listMessages(s.older) });
      expect(view(s), `joined at ${k}, window ${window}`).toEqual(expected(srv));
      expect(s.desync).toBe(false);
    }
  }
}
