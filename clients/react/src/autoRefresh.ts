// When the conversation list reloads on its own. Kept apart from the hook
// so that the policy is tested without a DOM.

/** What autoRefresh needs of the browser. */
export interface RefreshEnv {
  /** Where "focus" and "online" fire (the window); undefined outside a browser. */
  target?: Pick<EventTarget, "addEventListener" | "removeEventListener">;
  online(): boolean;
  visible(): boolean;
}

/** browserEnv is the page's window, navigator.onLine and document.visibilityState. */
export function browserEnv(): RefreshEnv {
  return {
    target: typeof window === "undefined" ? undefined : window,
    online: () => typeof navigator === "undefined" || navigator.onLine !== false,
    visible: () => typeof document === "undefined" || document.visibilityState === "visible",
  };
}

/**
 * autoRefresh calls load every intervalMs while the page is visible and
 * the browser online, when the window gets focus while online, and as soon
 * as the browser comes back online. A request made offline could only
 * fail and show an error until the next one. It returns the function that
 * stops it.
 */
export function autoRefresh(load: () => void, intervalMs: number, env: RefreshEnv = browserEnv()): () => void {
  const iv = setInterval(() => {
    if (env.online() && env.visible()) load();
  }, intervalMs);
  const onFocus = () => {
    if (env.online()) load();
  };
  const onOnline = () => load();
  env.target?.addEventListener("focus", onFocus);
  env.target?.addEventListener("online", onOnline);
  return () => {
    clearInterval(iv);
    env.target?.removeEventListener("focus", onFocus);
    env.target?.removeEventListener("online", onOnline);
  };
}
