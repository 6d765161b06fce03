// Share links: alice makes a live link of her conversation from the Share
// dialog; a reader with no account opens it in a browser of their own and
// sees the conversation read only, a new reply streaming in as it is
// written; signed out, Continue asks them to sign in. alice revokes the
// link: the reader's page says it no longer works. carol, signed in, opens
// a second link (a snapshot) and continues it as a conversation of her own.

import { createHmac } from "node:crypto";
import type { Browser, Page } from "@playwright/test";
import { conversationIdOf, expect, lastReply, recordLastReply, recorded, send, shot, test } from "./helpers";
import { launch, type Launched } from "./server";

const secret = "e2e-shares-secret-of-at-least-32-bytes!";
let server: Launched;

test.beforeAll(async () => {
  test.setTimeout(90_000);
  // The demo model at its default pace: a reply takes about ten seconds,
  // time enough for the reader's page to show it while it is written
  // (a live share sends the state at most every 200 ms).
  server = await launch("shares", { CONVO_AUTH_SECRET: secret });
});

test.afterAll(async () => {
  await server?.stop();
});

function jwt(sub: string): string {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const now = Math.floor(Date.now() / 1000);
  const unsigned = `${b64({ alg: "HS256", typ: "JWT" })}.${b64({ sub, iat: now - 60, exp: now + 3600 })}`;
  return `${unsigned}.${createHmac("sha256", secret).update(unsigned).digest("base64url")}`;
}

/**
 * browse opens url in a browser context of its own (no stored token);
 * errors collects its page's console errors but those the test expects.
 */
async function browse(browser: Browser, url: string, errors: string[], expected: RegExp[] = []): Promise<Page> {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.on("console", (m) => m.type() === "error" && !expected.some((r) => r.test(m.text())) && errors.push(m.text()));
  page.on("pageerror", (e) => errors.push(e.message));
  await recordLastReply(page);
  await page.goto(url);
  return page;
}

/** makeLink makes a share link in the open Share dialog and returns its URL. */
async function makeLink(page: Page, mode: "Live" | "Snapshot"): Promise<string> {
  const dialog = page.getByRole("dialog", { name: "Share" });
  await dialog.getByRole("radio", { name: new RegExp(`^${mode}:`) }).check();
  await dialog.getByRole("button", { name: "Create link" }).click();
  const link = dialog.getByRole("textbox", { name: "Share link", exact: true });
  await expect(link).toHaveValue(new RegExp(`^${server.base}/s/[A-Za-z0-9_-]{43}$`));
  await expect(dialog.getByText("shown only this once")).toBeVisible();
  return link.inputValue();
}

test("a live share link: read only and live for anyone, revoked, and continued by a signed-in user", async ({ page, browser }) => {
  // alice's conversation, its first reply written.
  await page.goto(`${server.base}/#token=${jwt("alice")}`);
  await send(page, "Hello from alice, tell me about the north");
  await expect(page).toHaveURL(/\/c\//);
  const id = conversationIdOf(page);
  await expect(lastReply(page)).toHaveAttribute("data-status", "completed", { timeout: 60_000 });

  // She makes a live link.
  await page.getByRole("button", { name: "Share", exact: true }).click();
  const dialog = page.getByRole("dialog", { name: "Share" });
  await expect(dialog.getByText("No links yet.")).toBeVisible();
  const live = await makeLink(page, "Live");
  await expect(dialog.locator('li[data-status="active"]')).toHaveCount(1);
  await expect(dialog.locator("li.share")).toContainText("Live");
  await shot(page, "shares-dialog");
  await dialog.getByRole("button", { name: "Close share" }).click();

  // A reader with no account opens it: the conversation, read only.
  const readerErrors: string[] = [];
  // Continue, signed out, is refused by the server (401), which Chromium logs.
  const reader = await browse(browser, live, readerErrors, [/status of 401/]);
  // Its title: the first line of alice's first message.
  await expect(reader.getByRole("heading", { level: 1 })).toContainText("Hello from alice");
  await expect(reader.getByText("Shared, read only")).toBeVisible();
  await expect(reader.getByRole("article", { name: "Message from User" })).toContainText("Hello from alice");
  await expect(lastReply(reader)).toHaveAttribute("data-status", "completed");
  await expect(reader.getByRole("textbox", { name: "Message", exact: true })).toHaveCount(0);
  for (const name of ["Edit", "Regenerate", "Trace", "Members", "Share"]) {
    await expect(reader.getByRole("button", { name, exact: true })).toHaveCount(0);
  }

  // alice sends again: the reader sees her message, then the reply as it is written.
  await send(page, "And what about the south?");
  await expect(reader.getByRole("article", { name: "Message from User" }).last()).toContainText("And what about the south?");
  await expect(lastReply(reader)).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
  const seen = (await recorded(reader)).map((s) => `${s.status}:${s.textLength}`);
  const streaming = (await recorded(reader)).filter((s) => s.status === "processing" && s.textLength > 0);
  expect(streaming.length, `the reader's page showed the reply while it was written: ${seen.join(" ")}`).toBeGreaterThan(1);
  expect(new Set(streaming.map((s) => s.textLength)).size).toBeGreaterThan(1);
  await shot(reader, "shares-reader");

  // Signed out, Continue says to sign in.
  await reader.getByRole("button", { name: "Continue this conversation" }).click();
  await expect(reader.getByText("Sign in to continue this conversation.")).toBeVisible();
  await expect(reader.getByRole("article", { name: "Message from User" }).first()).toContainText("Hello from alice");

  // alice revokes the link: the reader's page says it no longer works.
  await page.getByRole("button", { name: "Share", exact: true }).click();
  await dialog.getByRole("button", { name: "Revoke" }).click();
  await expect(dialog.locator('li[data-status="revoked"]')).toHaveCount(1);
  await expect(dialog.getByRole("button", { name: "Revoke" })).toHaveCount(0);
  await expect(reader.getByText("This link does not work any more")).toBeVisible();
  await expect(reader.getByRole("article")).toHaveCount(0);
  await shot(reader, "shares-revoked");
  await reader.context().close();
  expect(readerErrors, "the reader's console errors").toEqual([]);

  // A second link, a snapshot: carol, signed in, continues it as her own.
  const snapshot = await makeLink(page, "Snapshot");
  await expect(dialog.locator("li.share")).toHaveCount(2);
  const carolErrors: string[] = [];
  const carol = await browse(browser, `${snapshot}#token=${jwt("carol")}`, carolErrors);
  await expect(carol.getByText("This link shows the conversation as it was")).toBeVisible();
  await expect(carol.getByRole("article", { name: "Message from User" }).last()).toContainText("And what about the south?");
  await carol.getByRole("button", { name: "Continue this conversation" }).click();
  await expect(carol).toHaveURL(/\/c\//);
  const copy = conversationIdOf(carol);
  expect(copy).not.toBe(id);
  // Hers: her messages under "You", no role badge, her composer open.
  await expect(carol.getByRole("article", { name: "You message" }).first()).toContainText("Hello from alice");
  await expect(carol.getByRole("article", { name: "You message" }).last()).toContainText("And what about the south?");
  await expect(carol.locator(".role-badge")).toHaveCount(0);
  await expect(carol.getByRole("textbox", { name: "Message", exact: true })).toBeEnabled();
  await expect(carol.locator(".conv-item", { hasText: "Shared" })).toHaveCount(0);
  await shot(carol, "shares-continued");
  await carol.context().close();
  expect(carolErrors, "carol's console errors").toEqual([]);

  // alice's conversation is untouched: still her two exchanges.
  await dialog.getByRole("button", { name: "Close share" }).click();
  await expect(page.locator("article.message")).toHaveCount(4);
});
