// Mock models of the AI SDK (ai/test) that the tests script: each call of
// the model streams the next round of parts.

import type { LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { MockLanguageModelV4 } from "ai/test";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

export function finish(reason: "stop" | "tool-calls" = "stop"): LanguageModelV4StreamPart {
  return { type: "finish", finishReason: { unified: reason, raw: undefined }, usage };
}

export function textParts(id: string, ...deltas: string[]): LanguageModelV4StreamPart[] {
  return [{ type: "text-start", id }, ...deltas.map((delta) => ({ type: "text-delta" as const, id, delta })), { type: "text-end", id }];
}

export function reasoningParts(id: string, ...deltas: string[]): LanguageModelV4StreamPart[] {
  return [
    { type: "reasoning-start", id },
    ...deltas.map((delta) => ({ type: "reasoning-delta" as const, id, delta })),
    { type: "reasoning-end", id },
  ];
}

export function toolCallParts(id: string, toolName: string, input: object): LanguageModelV4StreamPart[] {
  const json = JSON.stringify(input);
  const half = Math.floor(json.length / 2);
  return [
    { type: "tool-input-start", id, toolName },
    { type: "tool-input-delta", id, delta: json.slice(0, half) },
    { type: "tool-input-delta", id, delta: json.slice(half) },
    { type: "tool-input-end", id },
    { type: "tool-call", toolCallId: id, toolName, input: json },
  ];
}

/**
 * A model whose nth call streams rounds[n]. A round is parts, or a
 * function that gets the call's abort signal and writes parts itself (to
 * stream slowly, or to hang until aborted).
 */
export function scriptedModel(
  rounds: Array<LanguageModelV4StreamPart[] | ((c: ReadableStreamDefaultController<LanguageModelV4StreamPart>, signal?: AbortSignal) => Promise<void>)>,
): MockLanguageModelV4 {
  let call = 0;
  return new MockLanguageModelV4({
    doStream: async (opts) => {
      const round = rounds[Math.min(call++, rounds.length - 1)];
      const stream = new ReadableStream<LanguageModelV4StreamPart>({
        async start(c) {
          if (typeof round === "function") {
            try {
              await round(c, opts.abortSignal);
            } catch (err) {
              c.error(err);
              return;
            }
          } else {
            for (const p of round) c.enqueue(p);
          }
          c.close();
        },
      });
      return { stream };
    },
  });
}

/** Resolves after ms, or rejects when signal fires. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      reject(signal.reason);
    }, { once: true });
  });
}
