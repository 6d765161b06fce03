// Authentication: with CONVO_AUTH_SECRET set, the app asks for a token,
// takes one from the URL (#token=…) and removes it from there, keeps it, and
// goes back to the token screen when the token is rejected or expires.

import { createHmac } from "node:crypto";
import { expect, shot, test } from "./helpers";
import { launch, type Launched } from "./server";

const secret = "e2e-secret-of-at-least-32-bytes-long!!";
let server: Launched;

// Chromium itself logs every 401 response; the app handles them.
test.use({ allowedConsoleErrors: [/Failed to load resource: the server responded with a status of 401/] });

test.beforeAll(async () => {
  test.setTimeout(90_000);
  server = await launch("auth", { CONVO_AUTH_SECRET: secret });
});

test.afterAll(async () => {
  await server?.stop();
});

function jwt(sub: string, expiresInSeconds: number): string {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const now = Math.floor(Date.now() / 1000);
  const unsigned = `${b64({ alg: "HS256", typ: "JWT" })}.${b64({ sub, iat: now - 60, exp: now + expiresInSeconds })}`;
  return `${unsigned}.${createHmac("sha256", secret).update(unsigned).digest("base64url")}`;
}

test("asks for a token, takes one from the URL, and asks again when it expires", async ({ page }) => {
  await page.goto(server.base + "/");
  await expect(page.getByRole("heading", { name: "Sign in to convo" })).toBeVisible();
  await shot(page, "token-screen");

  // A link with the token signs in and leaves no token in the URL.
  await page.goto(`${server.base}/#token=${jwt("alice", 3600)}`);
  await expect(page.getByRole("navigation", { name: "Conversations" })).toBeVisible();
  await expect(page.getByRole("heading", { name: "Sign in to convo" })).toBeHidden();
  expect(page.url()).not.toContain("token");
  expect(await page.evaluate(() => localStorage.getItem("convo.token"))).toBeTruthy();

  // The token is kept across a reload.
  await page.reload();
  await expect(page.getByRole("navigation", { name: "Conversations" })).toBeVisible();

  // An expired token leads back to the token screen, not to a blank page.
  await page.evaluate((t) => localStorage.setItem("convo.token", t), jwt("alice", -60));
  await page.reload();
  await expect(page.getByRole("heading", { name: "Sign in to convo" })).toBeVisible();

  // Pasting a good token gets in again.
  await page.getByLabel("Access token").fill(jwt("alice", 3600));
  await page.getByRole("button", { name: "Continue" }).click();
  await expect(page.getByRole("navigation", { name: "Conversations" })).toBeVisible();
});
