// Single-user mode (no auth) trusts whoever reaches the server, so the
// server refuses what other sites' pages make the user's browser send: a
// page on another origin cannot queue a prompt (not with a "simple"
// text/plain fetch, a JSON fetch or a form), and a DNS-rebinding page,
// which reaches the server under its own host name, cannot read anything.
// The app's own pages run under its Content-Security-Policy in every spec;
// a violation is a console error, which fails the test.

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { api, expect, test } from "./helpers";

// Chromium logs the refusals it meets (the 403s, the blocked CORS calls),
// and the 404 of the /favicon.ico it asks for after the form's refused
// navigation.
test.use({ allowedConsoleErrors: [/status of 40[34]|has been blocked by CORS policy|Failed to load resource: net::ERR_FAILED/] });

// The other site: a page served on this machine (so that the browser's
// private-network rules let it reach the server at all) under another
// host name, localhost, than the server's 127.0.0.1.
let other: Server;
let otherURL: string;

test.beforeAll(async () => {
  other = createServer((_, res) => {
    res.writeHead(200, { "Content-Type": "text/html" });
    res.end("<!doctype html><title>another site</title><p>hello</p>");
  });
  await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
  otherURL = `http://localhost:${(other.address() as AddressInfo).port}/`;
});

test.afterAll(async () => {
  await new Promise((resolve) => other?.close(resolve));
});

type Conversations = { conversations?: { title?: string }[] };

async function titles(): Promise<string[]> {
  const res = await api<Conversations>("ListConversations", { pageSize: 100 });
  return (res.conversations ?? []).map((c) => c.title ?? "");
}

test("a page of another site cannot queue prompts", async ({ page, baseURL }) => {
  const marker = `evil-${Date.now()}-${Math.random().toString(36).slice(2)}`;
  await page.goto(otherURL);

  const simpleResponse = page.waitForResponse((r) => r.url().endsWith("/v1/agui"));
  const outcome = await page.evaluate(
    async ({ target, marker }) => {
      const run = JSON.stringify({ messages: [{ id: "u1", role: "user", content: marker }] });
      const out: Record<string, string> = {};
      // A "simple" request: no preflight, the answer is opaque.
      await fetch(`${target}/v1/agui`, { method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body: run })
        .then(() => (out.simple = "sent"), (e) => (out.simple = String(e)));
      // JSON needs a preflight, which CORS (not configured) does not grant.
      await fetch(`${target}/convo.v1.ConversationService/SendMessage`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ text: marker }),
      }).then((r) => (out.json = String(r.status)), () => (out.json = "blocked"));
      return out;
    },
    { target: baseURL, marker },
  );
  // The browser sent the simple request (its answer is opaque to the
  // page); the server refused it.
  expect(outcome.simple).toBe("sent");
  expect((await simpleResponse).status()).toBe(403);
  expect(outcome.json).toBe("blocked");

  // A form posts across sites with no script at all.
  const [formResponse] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith("/v1/agui")),
    page.evaluate(
      ({ target, marker }) => {
        const form = document.createElement("form");
        form.method = "POST";
        form.action = `${target}/v1/agui`;
        form.enctype = "text/plain";
        const input = document.createElement("input");
        input.name = `{"messages":[{"id":"u1","role":"user","content":"${marker}","x":"`;
        input.value = `"}]}`;
        form.append(input);
        document.body.append(form);
        form.submit();
      },
      { target: baseURL, marker },
    ),
  ]);
  expect(formResponse.status()).toBe(403);

  // Nothing was queued: no conversation is titled with the marker.
  expect((await titles()).filter((t) => t.includes(marker))).toEqual([]);

  // The app itself still works from its own origin.
  const sent = await api<{ conversationId: string }>("SendMessage", { text: `own ${marker}` });
  expect(sent.conversationId).toBeTruthy();
});

test("a DNS-rebinding page cannot read the server", async ({ playwright, launchOptions, baseURL }) => {
  const port = new URL(baseURL!).port;
  // rebind.test resolves to the server, as an attacker's DNS would make it.
  const browser = await playwright.chromium.launch({
    ...launchOptions,
    args: [...(launchOptions.args ?? []), "--host-resolver-rules=MAP rebind.test 127.0.0.1"],
  });
  try {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on("console", (m: { type(): string; text(): string }) => m.type() === "error" && !/status of 403/.test(m.text()) && errors.push(m.text()));
    for (const path of ["/", "/convo.v1.ConversationService/ListConversations", "/v1/conversations/6f1c1f9e-6a39-4e5c-a7c1-1d6f4f0e2b11/history"]) {
      const res = await page.goto(`http://rebind.test:${port}${path}`);
      expect(res?.status(), path).toBe(403);
      expect(await page.content()).toContain("is not served here");
    }
    expect(errors).toEqual([]);
  } finally {
    await browser.close();
  }
});
