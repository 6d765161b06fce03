// The app's Connect client: @convo/client's, speaking the Connect protocol
// over HTTP/1.1 to the page's own origin, with the stored bearer token.

import { createConvoClient as newClient, type ConvoClient } from "@convo/client";
import type { Transport } from "@connectrpc/connect";
import { auth } from "./auth";

export { errorMessage, type ConvoClient } from "@convo/client";

let transportOverride: Transport | null = null;

/** useTransport replaces the HTTP transport (the development mock only). */
export function useTransport(t: Transport) {
  transportOverride = t;
}

export function createConvoClient(baseUrl: string = window.location.origin): ConvoClient {
  return newClient({
    baseUrl,
    getToken: auth.token,
    onUnauthenticated: auth.unauthenticated,
    transport: transportOverride ?? undefined,
  });
}
