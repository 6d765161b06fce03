import { useEffect, useRef, useState, type FormEvent, type KeyboardEvent } from "react";
import { showsSomething } from "@convo/client";

export interface SendOptions {
  text: string;
  /** Set for an A/B comparison: the two model names (empty: the worker's default). */
  compare?: { modelA: string; modelB: string };
}

/**
 * Composer: Enter sends, Shift+Enter adds a line; a stop button replaces
 * send while a reply runs. Send is disabled while the text shows nothing
 * (only whitespace, zero-width or bidi control characters: the server's
 * rule, showsSomething).
 */
export function Composer({
  onSend,
  onStop,
  running,
  disabled,
  autoFocus,
}: {
  onSend: (o: SendOptions) => Promise<boolean>;
  onStop: () => void;
  running: boolean;
  disabled?: boolean;
  autoFocus?: boolean;
}) {
  const [text, setText] = useState("");
  const [sending, setSending] = useState(false);
  const [compare, setCompare] = useState(false);
  const [modelA, setModelA] = useState("");
  const [modelB, setModelB] = useState("");
  const ref = useRef<HTMLTextAreaElement>(null);

  // Grow with the text, up to a limit.
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight, 240)}px`;
  }, [text]);

  const send = async () => {
    const t = text.trim();
    if (!showsSomething(t) || sending || disabled) return;
    setSending(true);
    const ok = await onSend({ text: t, compare: compare ? { modelA: modelA.trim(), modelB: modelB.trim() } : undefined });
    setSending(false);
    if (ok) setText("");
    ref.current?.focus();
  };

  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      void send();
    }
  };

  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    void send();
  };

  return (
    <form className="composer" onSubmit={onSubmit} aria-label="Send a message">
      {compare ? (
        <div className="compare-models">
          <label>
            Model A
            <input value={modelA} onChange={(e) => setModelA(e.target.value)} placeholder="default" />
          </label>
          <label>
            Model B
            <input value={modelB} onChange={(e) => setModelB(e.target.value)} placeholder="default" />
          </label>
        </div>
      ) : null}
      <div className="composer-row">
        <label className="visually-hidden" htmlFor="composer-input">
          Message
        </label>
        <textarea
          id="composer-input"
          ref={ref}
          rows={1}
          value={text}
          placeholder="Message convo…"
          aria-describedby="composer-hint"
          onChange={(e) => setText(e.target.value)}
          onKeyDown={onKeyDown}
          autoFocus={autoFocus}
          maxLength={100_000}
        />
        {running ? (
          <button type="button" className="stop" onClick={onStop} aria-label="Stop the reply">
            <span className="stop-square" aria-hidden="true" /> Stop
          </button>
        ) : null}
        <button type="submit" className="primary" disabled={!showsSomething(text) || sending || disabled} aria-label="Send">
          {sending ? "Sending…" : "Send"}
        </button>
      </div>
      <div className="composer-options">
        <label className="toggle">
          <input type="checkbox" checked={compare} onChange={(e) => setCompare(e.target.checked)} />
          A/B: compare two replies
        </label>
        <span id="composer-hint" className="composer-hint">
          Enter to send · Shift+Enter for a new line
        </span>
      </div>
    </form>
  );
}
