// useChat from the AI SDK (@ai-sdk/react, DefaultChatTransport, resume:
// true) against convo's /v1/ai-sdk/ endpoints, in Chromium: the page is
// the fixture in e2e/aisdk-fixture, built by global-setup and served at
// the server's origin.

import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import type { BrowserContext, Page } from "@playwright/test";
import { aisdkFixtureEnv } from "./aisdk-fixture/build";
import { expect, getConversation, pacedURL, shot, test } from "./helpers";

// A new chat's messages are a 404 (convo does not know the id yet), which
// the browser logs.
test.use({ allowedConsoleErrors: [/status of 404/] });

const fixturePath = "/__aisdk/";

/** serveFixture answers the fixture's files at the server's origin, as an app that embeds useChat would be served. */
async function serveFixture(context: BrowserContext) {
  const dir = process.env[aisdkFixtureEnv];
  if (!dir) throw new Error(`${aisdkFixtureEnv} is not set: run the tests with npm run e2e, whose global setup builds the fixture`);
  await context.route(`**${fixturePath}**`, async (route) => {
    const rel = new URL(route.request().url()).pathname.slice(fixturePath.length) || "index.html";
    const type = rel.endsWith(".js") ? "text/javascript" : rel.endsWith(".css") ? "text/css" : "text/html";
    await route.fulfill({ body: await readFile(path.join(dir, rel)), contentType: type });
  });
}

/** replyText is the text the page shows for its assistant messages, one string per message. */
async function replyTexts(page: Page): Promise<string[]> {
  return page
    .locator('article[data-role="assistant"]')
    .evaluateAll((els) => els.map((e) => Array.from(e.querySelectorAll("p.text")).map((p) => p.textContent ?? "").join("")));
}

// Reloaded and joined mid-reply: on the paced server, whose replies take
// about a minute (the shared one's take ten seconds).
test.describe("mid-reply, at a reading pace", () => {
  const paced = pacedURL();
  test.use({ baseURL: paced });

  test("useChat: send, reload mid-reply, a second tab mid-reply: the reply finishes on screen once, as convo holds it", async ({ page, context }) => {
    // The whole reply, about a minute at this pace, runs in the test.
    test.slow();
    await serveFixture(context);
    const chat = randomUUID();
    const url = `${fixturePath}index.html?chat=${chat}`;
    await page.goto(url);
    await page.getByRole("textbox", { name: "Message" }).fill("Tell me a long story about a lighthouse keeper and the sea.");
    await page.getByRole("button", { name: "Send" }).click();

    // Mid-reply: some text is on screen.
    const reply = page.locator('article[data-role="assistant"]');
    await expect(reply.locator("p.text").first()).not.toBeEmpty();
    await expect(page.locator("output")).toHaveAttribute("data-status", "streaming");

    // A second tab opened now loads the messages and resumes the reply.
    const second = await context.newPage();
    await second.goto(url);

    // Reload the first tab mid-reply: it resumes too.
    await page.reload();
    await expect(reply.locator("p.text").first()).not.toBeEmpty();

    const conv = await getConversation(chat, paced);
    for (const p of [page, second]) {
      await expect(p.locator("output")).toHaveAttribute("data-status", "ready", { timeout: 150_000 });
    }
    await expect
      .poll(async () => (await getConversation(chat, paced)).messages?.[1]?.status, { timeout: 150_000 })
      .toBe("completed");
    const final = await getConversation(chat, paced);
    const want = (final.messages?.[1]?.blocks ?? [])
      .filter((b) => b.blockType === "text")
      .map((b) => b.content ?? "")
      .join("");
    expect(want.length).toBeGreaterThan(0);
    expect(conv.messages?.length).toBe(2);
    for (const p of [page, second]) {
      // One user message, one reply, its text exactly once.
      await expect(p.locator('article[data-role="user"]')).toHaveCount(1);
      await expect.poll(() => replyTexts(p)).toEqual([want]);
      await expect(p.locator('article[data-role="assistant"]')).toHaveAttribute("data-id", final.messages?.[1]?.id ?? "");
    }
    await shot(page, "aisdk-usechat-reloaded");
    await shot(second, "aisdk-usechat-second-tab");
  });
});

test("useChat: an approval, a reload before deciding shows it once; Approve resumes the same message", async ({ page, context }) => {
  await serveFixture(context);
  const chat = randomUUID();
  await page.goto(`${fixturePath}index.html?chat=${chat}`);
  await page.getByRole("textbox", { name: "Message" }).fill("/approve a note about the harbour");
  await page.getByRole("button", { name: "Send" }).click();
  const card = page.getByRole("group", { name: "Approval requested" });
  await expect(card).toHaveCount(1, { timeout: 90_000 });
  await expect(card).toContainText("publish_note");
  await expect(page.locator("output")).toHaveAttribute("data-status", "ready", { timeout: 60_000 });

  // Reloaded, the page holds what /messages shows: the request, once.
  await page.reload();
  await expect(page.locator('article[data-role="assistant"]')).toHaveCount(1);
  await expect(card).toHaveCount(1);
  const before = await page.locator('article[data-role="assistant"]').getAttribute("data-id");
  await card.getByRole("button", { name: "Approve" }).click();
  await expect(card).toHaveCount(0);

  await expect
    .poll(async () => (await getConversation(chat)).messages?.[1]?.status, { timeout: 90_000 })
    .toBe("completed");
  await expect(page.locator("output")).toHaveAttribute("data-status", "ready", { timeout: 60_000 });
  const reply = page.locator('article[data-role="assistant"]');
  await expect(reply).toHaveCount(1);
  await expect(reply).toHaveAttribute("data-id", before ?? "");
  await expect.poll(() => replyTexts(page)).toEqual([expect.stringContaining("published a note")]);
  const texts = await replyTexts(page);
  expect(texts[0].split("published a note")).toHaveLength(2); // shown once
  await shot(page, "aisdk-usechat-approved-after-reload");
});

test("useChat: sendMessage with files; the reply names them; a reload and a second tab show each once, from convo's URLs", async ({
  page,
  context,
}) => {
  await serveFixture(context);
  const chat = randomUUID();
  const url = `${fixturePath}index.html?chat=${chat}`;
  await page.goto(url);
  const notes = "Shopping list\nbread\nolives\n";
  await page.getByLabel("Attach").setInputFiles([
    { name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from(notes) },
    { name: "dot.png", mimeType: "image/png", buffer: dotPNG },
  ]);
  await page.getByRole("textbox", { name: "Message" }).fill("What did I attach?");
  await page.getByRole("button", { name: "Send" }).click();
  await expect(page.locator("output")).toHaveAttribute("data-status", "ready", { timeout: 60_000 });
  // The demo model read the bytes: it names each file and the text file's first line.
  await expect.poll(() => replyTexts(page), { timeout: 60_000 }).toEqual([expect.stringContaining("notes.txt")]);
  const [reply] = await replyTexts(page);
  expect(reply).toContain("Shopping list");
  expect(reply).toContain("dot.png");

  const second = await context.newPage();
  await second.goto(url);
  await page.reload();
  for (const p of [page, second]) {
    const user = p.locator('article[data-role="user"]');
    await expect(user).toHaveCount(1);
    // Loaded from /messages: convo's signed URLs, never the data URLs sent.
    const link = user.locator("a.file");
    await expect(link).toHaveCount(1);
    await expect(link).toHaveText("notes.txt");
    expect(await link.getAttribute("href")).toMatch(/^\/v1\/files\/[0-9a-f-]{36}\/content\?exp=/);
    const image = user.locator("img.file");
    await expect(image).toHaveCount(1);
    expect(await image.getAttribute("src")).toMatch(/^\/v1\/files\/[0-9a-f-]{36}\/content\?exp=/);
    // The image loads from its signed URL, no token needed.
    await expect.poll(() => image.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth)).toBe(1);
    const body = await p.evaluate(async (href) => (await fetch(href!)).text(), await link.getAttribute("href"));
    expect(body).toBe(notes);
  }
  await shot(second, "aisdk-usechat-files-second-tab");
});

/** dotPNG is a 1×1 PNG. */
const dotPNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4//8/AwAI/AL+pzWBhAAAAABJRU5ErkJggg==",
  "base64",
);
