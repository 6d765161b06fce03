// A tool call that waits for a person says so, and shows nothing running.

import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import type { BlockState } from "@convo/client";
import { ToolCallPanel } from "./ToolCallPanel";
import { PersonWaits, waitingForPerson } from "./waiting";

const block: BlockState = {
  id: "b1",
  messageId: "m1",
  blockType: "tool_use",
  content: "",
  metadata: {},
  status: "completed",
  position: 1,
  toolCall: { id: "t1", blockId: "b1", name: "publish_note", status: "started", input: { note: "about the tides" }, output: "", error: "", startedAt: Date.now() - 5000 },
};

const render = (waiting: ReadonlySet<string>) =>
  renderToStaticMarkup(
    <PersonWaits.Provider value={waiting}>
      <ToolCallPanel block={block} live />
    </PersonWaits.Provider>,
  );

describe("ToolCallPanel", () => {
  it("shows a call waiting for a person as \"Waiting for you\", open, with its arguments, no spinner and no timer", () => {
    const html = render(waitingForPerson([{ toolCallId: "t1", kind: "approval" }]));
    expect(html).toContain("Waiting for you");
    expect(html).toContain('data-tool-status="waiting"');
    expect(html).toContain("<details");
    expect(html).toMatch(/<details[^>]* open=""/);
    expect(html).toContain("about the tides");
    expect(html).not.toContain("spinner");
    expect(html).not.toContain("tool-duration");
    expect(html).not.toContain("Started");
  });

  it("shows a started call with nobody to wait for as running, with its time", () => {
    // A client tool runs in a browser: it is not waiting for a person.
    const html = render(waitingForPerson([{ toolCallId: "t1", kind: "client_tool" }]));
    expect(html).toContain("Started");
    expect(html).toContain("spinner");
    expect(html).toContain("tool-duration");
    expect(html).not.toContain("Waiting for you");
  });

  it("counts approvals and questions as waiting for a person", () => {
    const w = waitingForPerson([
      { toolCallId: "a", kind: "approval" },
      { toolCallId: "q", kind: "question" },
      { toolCallId: "c", kind: "client_tool" },
    ]);
    expect([...w].sort()).toEqual(["a", "q"]);
  });
});
