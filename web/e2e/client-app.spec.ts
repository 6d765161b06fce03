// The example app of docs/client.md, installed from the npm tarballs of
// @convo/client and @convo/react outside the repo (client-app/build.ts), in
// Chromium on a second origin against convo with CONVO_CORS_ORIGINS set to
// that origin: a reply streams; a reload mid-reply and a dropped connection
// mid-reply lose nothing and double nothing. The same page on an origin
// convo does not allow is refused by the browser, and convo changes nothing.

import { createReadStream, existsSync, statSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { clientAppEnv } from "./client-app/build";
import { apiAt, expect, offlineConsoleErrors, shot, test, type ApiMessage } from "./helpers";
import { launch, type Launched } from "./server";

// Each worker runs this file's tests one at a time against its own convo
// (beforeAll runs once per worker), so what one test counts there no other
// test changes meanwhile.
let app: http.Server;
let origin = "";
// The same app on a second origin, which convo does not allow.
let otherApp: http.Server;
let otherOrigin = "";
let convo: Launched;

/** serveApp serves the built app on a free port and returns its server and origin. */
async function serveApp(dist: string): Promise<[http.Server, string]> {
  const server = http.createServer((req, res) => {
    const p = path.join(dist, path.normalize(decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname)));
    const file = p.startsWith(dist) && existsSync(p) && statSync(p).isFile() ? p : path.join(dist, "index.html");
    res.setHeader("Content-Type", file.endsWith(".js") ? "text/javascript" : file.endsWith(".css") ? "text/css" : "text/html");
    createReadStream(file).pipe(res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return [server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`];
}

test.beforeAll(async () => {
  const dist = process.env[clientAppEnv];
  if (!dist || !existsSync(dist)) throw new Error(`${clientAppEnv} names no built app: run the tests with npm run e2e`);
  [app, origin] = await serveApp(dist);
  [otherApp, otherOrigin] = await serveApp(dist);
  // A slower demo model, so that there is time to act mid-reply.
  convo = await launch("client-app", {
    CONVO_CORS_ORIGINS: origin,
    CONVO_DEMO_TOKENS_PER_SECOND: "25",
    CONVO_PUBLIC_METRICS: "true",
  });
});

test.afterAll(async () => {
  await convo?.stop();
  await new Promise((resolve) => app?.close(resolve));
  await new Promise((resolve) => otherApp?.close(resolve));
});

test.describe("across origins", () => {
  test.use({ allowedConsoleErrors: offlineConsoleErrors });

  test("the installed packages stream a reply across origins; a reload and a dropped connection lose and double nothing", async ({
    page,
    context,
  }) => {
    await page.goto(`${origin}/?convo=${encodeURIComponent(convo.api)}`);
    await expect(page.getByTestId("status")).toHaveText("live");
    await page.getByLabel("Message").fill("What is 6 times 7? Explain it in a few paragraphs.");
    await page.getByRole("button", { name: "Send" }).click();
    const reply = page.locator('article[data-role="assistant"]').last();
    const shown = () => reply.evaluate((el) => [...el.querySelectorAll("pre")].map((p) => p.textContent ?? ""));
    const length = async () => (await shown()).join("").length;
    await expect.poll(length, { timeout: 30_000 }).toBeGreaterThan(20);
    const id = new URL(page.url()).hash.slice(1);

    // Reload mid-reply: the page joins the stream again, from a snapshot and
    // the replayed text so far.
    await expect(reply).toHaveAttribute("data-status", "processing");
    await page.reload();
    await expect(page.getByTestId("status")).toHaveText("live");
    await expect(reply).toHaveAttribute("data-status", "processing");
    const before = await length();
    await expect.poll(length).toBeGreaterThan(before);

    // Drop the connection mid-reply: the client resumes after the last seq.
    await context.setOffline(true);
    await expect(page.getByTestId("status")).not.toHaveText("live");
    await page.waitForTimeout(1000);
    await context.setOffline(false);
    await expect(page.getByTestId("status")).toHaveText("live", { timeout: 30_000 });

    await expect(reply).toHaveAttribute("data-status", "completed", { timeout: 120_000 });
    await shot(page, "client-app");
    const conv = await apiAt<{ messages?: ApiMessage[] }>(convo.api, "GetConversation", { conversationId: id });
    const server = conv.messages?.filter((m) => m.role === "assistant").at(-1);
    expect(server?.status).toBe("completed");
    expect(await shown()).toEqual(server?.blocks?.map((b) => b.content ?? ""));
  });
});

/** subscriptions reads how many streams the server holds open. */
async function subscriptions(): Promise<number> {
  const text = await (await fetch(`${convo.api}/metrics`)).text();
  const m = text.match(/^convo_stream_subscriptions (\d+)/m);
  if (!m) throw new Error("no convo_stream_subscriptions in /metrics");
  return Number(m[1]);
}

test("aborting followConversation ends the stream and the server releases its subscription", async () => {
  // The built package, as an app in Node would import it.
  const { createConvoClient, followConversation, sendMessage } = await import("../../clients/typescript/dist/index.js");
  const client = createConvoClient({ baseUrl: convo.api });
  const sent = await sendMessage(client, "Hello from Node.");
  const before = await subscriptions();
  const stop = new AbortController();
  const updates = followConversation(client, sent.conversationId, { signal: stop.signal });
  // (Not for-await with break: leaving such a loop ends the generator.)
  for (;;) {
    const r = await updates.next();
    if (r.done) throw new Error("followConversation ended before the stream was live");
    if (r.value.status === "live" && r.value.state.seq !== null) break;
  }
  await expect.poll(subscriptions).toBe(before + 1);
  stop.abort();
  expect((await updates.next()).done).toBe(true);
  await expect.poll(subscriptions).toBe(before);
});

test.describe("an origin convo does not allow", () => {
  // One pattern: test.use reads a two-item array as a value and its options.
  test.use({ allowedConsoleErrors: [/CORS policy|Failed to load resource/] });

  test("is refused by the browser, and convo changes nothing", async ({ page }) => {
    // Not the shared server: the tests running beside this one add
    // conversations there.
    const count = async () =>
      (await apiAt<{ conversations?: unknown[] }>(convo.api, "ListConversations", { pageSize: 100 })).conversations?.length ?? 0;
    const cors: string[] = [];
    page.on("console", (m) => {
      if (/CORS policy/.test(m.text())) cors.push(m.text());
    });
    const before = await count();
    await page.goto(`${otherOrigin}/?convo=${encodeURIComponent(convo.api)}`);
    await expect(page.getByRole("alert")).toBeVisible();
    // The console message may come after the page shows its alert.
    await expect.poll(() => cors.length).toBeGreaterThan(0);
    expect(await count()).toBe(before);
  });
});
