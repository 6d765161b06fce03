// Starts the real server for the end-to-end tests (see server.ts) and
// passes its address to the tests through the environment. Playwright calls
// the returned function to stop it. With CONVO_E2E_BASE_URL set, an already
// running server is used instead and nothing is started.

import { launch } from "./server";

export default async function globalSetup(): Promise<() => Promise<void>> {
  if (process.env.CONVO_E2E_BASE_URL) {
    process.env.CONVO_E2E_API_URL ??= process.env.CONVO_E2E_BASE_URL;
    return async () => {};
  }
  const server = await launch("server", {}, { needWorker: true });
  process.env.CONVO_E2E_BASE_URL = server.base;
  process.env.CONVO_E2E_API_URL = server.api;
  return server.stop;
}
