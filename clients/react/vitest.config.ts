import { defineConfig } from "vitest/config";
import "../node20.mts";

export default defineConfig({
  // Generous: make test runs these beside the Go build, and a loaded
  // machine should not fail a test that asserts no speed.
  test: { include: ["src/**/*.test.{ts,tsx}"], environment: "node", testTimeout: 60_000 },
});
