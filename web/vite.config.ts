import react from "@vitejs/plugin-react";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import "../clients/node20.mts";

// The app is built on the repo's client packages, from their sources
// (clients/typescript is @convo/client, clients/react is @convo/react):
// one fold, one follower, no build step in between. Their dependencies
// (protobuf, Connect, React) resolve to this app's copies, never twice.
const clients = (p: string) => fileURLToPath(new URL(`../clients/${p}`, import.meta.url));

// The API server a development build talks to (`go run ./cmd/api`).
const api = process.env.CONVO_API ?? "http://127.0.0.1:8080";

export default defineConfig({
  plugins: [react()],
  resolve: {
    alias: [
      { find: /^@convo\/client\/testing$/, replacement: clients("typescript/src/testing/fakeServer.ts") },
      { find: /^@convo\/client$/, replacement: clients("typescript/src/index.ts") },
      { find: /^@convo\/react$/, replacement: clients("react/src/index.ts") },
    ],
    dedupe: ["@bufbuild/protobuf", "@connectrpc/connect", "@connectrpc/connect-web", "react", "react-dom"],
  },
  server: {
    proxy: {
      "/convo.v1.ConversationService": { target: api, changeOrigin: false },
      "/healthz": { target: api },
      // Files: uploads, their JSON, their content (signed URLs).
      "/v1/files": { target: api },
    },
  },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
    // One predictable layout, so a rebuild gives byte-identical files.
    assetsDir: "assets",
    chunkSizeWarningLimit: 800,
  },
  test: {
    include: ["src/**/*.test.{ts,tsx}"],
    environment: "node",
    // Generous: make test runs these beside the Go build, and a loaded
    // machine should not fail a test that asserts no speed.
    testTimeout: 60_000,
  },
});
