// The bearer token, kept in localStorage, and the "a token is needed" signal.
//
// In single-user mode the server never answers Unauthenticated and no token
// is ever asked for. When it does answer Unauthenticated, the stored token
// (if any) is dropped and the app shows its token screen.

const KEY = "convo.token";

type Listener = () => void;
const listeners = new Set<Listener>();

let token: string | null = readStored();
let required = false;

function readStored(): string | null {
  try {
    return typeof localStorage === "undefined" ? null : localStorage.getItem(KEY);
  } catch {
    return null;
  }
}

function emit() {
  for (const l of listeners) l();
}

export interface AuthState {
  token: string | null;
  /** The server answered Unauthenticated and no usable token is stored. */
  required: boolean;
}

let snapshot: AuthState = { token, required };

function update() {
  snapshot = { token, required };
  emit();
}

export const auth = {
  get: (): AuthState => snapshot,
  token: (): string | null => token,
  subscribe(l: Listener): () => void {
    listeners.add(l);
    return () => listeners.delete(l);
  },
  /** setToken stores a token (trimmed) and clears the "required" flag. */
  setToken(t: string) {
    token = t.trim() || null;
    try {
      if (token) localStorage.setItem(KEY, token);
      else localStorage.removeItem(KEY);
    } catch {
      /* storage unavailable: keep it in memory */
    }
    required = token === null && required;
    update();
  },
  signOut() {
    token = null;
    try {
      localStorage.removeItem(KEY);
    } catch {
      /* ignore */
    }
    update();
  },
  /** unauthenticated is called when the server answered Unauthenticated. */
  unauthenticated() {
    if (token === null && required) return;
    if (token !== null) {
      token = null;
      try {
        localStorage.removeItem(KEY);
      } catch {
        /* ignore */
      }
    }
    required = true;
    update();
  },
};

/** The user id the server gives a request without a token (single-user mode). */
export const LOCAL_USER = "local";

/**
 * tokenSubject is the user a token names (its JWT `sub`), as the server
 * knows the caller: senderId, members and presence use these ids. Without
 * a token it is LOCAL_USER; a token that is no readable JWT gives null
 * (the app then cannot tell the caller's own messages apart). The
 * signature is not checked: the server does that.
 */
export function tokenSubject(t: string | null): string | null {
  if (t === null) return LOCAL_USER;
  const part = t.split(".")[1];
  if (!part) return null;
  try {
    const b64 = part.replace(/-/g, "+").replace(/_/g, "/");
    const json = new TextDecoder().decode(Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0)));
    const sub = (JSON.parse(json) as { sub?: unknown }).sub;
    return typeof sub === "string" && sub !== "" ? sub : null;
  } catch {
    return null;
  }
}

/**
 * takeTokenFromUrl moves a `#token=…` from the page URL into storage and
 * removes it from the URL (and from history), once, at start.
 */
export function takeTokenFromUrl(loc: Location = window.location, hist: History = window.history) {
  const hash = loc.hash.replace(/^#/, "");
  if (!hash) return;
  const params = new URLSearchParams(hash);
  const t = params.get("token");
  if (t === null) return;
  params.delete("token");
  const rest = params.toString();
  hist.replaceState(hist.state, "", loc.pathname + loc.search + (rest ? `#${rest}` : ""));
  auth.setToken(t);
}

// Another tab signing in or out changes this tab too.
if (typeof window !== "undefined") {
  window.addEventListener("storage", (e) => {
    if (e.key !== KEY) return;
    token = e.newValue;
    if (token) required = false;
    update();
  });
}
