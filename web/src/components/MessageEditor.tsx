import { useState, type FormEvent, type KeyboardEvent } from "react";
import { showsSomething, type FileState } from "@convo/client";
import { KeptFiles } from "./Attachments";
import { writingHint } from "./VersionSwitcher";

/**
 * MessageEditor edits a user message in place: Save makes a new version
 * of it with its own reply (EditMessage; the old version stays, one
 * "‹" away), Cancel or Escape leaves it unchanged. Keyboard: Enter saves,
 * Shift+Enter adds a line. Save waits while a reply is being written
 * (the server would refuse), and says why, and while the text shows
 * nothing (only whitespace, zero-width or bidi control characters: the
 * server's rule, showsSomething) and no file is kept. The new version
 * keeps the message's files, less those removed here.
 */
export function MessageEditor({
  messageId,
  text,
  files = [],
  writing,
  onSave,
  onCancel,
}: {
  messageId: string;
  text: string;
  /** The message's files: the new version keeps them unless removed. */
  files?: readonly FileState[];
  writing: boolean;
  /** onSave resolves to whether the edit was made (the editor then closes). */
  onSave: (text: string, fileIds: string[]) => Promise<boolean>;
  onCancel: () => void;
}) {
  const [draft, setDraft] = useState(text);
  const [saving, setSaving] = useState(false);
  const [kept, setKept] = useState(files);
  const empty = !showsSomething(draft) && kept.length === 0;
  const blocked = writing || saving || empty;

  const save = async (e?: FormEvent) => {
    e?.preventDefault();
    if (blocked) return;
    setSaving(true);
    const ok = await onSave(showsSomething(draft) ? draft : "", kept.map((f) => f.id));
    setSaving(false);
    if (ok) onCancel();
  };
  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      void save(e);
    } else if (e.key === "Escape") {
      e.stopPropagation();
      onCancel();
    }
  };
  const inputId = `edit-${messageId}`;
  return (
    <form className="message-editor" onSubmit={(e) => void save(e)} aria-label="Edit message">
      <label className="visually-hidden" htmlFor={inputId}>
        Edit message
      </label>
      <textarea
        id={inputId}
        rows={3}
        value={draft}
        onChange={(e) => setDraft(e.target.value)}
        onKeyDown={onKeyDown}
        aria-describedby={`${inputId}-hint`}
        autoFocus
      />
      <KeptFiles files={kept} onRemove={(id) => setKept((k) => k.filter((f) => f.id !== id))} />
      <div className="message-editor-row">
        <span id={`${inputId}-hint`} className="muted small">
          {writing ? writingHint : "Enter to save as a new version · Shift+Enter for a new line · Esc to cancel"}
        </span>
        <button type="button" className="ghost small" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" className="primary small" aria-disabled={blocked} title={writing ? writingHint : undefined}>
          {saving ? "Saving…" : "Save"}
        </button>
      </div>
    </form>
  );
}
