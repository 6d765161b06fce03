import { defineConfig } from "@playwright/test";

// End-to-end tests against the real server (go run ./cmd/api: real
// PostgreSQL, the demo model), started by e2e/global-setup.ts, in the
// system's Chromium. Set CONVO_E2E_BASE_URL to test a server that is
// already running instead.
export default defineConfig({
  testDir: "e2e",
  outputDir: "test-results/playwright",
  timeout: 120_000,
  expect: { timeout: 30_000 },
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: [["list"]],
  globalSetup: "./e2e/global-setup.ts",
  use: {
    browserName: "chromium",
    // Set by global-setup, which runs before the workers load this file.
    baseURL: process.env.CONVO_E2E_BASE_URL,
    viewport: { width: 1280, height: 860 },
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
