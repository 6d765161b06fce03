// Files in the browser: attached through the file input, dropped onto the
// conversation, pasted into the composer; each upload's progress; a
// message of files only; thumbnails (their signed URLs load) and chips;
// the same files once after a reload and in a second tab; a file over the
// server's limit refused before any request.

import type { Page } from "@playwright/test";
import { conversationIdOf, expect, shot, test } from "./helpers";
import { launch, type Launched } from "./server";

let convo: Launched;
// One server for the file's tests, run one after the other in one worker:
// beforeAll runs once per group of tests a worker gets, and fully parallel
// each test would be a group that starts a server of its own.
test.describe.configure({ mode: "default" });
// Small, so that a file over it is quick to make.
const maxFileBytes = 64 * 1024;

// A file's content is served with Content-Security-Policy: sandbox, so
// Chromium's own viewer of an image opened in a tab may not run its
// script: the browser logs that, and shows the image.
test.use({ allowedConsoleErrors: [/Blocked script execution in '[^']*\/v1\/files\/[0-9a-f-]{36}\/content\?[^']*' because the document's frame is sandboxed/] });

test.beforeAll(async () => {
  convo = await launch("files", { CONVO_FILE_MAX_BYTES: String(maxFileBytes) });
});

test.afterAll(async () => {
  await convo?.stop();
});

/** png is a real PNG image: a screenshot of part of the page. */
async function png(page: Page): Promise<Buffer> {
  return page.screenshot({ clip: { x: 0, y: 0, width: 160, height: 100 } });
}

/** userFiles is what the page's last user message shows: its images' names and its chips' names. */
function userMessage(page: Page) {
  return page.locator("article.message-user").last();
}

async function expectFilesOnce(page: Page) {
  const m = userMessage(page);
  await expect(m.locator(".attachment-image img")).toHaveCount(2);
  await expect(m.locator(".attachment-image img").nth(0)).toHaveAttribute("alt", "cat.png");
  await expect(m.locator(".attachment-image img").nth(1)).toHaveAttribute("alt", "pasted.png");
  await expect(m.locator(".attachment-chip")).toHaveCount(1);
  await expect(m.locator(".attachment-chip")).toContainText("notes.txt");
  await expect(m.locator(".attachment-chip")).toContainText("24 B");
  // The thumbnails' signed URLs load without a token.
  await expect
    .poll(() => m.locator(".attachment-image img").evaluateAll((imgs) => imgs.map((i) => (i as HTMLImageElement).naturalWidth)))
    .toEqual([160, 160]);
}

test("files attached by the file input, a drop and a paste upload with progress, are sent without text, and show once after a reload and in a second tab", async ({
  page,
  context,
}) => {
  await page.goto(convo.base + "/");
  const image = await png(page);

  // Hold the first upload's answer, so that its progress shows.
  let release = () => {};
  const held = new Promise<void>((r) => (release = r));
  let first = true;
  await page.route("**/v1/files", async (route) => {
    if (first) {
      first = false;
      await held;
    }
    await route.continue();
  });

  await page.locator('input[type="file"]').setInputFiles({ name: "cat.png", mimeType: "image/png", buffer: image });
  const uploads = page.getByRole("list", { name: "Files to send" });
  await expect(uploads.getByRole("progressbar", { name: "Uploading cat.png" })).toBeVisible();
  await expect(page.getByRole("button", { name: "Send" })).toBeDisabled();
  await shot(page, "files-uploading");
  release();
  await expect(uploads.locator('[data-status="done"]')).toHaveCount(1);

  // A file dropped onto the conversation.
  const dropped = await page.evaluateHandle(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(["a few notes, for convo.\n"], "notes.txt", { type: "text/plain" }));
    return dt;
  });
  const main = page.locator("main");
  await main.dispatchEvent("dragenter", { dataTransfer: dropped });
  await main.dispatchEvent("dragover", { dataTransfer: dropped });
  await main.dispatchEvent("drop", { dataTransfer: dropped });

  // An image pasted into the composer.
  await page.getByRole("textbox", { name: "Message", exact: true }).focus();
  await page.evaluate((b64) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bytes], "pasted.png", { type: "image/png" }));
    const ev = new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true });
    document.getElementById("composer-input")!.dispatchEvent(ev);
  }, image.toString("base64"));

  await expect(uploads.locator('[data-status="done"]')).toHaveCount(3);
  await expect(uploads.locator(".attachment-image img")).toHaveCount(2);
  await shot(page, "files-composer");

  // No text: a message of files only.
  await page.getByRole("button", { name: "Send" }).click();
  await expect(page).toHaveURL(/\/c\//);
  const id = conversationIdOf(page);
  await expectFilesOnce(page);
  await expect(page.getByRole("list", { name: "Files to send" })).toHaveCount(0);
  // The demo model read the bytes: its reply names each file, and the
  // text file's first line.
  const reply = page.locator("article.message-assistant").last();
  for (const said of ["cat.png", "pasted.png", "notes.txt", "a few notes, for convo."]) {
    await expect(reply).toContainText(said, { timeout: 60_000 });
  }
  await shot(page, "files-sent");

  // A click opens the image in a new tab, through its signed URL.
  const [tab] = await Promise.all([context.waitForEvent("page"), userMessage(page).locator(".attachment-image").first().click()]);
  await tab.waitForLoadState();
  expect(tab.url()).toMatch(/\/v1\/files\/[0-9a-f-]{36}\/content\?exp=\d+&sig=/);
  await tab.close();

  await page.reload();
  await expectFilesOnce(page);

  const second = await context.newPage();
  await second.goto(`${convo.base}/c/${id}`);
  await expectFilesOnce(second);
  await shot(second, "files-second-tab");
});

test("a file over the server's limit is refused before upload, saying the limit, and sends no request", async ({ page }) => {
  await page.goto(convo.base + "/");
  const requests: string[] = [];
  page.on("request", (r) => {
    if (new URL(r.url()).pathname.startsWith("/v1/files")) requests.push(r.url());
  });
  await page.locator('input[type="file"]').setInputFiles({
    name: "huge.bin",
    mimeType: "application/octet-stream",
    buffer: Buffer.alloc(maxFileBytes + 1, 7),
  });
  await expect(page.getByRole("alert").filter({ hasText: "huge.bin is 65537 bytes: files can be at most 65536 bytes." })).toBeVisible();
  await expect(page.getByRole("button", { name: "Send" })).toBeDisabled();
  await shot(page, "files-refused");
  expect(requests).toEqual([]);
});

test("editing a message keeps its files, and may remove one", async ({ page }) => {
  await page.goto(convo.base + "/");
  await page.locator('input[type="file"]').setInputFiles([
    { name: "a.txt", mimeType: "text/plain", buffer: Buffer.from("first file\n") },
    { name: "b.txt", mimeType: "text/plain", buffer: Buffer.from("second file\n") },
  ]);
  await expect(page.getByRole("list", { name: "Files to send" }).locator('[data-status="done"]')).toHaveCount(2);
  const box = page.getByRole("textbox", { name: "Message", exact: true });
  await box.fill("two files");
  await box.press("Enter");
  await expect(page).toHaveURL(/\/c\//);
  await expect(userMessage(page).locator(".attachment-chip")).toHaveCount(2);
  await expect(page.locator("article.message-assistant").last()).toHaveAttribute("data-status", "completed", { timeout: 60_000 });

  await userMessage(page).getByRole("button", { name: "Edit" }).click();
  const kept = page.getByRole("list", { name: "Files the message keeps" });
  await expect(kept.locator(".attachment-chip")).toHaveCount(2);
  await kept.getByRole("button", { name: "Remove a.txt" }).click();
  await page.getByRole("textbox", { name: "Edit message" }).fill("one file");
  await page.getByRole("button", { name: "Save" }).click();
  await expect(userMessage(page)).toContainText("one file");
  // One assertion, retried until it holds whole: the chips are exactly
  // b.txt's (two separate ones could each pass on a different render).
  await expect(userMessage(page).locator(".attachment-chip")).toHaveText([/b\.txt/]);
  await shot(page, "files-edited");
});
