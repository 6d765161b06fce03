// Builds the useChat fixture page (index.html, main.tsx) with vite into a
// temporary directory, for aisdk.spec.ts to serve.
import react from "@vitejs/plugin-react";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "vite";

const here = path.dirname(fileURLToPath(import.meta.url));

/** The environment variable naming the built fixture's directory. */
export const aisdkFixtureEnv = "CONVO_E2E_AISDK_FIXTURE";

export async function buildAISDKFixture(): Promise<string> {
  const outDir = mkdtempSync(path.join(os.tmpdir(), "convo-e2e-aisdk-"));
  await build({
    root: here,
    base: "./",
    configFile: false,
    logLevel: "warn",
    plugins: [react()],
    build: { outDir, emptyOutDir: true, sourcemap: false },
  });
  process.env[aisdkFixtureEnv] = outDir;
  return outDir;
}
