// A tiny history-API router: "/" is a new conversation, "/c/<id>" an open
// one (with "?m=<messageId>" to scroll to a message).

import { useSyncExternalStore } from "react";

export type Route = { name: "home" } | { name: "conversation"; id: string; messageId?: string };

export function parseRoute(pathname: string, search = ""): Route {
  const m = /^\/c\/([^/]+)\/?$/.exec(pathname);
  if (m) {
    const messageId = new URLSearchParams(search).get("m") ?? undefined;
    return { name: "conversation", id: decodeURIComponent(m[1]), messageId };
  }
  return { name: "home" };
}

export function conversationPath(id: string, messageId?: string): string {
  return `/c/${encodeURIComponent(id)}${messageId ? `?m=${encodeURIComponent(messageId)}` : ""}`;
}

const listeners = new Set<() => void>();
let current = locationKey();

// "" outside a browser: the module loads in the unit tests (Node), where
// there is no location.
function locationKey() {
  return typeof window === "undefined" ? "" : window.location.pathname + window.location.search;
}

function notify() {
  current = locationKey();
  for (const l of listeners) l();
}

if (typeof window !== "undefined") window.addEventListener("popstate", notify);

export function navigate(path: string, opts: { replace?: boolean } = {}) {
  if (path === locationKey()) return;
  if (opts.replace) window.history.replaceState(null, "", path);
  else window.history.pushState(null, "", path);
  notify();
}

export function useRoute(): Route {
  const key = useSyncExternalStore(
    (l) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    () => current,
  );
  const q = key.indexOf("?");
  return parseRoute(q < 0 ? key : key.slice(0, q), q < 0 ? "" : key.slice(q));
}
