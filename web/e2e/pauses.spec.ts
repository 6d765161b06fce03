// Pauses in the web app against the demo model (docs/workers.md "Pauses"):
// a message starting with /approve asks to approve publish_note, /ask asks
// a question that fits the message, /client-tool has the browser run
// browser_info (exactly once across tabs). While a person is asked, the
// tool's panel says "Waiting for you" (nothing spins, no time runs). After
// the answer the reply goes on in the same assistant message, under a
// heading that says what happened.

import type { Page } from "@playwright/test";
import { api, expect, lastReply, send, shot, test } from "./helpers";

const done = { timeout: 90_000 };

async function assistantIds(page: Page): Promise<string[]> {
  return page.locator("article.message-assistant").evaluateAll((els) => els.map((e) => e.getAttribute("data-message-id") ?? ""));
}

test("an approval: Approve, and the reply goes on in the same message", async ({ page }) => {
  await page.goto("/");
  await send(page, "/approve a note about the tides");
  await page.waitForURL(/\/c\//);
  const card = page.getByRole("group", { name: "Approval needed" });
  await expect(card).toBeVisible(done);
  await expect(card).toContainText("publish_note");
  // The call's input is in the tool's panel above, once: not in the card.
  const panel = page.locator('[data-block-type="tool_use"]');
  await expect(panel).toHaveAttribute("data-tool-status", "waiting");
  await expect(panel.locator("summary")).toContainText("Waiting for you");
  await expect(panel).toContainText("the tides");
  await expect(card).not.toContainText("the tides");
  // Waiting, not busy: no spinner, no running time.
  await expect(panel.locator(".spinner, .tool-duration")).toHaveCount(0);
  await expect(lastReply(page).locator(".spinner")).toHaveCount(0);
  const before = await assistantIds(page);
  expect(before).toHaveLength(1);
  await shot(page, "approval");
  await card.getByRole("button", { name: "Approve" }).click();
  await expect(card).toHaveCount(0);
  const reply = lastReply(page);
  await expect(reply).toHaveAttribute("data-status", "completed", done);
  await expect(reply).toContainText("published a note");
  await expect(reply.getByRole("heading", { name: "Approved: the note is published" })).toBeVisible();
  await expect(panel).toHaveAttribute("data-tool-status", "completed");
  expect(await assistantIds(page)).toEqual(before);
});

test("a reload between the request and the decision shows the request once; the decision resumes the reply", async ({ page }) => {
  await page.goto("/");
  await send(page, "/approve a note about the moon");
  await page.waitForURL(/\/c\//);
  await expect(page.getByRole("group", { name: "Approval needed" })).toBeVisible(done);
  await page.reload();
  await expect(page.getByRole("status", { name: "Connection: Live" })).toBeVisible();
  const card = page.getByRole("group", { name: "Approval needed" });
  await expect(card).toHaveCount(1);
  await card.getByRole("textbox", { name: "Reason (optional)" }).fill("fine by me");
  await card.getByRole("button", { name: "Approve" }).click();
  const reply = lastReply(page);
  await expect(reply).toHaveAttribute("data-status", "completed", done);
  await expect(reply).toContainText("published a note");
  await expect(page.getByRole("group", { name: "Approval needed" })).toHaveCount(0);
  expect(await assistantIds(page)).toHaveLength(1);
});

test.describe("tabs racing", () => {
  // The losing tab's AnswerInput or ClaimInput is refused (failed_precondition, HTTP 400), which the browser logs.
  test.use({ allowedConsoleErrors: [/status of 400 \(Bad Request\)/] });

  // Every 400 a test's pages got must be such a lost race, and nothing else.
  let refusals: Promise<string>[] = [];
  test.beforeEach(({ context }) => {
    refusals = [];
    context.on("response", (r) => {
      if (r.status() === 400) refusals.push(r.text().then((body) => `${new URL(r.url()).pathname} ${body}`));
    });
  });
  test.afterEach(async () => {
    for (const r of await Promise.all(refusals)) {
      expect(r).toMatch(/^\/convo\.v1\.ConversationService\/(AnswerInput|ClaimInput) /);
      expect(r).toContain('"code":"failed_precondition"');
      expect(r).toMatch(/is claimed by|was already answered/);
    }
  });

  test("two tabs approve at once: one decision is recorded, the other tab is told it was already answered", async ({ context }) => {
    const sent = await api<{ conversationId: string }>("SendMessage", { text: "/approve a note about two tabs" });
    const tabs: Page[] = [await context.newPage(), await context.newPage()];
    for (const t of tabs) {
      await t.goto(`/c/${sent.conversationId}`);
      await expect(t.getByRole("group", { name: "Approval needed" })).toHaveCount(1, done);
    }
    // Hold each tab's AnswerInput until both have sent theirs, then let both
    // through at once; record what the server answered each.
    const statuses: number[] = [];
    let arrived = 0;
    let release!: () => void;
    const both = new Promise<void>((r) => (release = r));
    await context.route("**/convo.v1.ConversationService/AnswerInput", async (route) => {
      if (++arrived === 2) release();
      await both;
      const res = await route.fetch();
      statuses.push(res.status());
      await route.fulfill({ response: res });
    });
    await Promise.all(tabs.map((t) => t.getByRole("group", { name: "Approval needed" }).getByRole("button", { name: "Approve" }).click()));
    await expect.poll(() => statuses.length, done).toBe(2);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);

    for (const t of tabs) {
      const reply = lastReply(t);
      await expect(reply).toHaveAttribute("data-status", "completed", done);
      await expect(t.getByRole("group", { name: "Approval needed" })).toHaveCount(0);
      expect(await assistantIds(t)).toHaveLength(1);
      const text = (await reply.locator('[data-block-type="text"]').allTextContents()).join("");
      expect(text.split("published a note")).toHaveLength(2); // once
    }
    // The tab that lost says so, and nothing else; the winner shows no error.
    const alerts = (await Promise.all(tabs.map((t) => t.getByRole("alert").allTextContents()))).flat();
    expect(alerts).toHaveLength(1);
    expect(alerts[0]).toMatch(/already answered/);
    await shot(tabs[0], "approval-two-tabs-0");
    await shot(tabs[1], "approval-two-tabs-1");
  });

  test("a client tool with three tabs open runs once, and every tab shows its result", async ({ context }) => {
    // Every tab follows the conversation before the request comes.
    const sent = await api<{ conversationId: string }>("SendMessage", { text: "Hello there." });
    const tabs: Page[] = [await context.newPage(), await context.newPage(), await context.newPage()];
    for (const t of tabs) {
      await t.goto(`/c/${sent.conversationId}`);
      await expect(t.getByRole("status", { name: "Connection: Live" })).toBeVisible();
      await expect(lastReply(t)).toHaveAttribute("data-status", "completed", done);
    }
    await send(tabs[0], "/client-tool what does my browser say?");
    // Each tab shows where the tool runs while it does (or has run it).
    for (const t of tabs) {
      await expect(t.locator("article.message-assistant")).toHaveCount(2);
      await expect(lastReply(t)).toHaveAttribute("data-status", "completed", done);
      await expect(lastReply(t)).toContainText("your browser ran it and sent back its result");
      await expect(lastReply(t)).toContainText("timeZone");
      // Nobody answered anything: the heading says what happened.
      await expect(lastReply(t).getByRole("heading", { name: "Your browser ran browser_info" })).toBeVisible();
      await expect(lastReply(t)).not.toContainText("Thanks for your answer");
    }
    const runs = await Promise.all(tabs.map((t) => t.evaluate(() => window.convoClientToolRuns ?? 0)));
    expect(runs.reduce((a, b) => a + b, 0)).toBe(1);
    await shot(tabs[1], "client-tool-other-tab");
    await shot(tabs[2], "client-tool-third-tab");
  });
});

test("a question: choosing green, the reply mentions green", async ({ page }) => {
  await page.goto("/");
  await send(page, "/ask me something");
  await page.waitForURL(/\/c\//);
  const card = page.getByRole("group", { name: "Question" });
  await expect(card).toBeVisible(done);
  await expect(card).toContainText("Which colour do you like best?");
  await expect(card.getByRole("button")).toHaveText(["red", "green", "blue"]);
  await card.getByRole("button", { name: "green" }).click();
  const reply = lastReply(page);
  await expect(reply).toHaveAttribute("data-status", "completed", done);
  await expect(reply.locator('[data-block-type="text"]').last()).toContainText("green");
});

test("a question fits the message: which fruit, answered in words", async ({ page }) => {
  await page.goto("/");
  await send(page, "/ask which fruit should I eat?");
  await page.waitForURL(/\/c\//);
  const card = page.getByRole("group", { name: "Question" });
  await expect(card).toBeVisible(done);
  await expect(card.getByRole("heading")).toHaveText("Which fruit do you like best?");
  const panel = page.locator('[data-block-type="tool_use"]');
  await expect(panel.locator("summary")).toContainText("Waiting for you");
  await expect(panel.locator(".spinner, .tool-duration")).toHaveCount(0);
  await shot(page, "question-fruit");
  await card.getByRole("textbox", { name: "Your answer" }).fill("mango");
  await card.getByRole("button", { name: "Answer" }).click();
  const reply = lastReply(page);
  await expect(reply).toHaveAttribute("data-status", "completed", done);
  await expect(reply.getByRole("heading", { name: "Thanks for your answer" })).toBeVisible();
  await expect(reply.locator('[data-block-type="text"]').last()).toContainText("mango");
});

test("a client tool claimed by a tab that closed shows as running elsewhere, then this tab takes it over", async ({ page }) => {
  // No tab is open when the request comes; a tab claims it and is gone.
  const sent = await api<{ conversationId: string }>("SendMessage", { text: "/client-tool from a tab that closes" });
  let toolCallId = "";
  await expect
    .poll(
      async () => {
        const c = await api<{ pendingInputs?: { toolCallId: string; kind: string }[] }>("GetConversation", {
          conversationId: sent.conversationId,
          includePauseEvents: true,
        });
        toolCallId = c.pendingInputs?.find((i) => i.kind === "client_tool")?.toolCallId ?? "";
        return toolCallId;
      },
      done,
    )
    .not.toBe("");
  // A lease long enough that a loaded machine shows the page before it
  // lapses (six seconds, with four tests at once, was not).
  await api("ClaimInput", { toolCallId, claimant: "tab-closed", leaseSeconds: 20 });
  await page.goto(`/c/${sent.conversationId}`);
  const status = page.getByRole("status", { name: "Client tool" });
  await expect(status).toContainText("running in another tab");
  await shot(page, "client-tool-elsewhere");
  // The claim lapses: this tab runs the tool once, and the reply goes on.
  const reply = lastReply(page);
  await expect(reply).toHaveAttribute("data-status", "completed", done);
  await expect(reply).toContainText("your browser ran it and sent back its result");
  expect(await page.evaluate(() => window.convoClientToolRuns ?? 0)).toBe(1);
});
