import { useState, type FormEvent } from "react";
import { auth } from "../api/auth";

/** TokenScreen asks for an access token when the server requires one. */
export function TokenScreen() {
  const [value, setValue] = useState("");
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (value.trim()) auth.setToken(value);
  };
  return (
    <main className="token-screen">
      <form className="token-card" onSubmit={submit} aria-labelledby="token-title">
        <h1 id="token-title">Sign in to convo</h1>
        <p className="muted">
          This server needs an access token, or the one you had was rejected or has expired. Paste a token, or open
          the link you were given (it ends in <code>#token=…</code>).
        </p>
        <label htmlFor="token-input">Access token</label>
        <input
          id="token-input"
          type="password"
          autoComplete="off"
          spellCheck={false}
          value={value}
          onChange={(e) => setValue(e.target.value)}
          autoFocus
        />
        <button type="submit" className="primary" disabled={!value.trim()}>
          Continue
        </button>
      </form>
    </main>
  );
}
