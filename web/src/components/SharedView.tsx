import { useEffect, useMemo, useState, type FormEvent, type ReactNode } from "react";
import { Code, ConnectError, messageBlocks, type ConversationState } from "@convo/client";
import { auth } from "../api/auth";
import { createConvoClient, errorMessage, type ConvoClient } from "../api/client";
import { useSharedConversation } from "../hooks/useSharedConversation";
import { useStickToBottom } from "../hooks/useStickToBottom";
import { conversationPath, navigate } from "../router";
import { groupMessages } from "../state/groupMessages";
import { isShareGone } from "../state/shares";
import { ComparisonView } from "./ComparisonView";
import { ConnectionIndicator } from "./ConnectionIndicator";
import { MessageView } from "./MessageView";
import { Spinner } from "./Spinner";

/**
 * SharedPage is what a share link (/s/<token>) opens, for anyone holding
 * it, with no sign-in: the shared conversation, read only, followed live
 * when the share is live; and "Continue this conversation", which copies
 * it into a conversation of the signed-in user (ForkShare). needsSignIn:
 * the server asked for a token and none is stored.
 */
export function SharedPage({ token, needsSignIn }: { token: string; needsSignIn: boolean }) {
  const client = useMemo(() => createConvoClient(), []);
  const shared = useSharedConversation(client, token);
  const title = shared.view?.conversation?.title || "Shared conversation";
  useEffect(() => {
    document.title = shared.gone ? "Link not working · convo" : `${title} · shared · convo`;
  }, [title, shared.gone]);

  if (shared.gone) return <ShareGone />;
  const live = shared.share?.mode === "live";
  return (
    <main className="main shared-page" aria-busy={shared.view === null}>
      <header className="main-head">
        <a href="/" className="brand">
          convo
        </a>
        <h1 className="title" title={title}>
          {title}
        </h1>
        {live ? <ConnectionIndicator status={shared.status} /> : null}
      </header>
      <p className="share-banner" role="note">
        <span className="badge">Shared, read only</span>{" "}
        {shared.share === null
          ? null
          : live
            ? "This link follows the conversation: new messages show as they are written."
            : "This link shows the conversation as it was when the link was made."}
      </p>
      <SharedMessages view={shared.view} older={shared.older} />
      <ContinueBar client={client} token={token} needsSignIn={needsSignIn} ready={(shared.view?.messageIds.length ?? 0) > 0} />
    </main>
  );
}

/** SharedMessages lists what the share shows, read only: each state replaces the last. */
export function SharedMessages({ view, older }: { view: ConversationState | null; older: boolean }) {
  const scroll = useStickToBottom<HTMLDivElement>(view, false);
  return (
    <div className="messages" ref={scroll.ref} onScroll={scroll.onScroll}>
      <div className="messages-inner">
        {view === null ? (
          <p className="muted center">
            <Spinner /> Loading…
          </p>
        ) : null}
        {older ? <p className="muted center small">Earlier messages of this conversation are not shown.</p> : null}
        {view !== null && view.messageIds.length === 0 ? <p className="muted center">No messages yet.</p> : null}
        {view === null ? null : renderShared(view)}
      </div>
    </div>
  );
}

/** renderShared renders the messages with no actions: no feedback, edit, regenerate, versions or vote. */
function renderShared(view: ConversationState): ReactNode[] {
  return groupMessages(view).map((item) =>
    item.kind === "comparison" ? (
      <ComparisonView
        key={`cmp-${item.comparisonId}`}
        comparisonId={item.comparisonId}
        sides={item.sides.map((m) => ({ message: m, blocks: messageBlocks(view, m.id), error: view.errors[m.id] }))}
        vote={undefined}
      />
    ) : (
      <MessageView
        key={item.message.id}
        message={item.message}
        blocks={messageBlocks(view, item.message.id)}
        error={view.errors[item.message.id]}
        // A share hides who sent each message.
        sender={item.message.role === "user" ? "User" : undefined}
      />
    ),
  );
}

/**
 * ContinueBar offers "Continue this conversation": ForkShare, then the new
 * conversation. Without a token the server may still take the call (a
 * server without authentication: the one local user); when it asks for
 * one instead, the bar says to sign in and takes a token.
 */
export function ContinueBar({
  client,
  token,
  needsSignIn,
  ready,
}: {
  client: Pick<ConvoClient, "forkShare">;
  token: string;
  needsSignIn: boolean;
  /** The share shows a message: there is something to continue. */
  ready: boolean;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [value, setValue] = useState("");

  const fork = async () => {
    setBusy(true);
    setError(null);
    try {
      const res = await client.forkShare({ token });
      const id = res.conversation?.id;
      if (id) navigate(conversationPath(id));
    } catch (err) {
      // Unauthenticated turns the bar into the sign-in form (auth.unauthenticated).
      if (ConnectError.from(err).code !== Code.Unauthenticated) {
        setError(isShareGone(err) ? "This link does not work any more." : errorMessage(err));
      }
    } finally {
      setBusy(false);
    }
  };

  const signIn = (e: FormEvent) => {
    e.preventDefault();
    if (value.trim()) auth.setToken(value);
  };

  if (needsSignIn) {
    return (
      <form className="continue-bar" onSubmit={signIn} aria-label="Sign in to continue">
        <p>
          <strong>Sign in to continue this conversation.</strong>{" "}
          <span className="muted">
            Paste your access token, or open the sign-in link you were given (it ends in <code>#token=…</code>) and
            come back to this link.
          </span>
        </p>
        <label className="visually-hidden" htmlFor="share-token-input">
          Access token
        </label>
        <input
          id="share-token-input"
          type="password"
          autoComplete="off"
          spellCheck={false}
          placeholder="Access token"
          value={value}
          onChange={(e) => setValue(e.target.value)}
        />
        <button type="submit" className="primary small" disabled={!value.trim()}>
          Sign in
        </button>
      </form>
    );
  }
  return (
    <div className="continue-bar">
      {error ? (
        <p className="message-error" role="alert">
          {error}
        </p>
      ) : null}
      <button type="button" className="primary" disabled={busy || !ready} onClick={() => void fork()}>
        {busy ? <Spinner /> : null} Continue this conversation
      </button>
      <span className="muted small">A copy of your own to write in; this link stays as it is.</span>
    </div>
  );
}

/** ShareGone is the page of a link that opens nothing: revoked, expired or unknown alike (the server tells them apart to no one). */
export function ShareGone() {
  return (
    <main className="main shared-page">
      <header className="main-head">
        <a href="/" className="brand">
          convo
        </a>
        <h1 className="title">Link not working</h1>
      </header>
      <div className="empty" role="alert">
        <p className="hello">This link does not work any more</p>
        <p className="muted">
          It was revoked or has expired, or it was never a share link. Ask whoever gave it to you for a new one.
        </p>
        <a href="/" className="button primary">
          Open convo
        </a>
      </div>
    </main>
  );
}
