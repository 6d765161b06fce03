import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { Markdown } from "./Markdown";

const render = (text: string) => renderToStaticMarkup(<Markdown text={text} />);

describe("Markdown", () => {
  it("renders markdown", () => {
    const html = render("# Title\n\nSome **bold** and `code`.\n\n| a | b |\n|---|---|\n| 1 | 2 |");
    expect(html).toContain("<h1>Title</h1>");
    expect(html).toContain("<strong>bold</strong>");
    expect(html).toContain("<code>code</code>");
    expect(html).toContain("<table>");
  });

  it("never turns model output into live HTML", () => {
    const attacks = [
      "<script>alert(1)</script>",
      '<img src=x onerror="alert(1)">',
      '<a href="javascript:alert(1)">x</a>',
      "[click](javascript:alert(1))",
      "[click](JaVaScRiPt:alert(1))",
      "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
      '<iframe src="https://evil.example"></iframe>',
      '<svg onload="alert(1)"></svg>',
      "![x](https://evil.example/track.png)",
      '<div style="background:url(javascript:alert(1))">x</div>',
    ];
    for (const a of attacks) {
      const html = render(a);
      expect(html, a).not.toMatch(/<(script|iframe|svg|img|div style)/i);
      expect(html, a).not.toMatch(/<[^>]*\son\w+=/i); // no event-handler attribute on any element
      expect(html, a).not.toMatch(/href="(javascript|data):/i);
    }
  });

  it("opens links in a new tab without an opener", () => {
    expect(render("[site](https://example.com)")).toContain(
      '<a href="https://example.com" target="_blank" rel="noopener noreferrer nofollow">site</a>',
    );
  });
});
