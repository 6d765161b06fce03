// A tiny history-API router: "/" is a new conversation, "/c/<id>" an open
// one (with "?m=<messageId>" to scroll to a message), "/s/<token>" what a
// share link shows, read only.

import { useSyncExternalStore } from "react";

export type Route =
  | { name: "home" }
  | { name: "conversation"; id: string; messageId?: string }
  | { name: "share"; token: string };

export function parseRoute(pathname: string, search = ""): Route {
  const m = /^\/c\/([^/]+)\/?$/.exec(pathname);
  if (m) {
    const messageId = new URLSearchParams(search).get("m") ?? undefined;
    return { name: "conversation", id: decodeURIComponent(m[1]), messageId };
  }
  const s = /^\/s\/([^/]+)\/?$/.exec(pathname);
  if (s) {
    const token = safeDecode(s[1]);
    if (token) return { name: "share", token };
  }
  return { name: "home" };
}

/** safeDecode percent-decodes a path segment; "" for a malformed one (a bad link opens home). */
function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return "";
  }
}

export function conversationPath(id: string, messageId?: string): string {
  return `/c/${encodeURIComponent(id)}${messageId ? `?m=${encodeURIComponent(messageId)}` : ""}`;
}

/** sharePath is the app's page of a share link: "/s/<token>". */
export function sharePath(token: string): string {
  return `/s/${encodeURIComponent(token)}`;
}

/** shareURL is the link to give out: the page of the share at origin (e.g. "https://chat.example.com"). */
export function shareURL(origin: string, token: string): string {
  return origin.replace(/\/+$/, "") + sharePath(token);
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
