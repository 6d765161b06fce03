// The Connect client of ConversationService: the Connect protocol over
// HTTP/1.1 to the page's own origin, with the stored bearer token.

import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import type { Transport } from "@connectrpc/connect";
import { ConversationService } from "../gen/convo/v1/conversation_service_pb";
import { auth } from "./auth";

export type ConvoClient = Client<typeof ConversationService>;

/** withAuth adds the bearer token and reports Unauthenticated answers of unary calls. */
const withAuth: Interceptor = (next) => async (req) => {
  const t = auth.token();
  if (t) req.header.set("Authorization", `Bearer ${t}`);
  try {
    return await next(req);
  } catch (err) {
    if (ConnectError.from(err).code === Code.Unauthenticated) auth.unauthenticated();
    throw err;
  }
};

let transportOverride: Transport | null = null;

/** useTransport replaces the HTTP transport (the development mock only). */
export function useTransport(t: Transport) {
  transportOverride = t;
}

export function createConvoClient(baseUrl: string = window.location.origin): ConvoClient {
  const transport = transportOverride ?? createConnectTransport({ baseUrl, interceptors: [withAuth] });
  return createClient(ConversationService, transport);
}

/** errorMessage is a short, human-readable description of a failed call. */
export function errorMessage(err: unknown): string {
  const e = ConnectError.from(err);
  switch (e.code) {
    case Code.Unavailable:
      return "The server is unavailable. Try again in a moment.";
    case Code.Unauthenticated:
      return "Your session has expired. Sign in again.";
    case Code.NotFound:
      return "Not found: it may have been deleted.";
    case Code.Canceled:
      return "Cancelled.";
    default:
      return e.rawMessage || "Something went wrong.";
  }
}
