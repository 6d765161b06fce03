import { timestampMs } from "@bufbuild/protobuf/wkt";
import { useEffect, useRef, useState } from "react";
import { errorMessage, type ConvoClient } from "../api/client";
import type { Event } from "@convo/client";
import type { Trace } from "@convo/client";
import { valueToJson } from "@convo/client";
import { durationMs, formatDuration, stringifyJson } from "../util/format";
import { Spinner } from "./Spinner";

/** TraceDialog shows what one prompt did: its timings and every event with its time. */
export function TraceDialog({
  client,
  messageId,
  onClose,
}: {
  client: ConvoClient;
  messageId: string;
  onClose: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const [trace, setTrace] = useState<Trace | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
  }, []);

  useEffect(() => {
    let cancelled = false;
    client
      .getTrace({ target: { case: "messageId", value: messageId } })
      .then((res) => !cancelled && setTrace(res.trace ?? null))
      .catch((err) => !cancelled && setError(errorMessage(err)));
    return () => {
      cancelled = true;
    };
  }, [client, messageId]);

  const p = trace?.prompt;
  const t0 = p?.createdAt ? timestampMs(p.createdAt) : trace?.events[0]?.createdAt ? timestampMs(trace.events[0].createdAt) : 0;

  return (
    <dialog ref={ref} className="dialog trace-dialog" aria-labelledby="trace-title" onClose={onClose}>
      <header className="dialog-head">
        <h2 id="trace-title">Trace</h2>
        <button type="button" className="ghost" onClick={() => ref.current?.close()} aria-label="Close trace">
          ✕
        </button>
      </header>
      {error ? <p className="message-error">{error}</p> : null}
      {!trace && !error ? (
        <p className="muted">
          <Spinner /> Loading…
        </p>
      ) : null}
      {trace && p ? (
        <>
          <dl className="trace-summary">
            <dt>Status</dt>
            <dd>
              <span className={`badge badge-${p.status}`}>{p.status}</span>
            </dd>
            <dt>Queued for</dt>
            <dd>{formatDuration(durationMs(trace.queueTime))}</dd>
            <dt>Duration</dt>
            <dd>{formatDuration(durationMs(trace.duration))}</dd>
            <dt>Events</dt>
            <dd>{trace.events.length}</dd>
            <dt>Trace id</dt>
            <dd>
              <code>{p.id}</code>
            </dd>
            {p.error ? (
              <>
                <dt>Error</dt>
                <dd className="message-error">{p.error}</dd>
              </>
            ) : null}
            {p.modelConfig && Object.keys(p.modelConfig).length > 0 ? (
              <>
                <dt>Model</dt>
                <dd>
                  <code>{JSON.stringify(p.modelConfig)}</code>
                </dd>
              </>
            ) : null}
          </dl>
          <div className="trace-table-wrap">
            <table className="trace-table">
              <thead>
                <tr>
                  <th scope="col">+time</th>
                  <th scope="col">seq</th>
                  <th scope="col">event</th>
                  <th scope="col">detail</th>
                </tr>
              </thead>
              <tbody>
                {trace.events.map((ev) => (
                  <tr key={String(ev.seq)}>
                    <td className="num">{ev.createdAt ? formatDuration(timestampMs(ev.createdAt) - t0) : ""}</td>
                    <td className="num">{String(ev.seq)}</td>
                    <td>
                      <code>{ev.kind.case}</code>
                    </td>
                    <td className="trace-detail">{eventDetail(ev)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      ) : null}
    </dialog>
  );
}

function clip(s: string, n = 80): string {
  return s.length > n ? `${s.slice(0, n)}…` : s;
}

function eventDetail(ev: Event): string {
  const k = ev.kind;
  switch (k.case) {
    case "blockStart":
      return k.value.blockType;
    case "blockDelta":
      return JSON.stringify(clip(k.value.content));
    case "blockEnd":
      return k.value.metadata && Object.keys(k.value.metadata).length ? clip(JSON.stringify(k.value.metadata)) : "";
    case "toolCallStarted":
      return `${k.value.toolCall?.name ?? ""} ${clip(stringifyJson(valueToJson(k.value.input)).replace(/\s+/g, " "))}`;
    case "toolCallProgress":
      return JSON.stringify(clip(k.value.output));
    case "toolCallCompleted":
      return `${k.value.toolCall?.name ?? ""} completed`;
    case "toolCallFailed":
      return `${k.value.toolCall?.name ?? ""}: ${k.value.error}`;
    case "promptFailed":
      return k.value.error;
    case "messageCreated":
    case "messageUpdated":
      return `${k.value.message?.role ?? ""} ${k.value.message?.status ?? ""}`;
    case "promptQueued":
    case "promptStarted":
    case "promptCompleted":
    case "promptCancelled":
      return k.value.prompt?.status ?? "";
    default:
      return "";
  }
}
