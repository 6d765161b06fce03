import { defineConfig } from "@playwright/test";

// End-to-end tests against the real server (cmd/api built from the current
// sources with the web/dist just built: real PostgreSQL, the demo model),
// started by e2e/global-setup.ts, in the system's Chromium. Set
// CONVO_E2E_BASE_URL to test a server that is already running instead.
//
// Every test ends with a screenshot of its final state and keeps a trace
// when it fails, under test-results/playwright/<test>/; the named
// screenshots the tests take are in test-results/screens/.
export default defineConfig({
  testDir: "e2e",
  outputDir: "test-results/playwright",
  timeout: 120_000,
  expect: { timeout: 30_000 },
  // The tests share two servers (global-setup.ts); each uses its own
  // conversations. Four at a time: most of a test's time is waiting for a
  // reply's pace, so two would leave the cores idle.
  fullyParallel: true,
  workers: 4,
  retries: 0,
  // A forgotten test.only would silently skip the rest.
  forbidOnly: true,
  reporter: [["list"], ["./e2e/no-skips.ts"]],
  globalSetup: "./e2e/global-setup.ts",
  use: {
    browserName: "chromium",
    // Set by global-setup, which runs before the workers load this file.
    baseURL: process.env.CONVO_E2E_BASE_URL,
    viewport: { width: 1280, height: 860 },
    screenshot: "on",
    trace: "retain-on-failure",
    launchOptions: {
      executablePath: process.env.CONVO_E2E_CHROMIUM ?? "/usr/bin/chromium",
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    },
  },
});
