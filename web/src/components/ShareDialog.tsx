import { useEffect, useRef, useState, type FormEvent } from "react";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { tsMs, type Share } from "@convo/client";
import { errorMessage, type ConvoClient } from "../api/client";
import { useShares } from "../hooks/useShares";
import { shareURL } from "../router";
import { expiresAt, expiryChoices, mayRevoke, shareModeLabel, shareStatus } from "../state/shares";
import { absoluteTime } from "../util/format";
import { Spinner } from "./Spinner";

/**
 * ShareDialog makes share links of the conversation (the owner and
 * participants; docs/api.md, "Share links") and lists them with Revoke. A
 * new link shows once: its token comes back only from CreateShare. The
 * list is read again on the shareCreated and shareRevoked events
 * (changes), here as in every other tab. A refused change shows the
 * server's message and changes nothing.
 */
export function ShareDialog({
  client,
  conversationId,
  role,
  me,
  changes,
  onClose,
}: {
  client: Pick<ConvoClient, "createShare" | "listShares" | "revokeShare">;
  conversationId: string;
  /** The caller's role: the owner revokes any link, a participant the ones they made. */
  role: string;
  me: string | null;
  /** Bumped by the conversation's shareCreated and shareRevoked events. */
  changes: number;
  onClose: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const shares = useShares(client, conversationId, changes);
  const [mode, setMode] = useState("live");
  const [includeTools, setIncludeTools] = useState(false);
  const [expiry, setExpiry] = useState("");
  const [made, setMade] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
  }, []);

  const run = async (f: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await f();
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };

  const create = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const at = expiresAt(expiry);
      const res = await client.createShare({
        conversationId,
        mode,
        includeTools,
        expiresAt: at ? timestampFromDate(at) : undefined,
      });
      setMade(shareURL(window.location.origin, res.token));
    });
  };

  const revoke = (shareId: string) => void run(async () => void (await client.revokeShare({ shareId })));

  return (
    <dialog ref={ref} className="dialog share-dialog" aria-labelledby="share-title" onClose={onClose}>
      <header className="dialog-head">
        <h2 id="share-title">Share</h2>
        <button type="button" className="ghost" onClick={() => ref.current?.close()} aria-label="Close share">
          ✕
        </button>
      </header>
      <p className="muted small">
        Anyone with a link reads this conversation, with no account, until the link is revoked or expires; a signed-in
        reader may continue it as a copy of their own.
      </p>
      {error ? (
        <p className="message-error" role="alert">
          {error}
        </p>
      ) : null}
      <form className="share-form" onSubmit={create} aria-label="Make a share link">
        <fieldset>
          <legend>Readers see</legend>
          <label className="toggle">
            <input type="radio" name="share-mode" value="live" checked={mode === "live"} onChange={() => setMode("live")} />
            Live: the conversation as it goes on, replies as they are written
          </label>
          <label className="toggle">
            <input
              type="radio"
              name="share-mode"
              value="snapshot"
              checked={mode === "snapshot"}
              onChange={() => setMode("snapshot")}
            />
            Snapshot: the conversation as it is now
          </label>
        </fieldset>
        <label className="toggle">
          <input type="checkbox" checked={includeTools} onChange={(e) => setIncludeTools(e.target.checked)} />
          Show tool calls' arguments and results
        </label>
        <span className="field">
          <label htmlFor="share-expiry">Expires</label>
          <select id="share-expiry" value={expiry} onChange={(e) => setExpiry(e.target.value)}>
            {expiryChoices.map((c) => (
              <option key={c.value} value={c.value}>
                {c.label}
              </option>
            ))}
          </select>
        </span>
        <button type="submit" className="primary small" disabled={busy}>
          Create link
        </button>
      </form>
      {made ? <NewShareLink url={made} /> : null}
      <h3 className="share-list-title">Links</h3>
      {shares.list === null && !shares.error ? (
        <p className="muted">
          <Spinner /> Loading…
        </p>
      ) : null}
      {shares.error ? <p className="message-error">{shares.error}</p> : null}
      {shares.list ? <ShareList shares={shares.list} me={me} role={role} busy={busy} onRevoke={revoke} /> : null}
    </dialog>
  );
}

/**
 * NewShareLink shows a link just made, with Copy. It says that this is
 * the only time: the server keeps a hash of the token, never the token.
 */
export function NewShareLink({ url }: { url: string }) {
  const [copied, setCopied] = useState<"yes" | "no" | null>(null);
  const input = useRef<HTMLInputElement>(null);
  const copy = () => {
    // Select it too: where the clipboard is refused, the reader copies it.
    input.current?.select();
    // No clipboard outside a secure context (a page served over plain HTTP from another host).
    const written = navigator.clipboard?.writeText(url);
    if (!written) return setCopied("no");
    written.then(
      () => setCopied("yes"),
      () => setCopied("no"),
    );
  };
  return (
    <section className="share-new" aria-label="New link">
      <p>
        <strong>Copy this link now:</strong> it is shown only this once. convo keeps no copy of it; for another, make
        a new link.
      </p>
      <div className="share-url">
        <input ref={input} readOnly value={url} aria-label="Share link" onFocus={(e) => e.target.select()} />
        <button type="button" className="small" onClick={copy}>
          Copy
        </button>
      </div>
      {copied ? (
        <p className="muted small" role="status">
          {copied === "yes" ? "Copied." : "Copying was refused here: the link is selected, copy it with your keyboard."}
        </p>
      ) : null}
    </section>
  );
}

/** ShareList lists the conversation's share links (ListShares: never a token), with Revoke for those the caller may end. */
export function ShareList({
  shares,
  me,
  role,
  busy,
  onRevoke,
  now = Date.now(),
}: {
  shares: readonly Share[];
  me: string | null;
  role: string;
  busy: boolean;
  onRevoke: (shareId: string) => void;
  now?: number;
}) {
  if (shares.length === 0) return <p className="muted small">No links yet.</p>;
  return (
    <ul className="shares" aria-label="Share links">
      {shares.map((s) => {
        const status = shareStatus(s, now);
        const expires = tsMs(s.expiresAt);
        return (
          <li key={s.id} className={`share share-${status}`} data-share-id={s.id} data-status={status}>
            <span className="share-what">
              <span className="share-mode">{shareModeLabel(s)}</span>
              <span className="muted small">
                Made {absoluteTime(tsMs(s.createdAt))}
                {s.createdBy && s.createdBy !== me ? ` by ${s.createdBy}` : ""} ·{" "}
                {status === "revoked"
                  ? `revoked ${absoluteTime(tsMs(s.revokedAt))}`
                  : expires === undefined
                    ? "no expiry"
                    : `${status === "expired" ? "expired" : "expires"} ${absoluteTime(expires)}`}
              </span>
            </span>
            {status === "active" ? (
              mayRevoke(s, me, role) ? (
                <button
                  type="button"
                  className="danger small"
                  disabled={busy}
                  title="The link stops working at once, for everyone reading it"
                  onClick={() => onRevoke(s.id)}
                >
                  Revoke
                </button>
              ) : (
                <span className="badge">Active</span>
              )
            ) : (
              <span className="badge">{status === "revoked" ? "Revoked" : "Expired"}</span>
            )}
          </li>
        );
      })}
    </ul>
  );
}
