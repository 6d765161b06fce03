import { defineConfig } from "vitest/config";
import "../node20.mts";

// The tests run against real PostgreSQL: under
// `go run ./internal/pgtest/withdb -- npm test --prefix clients/worker`,
// each test file makes its own databases from the migrated template.
export default defineConfig({
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // One file at a time: the machine is small and shared.
    fileParallelism: false,
  },
});
