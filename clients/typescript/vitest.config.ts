import { defineConfig } from "vitest/config";
import "../node20.mts";

export default defineConfig({
  // The exhaustive tests (every join point, every page at every moment)
  // take a few seconds alone and several times that on a loaded machine
  // (make test runs beside the Go build): vitest's 5 s default would fail
  // them for the machine's load, not for what they assert.
  test: { include: ["src/**/*.test.ts"], environment: "node", testTimeout: 60_000 },
});
