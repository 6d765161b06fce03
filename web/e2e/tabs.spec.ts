// Many tabs on plain HTTP: a browser opens about six connections per host
// over HTTP/1.1 and every open stream holds one, so ten tabs each holding
// their own stream would leave four on "Connecting". The tabs of an origin
// share one stream per conversation (followShared in @convo/client): ten
// tabs of the app on one conversation are all live, all show the reply
// once, and the server holds a single stream for them.

import type { Page } from "@playwright/test";
import { blockLengths, expect, lastReply, shot, test, type ApiMessage } from "./helpers";
import { launch, type Launched } from "./server";

let convo: Launched;

async function call<T>(method: string, body: unknown): Promise<T> {
  const res = await fetch(`${convo.api}/convo.v1.ConversationService/${method}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

async function subscriptions(): Promise<number> {
  const text = await (await fetch(`${convo.api}/metrics`)).text();
  const m = text.match(/^convo_stream_subscriptions (\d+)/m);
  if (!m) throw new Error("no convo_stream_subscriptions in /metrics");
  return Number(m[1]);
}

test.beforeAll(async () => {
  convo = await launch("tabs", { CONVO_PUBLIC_METRICS: "true", CONVO_DEMO_TOKENS_PER_SECOND: "25" });
});

test.afterAll(async () => {
  await convo?.stop();
});

test("ten tabs of one conversation share one stream: all live, the reply once in each", async ({ context }) => {
  const sent = await call<{ conversationId: string }>("SendMessage", { text: "Tell me about the tides, in a few paragraphs." });
  const tabs: Page[] = [];
  for (let i = 0; i < 10; i++) {
    const page = await context.newPage();
    await page.goto(`${convo.base}/c/${sent.conversationId}`);
    tabs.push(page);
  }
  for (const page of tabs) {
    await expect(page.getByRole("status", { name: "Connection: Live" })).toBeVisible({ timeout: 30_000 });
  }
  expect(await subscriptions()).toBe(1);
  for (const page of tabs) {
    await expect(lastReply(page)).toHaveAttribute("data-status", "completed", { timeout: 120_000 });
  }
  await shot(tabs[9], "tenth-tab");
  const conv = await call<{ messages?: ApiMessage[] }>("GetConversation", { conversationId: sent.conversationId });
  const want = (conv.messages ?? []).flatMap((m) => (m.blocks ?? []).map((b) => `${b.blockType}:${(b.content ?? "").length}`));
  expect(want.length).toBeGreaterThan(2);
  for (const page of tabs) {
    expect(await blockLengths(page)).toEqual(want);
  }
  // The leading tab closes: another takes over the stream.
  await tabs[0].close();
  await expect.poll(subscriptions).toBe(1);
  await expect(tabs[1].getByRole("status", { name: "Connection: Live" })).toBeVisible();
});
