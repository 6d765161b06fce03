// What a reader sees around replies: which model wrote each A/B reply, no
// vote or rating on an empty reply, tool result sizes in words, search
// snippets without markdown syntax.

import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import type { BlockState, MessageState } from "@convo/client";
import { ToolResultBlock } from "./blocks/ToolResultBlock";
import { ComparisonView, type ComparisonSide } from "./ComparisonView";
import { Highlighted } from "./Highlighted";
import { MessageView, type MessageActions } from "./MessageView";

const actions: MessageActions = {
  onFeedback: () => {},
  onTrace: () => {},
  onEdit: async () => true,
  onRegenerate: () => {},
  onSwitch: () => {},
};

const message = (id: string, status: string, slot = "", versions = { index: 0, count: 1 }, role = "assistant"): MessageState => ({
  id,
  role,
  status,
  promptId: role === "assistant" ? `p-${id}` : "",
  comparisonId: slot ? "cmp" : "",
  comparisonSlot: slot,
  parentId: "",
  siblingCount: versions.count,
  siblingIndex: versions.index,
  error: "",
  blockIds: [],
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

const side = (id: string, status: string, slot: string, content: string, model?: string): ComparisonSide => ({
  message: message(id, status, slot),
  blocks: content ? [text(id, content)] : [],
  model,
});

const renderComparison = (sides: ComparisonSide[]) =>
  renderToStaticMarkup(
    <ComparisonView comparisonId="cmp" sides={sides} vote={undefined} onVote={() => {}} actions={actions} />,
  );

/** The vote buttons of rendered HTML, and whether each is disabled. */
const voteButtons = (html: string) =>
  [...html.matchAll(/<button[^>]*?(disabled="")?[^>]*>(A is better|Tie|B is better)<\/button>/g)].map((m) => ({
    label: m[2],
    disabled: m[0].includes('disabled=""'),
  }));

describe("A/B comparison", () => {
  it("says which model wrote each reply", () => {
    const html = renderComparison([
      side("a", "completed", "a", "Reply one.", "small"),
      side("b", "completed", "b", "Reply two.", "large, temperature 0.7"),
    ]);
    const slots = [...html.matchAll(/<h3 class="comparison-slot">(.*?)<\/h3>/g)].map((m) => m[1].replace(/<[^>]+>/g, ""));
    expect(slots).toEqual(["Reply A · small", "Reply B · large, temperature 0.7"]);
  });

  it("offers the vote once both replies are done and have something in them", () => {
    const both = voteButtons(renderComparison([side("a", "completed", "a", "One."), side("b", "completed", "b", "Two.")]));
    expect(both).toHaveLength(3);
    expect(both.every((b) => !b.disabled)).toBe(true);
  });

  it("disables the vote while one side is empty", () => {
    for (const status of ["cancelled", "failed"]) {
      const html = renderComparison([side("a", "completed", "a", "One."), side("b", status, "b", "")]);
      const buttons = voteButtons(html);
      expect(buttons).toHaveLength(3);
      expect(buttons.every((b) => b.disabled)).toBe(true);
      expect(html).toContain("A reply is empty");
    }
  });

  it("keeps the vote disabled while a reply streams", () => {
    const buttons = voteButtons(renderComparison([side("a", "completed", "a", "One."), side("b", "processing", "b", "Tw")]));
    expect(buttons.every((b) => b.disabled)).toBe(true);
  });
});

describe("a reply's actions", () => {
  const render = (status: string, blocks: BlockState[]) =>
    renderToStaticMarkup(<MessageView message={message("m", status)} blocks={blocks} actions={actions} />);

  it("offers thumbs and Trace on a reply with text", () => {
    for (const status of ["completed", "cancelled"]) {
      const html = render(status, [text("m", "Partial")]);
      expect(html).toContain('aria-label="Good reply"');
      expect(html).toContain(">Trace</button>");
    }
  });

  it("offers neither on a reply stopped before its first token", () => {
    for (const blocks of [[], [text("m", "")]]) {
      const html = render("cancelled", blocks);
      expect(html).toContain("Stopped.");
      expect(html).not.toContain('aria-label="Good reply"');
      expect(html).not.toContain(">Trace</button>");
    }
  });
});

describe("a tool result", () => {
  const render = (content: string) =>
    renderToStaticMarkup(<ToolResultBlock block={{ ...text("m", content), blockType: "tool_result" }} />);

  it("counts characters in proper English", () => {
    expect(render("7")).toContain(">1 char<");
    expect(render("42")).toContain(">2 chars<");
    expect(render("")).toContain(">0 chars<");
  });
});

describe("a search snippet", () => {
  it("shows the reply's text, not its markdown", () => {
    // "I handed `6 * 7` to the **calculator** tool", matched on "calculator".
    const snippet = "I handed `6 * 7` to the **calculator** tool";
    const start = Array.from(snippet).indexOf("c", 20);
    const html = renderToStaticMarkup(<Highlighted text={snippet} ranges={[{ start, end: start + 10 }]} />);
    const shown = html.replace(/<[^>]+>/g, "");
    expect(shown).toBe("I handed 6 * 7 to the calculator tool");
    expect(html).toContain("<mark>calculator</mark>");
  });
});

describe("versions of a turn", () => {
  /** The version controls of rendered HTML: each button's label, whether it is aria-disabled, and its tooltip. */
  const controls = (html: string) =>
    [...html.matchAll(/<button[^>]*aria-label="([^"]+)"[^>]*aria-disabled="(true|false)"[^>]*title="([^"]*)"/g)].map((m) => ({
      label: m[1],
      off: m[2] === "true",
      title: m[3],
    }));
  const render = (m: MessageState, writing = false) =>
    renderToStaticMarkup(<MessageView message={m} blocks={[text(m.id, "Hello.")]} actions={actions} writing={writing} />);

  it("shows ‹ n / m › on a message with versions, the arrows past the ends off", () => {
    const html = render(message("r", "completed", "", { index: 1, count: 3 }));
    expect(html).toContain('aria-label="Version 2 of 3"');
    expect(html).toMatch(/>2 \/ 3</);
    expect(controls(html).filter((c) => c.label.endsWith("version"))).toEqual([
      { label: "Previous version", off: false, title: "Previous version" },
      { label: "Next version", off: false, title: "Next version" },
    ]);
    const first = controls(render(message("r", "completed", "", { index: 0, count: 2 })));
    expect(first.find((c) => c.label === "Previous version")?.off).toBe(true);
    expect(render(message("r", "completed"))).not.toContain("Versions");
  });

  it("while a reply is being written, every branch control is off and says why", () => {
    const writingHint = "A reply is being written: stop it or wait for it to end first.";
    const reply = controls(render(message("r", "completed", "", { index: 1, count: 2 }), true));
    expect(reply.map((c) => [c.label, c.off, c.title])).toEqual([
      ["Previous version", true, writingHint],
      ["Next version", true, writingHint],
    ]);
    const html = render(message("r", "completed", "", { index: 1, count: 2 }), true);
    expect(html).toMatch(new RegExp(`aria-disabled="true" title="${writingHint}">Regenerate<`));
    const user = render(message("u", "completed", "", { index: 0, count: 2 }, "user"), true);
    expect(user).toMatch(new RegExp(`aria-disabled="true" title="${writingHint}">Edit<`));
  });

  it("offers Edit on the user's messages and Regenerate on replies, not on a comparison's", () => {
    expect(render(message("u", "completed", "", undefined, "user"))).toMatch(/>Edit</);
    expect(render(message("r", "completed"))).toMatch(/>Regenerate</);
    expect(render(message("r", "completed"))).not.toMatch(/>Edit</);
    const html = renderComparison([side("a", "completed", "a", "One."), side("b", "completed", "b", "Two.")]);
    expect(html).not.toMatch(/>Regenerate</);
  });
});

describe("a tool call whose call was never recorded", () => {
  const toolUse = (messageId: string): BlockState => ({ ...text(messageId, ""), id: `t-${messageId}`, blockType: "tool_use" });
  const badge = (status: string) => {
    const html = renderToStaticMarkup(<MessageView message={message("m", status)} blocks={[toolUse("m")]} actions={actions} />);
    return html.match(/data-tool-status="([a-z]+)"/)?.[1];
  };

  it("is Done in a reply that completed, Stopped in one that failed or was cancelled", () => {
    expect(badge("completed")).toBe("completed");
    expect(badge("failed")).toBe("stopped");
    expect(badge("cancelled")).toBe("stopped");
  });
});
