// Builds the server under test from the current sources (see server.ts),
// starts it, and passes its address to the tests through the environment.
// Playwright calls the returned function at the end: it stops the server and
// fails the run if the race detector reported anything. With
// CONVO_E2E_BASE_URL set, the tests use that running server instead (the
// authentication tests still start their own, so the build happens anyway).

import { rmSync } from "node:fs";
import { buildAISDKFixture } from "./aisdk-fixture/build";
import { buildClientApp } from "./client-app/build";
import { launch, prepare } from "./server";

export default async function globalSetup(): Promise<() => Promise<void>> {
  const started = Date.now();
  const prepared = await prepare();
  // The useChat page of aisdk.spec.ts.
  const fixture = await buildAISDKFixture();
  // docs/client.md's example, installed from the packages' tarballs.
  const clientApp = buildClientApp();
  const cleanup = () => {
    prepared();
    rmSync(fixture, { recursive: true, force: true });
    rmSync(clientApp, { recursive: true, force: true });
  };
  console.log(`[e2e] built web/dist and the server in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (process.env.CONVO_E2E_BASE_URL) {
    process.env.CONVO_E2E_API_URL ??= process.env.CONVO_E2E_BASE_URL;
    return async () => cleanup();
  }
  try {
    const server = await launch("server");
    process.env.CONVO_E2E_BASE_URL = server.base;
    process.env.CONVO_E2E_API_URL = server.api;
    return async () => {
      try {
        await server.stop();
      } finally {
        cleanup();
      }
    };
  } catch (err) {
    cleanup();
    throw err;
  }
}
