// What a pause looks like: an approval with the tool and its input, a
// question with its choices or a text box, and where a client tool runs.

import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import type { PendingInput } from "@convo/react";
import { PauseCard, type PauseActions } from "./PauseCard";

const actions: PauseActions = { approve: async () => true, deny: async () => true, answer: async () => true };

const pending = (kind: string, request: PendingInput["request"], more: Partial<PendingInput> = {}): PendingInput => ({
  toolCallId: "t1",
  promptId: "p1",
  kind,
  request,
  claimedBy: "",
  toolName: kind === "approval" ? "publish_note" : kind === "client_tool" ? "browser_info" : "ask_user",
  input: { note: "about the tides" },
  blockId: "b1",
  messageId: "m1",
  ...more,
});

const render = (p: PendingInput) => renderToStaticMarkup(<PauseCard p={p} actions={actions} />);

describe("PauseCard", () => {
  it("shows an approval's tool and message, a reason box, Approve and Deny, not the arguments the tool panel shows", () => {
    const html = render(pending("approval", { message: "Publish it?" }));
    expect(html).toContain('aria-label="Approval needed"');
    expect(html).toContain("publish_note");
    expect(html).toContain("Publish it?");
    expect(html).not.toContain("about the tides");
    expect(html).toContain("Its arguments are shown above.");
    expect(html).toContain("Reason (optional)");
    expect(html).toMatch(/>Approve<\/button>.*>Deny<\/button>/);
  });

  it("shows a question's choices as buttons, and a text box when it has none", () => {
    const choices = render(pending("question", { question: "Which colour do you like best?", choices: ["red", "green", "blue"] }));
    expect(choices).toContain("Which colour do you like best?");
    expect(choices).toMatch(/>red<\/button>.*>green<\/button>.*>blue<\/button>/);
    expect(choices).not.toContain("<input");
    const free = render(pending("question", { question: "Which file?" }));
    expect(free).toContain('aria-label="Your answer"');
    expect(free).toContain(">Answer</button>");
  });

  it("shows where a client tool runs", () => {
    expect(render(pending("client_tool", {}, { run: { status: "here" } }))).toContain("running in this tab");
    expect(render(pending("client_tool", {}, { run: { status: "elsewhere", claimedBy: "tab-2" } }))).toContain("running in another tab");
    expect(render(pending("client_tool", {}, { run: { status: "done", output: "{}" } }))).toContain("done in this tab");
    expect(render(pending("client_tool", {}))).toContain("waiting for a client to run it");
  });
});
