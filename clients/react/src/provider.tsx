// ConvoProvider gives the components below it one convo client.

import { createConvoClient, type ConvoClient } from "@convo/client";
import { createContext, useContext, useMemo, type ReactNode } from "react";

const ClientContext = createContext<ConvoClient | null>(null);

export interface ConvoProviderProps {
  /** Where convo answers, e.g. "https://api.example.com" (ignored when client is given). */
  baseUrl?: string;
  /** Returns the bearer token for each call; omit it for a server in single-user mode. */
  getToken?: () => string | null | undefined | Promise<string | null | undefined>;
  /** Called when the server refuses the credentials. */
  onUnauthenticated?: () => void;
  /** A client made elsewhere (createConvoClient), instead of baseUrl and getToken. */
  client?: ConvoClient;
  children?: ReactNode;
}

/**
 * ConvoProvider makes a client from baseUrl and getToken (once: later
 * changes of them are not seen; getToken is called for every request, so
 * a refreshed token is used at once) and gives it to the hooks below.
 */
export function ConvoProvider({ baseUrl, getToken, onUnauthenticated, client, children }: ConvoProviderProps) {
  const value = useMemo(
    () => client ?? createConvoClient({ baseUrl: baseUrl ?? "", getToken, onUnauthenticated }),
    // The first client is kept: a new one would restart every stream.
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [client],
  );
  return <ClientContext.Provider value={value}>{children}</ClientContext.Provider>;
}

/** useConvoClient returns the ConvoProvider's client; it throws outside one. */
export function useConvoClient(): ConvoClient {
  const c = useContext(ClientContext);
  if (!c) throw new Error("useConvoClient: no ConvoProvider above this component");
  return c;
}

/** useClient returns given, or else the ConvoProvider's client; it throws when there is neither. */
export function useClient(given: ConvoClient | undefined, hook: string): ConvoClient {
  const c = useContext(ClientContext);
  const client = given ?? c;
  if (!client) throw new Error(`${hook}: no ConvoProvider above this component, and no client given`);
  return client;
}
