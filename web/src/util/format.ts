// Formatting of times, durations and JSON for display.

import type { Duration } from "@bufbuild/protobuf/wkt";

export function durationMs(d: Duration | undefined): number | undefined {
  if (!d) return undefined;
  return Number(d.seconds) * 1000 + d.nanos / 1e6;
}

export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60_000);
  const s = Math.floor((ms % 60_000) / 1000);
  return `${m}m ${String(s).padStart(2, "0")}s`;
}

/** relativeTime says how long ago a time was, briefly: "now", "5m", "3h", "Mar 4". */
export function relativeTime(ms: number | undefined, now = Date.now()): string {
  if (ms === undefined) return "";
  const d = Math.max(0, now - ms);
  if (d < 60_000) return "now";
  if (d < 3_600_000) return `${Math.floor(d / 60_000)}m`;
  if (d < 86_400_000) return `${Math.floor(d / 3_600_000)}h`;
  if (d < 7 * 86_400_000) return `${Math.floor(d / 86_400_000)}d`;
  return new Date(ms).toLocaleDateString(undefined, { month: "short", day: "numeric" });
}

export function absoluteTime(ms: number | undefined): string {
  return ms === undefined ? "" : new Date(ms).toLocaleString();
}

/** prettyJson pretty-prints JSON text; text that does not parse is returned unchanged. */
export function prettyJson(text: string): { text: string; ok: boolean } {
  try {
    return { text: JSON.stringify(JSON.parse(text), null, 2), ok: true };
  } catch {
    return { text, ok: false };
  }
}

/** countOf says "1 char", "2 chars": a count and its noun, singular for one. */
export function countOf(n: number, one: string, many = `${one}s`): string {
  return `${n.toLocaleString("en-US")} ${n === 1 ? one : many}`;
}

/**
 * modelLabel names the model a reply was asked of, from the prompt's model
 * configuration: its model (or provider), and its temperature when set.
 * "default model" when the configuration names none.
 */
export function modelLabel(config: { provider?: string; model?: string; temperature?: number } | undefined): string {
  const name = config?.model || config?.provider || "default model";
  return config?.temperature === undefined ? name : `${name}, temperature ${config.temperature}`;
}

export function stringifyJson(v: unknown): string {
  return v === undefined ? "" : JSON.stringify(v, null, 2);
}
