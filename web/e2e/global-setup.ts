// Builds the server under test from the current sources (see server.ts),
// starts it twice, and passes their addresses to the tests through the
// environment: the shared server, and the paced one, whose demo model
// writes at a slow reading pace (for the tests that act while a reply
// runs).
// Playwright calls the returned function at the end: it stops the servers
// and fails the run if the race detector reported anything. With
// CONVO_E2E_BASE_URL set, the tests use that running server for both
// instead (the authentication tests still start their own, so the build
// happens anyway).

import { rmSync } from "node:fs";
import { buildAISDKFixture } from "./aisdk-fixture/build";
import { buildClientApp } from "./client-app/build";
import { launch, prepare, type Launched } from "./server";

// The shared server's demo model writes at its default pace, 40 tokens a
// second: a reply takes about ten seconds. (Faster, tests that look at a
// reply while it is written, e.g. an edit's arrows being off, or a client
// tool's tabs, would see it finished.) The paced one's, at 8 tokens a
// second, takes about a minute, so that a test that reloads, stops, drops the network or opens a
// tab mid-reply acts while the reply still runs, even on a loaded machine.
const pacedTokensPerSecond = "8";

export default async function globalSetup(): Promise<() => Promise<void>> {
  const started = Date.now();
  // The server (web/dist, then cmd/api), the useChat page of aisdk.spec.ts
  // and docs/client.md's example installed from the packages' tarballs,
  // built at the same time: each mostly waits (on tsc, vite, npm, go's
  // cache and linker), one alone would leave a core idle.
  const built = await Promise.allSettled([prepare(), buildAISDKFixture(), buildClientApp()]);
  const cleanup = () => {
    for (const b of built) {
      if (b.status !== "fulfilled") continue;
      if (typeof b.value === "function") b.value();
      else rmSync(b.value, { recursive: true, force: true });
    }
  };
  const failed = built.find((b) => b.status === "rejected");
  if (failed) {
    cleanup();
    throw failed.reason;
  }
  console.log(`[e2e] built web/dist, the server and the fixtures in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (process.env.CONVO_E2E_BASE_URL) {
    process.env.CONVO_E2E_API_URL ??= process.env.CONVO_E2E_BASE_URL;
    process.env.CONVO_E2E_PACED_URL ??= process.env.CONVO_E2E_BASE_URL;
    return async () => cleanup();
  }
  const servers: Launched[] = [];
  const stopAll = async () => {
    try {
      // Each stop runs; the first failure (a data race) is reported.
      const stopped = await Promise.allSettled(servers.map((s) => s.stop()));
      const failure = stopped.find((s) => s.status === "rejected");
      if (failure) throw failure.reason;
    } finally {
      cleanup();
    }
  };
  try {
    // Up to four tests at once, an A/B comparison two replies: eight demo
    // workers, so that no prompt waits in a queue.
    const launched = await Promise.allSettled([
      launch("server", { CONVO_WORKERS: "8" }),
      launch("paced", { CONVO_WORKERS: "8", CONVO_DEMO_TOKENS_PER_SECOND: pacedTokensPerSecond }),
    ]);
    for (const l of launched) if (l.status === "fulfilled") servers.push(l.value);
    const failure = launched.find((l) => l.status === "rejected");
    if (failure) throw failure.reason;
    const [shared, paced] = servers;
    process.env.CONVO_E2E_BASE_URL = shared.base;
    process.env.CONVO_E2E_API_URL = shared.api;
    process.env.CONVO_E2E_PACED_URL = paced.base;
    return stopAll;
  } catch (err) {
    await stopAll().catch(() => {});
    throw err;
  }
}
