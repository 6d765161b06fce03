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

/**
 * offlineConsoleErrors is what Chromium logs for a request made while a
 * test holds the context offline (the conversation list's refresh, a
 * retry racing the offline event): the browser's own log of the failure
 * the test causes, not an error of the app.
 */
export const offlineConsoleErrors = [/Failed to load resource: net::ERR_INTERNET_DISCONNECTED/];

/** sharedAPI is where the Connect API of the server every test shares answers (set by global-setup). */
function sharedAPI(): string {
  return process.env.CONVO_E2E_API_URL ?? process.env.CONVO_E2E_BASE_URL ?? "";
}

/**
 * pacedURL is the server whose demo model writes at a slow reading pace
 * (about a minute a reply; set by global-setup), for the tests that
 * act while a reply runs: its app and its API answer at the same address.
 * The shared server's model writes one in about ten seconds.
 */
export function pacedURL(): string {
  return process.env.CONVO_E2E_PACED_URL ?? sharedAPI();
}

/** api calls the Connect API with JSON, as a worker or another client would. */
export async function api<T = Record<string, unknown>>(method: string, body: unknown): Promise<T> {
  return apiAt<T>(sharedAPI(), method, body);
}

/** apiAt calls the Connect API of the server at base with JSON. */
export async function apiAt<T = Record<string, unknown>>(base: string, method: string, body: unknown): Promise<T> {
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
  feedback?: { rating?: string; comment?: string };
}

/** getConversation reads a conversation from the shared server, or from the server whose API is at base. */
export async function getConversation(conversationId: string, base = sharedAPI()) {
  return apiAt<{ messages?: ApiMessage[]; seq?: string }>(base, "GetConversation", { conversationId });
}

/**
 * allMessages reads every message of a conversation: GetConversation
 * answers the latest that fit the server's snapshot size, and ListMessages
 * the older ones, a page at a time, from its olderPageToken.
 */
export async function allMessages(conversationId: string, base = sharedAPI()): Promise<ApiMessage[]> {
  const first = await apiAt<{ messages?: ApiMessage[]; olderPageToken?: string }>(base, "GetConversation", { conversationId });
  let messages = first.messages ?? [];
  let pageToken = first.olderPageToken ?? "";
  while (pageToken) {
    const page = await apiAt<{ messages?: ApiMessage[]; nextPageToken?: string }>(base, "ListMessages", { conversationId, pageToken });
    messages = [...(page.messages ?? []), ...messages];
    pageToken = page.nextPageToken ?? "";
  }
  return messages;
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

/** serverBlockLengths is the same list from GetConversation (of the shared server, or of the one at base). */
export async function serverBlockLengths(conversationId: string, base = sharedAPI()): Promise<string[]> {
  const conv = await getConversation(conversationId, base);
  return (conv.messages ?? []).flatMap((m) =>
    (m.blocks ?? []).map((b) => `${b.blockType}:${(b.content ?? "").length}`),
  );
}

/** What the page showed of its last reply at one moment. */
export interface ReplyState {
  status: string;
  textLength: number;
}

/**
 * recordLastReply makes the page (before it loads) record every state its
 * last reply shows, in order; recorded reads them. A test then checks what
 * the page showed however late it looks.
 */
export async function recordLastReply(page: Page) {
  await page.addInitScript(() => {
    const seen: { status: string; textLength: number }[] = [];
    (window as unknown as { __convoSeen: typeof seen }).__convoSeen = seen;
    const record = () => {
      const replies = document.querySelectorAll("article.message-assistant");
      const last = replies[replies.length - 1];
      if (!last) return;
      const status = last.getAttribute("data-status") ?? "";
      let textLength = 0;
      last.querySelectorAll('[data-block-type="text"]').forEach((e) => (textLength += Number(e.getAttribute("data-length") ?? 0)));
      const prev = seen[seen.length - 1];
      if (!prev || prev.status !== status || prev.textLength !== textLength) seen.push({ status, textLength });
    };
    new MutationObserver(record).observe(document, {
      subtree: true,
      childList: true,
      attributes: true,
      attributeFilter: ["data-status", "data-length"],
    });
  });
}

export async function recorded(page: Page): Promise<ReplyState[]> {
  return page.evaluate(() => (window as unknown as { __convoSeen?: ReplyState[] }).__convoSeen ?? []);
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
