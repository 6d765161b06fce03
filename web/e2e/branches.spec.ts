// Branches (docs/branches.md) in the web app and in @convo/client, against
// the real server, PostgreSQL and the demo model: edit a message and see
// "‹ 2 / 2 ›", go back to the first version, regenerate a reply, a switch
// in one tab shown live in others, an A/B comparison on a branch, and
// followers that join at every step folding to GetConversation.

import type { Locator, Page } from "@playwright/test";
import { api, conversationIdOf, expect, getConversation, lastReply, pacedURL, send, shot, test } from "./helpers";

/** writingHint is what a branch control says while a reply is being written (VersionSwitcher.tsx). */
const writingHint = "A reply is being written: stop it or wait for it to end first.";

/** idle waits until no reply of the conversation is queued or running. */
async function idle(conversationId: string) {
  await expect
    .poll(async () => (await api<{ conversation?: { activePromptId?: string } }>("GetConversation", { conversationId })).conversation?.activePromptId ?? "", {
      timeout: 90_000,
    })
    .toBe("");
}

/** versionOf is the "Version n of m" a message shows ("" when it has one version). */
async function versionOf(message: Locator): Promise<string> {
  const place = message.locator(".version-place");
  return (await place.count()) === 0 ? "" : ((await place.getAttribute("aria-label")) ?? "");
}

/** shownIds lists the ids of the messages the page shows, in order. */
async function shownIds(page: Page): Promise<string[]> {
  return page.locator("article[data-message-id]").evaluateAll((els) => els.map((e) => e.getAttribute("data-message-id") ?? ""));
}

async function serverIds(conversationId: string, base?: string): Promise<string[]> {
  return ((await getConversation(conversationId, base)).messages ?? []).map((m) => m.id);
}

// It looks at the arrows while a reply is written: on the paced server,
// where a reply takes about a minute, so that a loaded machine cannot
// finish it before the test looks.
test.describe("while a reply is written", () => {
  const paced = pacedURL();
  test.use({ baseURL: paced });

  test("edit a message: its new reply and ‹ 2 / 2 ›, back to ‹ 1 / 2 › and the old reply; regenerate keeps both replies", async ({ page }) => {
    // Three replies at the paced server's pace.
    test.slow();
    await page.goto("/");
    await send(page, "Name a colour.");
    await page.waitForURL(/\/c\//);
    const conv = conversationIdOf(page);
    await expect(lastReply(page)).toHaveAttribute("data-status", "completed", { timeout: 90_000 });
    const firstReply = await lastReply(page).getAttribute("data-message-id");
    const user = page.locator("article.message-user").first();
    expect(await versionOf(user)).toBe("");

    // Edit: an inline editor; Cancel leaves the message as it was.
    await user.getByRole("button", { name: "Edit" }).click();
    const editor = user.getByRole("textbox", { name: "Edit message" });
    await expect(editor).toHaveValue("Name a colour.");
    await user.getByRole("button", { name: "Cancel" }).click();
    await expect(editor).toBeHidden();
    await user.getByRole("button", { name: "Edit" }).click();
    await user.getByRole("textbox", { name: "Edit message" }).fill("Tell me a long story about a fruit.");
    await user.getByRole("textbox", { name: "Edit message" }).press("Enter");

    await expect(user).toContainText("Tell me a long story about a fruit.");
    await expect(user.getByRole("group", { name: "Versions" })).toContainText("2 / 2");
    // The title came from the first message: it follows the edit, in the
    // header and in the list.
    const title = page.locator("h1.title");
    await expect(title).toHaveText("Tell me a long story about a fruit.");
    await expect(page).toHaveTitle("Tell me a long story about a fruit. · convo");
    await expect(page.locator(`a[href="/c/${conv}"]`).first()).toContainText("Tell me a long story about a fruit.");
    expect(await versionOf(user)).toBe("Version 2 of 2");
    // While its reply is written, the arrows are off and say why.
    const back = user.getByRole("button", { name: "Previous version" });
    await expect(back).toHaveAttribute("aria-disabled", "true");
    await expect(back).toHaveAttribute("title", writingHint);
    await shot(page, "branches-writing");
    const reply = lastReply(page);
    await expect(reply).toHaveAttribute("data-status", "completed", { timeout: 90_000 });
    const editedReply = await reply.getAttribute("data-message-id");
    expect(editedReply).not.toBe(firstReply);
    await expect(back).toHaveAttribute("aria-disabled", "false");
    await shot(page, "branches-edited");

    // ‹ : the first version and its reply, by keyboard.
    await back.focus();
    await page.keyboard.press("Enter");
    await expect(user).toContainText("Name a colour.");
    await expect(title).toHaveText("Name a colour.");
    expect(await versionOf(page.locator("article.message-user").first())).toBe("Version 1 of 2");
    await expect(lastReply(page)).toHaveAttribute("data-message-id", firstReply!);
    expect(await shownIds(page)).toEqual(await serverIds(conv, paced));

    // Regenerate the reply: a second version of it, the first kept.
    await lastReply(page).getByRole("button", { name: "Regenerate" }).click();
    await expect(lastReply(page)).not.toHaveAttribute("data-message-id", firstReply!);
    expect(await versionOf(lastReply(page))).toBe("Version 2 of 2");
    await expect(lastReply(page)).toHaveAttribute("data-status", "completed", { timeout: 90_000 });
    const regenerated = await lastReply(page).getAttribute("data-message-id");
    await lastReply(page).getByRole("button", { name: "Previous version" }).click();
    await expect(lastReply(page)).toHaveAttribute("data-message-id", firstReply!);
    expect(await versionOf(lastReply(page))).toBe("Version 1 of 2");
    await lastReply(page).getByRole("button", { name: "Next version" }).click();
    await expect(lastReply(page)).toHaveAttribute("data-message-id", regenerated!);
    expect(await shownIds(page)).toEqual(await serverIds(conv, paced));
    await shot(page, "branches-regenerated");

    // The switcher is easy to see and to hit, and stays in reach: with the
    // top of a reply taller than the screen in view, it sits at the bottom
    // edge of the list rather than below it.
    await page.setViewportSize({ width: 1280, height: 520 });
    const switcher = lastReply(page).getByRole("group", { name: "Versions" });
    const look = await switcher.evaluate((el) => {
      const place = el.querySelector(".version-place") as HTMLElement;
      const step = el.querySelector(".version-step") as HTMLElement;
      return {
        fontSize: parseFloat(getComputedStyle(place).fontSize),
        color: getComputedStyle(place).color,
        text: getComputedStyle(document.body).color,
        stepHeight: step.getBoundingClientRect().height,
      };
    });
    expect(look.fontSize).toBeGreaterThanOrEqual(14);
    expect(look.color).toBe(look.text); // full contrast, not muted
    expect(look.stepHeight).toBeGreaterThanOrEqual(30);
    await lastReply(page).evaluate((el) => el.scrollIntoView({ block: "start" }));
    const list = await page.locator(".messages").boundingBox();
    const replyBox = await lastReply(page).boundingBox();
    const box = await switcher.boundingBox();
    expect(replyBox!.y + replyBox!.height).toBeGreaterThan(list!.y + list!.height); // the reply runs on below
    expect(box!.y).toBeGreaterThanOrEqual(list!.y);
    expect(box!.y + box!.height).toBeLessThanOrEqual(list!.y + list!.height + 1);
    await expect(switcher).toBeInViewport();
    await shot(page, "branches-switcher-in-reach");
    await switcher.getByRole("button", { name: "Previous version" }).click();
    await expect(lastReply(page)).toHaveAttribute("data-message-id", firstReply!);
  });
});

test("a switch in one tab shows in the others live, in the same browser and in another", async ({ page, browser }) => {
  const sent = await api<{ conversationId: string; userMessageId: string }>("SendMessage", { text: "Say hello." });
  const conv = sent.conversationId;
  await idle(conv);
  await api("EditMessage", { conversationId: conv, messageId: sent.userMessageId, text: "Say goodbye." });
  await idle(conv);

  const sameBrowser = await page.context().newPage();
  const other = await browser.newContext();
  const otherBrowser = await other.newPage();
  const tabs = [page, sameBrowser, otherBrowser];
  for (const tab of tabs) {
    await tab.goto(`/c/${conv}`);
    await expect(tab.getByRole("status", { name: "Connection: Live" })).toBeVisible({ timeout: 30_000 });
    await expect(tab.locator("article.message-user").first()).toContainText("Say goodbye.");
  }

  await page.locator("article.message-user").first().getByRole("button", { name: "Previous version" }).click();
  for (const tab of tabs) {
    const user = tab.locator("article.message-user").first();
    await expect(user).toContainText("Say hello.");
    await expect(user.locator(".version-place")).toHaveAttribute("aria-label", "Version 1 of 2");
    expect(await shownIds(tab)).toEqual(await serverIds(conv));
  }
  await otherBrowser.locator("article.message-user").first().getByRole("button", { name: "Next version" }).click();
  for (const tab of tabs) {
    await expect(tab.locator("article.message-user").first()).toContainText("Say goodbye.");
    expect(await shownIds(tab)).toEqual(await serverIds(conv));
  }
  await other.close();
});

test("an A/B comparison still works on a branch: shown, and voted on, after an edit and a switch back", async ({ page }) => {
  await page.goto("/");
  await page.getByRole("checkbox", { name: /compare two replies/ }).check();
  await page.getByLabel("Model A").fill("small");
  await page.getByLabel("Model B").fill("large");
  await send(page, "Which is better, tea or coffee?");
  await page.waitForURL(/\/c\//);
  const conv = conversationIdOf(page);
  const cmp = page.getByRole("region", { name: "A/B comparison" });
  await expect(cmp.locator("article.message-assistant")).toHaveCount(2);
  await idle(conv);
  const comparisonId = await cmp.getAttribute("data-comparison-id");

  const user = page.locator("article.message-user").first();
  await user.getByRole("button", { name: "Edit" }).click();
  await user.getByRole("textbox", { name: "Edit message" }).fill("Which is better, juice or water?");
  await user.getByRole("button", { name: "Save" }).click();
  await expect(cmp).toBeHidden();
  await expect(page.locator("article.message-assistant")).toHaveCount(1);
  await idle(conv);

  await user.getByRole("button", { name: "Previous version" }).click();
  await expect(cmp).toBeVisible();
  await expect(cmp).toHaveAttribute("data-comparison-id", comparisonId!);
  await expect(cmp.locator("article.message-assistant")).toHaveCount(2);
  await expect(cmp.locator(".comparison-slot")).toHaveText(["Reply A · small", "Reply B · large"]);
  const b = cmp.getByRole("button", { name: "B is better" });
  await b.click();
  await expect(b).toHaveAttribute("aria-pressed", "true");
  await expect
    .poll(async () => {
      const res = await api<{ comparisons?: { id: string; preference?: string }[] }>("ListComparisons", { conversationId: conv });
      return res.comparisons?.find((c) => c.id === comparisonId)?.preference;
    })
    .toBe("PREFERENCE_B");
  expect(await shownIds(page)).toEqual(await serverIds(conv));
  await shot(page, "branches-ab");
});

test("@convo/client followers that join at every step of edits, regenerations and switches fold to GetConversation", async () => {
  // The built package, as an app in Node would import it.
  const { createConvoClient, editMessage, followConversation, regenerateReply, sendMessage, switchBranch } = await import(
    "../../clients/typescript/dist/index.js"
  );
  type State = Awaited<ReturnType<ReturnType<typeof followConversation>["next"]>>["value"];
  const base = process.env.CONVO_E2E_API_URL ?? process.env.CONVO_E2E_BASE_URL ?? "";
  const client = createConvoClient({ baseUrl: base });
  const stop = new AbortController();
  const followers: { latest: State | undefined; done: Promise<void> }[] = [];
  const join = (conversationId: string) => {
    const f: { latest: State | undefined; done: Promise<void> } = { latest: undefined, done: Promise.resolve() };
    f.done = (async () => {
      for await (const u of followConversation(client, conversationId, { signal: stop.signal })) f.latest = u;
    })();
    followers.push(f);
  };

  const sent = await sendMessage(client, "Tell me a long story about a lighthouse.");
  const conv = sent.conversationId;
  join(conv); // while the first reply is written
  await idle(conv);
  const second = await sendMessage(client, "And about the sea?", { conversationId: conv });
  await idle(conv);
  join(conv);
  await regenerateReply(client, conv);
  join(conv); // while the regenerated reply is written
  await idle(conv);
  const edited = await editMessage(client, conv, sent.userMessageId, "Tell me a short story about a harbour.");
  join(conv); // while the edit's reply is written
  await idle(conv);
  join(conv);
  await switchBranch(client, conv, edited.userMessageId, 0); // ‹ back to the first version
  join(conv);
  await switchBranch(client, conv, second.assistantMessageId); // its first reply, by id
  join(conv);

  const want = await client.getConversation({ conversationId: conv });
  const summary = (m: { id: string; role: string; status: string; parentId: string; siblingCount: number; siblingIndex: number }, text: string) =>
    `${m.id} ${m.role} ${m.status} parent=${m.parentId} ${m.siblingIndex + 1}/${Math.max(1, m.siblingCount)} ${text}`;
  const expected = want.messages.map((m) => summary(m, m.blocks.map((b) => b.content).join("|")));
  expect(want.messages.map((m) => m.siblingCount)).toEqual([2, 1, 1, 2]);
  for (const [i, f] of followers.entries()) {
    await expect
      .poll(() => (f.latest?.state.seq ?? -1n) >= want.seq && f.latest?.status === "live", { timeout: 30_000 })
      .toBe(true);
    const s = f.latest!.state;
    const got = s.messageIds.map((id) => summary(s.messages[id], s.messages[id].blockIds.map((b) => s.blocks[b].content).join("|")));
    expect(got, `follower ${i}`).toEqual(expected);
    expect(s.desync, `follower ${i}`).toBe(false);
  }
  stop.abort();
  await Promise.all(followers.map((f) => f.done));
});
