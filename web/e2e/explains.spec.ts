// The app says what it does and why a reply failed. The empty screen says
// where replies come from (the demo model, when it is the one) and what
// the demo's commands do. A reply that fails says why in the chat, however
// the page came to know of it: live (the promptFailed event), after a reload, and in a tab opened
// later (both from a snapshot, whose failed messages carry their error):
// never with a GetTrace call. The demo worker fails a prompt that names a provider
// it does not run, at once, as a worker that cannot reach its model does.

import type { Page } from "@playwright/test";
import { api, expect, lastReply, shot, test } from "./helpers";

const done = { timeout: 90_000 };
const reason = 'unknown model provider "nonesuch"';

/** traceReads counts the GetTrace calls page makes from now on. */
function traceReads(page: Page): () => number {
  let n = 0;
  page.on("request", (r) => {
    if (r.url().endsWith("/convo.v1.ConversationService/GetTrace")) n++;
  });
  return () => n;
}

async function expectFailedWithReason(page: Page) {
  const reply = lastReply(page);
  await expect(reply).toHaveAttribute("data-status", "failed", done);
  await expect(reply.getByRole("alert")).toContainText(`The reply failed: ${reason}`);
  await expect(reply.getByRole("alert")).toContainText("this worker runs demo");
}

test("a failed reply shows its cause: live, after a reload, and in a tab opened later", async ({ page, context }) => {
  const conv = await api<{ conversation: { id: string } }>("CreateConversation", {});
  const id = conv.conversation.id;
  await page.goto(`/c/${id}`);
  await expect(page.getByRole("status", { name: "Connection: Live" })).toBeVisible();

  // Live: the reason comes with the event; nothing is looked up.
  const live = traceReads(page);
  await api("SendMessage", { conversationId: id, text: "Which provider?", model: { provider: "nonesuch" } });
  await expectFailedWithReason(page);
  expect(live()).toBe(0);
  await shot(page, "failed-reply-live");

  // After a reload: the snapshot's message carries the reason.
  const reloaded = traceReads(page);
  await page.reload();
  await expectFailedWithReason(page);
  expect(reloaded()).toBe(0);
  await shot(page, "failed-reply-reloaded");

  // A tab that joins later, and a reply that failed before any tab saw it.
  await api("SendMessage", { conversationId: id, text: "And again?", model: { provider: "nonesuch" } });
  const later = await context.newPage();
  const laterReads = traceReads(later);
  await later.goto(`/c/${id}`);
  await expect(later.locator("article.message-assistant")).toHaveCount(2);
  for (const reply of await later.locator("article.message-assistant").all()) {
    await expect(reply).toHaveAttribute("data-status", "failed", done);
    await expect(reply.getByRole("alert")).toContainText(`The reply failed: ${reason}`);
  }
  expect(laterReads()).toBe(0);
  await shot(later, "failed-reply-later-tab");
});

test("the empty screen says replies come from the demo model and what its commands do", async ({ page }) => {
  await page.goto("/");
  const intro = page.getByRole("region", { name: "About the demo model" });
  await expect(intro).toContainText("Replies come from the built-in demo model (no key, no network)");
  for (const [command, does] of [
    ["/approve", "asks you to approve"],
    ["/ask", "asks you a question made from your message"],
    ["/client-tool", "has your browser run a tool"],
  ]) {
    await expect(intro.locator("dt", { hasText: command })).toBeVisible();
    await expect(intro).toContainText(does);
  }
  await shot(page, "empty-screen");
});
