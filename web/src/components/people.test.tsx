// What a shared conversation shows: who sent each message, queued messages
// with "Take back", who else is here and who types, the caller's role in
// the header and the sidebar, and the members panel for the owner and for
// a member.

import { create } from "@bufbuild/protobuf";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it, vi } from "vitest";
import { MemberSchema, type BlockState, type ConversationInfo, type MessageState } from "@convo/client";
import type { ConversationList } from "@convo/react";
import type { ConvoClient } from "../api/client";
import type { Members } from "../hooks/useMembers";
import { Composer } from "./Composer";
import { ConversationHeader } from "./ConversationHeader";
import { ConversationItem } from "./ConversationItem";
import { MembersDialog } from "./MembersDialog";
import { MessageView, type MessageActions } from "./MessageView";
import { PresenceAvatars, TypingIndicator } from "./Presence";

// The sidebar's items import the router, which reads the page's location.
vi.hoisted(() => {
  Object.assign(globalThis, { window: { location: { pathname: "/", search: "" }, addEventListener: () => {} } });
});

const actions: MessageActions = {
  onFeedback: () => {},
  onTrace: () => {},
  onEdit: async () => true,
  onRegenerate: () => {},
  onSwitch: () => {},
  onTakeBack: () => {},
};

const message = (id: string, more: Partial<MessageState> = {}): MessageState => ({
  id,
  role: "user",
  status: "completed",
  promptId: "",
  comparisonId: "",
  comparisonSlot: "",
  parentId: "",
  siblingCount: 1,
  siblingIndex: 0,
  error: "",
  blockIds: [],
  ...more,
});

const text = (messageId: string, content: string): BlockState => ({
  id: `b-${messageId}`,
  messageId,
  blockType: "text",
  content,
  metadata: {},
  status: "completed",
  position: 0,
});

const view = (m: MessageState, props: { sender?: string; takeBack?: boolean } = {}) =>
  renderToStaticMarkup(<MessageView message={m} blocks={[text(m.id, "hello")]} actions={actions} {...props} />);

/** buttons lists the labels of the rendered buttons. */
const buttons = (html: string) => [...html.matchAll(/<button[^>]*>(.*?)<\/button>/g)].map((m) => m[1].replace(/<[^>]+>/g, "").trim());

const noClient = {} as ConvoClient;

describe("sender names", () => {
  it("names another member's message by id and the caller's as You", () => {
    const bobs = view(message("m1", { senderId: "bob" }), { sender: "bob" });
    expect(bobs).toContain('aria-label="Message from bob"');
    expect(bobs).toContain('<span class="role">bob</span>');
    const mine = view(message("m2", { senderId: "alice" }), { sender: "You" });
    expect(mine).toContain('aria-label="You message"');
    expect(mine).toContain('<span class="role">You</span>');
  });
});

describe("queued messages", () => {
  it("marks a queued message and offers Take back instead of Edit, when allowed", () => {
    const m = message("q1", { senderId: "bob", queued: true });
    const allowed = view(m, { sender: "bob", takeBack: true });
    expect(allowed).toContain('data-queued="true"');
    expect(allowed).toContain(">Queued</span>");
    expect(buttons(allowed)).toEqual(["Take back"]);
    expect(buttons(view(m, { sender: "bob", takeBack: false }))).toEqual([]);
    // Once its turn comes: no mark, Edit again.
    const started = view(message("q1", { senderId: "bob" }), { sender: "bob", takeBack: false });
    expect(started).not.toContain("Queued");
    expect(buttons(started)).toEqual(["Edit"]);
  });

  it("says a queued reply waits for the reply before it, not for a worker", () => {
    const reply = (queued: boolean) =>
      renderToStaticMarkup(
        <MessageView message={message("r1", { role: "assistant", status: "pending", promptId: "p1", queued })} blocks={[]} actions={actions} />,
      );
    expect(reply(true)).toContain("Queued: starts when the reply before it ends");
    expect(reply(false)).toContain("Waiting for a worker…");
  });

  it("keeps the composer usable while a reply runs, and read-only for a viewer", () => {
    const composer = (disabled: boolean) =>
      renderToStaticMarkup(<Composer onSend={async () => true} onStop={() => {}} running disabled={disabled} placeholder="p" />);
    const running = composer(false);
    expect(running).toContain("Stop");
    expect(running).not.toMatch(/<textarea[^>]*disabled/);
    expect(composer(true)).toMatch(/<textarea[^>]*disabled/);
  });
});

describe("presence", () => {
  it("shows the others' initials, and who types", () => {
    const html = renderToStaticMarkup(<PresenceAvatars ids={["bob", "carol.d"]} />);
    expect(html).toContain('aria-label="Also here: bob, carol.d"');
    expect([...html.matchAll(/<span aria-hidden="true">(.*?)<\/span>/g)].map((m) => m[1])).toEqual(["B", "CD"]);
    expect(renderToStaticMarkup(<PresenceAvatars ids={[]} />)).toBe("");
    expect(renderToStaticMarkup(<TypingIndicator ids={["bob"]} />)).toContain("bob is typing…");
    expect(renderToStaticMarkup(<TypingIndicator ids={[]} />)).toMatch(/role="status"[^>]*><\/p>/);
  });
});

describe("roles", () => {
  const header = (role: string) =>
    renderToStaticMarkup(
      <ConversationHeader title="T" status="live" empty={false} onClear={() => {}} role={role} present={["bob"]} onMembers={() => {}} />,
    );

  it("shows the caller's role in the header when not the owner, and Clear history only to the owner", () => {
    const owner = header("owner");
    expect(owner).not.toContain("role-badge");
    expect(buttons(owner)).toEqual(["Members", "Clear history"]);
    const viewer = header("viewer");
    expect(viewer).toMatch(/role-badge[^>]*>Viewer</);
    expect(buttons(viewer)).toEqual(["Members"]);
    expect(header("participant")).toMatch(/role-badge[^>]*>Participant</);
    expect(owner).toContain('aria-label="Also here: bob"');
  });

  it("marks a conversation shared with the user in the sidebar, without rename or delete", () => {
    const item = (role?: string) => {
      const c: ConversationInfo = { id: "c1", title: "Plans", activePromptId: "", ...(role ? { role } : {}) };
      return renderToStaticMarkup(
        <ConversationItem client={noClient} c={c} current={false} list={{} as ConversationList} go={() => () => {}} />,
      );
    };
    const shared = item("participant");
    expect(shared).toContain(">Shared</span>");
    expect(shared).not.toContain("Rename Plans");
    const own = item("owner");
    expect(own).not.toContain("Shared");
    expect(own).toContain('aria-label="Rename Plans"');
    expect(item()).not.toContain("Shared"); // a server before members
  });
});

describe("members panel", () => {
  const members: Members = {
    list: [
      create(MemberSchema, { userId: "alice", role: "owner" }),
      create(MemberSchema, { userId: "bob", role: "participant" }),
      create(MemberSchema, { userId: "carol", role: "viewer" }),
    ],
    error: null,
    refresh: () => {},
  };
  const dialog = (role: string, me: string) =>
    renderToStaticMarkup(
      <MembersDialog client={noClient} conversationId="c1" role={role} me={me} members={members} onClose={() => {}} onLeft={() => {}} />,
    );

  it("lets the owner add by user id as viewer or participant, change a role and remove", () => {
    const html = dialog("owner", "alice");
    expect(html).toContain('aria-label="Add a member"');
    expect(html).toContain(">User id");
    expect(html).toMatch(/<option value="participant"[^>]*>Participant \(reads and writes\)/);
    expect(html).toMatch(/<option value="viewer"[^>]*>Viewer \(reads\)/);
    expect(html).toContain('aria-label="Remove bob"');
    expect(html).toContain('aria-label="Remove carol"');
    expect(html).not.toContain('aria-label="Remove alice"');
    expect(html).toMatch(/<select id="role-carol">.*<option value="viewer" selected="">/);
    expect(html).not.toContain(">Leave<");
  });

  it("lets a member see the members and leave, and nothing more", () => {
    const html = dialog("viewer", "carol");
    expect(html).not.toContain("Add a member");
    expect(html).not.toContain("Remove ");
    expect(html).not.toContain("<select");
    expect(html).toContain(">Leave</button>");
    expect(html).toContain("You are a viewer here.");
    expect(html).toMatch(/carol<span class="muted small"> \(you\)/);
  });
});
