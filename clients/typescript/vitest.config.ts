import { defineConfig } from "vitest/config";
import "../node20";

export default defineConfig({
  test: { include: ["src/**/*.test.ts"], environment: "node" },
});
