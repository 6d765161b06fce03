import type { Highlight } from "../gen/convo/v1/conversation_service_pb";
import { highlightSegments } from "../util/highlight";

/** Highlighted renders a snippet with its matches in <mark>, as React elements (never HTML). */
export function Highlighted({ text, ranges }: { text: string; ranges: readonly Pick<Highlight, "start" | "end">[] }) {
  return (
    <>
      {highlightSegments(text, ranges).map((s, i) => (s.mark ? <mark key={i}>{s.text}</mark> : <span key={i}>{s.text}</span>))}
    </>
  );
}
