// The empty screen says replies come from the demo model only when the
// server says its workers run it (GetServerInfo), and what each of its
// commands does.

import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { DemoIntro, demoCommands } from "./DemoIntro";

describe("DemoIntro", () => {
  it("says plainly that replies come from the demo model when the server says so", () => {
    const html = renderToStaticMarkup(<DemoIntro demo={true} />);
    expect(html).toContain("Replies come from the built-in <strong>demo model</strong> (no key, no network)");
    expect(html).not.toContain("With its own workers");
  });

  it("claims no demo model when the server runs another", () => {
    const html = renderToStaticMarkup(<DemoIntro demo={false} />);
    expect(html).toContain("Replies come from the workers serving this server.");
    expect(html).not.toContain("demo model");
    expect(html).not.toContain("no key");
    expect(html).not.toContain("/approve");
  });

  it("says nothing until the server answers", () => {
    expect(renderToStaticMarkup(<DemoIntro demo={null} />)).toBe("");
  });

  it("lists /approve, /ask and /client-tool, each with what it does and an example", () => {
    const html = renderToStaticMarkup(<DemoIntro demo={true} />);
    expect(demoCommands.map((c) => c.command)).toEqual(["/approve", "/ask", "/client-tool"]);
    for (const c of demoCommands) {
      expect(html).toContain(`<dt><code>${c.command}</code></dt>`);
      expect(html).toContain(c.does);
      expect(c.example.startsWith(c.command)).toBe(true);
    }
  });
});
