import { defineConfig } from "vitest/config";
import "../node20.mts";

export default defineConfig({
  test: { include: ["src/**/*.test.ts"], environment: "node" },
});
