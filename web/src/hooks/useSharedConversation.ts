import { useEffect, useState } from "react";
import type { ConnectionStatus, ConversationState, Share } from "@convo/client";
import { followShare, type ShareReader } from "../api/followShare";
import { sharedView } from "../state/shares";

/** Shared: what a share link's page shows. */
export interface Shared {
  /** null until the first answer. */
  view: ConversationState | null;
  /** The share (mode, expiry; never its creator). */
  share: Share | null;
  /** The path has messages before those shown (a share shows at most the last 1000). */
  older: boolean;
  /** The link opens nothing: revoked, expired or unknown. */
  gone: boolean;
  status: ConnectionStatus;
}

/**
 * useSharedConversation follows the share whose token is given
 * (followShare): each state it brings replaces the one shown.
 */
export function useSharedConversation(client: ShareReader, token: string): Shared {
  const [shared, setShared] = useState<Shared>({ view: null, share: null, older: false, gone: false, status: "connecting" });
  useEffect(() => {
    setShared({ view: null, share: null, older: false, gone: false, status: "connecting" });
    return followShare({
      client,
      token,
      onState: (res) =>
        setShared((s) => ({ ...s, view: sharedView(res), share: res.share ?? null, older: res.older, gone: false })),
      onGone: () => setShared((s) => ({ ...s, gone: true, status: "notFound" })),
      onStatus: (status) => setShared((s) => (s.gone ? s : { ...s, status })),
    });
  }, [client, token]);
  return shared;
}
