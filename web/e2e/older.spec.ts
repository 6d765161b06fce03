// A long conversation on a server whose snapshots hold only its latest
// messages (CONVO_SNAPSHOT_BYTES at its minimum, 4096 bytes): the view
// shows those first, and loads the older ones, a ListMessages page at a
// time, as the reader scrolls up, without moving what the reader sees. A
// switch back to the long branch after an edit of an early turn is
// bounded the same way (docs/branches.md).

import { allMessages, apiAt, expect, getConversation, shot, test } from "./helpers";
import { launch, type Launched } from "./server";

let convo: Launched;
let conversationId = "";
let ids: string[] = [];
const exchanges = 10;

// One server and one conversation for the tests of this file, in one worker.
test.describe.configure({ mode: "default" });

test.beforeAll(async () => {
  test.setTimeout(180_000);
  // The demo model as fast as it goes: the replies are written, not watched.
  convo = await launch("older", { CONVO_SNAPSHOT_BYTES: "4096", CONVO_DEMO_TOKENS_PER_SECOND: "-1" });
  for (let i = 1; i <= exchanges; i++) {
    // Long enough that the latest few messages fill the screen.
    const text = `Question ${String(i).padStart(2, "0")}: ` + "how far is the lighthouse from the harbour? ".repeat(6);
    const res = await apiAt<{ conversationId: string }>(convo.api, "SendMessage", { conversationId, text });
    conversationId = res.conversationId;
    // One reply at a time, in order.
    await expect
      .poll(async () => (await getConversation(conversationId, convo.api)).messages?.every((m) => m.status === "completed"), {
        timeout: 60_000,
      })
      .toBe(true);
  }
  // GetConversation holds only the latest (the snapshot's size): the rest
  // are ListMessages pages.
  ids = (await allMessages(conversationId, convo.api)).map((m) => m.id);
  expect(ids).toHaveLength(2 * exchanges);
});

test.afterAll(async () => {
  await convo?.stop();
});

/** shownIds are the ids of the messages the page shows, in order. */
const shownIds = (page: import("@playwright/test").Page) =>
  page.locator("article[data-message-id]").evaluateAll((els) => els.map((e) => e.getAttribute("data-message-id") ?? ""));

test("scrolling up loads the older messages, in order, each once, keeping the reader's place", async ({ page }) => {
  await page.goto(`${convo.base}/c/${conversationId}`);
  await expect(page.getByRole("status", { name: "Connection: Live" })).toBeVisible();
  const messages = page.locator(".messages");
  const oldest = page.locator(`article[data-message-id="${ids[0]}"]`);

  // At first: the latest messages, at the bottom; the oldest is not there.
  await expect(page.locator(`article[data-message-id="${ids[ids.length - 1]}"]`)).toBeVisible();
  const first = await shownIds(page);
  expect(first.length).toBeLessThan(ids.length);
  expect(first).toEqual(ids.slice(ids.length - first.length));
  await expect(oldest).toHaveCount(0);
  await expect(page.getByRole("button", { name: /Load earlier messages|Loading earlier messages/ })).toBeAttached();
  await shot(page, "older-at-first");

  // Scrolled to the top, the page before the first shown message comes in
  // above it, and the message the reader saw stays where it was (to the
  // pixel: scrollTop rounds a fractional height).
  const top = (id: string) =>
    page.locator(`article[data-message-id="${id}"]`).evaluate((el) => el.getBoundingClientRect().top);
  await messages.evaluate((el) => (el.scrollTop = 0));
  const seen = first[0];
  const seenAt = await top(seen);
  await expect.poll(async () => (await shownIds(page)).length).toBeGreaterThan(first.length);
  await expect.poll(async () => Math.abs((await top(seen)) - seenAt)).toBeLessThanOrEqual(1);
  const second = await shownIds(page);
  expect(second).toEqual(ids.slice(ids.length - second.length));

  // Scrolling up again and again reaches the first message.
  await expect(async () => {
    await messages.evaluate((el) => (el.scrollTop = 0));
    await expect(oldest).toBeAttached({ timeout: 2_000 });
  }).toPass({ timeout: 60_000 });
  await expect(page.getByRole("button", { name: /Load earlier messages|Loading earlier messages/ })).toHaveCount(0);
  expect(await shownIds(page)).toEqual(ids);
  await messages.evaluate((el) => (el.scrollTop = 0));
  await expect(oldest).toBeInViewport();
  await expect(oldest).toContainText("Question 01:");
  await shot(page, "older-all");
});

test("a link to an old message (a search result) pages back to it", async ({ page }) => {
  await page.goto(`${convo.base}/c/${conversationId}?m=${ids[1]}`);
  const target = page.locator(`article[data-message-id="${ids[1]}"]`);
  await expect(target).toBeInViewport();
  const shown = await shownIds(page);
  expect(shown).toEqual(ids.slice(ids.length - shown.length));
});

test("a switch back to the long branch after an edit of an early turn shows its latest messages, then pages in the rest", async ({ page }) => {
  await page.goto(`${convo.base}/c/${conversationId}`);
  await expect(page.getByRole("status", { name: "Connection: Live" })).toBeVisible();
  const messages = page.locator(".messages");

  // Another client edits the second question: the page follows the short
  // new branch (its branchSwitched is small: every message after the fork).
  const edit = await apiAt<{ userMessageId: string }>(convo.api, "EditMessage", {
    conversationId,
    messageId: ids[2],
    text: "Question 02, asked again: is the lighthouse lit at night?",
  });
  await expect
    .poll(async () => (await getConversation(conversationId, convo.api)).messages?.at(-1)?.status, { timeout: 60_000 })
    .toBe("completed");
  // The messages before the fork were never loaded (the snapshot held the
  // latest of the long branch): scrolling up pages them in above the edit.
  // (Whether the loader fires by itself depends on whether the new branch
  // fills the screen: the demo's reply to the edit can.)
  await expect(async () => {
    await messages.evaluate((el) => (el.scrollTop = 0));
    await expect(page.locator(`article[data-message-id="${ids[0]}"]`)).toBeAttached({ timeout: 2_000 });
  }).toPass({ timeout: 60_000 });
  await expect.poll(async () => (await shownIds(page)).slice(0, 3)).toEqual([ids[0], ids[1], edit.userMessageId]);

  // And switches back: 17 long messages after the fork, more than a
  // snapshot of 4096 bytes. The event carries the latest that fit; the
  // page shows those, and scrolling up brings the rest of the branch.
  await apiAt(convo.api, "SwitchBranch", { conversationId, messageId: ids[2] });
  await expect(page.locator(`article[data-message-id="${ids[ids.length - 1]}"]`)).toBeVisible();
  await expect(page.locator(`article[data-message-id="${edit.userMessageId}"]`)).toHaveCount(0);
  const shown = await shownIds(page);
  expect(shown.length).toBeLessThan(ids.length);
  expect(shown).toEqual(ids.slice(ids.length - shown.length));
  await expect(async () => {
    await messages.evaluate((el) => (el.scrollTop = 0));
    await expect(page.locator(`article[data-message-id="${ids[0]}"]`)).toBeAttached({ timeout: 2_000 });
  }).toPass({ timeout: 60_000 });
  expect(await shownIds(page)).toEqual(ids);
  await expect(page.locator(`article[data-message-id="${ids[2]}"]`)).toContainText("1 / 2");
  await shot(page, "older-after-switch");
});
