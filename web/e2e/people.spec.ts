// People together: two users in two browsers share one conversation. The
// owner adds the other as a participant from the Members panel; each then
// sees the other's avatar, the other's messages under the sender's name,
// the other typing, and a message sent while a reply runs as queued, which
// its sender takes back.

import { createHmac } from "node:crypto";
import type { Browser, Page } from "@playwright/test";
import { conversationIdOf, expect, send, shot, test } from "./helpers";
import { launch, type Launched } from "./server";

const secret = "e2e-people-secret-of-at-least-32-bytes!";
let server: Launched;

test.beforeAll(async () => {
  test.setTimeout(90_000);
  // A slow model: the owner's reply runs for minutes (on a loaded machine
  // too), while the participant's message waits its turn; the test stops
  // it at the end.
  server = await launch("people", { CONVO_AUTH_SECRET: secret, CONVO_DEMO_TOKENS_PER_SECOND: "2" });
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

/** signedIn opens path in a browser context of its own, signed in as sub; errors collects its page's errors. */
async function signedIn(browser: Browser, sub: string, path: string, errors: string[]): Promise<Page> {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(`${server.base}${path}#token=${jwt(sub)}`);
  return page;
}

test("two users share a conversation: names, avatars, typing, a queued message taken back", async ({ page, browser }) => {
  // alice starts a conversation, as its owner.
  await page.goto(`${server.base}/#token=${jwt("alice")}`);
  await send(page, "Hello from alice, tell me a long story");
  await expect(page).toHaveURL(/\/c\//);
  const id = conversationIdOf(page);
  await expect(page.getByRole("article", { name: "You message" })).toContainText("Hello from alice");

  // She adds bob as a participant.
  await page.getByRole("button", { name: "Members" }).click();
  const dialog = page.getByRole("dialog", { name: "Members" });
  await dialog.getByLabel("User id").fill("bob");
  await dialog.getByLabel("Role", { exact: true }).selectOption("participant");
  await dialog.getByRole("button", { name: "Add" }).click();
  await expect(dialog.getByLabel("Role of bob")).toHaveValue("participant");
  await dialog.getByRole("button", { name: "Close members" }).click();

  // bob, in a browser of his own, finds it shared with him.
  const bobErrors: string[] = [];
  const bob = await signedIn(browser, "bob", `/c/${id}`, bobErrors);
  await expect(bob.locator(".conv-item", { hasText: "Shared" })).toBeVisible();
  await expect(bob.locator(".role-badge")).toHaveText("Participant");
  await expect(bob.getByRole("article", { name: "Message from alice" })).toContainText("Hello from alice");

  // Each sees the other's avatar, never their own.
  await expect(page.getByRole("list", { name: "Also here: bob" })).toBeVisible();
  await expect(bob.getByRole("list", { name: "Also here: alice" })).toBeVisible();

  // bob types: alice sees it; bob does not see himself typing.
  await bob.getByRole("textbox", { name: "Message", exact: true }).fill("A question from bob");
  await expect(page.getByRole("status").filter({ hasText: "bob is typing…" })).toBeVisible();
  await expect(bob.getByText("is typing…")).toHaveCount(0);
  await shot(page, "people-typing");

  // He sends while alice's reply runs: the message waits its turn, queued,
  // in both browsers, under his name.
  await bob.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
  const queuedAtAlice = page.getByRole("article", { name: "Message from bob" });
  await expect(queuedAtAlice).toContainText("A question from bob");
  await expect(queuedAtAlice).toHaveAttribute("data-queued", "true");
  await expect(page.getByRole("status").filter({ hasText: "bob is typing…" })).toHaveCount(0);
  const queuedAtBob = bob.getByRole("article", { name: "You message" }).filter({ hasText: "A question from bob" });
  await expect(queuedAtBob).toHaveAttribute("data-queued", "true");
  await shot(bob, "people-queued");

  // bob takes it back: gone for both.
  await queuedAtBob.getByRole("button", { name: "Take back" }).click();
  await expect(bob.getByText("A question from bob")).toHaveCount(0);
  await expect(page.getByText("A question from bob")).toHaveCount(0);

  // He sends again; alice sees it under his name.
  await send(bob, "Second try from bob");
  await expect(page.getByRole("article", { name: "Message from bob" })).toContainText("Second try from bob");

  // alice stops the replies (hers, and bob's queued behind it).
  await page.getByRole("button", { name: "Stop the reply" }).click();
  await expect(page.locator('article.message-assistant[aria-busy="true"]')).toHaveCount(0);

  // Closing bob's browser takes his avatar away from alice's header.
  await bob.context().close();
  expect(bobErrors, "bob's console errors").toEqual([]);
  await expect(page.getByRole("list", { name: /Also here/ })).toHaveCount(0);
});
