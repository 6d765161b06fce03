// The app's pages carry a strict Content-Security-Policy, and every spec
// runs under it: Chromium reports a violation as a console error, which
// fails the test (helpers.ts). This spec checks both halves: the header is
// there, and a violation does surface as a console error.

import { expect, test } from "./helpers";

// The one violation this spec provokes on purpose.
test.use({ allowedConsoleErrors: [/violates the following Content Security Policy directive: "img-src 'self' data:"/] });

test("the app runs under its Content-Security-Policy, and a violation is a console error", async ({ page }) => {
  const res = await page.goto("/");
  const csp = res?.headers()["content-security-policy"] ?? "";
  expect(csp).toContain("default-src 'none'");
  expect(csp).toContain("script-src 'self'");
  expect(csp).not.toContain("unsafe");
  await expect(page.getByRole("navigation", { name: "Conversations" })).toBeVisible();

  // An image from elsewhere, as model markdown might ask for, is refused
  // and reported.
  const violation = page.waitForEvent("console", (m) => m.type() === "error" && /Content Security Policy/.test(m.text()));
  await page.evaluate(() => {
    const img = document.createElement("img");
    img.src = "https://images.example.com/tracker.png";
    document.body.append(img);
  });
  expect((await violation).text()).toContain("images.example.com");
});
