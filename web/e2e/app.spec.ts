// End-to-end: the web app in Chromium against the real server, real
// PostgreSQL and the demo model (see global-setup.ts).

import {
  api,
  blockLengths,
  conversationIdOf,
  expect,
  getConversation,
  lastReply,
  offlineConsoleErrors,
  pacedURL,
  recordLastReply,
  recorded,
  send,
  serverBlockLengths,
  shot,
  test,
  textLength,
  uniqueWord,
} from "./helpers";

// The tests that act while a reply runs (watch it grow, reload, stop it,
// drop the network, open a second tab, stop a comparison) run against the
// paced server: a reply there takes about a minute, so a loaded
// machine cannot finish it before the test acts. The other tests use the
// shared server, whose replies take about ten seconds.
const paced = pacedURL();

test.describe("mid-reply, at a reading pace", () => {
  test.use({ baseURL: paced });

  test("a reply streams in: reasoning, the tool panel, then text; the trace lists its events", async ({ page }) => {
    // The whole reply, about a minute at this pace, runs in the test.
    test.slow();
    await page.goto("/");
    await send(page, "How many words are in this sentence, and which is the longest?");
    await page.waitForURL(/\/c\//);
    await expect(page.getByRole("status", { name: "Connection: Live" })).toBeVisible();

    const reply = lastReply(page);
    await expect(reply.locator('[data-block-type="reasoning"]')).toBeVisible();
    const tool = reply.locator('[data-block-type="tool_use"]');
    await expect(tool).toBeVisible();
    await expect(tool.locator(".tool-name")).not.toBeEmpty();

    // The text grows while the reply runs.
    await expect.poll(() => textLength(reply)).toBeGreaterThan(0);
    const early = await textLength(reply);
    await expect.poll(() => textLength(reply)).toBeGreaterThan(early);
    await expect(page.getByRole("button", { name: "Stop the reply" })).toBeVisible();

    await expect(reply).toHaveAttribute("data-status", "completed", { timeout: 150_000 });
    await expect(page.getByRole("button", { name: "Stop the reply" })).toBeHidden();
    await expect(tool).toHaveAttribute("data-tool-status", "completed");
    expect(await blockLengths(page)).toEqual(await serverBlockLengths(conversationIdOf(page), paced));
    await tool.locator("summary").click();
    await shot(page, "stream-completed");

    await reply.getByRole("button", { name: "Trace" }).click();
    const dialog = page.getByRole("dialog", { name: "Trace" });
    await expect(dialog.locator("tbody tr").first()).toBeVisible();
    expect(await dialog.locator("tbody tr").count()).toBeGreaterThan(5);
    await expect(dialog.getByText("blockDelta").first()).toBeVisible();
    await shot(page, "trace");
    await page.keyboard.press("Escape");
    await expect(dialog).toBeHidden();
  });

  test("reloading mid-reply continues it with no text duplicated or missing", async ({ page }) => {
    // The whole reply, about a minute at this pace, runs in the test.
    test.slow();
    await page.goto("/");
    await send(page, "Tell me a long story about a lighthouse keeper and the sea.");
    await page.waitForURL(/\/c\//);
    const id = conversationIdOf(page);
    const reply = lastReply(page);
    await expect.poll(() => textLength(reply)).toBeGreaterThan(20);
    await expect(reply).toHaveAttribute("data-status", "processing");
    const before = await textLength(reply);

    await page.reload();
    await expect(page.getByRole("status", { name: "Connection: Live" })).toBeVisible();
    // The reply goes on after the reload …
    await expect.poll(() => textLength(lastReply(page))).toBeGreaterThan(before);
    await expect(lastReply(page)).toHaveAttribute("data-status", "completed", { timeout: 150_000 });
    // … and ends exactly as the server has it.
    expect(await blockLengths(page)).toEqual(await serverBlockLengths(id, paced));
    const shown = await page.locator(".messages-inner").innerText();
    await shot(page, "reload-completed");

    // A fresh load of the finished conversation shows the very same text.
    await page.reload();
    await expect(lastReply(page)).toHaveAttribute("data-status", "completed");
    expect(await page.locator(".messages-inner").innerText()).toEqual(shown);
  });

  test("stop ends a running reply and keeps what it wrote", async ({ page }) => {
    await page.goto("/");
    await send(page, "Write a detailed essay on the history of PostgreSQL.");
    await page.waitForURL(/\/c\//);
    const reply = lastReply(page);
    await expect.poll(() => textLength(reply)).toBeGreaterThan(10);

    await page.getByRole("button", { name: "Stop the reply" }).click();
    await expect(reply).toHaveAttribute("data-status", "cancelled");
    await expect(reply.getByText("Stopped.")).toBeVisible();
    await expect(page.getByRole("button", { name: "Stop the reply" })).toBeHidden();

    // Nothing more arrives, and the partial reply is what the server kept.
    const kept = await textLength(reply);
    expect(kept).toBeGreaterThan(0);
    await page.waitForTimeout(1500);
    expect(await textLength(reply)).toBe(kept);
    const conv = await getConversation(conversationIdOf(page), paced);
    const server = conv.messages?.find((m) => m.role === "assistant");
    expect(server?.status).toBe("cancelled");
    expect(await blockLengths(page)).toEqual(await serverBlockLengths(conversationIdOf(page), paced));
    await shot(page, "stopped");
  });
});

test("feedback and its comment persist across a reload", async ({ page }) => {
  await page.goto("/");
  await send(page, "Say hello.");
  await page.waitForURL(/\/c\//);
  const id = conversationIdOf(page);
  const reply = lastReply(page);
  await expect(reply).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
  const feedback = async () => (await getConversation(id)).messages?.find((m) => m.role === "assistant")?.feedback;

  // From the keyboard: rate, then Tab to "Add a comment", write it, Enter saves.
  const up = reply.getByRole("button", { name: "Good reply" });
  await up.focus();
  await page.keyboard.press("Enter");
  await expect(up).toHaveAttribute("aria-pressed", "true");
  await page.keyboard.press("Tab");
  await page.keyboard.press("Tab");
  await expect(reply.getByRole("button", { name: "Add a comment" })).toBeFocused();
  await page.keyboard.press("Enter");
  const box = reply.getByRole("textbox", { name: /Comment on this reply/ });
  await expect(box).toBeFocused();
  const comment = "Friendly, but the table is more than a greeting needs.";
  await page.keyboard.type(comment);
  await page.keyboard.press("Enter");
  await expect(box).toBeHidden();
  await expect(reply.getByRole("button", { name: "Edit comment" })).toBeFocused();
  await expect(reply.locator(".feedback-comment")).toContainText(comment);
  await expect.poll(feedback).toMatchObject({ rating: "RATING_UP", comment });

  // A new rating keeps the comment.
  await reply.getByRole("button", { name: "Bad reply" }).click();
  await expect.poll(feedback).toMatchObject({ rating: "RATING_DOWN", comment });

  // Escape leaves the comment as it was.
  await reply.getByRole("button", { name: "Edit comment" }).click();
  await expect(box).toHaveValue(comment);
  await box.press("End");
  await box.pressSequentially(" Not saved.");
  await box.press("Escape");
  await expect(box).toBeHidden();
  await expect(reply.locator(".feedback-comment")).toHaveText(`Your comment: ${comment}`);

  await page.reload();
  const again = lastReply(page);
  await expect(again.getByRole("button", { name: "Bad reply" })).toHaveAttribute("aria-pressed", "true");
  await expect(again.getByRole("button", { name: "Good reply" })).toHaveAttribute("aria-pressed", "false");
  await expect(again.locator(".feedback-comment")).toHaveText(`Your comment: ${comment}`);
  expect((await feedback())?.comment).toBe(comment);
  const edit = again.getByRole("button", { name: "Edit comment" });
  await edit.click();
  await expect(box).toHaveValue(comment);
  await expect(again.getByRole("button", { name: "Save comment" })).toBeInViewport();
  await shot(page, "feedback-editor");
  await page.keyboard.press("Escape");
  await expect(edit).toBeFocused();
  await shot(page, "feedback");
});

test("search finds a message across conversations and opens it", async ({ page }) => {
  const word = uniqueWord("zanzibar");
  await page.goto("/");
  await send(page, `Remember the ${word} lighthouse.`);
  await page.waitForURL(/\/c\//);
  const id = conversationIdOf(page);
  await expect(lastReply(page)).toHaveAttribute("data-status", "completed", { timeout: 60_000 });

  // Start elsewhere, then search.
  await page.getByRole("link", { name: "+ New" }).click();
  await page.waitForURL((u) => u.pathname === "/");
  await page.getByRole("searchbox", { name: "Search messages" }).fill(word);
  const results = page.getByRole("list", { name: "Search results" });
  await expect(results.locator("mark").first()).toHaveText(new RegExp(word, "i"));
  await shot(page, "search");

  await results.getByRole("link").first().click();
  await page.waitForURL(new RegExp(`/c/${id}`));
  await expect(page.locator("article.is-highlighted")).toContainText(word);
});

test("an A/B comparison shows two replies side by side and records the vote", async ({ page }) => {
  await page.goto("/");
  await page.getByRole("checkbox", { name: /compare two replies/ }).check();
  // Each model field sits below its label, with room between them.
  for (const name of ["Model A", "Model B"]) {
    const gap = await page.getByLabel(name).evaluate((input) => {
      const label = input.closest("label")!;
      const range = document.createRange();
      range.selectNodeContents(label.firstChild!);
      return input.getBoundingClientRect().top - range.getBoundingClientRect().bottom;
    });
    expect(gap, `space between the ${name} label and its field`).toBeGreaterThanOrEqual(5);
  }
  await page.getByLabel("Model A").fill("small");
  await page.getByLabel("Model B").fill("large");
  await send(page, "Which is better, tea or coffee?");
  await page.waitForURL(/\/c\//);
  const cmp = page.getByRole("region", { name: "A/B comparison" });
  await expect(cmp.locator("article.message-assistant")).toHaveCount(2);
  for (const side of await cmp.locator("article.message-assistant").all()) {
    await expect(side).toHaveAttribute("data-status", "completed", { timeout: 90_000 });
  }
  // Each column says which model wrote it, and the demo model answers each differently.
  await expect(cmp.locator(".comparison-slot")).toHaveText(["Reply A · small", "Reply B · large"]);
  const [textA, textB] = await cmp.locator('article.message-assistant [data-block-type="text"]').allTextContents();
  expect(textA).not.toBe(textB);
  const b = cmp.getByRole("button", { name: "B is better" });
  await b.click();
  await expect(b).toHaveAttribute("aria-pressed", "true");
  const comparisonId = await cmp.getAttribute("data-comparison-id");
  await expect
    .poll(async () => {
      const res = await api<{ comparisons?: { id: string; preference?: string }[] }>("ListComparisons", {
        conversationId: conversationIdOf(page),
      });
      return res.comparisons?.find((c) => c.id === comparisonId)?.preference;
    })
    .toBe("PREFERENCE_B");
  await shot(page, "ab");
});

test.describe("with a slow model", () => {
  // These tests need a reply still running when they act: a tab must join
  // it mid-stream, Stop must reach both replies of a comparison. At the
  // paced server's 8 tokens a second a long reply takes about fifty.
  test.use({ baseURL: paced });

  test("a second tab shows the same reply as it streams", async ({ page, context }) => {
    // The whole reply, most of a minute at this pace, runs in the test.
    test.slow();
    // Opened ahead, recording what it shows, so that a slow machine cannot
    // turn "joined mid-reply" into "arrived after the end" unnoticed.
    const second = await context.newPage();
    await recordLastReply(second);
    await page.goto("/");
    await send(page, "Count the letters in: the quick brown fox jumps over the lazy dog");
    await page.waitForURL(/\/c\//);
    // Join while the reply runs: its tool call is there, its text about to stream.
    await expect(lastReply(page).locator('[data-block-type="tool_use"]')).toBeVisible();

    await second.goto(page.url());
    await expect(second.getByRole("status", { name: "Connection: Live" })).toBeVisible();
    for (const p of [page, second]) {
      await expect(lastReply(p)).toHaveAttribute("data-status", "completed", { timeout: 150_000 });
    }
    // The second tab joined mid-reply and followed it live: it showed the
    // reply running, with its text growing.
    const running = (await recorded(second)).filter((r) => r.status === "processing" && r.textLength > 0);
    expect(running.length, "text lengths the second tab showed while the reply ran").toBeGreaterThan(1);
    expect(await blockLengths(second)).toEqual(await blockLengths(page));
    expect(await second.locator(".messages-inner").innerText()).toEqual(await page.locator(".messages-inner").innerText());
    await shot(second, "second-tab");
  });

  test("stop in an A/B comparison stops both replies", async ({ page }) => {
    await page.goto("/");
    await page.getByRole("checkbox", { name: /compare two replies/ }).check();
    await send(page, "Write two long paragraphs about lighthouses.");
    await page.waitForURL(/\/c\//);
    const id = conversationIdOf(page);
    const sides = page.getByRole("region", { name: "A/B comparison" }).locator("article.message-assistant");
    await expect(sides).toHaveCount(2);
    for (const side of await sides.all()) {
      await expect.poll(() => textLength(side), { timeout: 60_000 }).toBeGreaterThan(10);
      await expect(side).toHaveAttribute("data-status", "processing");
    }

    await page.getByRole("button", { name: "Stop the reply" }).click();
    for (const side of await sides.all()) {
      await expect(side).toHaveAttribute("data-status", "cancelled");
      await expect(side.getByText("Stopped.")).toBeVisible();
    }
    await expect(page.getByRole("button", { name: "Stop the reply" })).toBeHidden();
    await expect(page.getByRole("alert")).toHaveCount(0);
    const conv = await getConversation(id, paced);
    expect(conv.messages?.filter((m) => m.role === "assistant").map((m) => m.status)).toEqual(["cancelled", "cancelled"]);
    expect(await blockLengths(page)).toEqual(await serverBlockLengths(id, paced));
    await shot(page, "ab-stopped");
  });
});

test("on a phone-sized screen the sidebar is a drawer", async ({ page }) => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto("/");
  await send(page, "Hello from a phone.");
  await page.waitForURL(/\/c\//);
  await expect(lastReply(page)).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
  await shot(page, "phone");
  await page.getByRole("button", { name: "Show conversations" }).click();
  const nav = page.getByRole("navigation", { name: "Conversations" });
  await expect(nav).toBeVisible();
  // Wait for the drawer to finish sliding in.
  await expect.poll(async () => (await nav.boundingBox())?.x).toBe(0);
  await shot(page, "phone-drawer");
  await page.keyboard.press("Escape");
  await expect(page.getByRole("button", { name: "Show conversations" })).toHaveAttribute("aria-expanded", "false");
});

test.describe("offline", () => {
  test.use({ allowedConsoleErrors: offlineConsoleErrors, baseURL: paced });

  test("the stream reconnects after the network drops and resumes where it was", async ({ page, context }) => {
    // The whole reply, about a minute at this pace, runs in the test.
    test.slow();
    await page.goto("/");
    await send(page, "Describe the water cycle in a few paragraphs.");
    await page.waitForURL(/\/c\//);
    const id = conversationIdOf(page);
    const reply = lastReply(page);
    await expect.poll(() => textLength(reply)).toBeGreaterThan(10);

    await context.setOffline(true);
    await expect(page.getByRole("status", { name: /Connection: (Reconnecting|Offline)/ })).toBeVisible();
    await shot(page, "offline");
    await page.waitForTimeout(1500);
    await context.setOffline(false);
    await expect(page.getByRole("status", { name: "Connection: Live" })).toBeVisible({ timeout: 30_000 });

    await expect(reply).toHaveAttribute("data-status", "completed", { timeout: 150_000 });
    expect(await blockLengths(page)).toEqual(await serverBlockLengths(id, paced));
  });
});

test("the sidebar renames, clears and deletes a conversation", async ({ page }) => {
  await page.goto("/");
  await send(page, "A conversation to rename.");
  await page.waitForURL(/\/c\//);
  const id = conversationIdOf(page);
  await expect(lastReply(page)).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
  const item = page.locator(`li[data-conversation-id="${id}"]`);
  await expect(item).toContainText("A conversation to rename.");

  // Rename from the keyboard: the button, then type and Enter.
  await item.getByRole("button", { name: /^Rename / }).click();
  await page.getByRole("textbox", { name: "New title" }).fill("Renamed by e2e");
  await page.keyboard.press("Enter");
  await expect(item.locator(".conv-title")).toHaveText("Renamed by e2e");
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Renamed by e2e");

  // Clear the history: the messages go, the conversation stays.
  await page.getByRole("button", { name: "Clear history" }).click();
  await page.getByRole("group", { name: "Confirm clearing the history" }).getByRole("button", { name: "Clear" }).click();
  await expect(page.locator("article.message")).toHaveCount(0);
  await expect(page.getByText("No messages yet.")).toBeVisible();
  await expect(item).toBeVisible();
  await shot(page, "cleared");

  // Delete it: back to a new conversation, and it is gone from the list.
  await item.getByRole("button", { name: /^Delete / }).click();
  await item.getByRole("button", { name: "Delete", exact: true }).click();
  await page.waitForURL((u) => u.pathname === "/");
  await expect(page.locator(`li[data-conversation-id="${id}"]`)).toHaveCount(0);
  const conv = await api("ListConversations", { pageSize: 100 });
  expect(JSON.stringify(conv)).not.toContain(id);
});
