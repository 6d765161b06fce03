// OpenTelemetry, when the app has it: @opentelemetry/api is an optional
// peer dependency, loaded once when the worker starts. With it, each
// claimed prompt gets a span (convo.prompt, kind CONSUMER) whose parent is
// the trace context the prompt keeps from the request that sent its
// message (convo.prompt_trace), so the reply joins the send's trace; the
// handler runs with that span active, so the app's own spans (the AI
// SDK's, its tools') are its children. The spans go to the tracer provider
// the app registered (trace.setGlobalTracerProvider, or an SDK's
// register()); with none registered the API's no-op tracer records
// nothing. Without the package, nothing is done at all.

import type * as otel from "@opentelemetry/api";
import type { ClaimRow } from "./sql.js";
import type { Settled } from "./options.js";

type Api = typeof otel;

let loading: Promise<Api | undefined> | undefined;

/** @opentelemetry/api, or undefined when the app does not have it. */
export function loadOtel(): Promise<Api | undefined> {
  loading ??= import("@opentelemetry/api").then(
    (m) => m,
    () => undefined,
  );
  return loading;
}

/** The W3C trace context a prompt keeps, as convo.prompt_trace returns it (a JSON object of strings). */
export interface TraceCarrier {
  traceparent?: string;
  tracestate?: string;
}

const traceparentRe = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * The context whose remote span is the one carrier's traceparent names
 * (W3C Trace Context), with its tracestate; ROOT_CONTEXT when there is
 * none or it is not valid. Read here rather than by the app's global
 * propagator, which is a no-op unless the app set one: the stored context
 * is always W3C's, as the Go runtime reads it.
 */
export function parentOf(api: Api, carrier: TraceCarrier | null): otel.Context {
  const m = traceparentRe.exec(carrier?.traceparent?.trim() ?? "");
  if (!m || m[1] === "ff" || (m[1] === "00" && m[5] !== undefined)) return api.ROOT_CONTEXT;
  const sc: otel.SpanContext = { traceId: m[2], spanId: m[3], traceFlags: parseInt(m[4], 16) & 1, isRemote: true };
  if (carrier?.tracestate) sc.traceState = api.createTraceState(carrier.tracestate);
  if (!api.isSpanContextValid(sc)) return api.ROOT_CONTEXT;
  return api.trace.setSpanContext(api.ROOT_CONTEXT, sc);
}

/** A prompt's span, or none: end() is then a no-op and run() just calls f. */
export class PromptSpan {
  private constructor(
    private readonly api: Api | undefined,
    private readonly span: otel.Span | undefined,
    private readonly ctx: otel.Context | undefined,
  ) {}

  static none = new PromptSpan(undefined, undefined, undefined);

  /** Starts the span of a claimed prompt under its stored trace context (none: a trace of its own). */
  static start(api: Api | undefined, row: ClaimRow, worker: string): PromptSpan {
    if (!api) return PromptSpan.none;
    const parent = parentOf(api, row.trace_context);
    const tracer = api.trace.getTracer("@convo/worker");
    const span = tracer.startSpan(
      "convo.prompt",
      {
        kind: api.SpanKind.CONSUMER,
        attributes: {
          "convo.prompt.id": row.prompt_id,
          "convo.message.id": row.message_id,
          "gen_ai.conversation.id": row.conversation_id,
          "convo.worker.name": worker,
          "convo.prompt.attempt": row.attempts,
          "convo.prompt.resumed": row.resumed,
          "convo.prompt.queued_seconds": row.queued_seconds,
        },
      },
      parent,
    );
    span.addEvent("claimed");
    return new PromptSpan(api, span, api.trace.setSpan(parent, span));
  }

  /** Runs f with the prompt's span active (the app's spans in it are its children). */
  run<T>(f: () => T): T {
    if (!this.api || !this.ctx) return f();
    return this.api.context.with(this.ctx, f);
  }

  /** Ends the span with the prompt's outcome (an attribute and an event), an error status when it failed. */
  end(settled: Settled): void {
    if (!this.api || !this.span) return;
    this.span.setAttribute("convo.prompt.outcome", settled.outcome);
    this.span.addEvent(settled.outcome);
    if (settled.outcome === "failed") this.span.setStatus({ code: this.api.SpanStatusCode.ERROR, message: settled.error });
    this.span.end();
  }
}
