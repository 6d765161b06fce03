import { expect, test as base, type Locator, type Page } from "@playwright/test";
import path from "node:path";
import { fileURLToPath } from "node:url";

const screens = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "test-results", "screens");

/** test is Playwright's test with a page that fails the test on any console error or page error. */
export const test = base.extend<{ consoleErrors: string[]; allowedConsoleErrors: RegExp[] }>({
  /** Console errors a test expects (e.g. the browser's own log of a 401 response). */
  allowedConsoleErrors: [[], { option: true }],
  consoleErrors: [
    async ({ context, allowedConsoleErrors }, use) => {
      const errors: string[] = [];
      const watch = (p: Page) => {
        p.on("console", (m) => {
          if (m.type() !== "error" || allowedConsoleErrors.some((r) => r.test(m.text()))) return;
          errors.push(`${p.url()}: ${m.text()}`);
        });
        p.on("pageerror", (e) => errors.push(`${p.url()}: ${e.message}`));
      };
      context.pages().forEach(watch);
      context.on("page", watch);
      await use(errors);
      expect(errors, "console errors").toEqual([]);
    },
    { auto: true },
  ],
});

export { expect };

/** api calls the Connect API with JSON, as a worker or another client would. */
export async function api<T = Record<string, unknown>>(method: string, body: unknown): Promise<T> {
  const base = process.env.CONVO_E2E_API_URL ?? process.env.CONVO_E2E_BASE_URL;
  const res = await fetch(`${base}/convo.v1.ConversationService/${method}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

export interface ApiBlock {
  id: string;
  blockType: string;
  content?: string;
  status?: string;
}
export interface ApiMessage {
  id: string;
  role: string;
  status: string;
  blocks?: ApiBlock[];
  feedback?: { rating?: string };
}

export async function getConversation(conversationId: string) {
  return api<{ messages?: ApiMessage[]; seq?: string }>("GetConversation", { conversationId });
}

export function conversationIdOf(page: Page): string {
  const m = /\/c\/([^/?#]+)/.exec(page.url());
  if (!m) throw new Error(`not on a conversation: ${page.url()}`);
  return decodeURIComponent(m[1]);
}

/** send types a message in the composer and sends it with Enter. */
export async function send(page: Page, text: string) {
  const box = page.getByRole("textbox", { name: "Message", exact: true });
  await box.fill(text);
  await box.press("Enter");
}

export function lastReply(page: Page): Locator {
  return page.locator("article.message-assistant").last();
}

/** textLength is how many characters of text the last reply shows (the sum over its text blocks). */
export async function textLength(reply: Locator): Promise<number> {
  const lengths = await reply
    .locator('[data-block-type="text"]')
    .evaluateAll((els) => els.map((e) => Number(e.getAttribute("data-length") ?? 0)));
  return lengths.reduce((a, b) => a + b, 0);
}

/** blockLengths lists the shown blocks of every message as "type:length". */
export async function blockLengths(page: Page): Promise<string[]> {
  return page
    .locator("[data-block-id]")
    .evaluateAll((els) => els.map((e) => `${e.getAttribute("data-block-type")}:${e.getAttribute("data-length")}`));
}

/** serverBlockLengths is the same list from GetConversation. */
export async function serverBlockLengths(conversationId: string): Promise<string[]> {
  const conv = await getConversation(conversationId);
  return (conv.messages ?? []).flatMap((m) =>
    (m.blocks ?? []).map((b) => `${b.blockType}:${(b.content ?? "").length}`),
  );
}

export async function shot(page: Page, name: string) {
  await page.screenshot({ path: path.join(screens, `${name}.png`) });
}

export function uniqueWord(prefix: string): string {
  const letters = "abcdefghijklmnopqrstuvwxyz";
  let s = prefix;
  for (let i = 0; i < 6; i++) s += letters[Math.floor(Math.random() * letters.length)];
  return s;
}
