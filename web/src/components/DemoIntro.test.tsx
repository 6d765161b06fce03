// The empty screen says where replies come from, when that is the demo
// model, and what each of its commands does.

import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { DemoIntro, demoCommands } from "./DemoIntro";

describe("DemoIntro", () => {
  it("says when replies come from the demo model, with no key and no network", () => {
    const html = renderToStaticMarkup(<DemoIntro />);
    expect(html).toContain("<strong>demo model</strong>");
    expect(html).toContain("no API key");
    expect(html).toContain("network");
    // Only when it is the demo: the server's own workers, no OpenAI provider.
    expect(html).toContain("no OpenAI key or URL set");
  });

  it("lists /approve, /ask and /client-tool, each with what it does and an example", () => {
    const html = renderToStaticMarkup(<DemoIntro />);
    expect(demoCommands.map((c) => c.command)).toEqual(["/approve", "/ask", "/client-tool"]);
    for (const c of demoCommands) {
      expect(html).toContain(`<dt><code>${c.command}</code></dt>`);
      expect(html).toContain(c.does);
      expect(c.example.startsWith(c.command)).toBe(true);
    }
  });
});
