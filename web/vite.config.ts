import react from "@vitejs/plugin-react";
import { defineConfig } from "vitest/config";

// Vitest 5 reports failures with Map.groupBy, which Node 20 lacks.
if (typeof (Map as { groupBy?: unknown }).groupBy !== "function") {
  (Map as unknown as { groupBy: unknown }).groupBy = <K, V>(items: Iterable<V>, key: (v: V, i: number) => K) => {
    const out = new Map<K, V[]>();
    let i = 0;
    for (const v of items) {
      const k = key(v, i++);
      const list = out.get(k);
      if (list) list.push(v);
      else out.set(k, [v]);
    }
    return out;
  };
}

// The API server a development build talks to (`go run ./cmd/api`).
const api = process.env.CONVO_API ?? "http://127.0.0.1:8080";

export default defineConfig({
  plugins: [react()],
  server: {
    proxy: {
      "/convo.v1.ConversationService": { target: api, changeOrigin: false },
      "/healthz": { target: api },
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
  },
});
