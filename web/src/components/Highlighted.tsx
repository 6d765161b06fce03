import type { Highlight } from "@convo/client";
import { highlightSegments, plainSnippet } from "../util/highlight";

/**
 * Highlighted renders a snippet of a message with its matches in <mark>, as
 * React elements (never HTML), and without its markdown syntax.
 */
export function Highlighted({ text, ranges }: { text: string; ranges: readonly Pick<Highlight, "start" | "end">[] }) {
  const plain = plainSnippet(text, ranges);
  return (
    <>
      {highlightSegments(plain.text, plain.ranges).map((s, i) => (s.mark ? <mark key={i}>{s.text}</mark> : <span key={i}>{s.text}</span>))}
    </>
  );
}
