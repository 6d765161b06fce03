import { useState } from "react";
import type { ClientToolRun, PendingInput } from "@convo/react";
import { Spinner } from "./Spinner";

export interface PauseActions {
  approve: (toolCallId: string, reason?: string) => Promise<boolean>;
  deny: (toolCallId: string, reason?: string) => Promise<boolean>;
  answer: (toolCallId: string, text: string) => Promise<boolean>;
}

const str = (v: unknown) => (typeof v === "string" ? v : "");

/**
 * PauseCard shows an open input request of a reply: an approval (the tool,
 * Approve / Deny with an optional reason; its arguments are in the tool's
 * panel right above, "Waiting for you", and are not repeated), a question
 * (its choices, or a text box), or a client tool's run (here, elsewhere).
 */
export function PauseCard({ p, actions }: { p: PendingInput; actions: PauseActions }) {
  const [busy, setBusy] = useState(false);
  const [text, setText] = useState("");
  const act = (f: () => Promise<boolean>) => {
    setBusy(true);
    void f().then((ok) => {
      if (!ok) setBusy(false);
    });
  };
  if (p.kind === "approval") {
    const message = str(p.request.message);
    return (
      <section className="pause pause-approval" role="group" aria-label="Approval needed" data-tool-call-id={p.toolCallId}>
        <h4>
          Approve <code>{p.toolName || "the tool call"}</code>?
        </h4>
        {message ? <p>{message}</p> : null}
        {p.input !== undefined ? <p className="muted small">Its arguments are shown above.</p> : null}
        <label className="pause-reason">
          Reason (optional)
          <input type="text" value={text} maxLength={2000} onChange={(e) => setText(e.target.value)} disabled={busy} />
        </label>
        <div className="pause-buttons">
          <button type="button" className="primary" disabled={busy} onClick={() => act(() => actions.approve(p.toolCallId, text.trim() || undefined))}>
            Approve
          </button>
          <button type="button" disabled={busy} onClick={() => act(() => actions.deny(p.toolCallId, text.trim() || undefined))}>
            Deny
          </button>
        </div>
      </section>
    );
  }
  if (p.kind === "question") {
    const question = str(p.request.question) || "The assistant asks a question.";
    const choices = Array.isArray(p.request.choices) ? p.request.choices.filter((c): c is string => typeof c === "string") : [];
    return (
      <section className="pause pause-question" role="group" aria-label="Question" data-tool-call-id={p.toolCallId}>
        <h4>{question}</h4>
        {choices.length > 0 ? (
          <div className="pause-buttons">
            {choices.map((c) => (
              <button key={c} type="button" disabled={busy} onClick={() => act(() => actions.answer(p.toolCallId, c))}>
                {c}
              </button>
            ))}
          </div>
        ) : (
          <form
            className="pause-buttons"
            onSubmit={(e) => {
              e.preventDefault();
              if (text.trim()) act(() => actions.answer(p.toolCallId, text));
            }}
          >
            <input type="text" aria-label="Your answer" value={text} onChange={(e) => setText(e.target.value)} disabled={busy} />
            <button type="submit" className="primary" disabled={busy || !text.trim()}>
              Answer
            </button>
          </form>
        )}
      </section>
    );
  }
  return <ClientToolStatus name={p.toolName} toolCallId={p.toolCallId} run={p.run} />;
}

/** ClientToolStatus shows where a client tool runs: in this tab, in another, or done here. */
export function ClientToolStatus({ name, toolCallId, run }: { name: string; toolCallId: string; run?: ClientToolRun }) {
  const label =
    run?.status === "here"
      ? "running in this tab"
      : run?.status === "elsewhere"
        ? "running in another tab"
        : run?.status === "done"
          ? "done in this tab"
          : run?.status === "failed"
            ? `failed in this tab: ${run.error ?? ""}`
            : "waiting for a client to run it";
  const running = run?.status === "here" || run?.status === "elsewhere" || run === undefined;
  return (
    <section className="pause pause-client-tool" role="status" aria-label="Client tool" data-tool-call-id={toolCallId} data-run={run?.status ?? "none"}>
      <p>
        {running ? <Spinner /> : null} <code>{name || "client tool"}</code> {label}
      </p>
    </section>
  );
}
