import { useContext, useEffect, useState } from "react";
import type { BlockState, ToolCallState } from "@convo/client";
import { blockAttrs } from "./attrs";
import { formatDuration, stringifyJson } from "../../util/format";
import { Spinner } from "../Spinner";
import { PersonWaits } from "./waiting";

const statusLabel: Record<string, string> = {
  started: "Started",
  running: "Running",
  completed: "Done",
  failed: "Failed",
  stopped: "Stopped",
  waiting: "Waiting for you",
};

/**
 * ToolCallPanel shows a tool_use block: the call's name, arguments, live
 * output, status, duration and error. A block whose call was never
 * recorded is "Done" once its reply has ended, unless the reply failed or
 * was cancelled (stopped): then the call never ran to its end. A call that
 * waits for a person (an approval, a question: PersonWaits) is "Waiting for
 * you", open, with no spinner and no running time: nothing is running.
 */
export function ToolCallPanel({ block, live, stopped = false }: { block: BlockState; live: boolean; stopped?: boolean }) {
  const tc = block.toolCall;
  const waits = useContext(PersonWaits).has(tc?.id ?? "") && live;
  const running = live && !waits && (!tc || tc.status === "started" || tc.status === "running");
  const status = waits ? "waiting" : tc ? tc.status : live ? "pending" : stopped ? "stopped" : "completed";
  const name = tc?.name || stringMeta(block, "name") || stringMeta(block, "tool") || "tool";
  return (
    <details className={`block block-tool tool-${status}`} {...blockAttrs(block)} data-tool-status={status} open={running || waits || status === "failed" || undefined}>
      <summary>
        <span className="tool-icon" aria-hidden="true">⚙</span>
        <span className="tool-name">{name}</span>
        <span className={`badge badge-${status}`}>
          {running ? <Spinner /> : null}
          {statusLabel[status] ?? (running ? "Waiting" : status)}
        </span>
        {tc && !waits ? <Elapsed tc={tc} running={running} /> : null}
      </summary>
      <div className="tool-body">
        {tc?.input !== undefined ? (
          <section>
            <h4>Arguments</h4>
            <pre className="code">{stringifyJson(tc.input)}</pre>
          </section>
        ) : block.content ? (
          <section>
            <h4>Arguments</h4>
            <pre className="code">{block.content}</pre>
          </section>
        ) : null}
        {tc && (tc.output || running) ? (
          <section>
            <h4>Output</h4>
            <pre className="code tool-output" aria-busy={running}>
              {tc.output || "…"}
            </pre>
          </section>
        ) : null}
        {tc?.error ? (
          <p className="tool-error" role="alert">
            {tc.error}
          </p>
        ) : null}
      </div>
    </details>
  );
}

function stringMeta(b: BlockState, key: string): string | undefined {
  const v = b.metadata[key];
  return typeof v === "string" ? v : undefined;
}

function Elapsed({ tc, running }: { tc: ToolCallState; running: boolean }) {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!running) return;
    const t = setInterval(() => setNow(Date.now()), 100);
    return () => clearInterval(t);
  }, [running]);
  if (tc.startedAt === undefined) return null;
  const end = tc.endedAt ?? (running ? now : undefined);
  if (end === undefined) return null;
  return <span className="muted small tool-duration">{formatDuration(Math.max(0, end - tc.startedAt))}</span>;
}
