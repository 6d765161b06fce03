// A reply cut off mid-stream renders without the stray backticks of an
// open code span or fence.

import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { Markdown } from "../components/Markdown";
import { closeOpenMarkdown } from "./streamingMarkdown";

const render = (text: string) => renderToStaticMarkup(<Markdown text={text} />);

describe("closeOpenMarkdown", () => {
  it("closes an open inline code span, and drops opening backticks with nothing after them", () => {
    expect(closeOpenMarkdown("Run `npm inst")).toBe("Run `npm inst`");
    expect(closeOpenMarkdown("Run ``a ` b")).toBe("Run ``a ` b``");
    expect(closeOpenMarkdown("Run `")).toBe("Run ");
    expect(closeOpenMarkdown("Run `a` and `b` then `")).toBe("Run `a` and `b` then ");
    expect(closeOpenMarkdown("Text\n\n``")).toBe("Text\n\n");
  });

  it("closes an open fence with its own characters and length", () => {
    expect(closeOpenMarkdown("Code:\n\n```go\nfmt.Println(1)")).toBe("Code:\n\n```go\nfmt.Println(1)\n```");
    expect(closeOpenMarkdown("````\na\n```\n")).toBe("````\na\n```\n````");
    expect(closeOpenMarkdown("~~~\nx")).toBe("~~~\nx\n~~~");
  });

  it("leaves text with nothing open as it is", () => {
    for (const t of [
      "",
      "plain text",
      "done `code` here",
      "```\nclosed\n```\n\nafter",
      "an escaped \\` backtick",
      "a `span` over\n\nparagraphs with ``two`` ticks",
      "```\ncode with a ` inside\n```",
    ]) {
      expect(closeOpenMarkdown(t)).toBe(t);
    }
  });

  it("only looks at the last paragraph for inline code", () => {
    expect(closeOpenMarkdown("an old ` stray\n\nnew `open")).toBe("an old ` stray\n\nnew `open`");
  });

  it("renders a half-written reply without a raw backtick", () => {
    for (const [partial, code] of [
      ["Install it with `npm inst", "<code>npm inst</code>"],
      ["Then:\n\n```sh\nnpm run bui", "npm run bui\n</code></pre>"],
    ]) {
      const html = render(closeOpenMarkdown(partial));
      expect(html).toContain(code);
      expect(html).not.toContain("`");
    }
    expect(render(closeOpenMarkdown("Install it with `"))).not.toContain("`");
    // Without the helper, the stray backtick shows.
    expect(render("Install it with `npm inst")).toContain("`");
  });
});
