import { useEffect, useRef, useState, type ClipboardEvent, type FormEvent, type KeyboardEvent } from "react";
import { showsSomething } from "@convo/client";
import { formatBytes, type Uploads } from "@convo/react";
import { UploadList } from "./Attachments";

export interface SendOptions {
  text: string;
  /** The files the message holds (uploads done). */
  fileIds?: string[];
  /** Set for an A/B comparison: the two model names (empty: the worker's default). */
  compare?: { modelA: string; modelB: string };
}

/**
 * Composer: Enter sends, Shift+Enter adds a line; a stop button replaces
 * send while a reply runs. Send is disabled while the message would show
 * nothing: text that shows nothing (only whitespace, zero-width or bidi
 * control characters: the server's rule, showsSomething) and no file.
 * With uploads, files come from the attach button or an image pasted into
 * the text (the conversation takes dropped files: useFileDrop); send waits
 * for the uploads in flight, and a file past the server's limits is
 * refused before it is uploaded, saying why. While a reply runs the
 * composer stays usable: the server queues what is sent (its send policy).
 * onTyping hears every change of the draft: whether it holds text.
 */
export function Composer({
  onSend,
  onStop,
  running,
  disabled,
  autoFocus,
  uploads,
  onTyping,
  placeholder = "Message convo…",
}: {
  onTyping?: (hasText: boolean) => void;
  placeholder?: string;
  onSend: (o: SendOptions) => Promise<boolean>;
  onStop: () => void;
  running: boolean;
  disabled?: boolean;
  autoFocus?: boolean;
  uploads?: Uploads;
}) {
  const [text, setText] = useState("");
  const [sending, setSending] = useState(false);
  const [compare, setCompare] = useState(false);
  const [modelA, setModelA] = useState("");
  const [modelB, setModelB] = useState("");
  const ref = useRef<HTMLTextAreaElement>(null);
  const picker = useRef<HTMLInputElement>(null);
  const fileIds = uploads?.fileIds ?? [];
  const busy = uploads?.busy ?? false;
  const empty = !showsSomething(text) && fileIds.length === 0;

  // Grow with the text, up to a limit.
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight, 240)}px`;
  }, [text]);

  const send = async () => {
    const t = text.trim();
    if (empty || busy || sending || disabled) return;
    setSending(true);
    const ok = await onSend({
      text: showsSomething(t) ? t : "",
      fileIds,
      compare: compare ? { modelA: modelA.trim(), modelB: modelB.trim() } : undefined,
    });
    setSending(false);
    if (ok) {
      setText("");
      uploads?.clear();
    }
    ref.current?.focus();
  };

  // A pasted image (a screenshot) is attached; pasted text stays text.
  const onPaste = (e: ClipboardEvent<HTMLTextAreaElement>) => {
    if (!uploads) return;
    const files = Array.from(e.clipboardData.files);
    if (files.length === 0) return;
    e.preventDefault();
    void uploads.add(files);
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
      {uploads ? <UploadList uploads={uploads.uploads} onRemove={uploads.remove} /> : null}
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
        {uploads ? (
          <>
            <input
              ref={picker}
              type="file"
              multiple
              hidden
              aria-label="Attach files"
              onChange={(e) => {
                const files = Array.from(e.target.files ?? []);
                e.target.value = ""; // the same file may be picked again
                if (files.length > 0) void uploads.add(files);
              }}
            />
            <button
              type="button"
              className="ghost attach"
              aria-label="Attach files"
              title={
                uploads.limits
                  ? `Attach files (up to ${uploads.limits.maxFilesPerMessage}, ${formatBytes(uploads.limits.maxFileBytes)} each)`
                  : "Attach files"
              }
              onClick={() => picker.current?.click()}
            >
              <PaperclipIcon />
            </button>
          </>
        ) : null}
        <label className="visually-hidden" htmlFor="composer-input">
          Message
        </label>
        <textarea
          id="composer-input"
          ref={ref}
          rows={1}
          value={text}
          placeholder={placeholder}
          aria-describedby="composer-hint"
          onChange={(e) => {
            setText(e.target.value);
            onTyping?.(e.target.value.trim() !== "");
          }}
          onKeyDown={onKeyDown}
          onPaste={onPaste}
          disabled={disabled}
          autoFocus={autoFocus}
          maxLength={100_000}
        />
        {running ? (
          <button type="button" className="stop" onClick={onStop} aria-label="Stop the reply">
            <span className="stop-square" aria-hidden="true" /> Stop
          </button>
        ) : null}
        <button
          type="submit"
          className="primary"
          disabled={empty || busy || sending || disabled}
          aria-label="Send"
          title={busy ? "Waiting for the files to upload" : undefined}
        >
          {sending ? "Sending…" : busy ? "Uploading…" : "Send"}
        </button>
      </div>
      <div className="composer-options">
        <label className="toggle">
          <input type="checkbox" checked={compare} onChange={(e) => setCompare(e.target.checked)} />
          A/B: compare two replies
        </label>
        <span id="composer-hint" className="composer-hint">
          Enter to send · Shift+Enter for a new line{uploads ? " · drop or paste files to attach" : ""}
        </span>
      </div>
    </form>
  );
}

function PaperclipIcon() {
  return (
    <svg viewBox="0 0 16 16" width="18" height="18" aria-hidden="true">
      <path
        d="M10.5 4.5 5.6 9.4a1.4 1.4 0 0 0 2 2l5-5a2.8 2.8 0 0 0-4-4l-5.2 5.2a4.2 4.2 0 0 0 6 6l4.1-4.1"
        fill="none"
        stroke="currentColor"
        strokeWidth="1.3"
        strokeLinecap="round"
        strokeLinejoin="round"
      />
    </svg>
  );
}
