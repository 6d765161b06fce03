// Share links as the app renders them: the header's Share (never for a
// viewer), the dialog's new link (shown once) and its list with Revoke,
// and the page a link opens: read only, "User" for the sender, the
// continue bar signed in and signed out, and the page of a dead link.

import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it, vi } from "vitest";
import { BlockSchema, GetSharedConversationResponseSchema, MessageSchema, ShareSchema } from "@convo/client";
import type { ConvoClient } from "../api/client";
import { sharedView } from "../state/shares";
import { ConversationHeader } from "./ConversationHeader";
import { NewShareLink, ShareList } from "./ShareDialog";
import { ContinueBar, ShareGone, SharedMessages } from "./SharedView";

// The page imports the router, which reads the page's location.
vi.hoisted(() => {
  Object.assign(globalThis, { window: { location: { pathname: "/", search: "" }, addEventListener: () => {} } });
});

const header = (role: string) =>
  renderToStaticMarkup(
    <ConversationHeader title="T" status="live" empty={false} onClear={() => {}} role={role} onShare={() => {}} />,
  );

describe("ConversationHeader", () => {
  it("offers Share to the owner and participants, never to a viewer", () => {
    expect(header("owner")).toContain(">Share</button>");
    expect(header("participant")).toContain(">Share</button>");
    expect(header("viewer")).not.toContain(">Share</button>");
  });
});

describe("the Share dialog", () => {
  it("shows a new link once, saying so, with Copy", () => {
    const html = renderToStaticMarkup(<NewShareLink url="http://x.test/s/tok" />);
    expect(html).toContain('value="http://x.test/s/tok"');
    expect(html).toContain("shown only this once");
    expect(html).toContain(">Copy</button>");
  });

  const now = Date.UTC(2026, 0, 10);
  const shares = [
    create(ShareSchema, { id: "s3", mode: "live", createdBy: "bob", createdAt: timestampFromMs(now - 10) }),
    create(ShareSchema, {
      id: "s2",
      mode: "snapshot",
      includeTools: true,
      createdBy: "alice",
      createdAt: timestampFromMs(now - 20),
      expiresAt: timestampFromMs(now - 1),
    }),
    create(ShareSchema, { id: "s1", mode: "live", createdBy: "alice", revokedAt: timestampFromMs(now - 5) }),
  ];
  const list = (me: string, role: string) =>
    renderToStaticMarkup(<ShareList shares={shares} me={me} role={role} busy={false} onRevoke={() => {}} now={now} />);

  it("lists every link with its mode and state; the owner revokes those in force", () => {
    const html = list("alice", "owner");
    expect(html).toMatch(/data-share-id="s3" data-status="active".*>Revoke<\/button>/s);
    expect(html).toContain("Snapshot, with tool calls");
    expect(html).toMatch(/data-share-id="s2" data-status="expired"/);
    expect(html).toMatch(/data-share-id="s1" data-status="revoked"/);
    expect(html.match(/>Revoke<\/button>/g)).toHaveLength(1);
    expect(html).toContain(" by bob");
    expect(html).not.toContain("tok");
  });

  it("a participant revokes only their own", () => {
    expect(list("carol", "participant")).not.toContain(">Revoke</button>");
    expect(list("bob", "participant")).toContain(">Revoke</button>");
  });

  it("says when there is no link", () => {
    expect(renderToStaticMarkup(<ShareList shares={[]} me="a" role="owner" busy={false} onRevoke={() => {}} />)).toContain(
      "No links yet.",
    );
  });
});

describe("the page a share link opens", () => {
  const view = sharedView(
    create(GetSharedConversationResponseSchema, {
      conversation: { id: "c1", title: "Trip" },
      seq: 4n,
      messages: [
        create(MessageSchema, {
          id: "m1",
          role: "user",
          status: "completed",
          siblingCount: 2,
          blocks: [create(BlockSchema, { id: "b1", blockType: "text", content: "Plan a trip", status: "completed" })],
        }),
        create(MessageSchema, {
          id: "m2",
          role: "assistant",
          status: "completed",
          blocks: [create(BlockSchema, { id: "b2", blockType: "text", content: "Go north", status: "completed" })],
        }),
      ],
    }),
  );

  it("shows the messages read only: no feedback, trace, edit, regenerate or versions", () => {
    const html = renderToStaticMarkup(<SharedMessages view={view} older={false} />);
    expect(html).toContain("Plan a trip");
    expect(html).toContain("Go north");
    expect(html).toContain('aria-label="Message from User"');
    for (const action of [">Edit<", ">Regenerate<", ">Trace<", "Good reply", "Bad reply", "‹"]) {
      expect(html).not.toContain(action);
    }
    expect(html).not.toContain("<footer");
  });

  it("says when earlier messages are left out", () => {
    expect(renderToStaticMarkup(<SharedMessages view={view} older />)).toContain("Earlier messages");
    expect(renderToStaticMarkup(<SharedMessages view={null} older={false} />)).toContain("Loading");
  });

  const client = {} as Pick<ConvoClient, "forkShare">;
  it("offers Continue to a signed-in reader, sign-in to one the server asked a token of", () => {
    const signedIn = renderToStaticMarkup(<ContinueBar client={client} token="t" needsSignIn={false} ready />);
    expect(signedIn).toContain("Continue this conversation");
    const signedOut = renderToStaticMarkup(<ContinueBar client={client} token="t" needsSignIn ready />);
    expect(signedOut).toContain("Sign in to continue this conversation");
    expect(signedOut).toContain('id="share-token-input"');
    expect(signedOut).not.toContain("Continue this conversation</button>");
  });

  it("a dead link says it does not work any more", () => {
    expect(renderToStaticMarkup(<ShareGone />)).toContain("This link does not work any more");
  });
});
