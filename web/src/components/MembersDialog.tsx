import { useEffect, useRef, useState, type FormEvent } from "react";
import { errorMessage, type ConvoClient } from "../api/client";
import type { Members } from "../hooks/useMembers";
import { roleLabel } from "../state/people";
import { Spinner } from "./Spinner";

/**
 * MembersDialog lists who shares the conversation. Its owner adds a user
 * by id as a viewer (reads) or a participant (reads and writes), changes a
 * member's role and removes a member; a member may leave. A refused change
 * shows the server's message and changes nothing. The list is read again
 * on the memberAdded and memberRemoved events the change brings, in this
 * tab as in every other (not also here: one read per change).
 */
export function MembersDialog({
  client,
  conversationId,
  role,
  me,
  members,
  onClose,
  onLeft,
}: {
  client: ConvoClient;
  conversationId: string;
  /** The caller's role: "owner" manages, a member may only leave. */
  role: string;
  me: string | null;
  members: Members;
  onClose: () => void;
  /** The caller left the conversation. */
  onLeft: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const [userId, setUserId] = useState("");
  const [newRole, setNewRole] = useState("participant");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const owner = role === "owner";

  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
  }, []);

  const run = async (f: () => Promise<unknown>) => {
    setBusy(true);
    setError(null);
    try {
      await f();
      return true;
    } catch (err) {
      setError(errorMessage(err));
      return false;
    } finally {
      setBusy(false);
    }
  };

  const add = async (e: FormEvent) => {
    e.preventDefault();
    const id = userId.trim();
    if (!id) return;
    if (await run(() => client.addMember({ conversationId, userId: id, role: newRole }))) setUserId("");
  };

  const leave = async () => {
    if (me && (await run(() => client.removeMember({ conversationId, userId: me })))) onLeft();
  };

  return (
    <dialog ref={ref} className="dialog members-dialog" aria-labelledby="members-title" onClose={onClose}>
      <header className="dialog-head">
        <h2 id="members-title">Members</h2>
        <button type="button" className="ghost" onClick={() => ref.current?.close()} aria-label="Close members">
          ✕
        </button>
      </header>
      {error ? (
        <p className="message-error" role="alert">
          {error}
        </p>
      ) : null}
      {members.list === null && !members.error ? (
        <p className="muted">
          <Spinner /> Loading…
        </p>
      ) : null}
      {members.error ? <p className="message-error">{members.error}</p> : null}
      {members.list ? (
        <ul className="members" aria-label="Members">
          {members.list.map((m) => (
            <li key={m.userId} className="member" data-user-id={m.userId}>
              <span className="member-id">
                {m.userId}
                {m.userId === me ? <span className="muted small"> (you)</span> : null}
              </span>
              {owner && m.role !== "owner" ? (
                <>
                  <label className="visually-hidden" htmlFor={`role-${m.userId}`}>
                    Role of {m.userId}
                  </label>
                  <select
                    id={`role-${m.userId}`}
                    value={m.role}
                    disabled={busy}
                    onChange={(e) => {
                      const r = e.target.value;
                      void run(() => client.addMember({ conversationId, userId: m.userId, role: r }));
                    }}
                  >
                    <option value="participant">Participant</option>
                    <option value="viewer">Viewer</option>
                  </select>
                  <button
                    type="button"
                    className="ghost small"
                    disabled={busy}
                    aria-label={`Remove ${m.userId}`}
                    onClick={() => void run(() => client.removeMember({ conversationId, userId: m.userId }))}
                  >
                    Remove
                  </button>
                </>
              ) : (
                <span className="badge">{roleLabel(m.role)}</span>
              )}
            </li>
          ))}
        </ul>
      ) : null}
      {owner ? (
        <form className="member-add" onSubmit={(e) => void add(e)} aria-label="Add a member">
          <span className="field">
            <label htmlFor="member-user-id">User id</label>
            <input
              id="member-user-id"
              value={userId}
              onChange={(e) => setUserId(e.target.value)}
              maxLength={200}
              placeholder="e.g. bob"
            />
          </span>
          <span className="field">
            <label htmlFor="member-role">Role</label>
            <select id="member-role" value={newRole} onChange={(e) => setNewRole(e.target.value)}>
              <option value="participant">Participant (reads and writes)</option>
              <option value="viewer">Viewer (reads)</option>
            </select>
          </span>
          <button type="submit" className="primary small" disabled={busy || !userId.trim()}>
            Add
          </button>
        </form>
      ) : (
        <p className="member-leave">
          <span className="muted small">You are a {roleLabel(role).toLowerCase()} here.</span>{" "}
          <button type="button" className="danger small" disabled={busy || !me} onClick={() => void leave()}>
            Leave
          </button>
        </p>
      )}
    </dialog>
  );
}
