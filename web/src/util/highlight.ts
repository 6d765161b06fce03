// Splitting a search snippet into plain and highlighted segments. Highlight
// ranges count Unicode code points (not UTF-16 units), so an emoji before a
// match does not shift it.

export interface Range {
  start: number;
  end: number;
}

export interface Segment {
  text: string;
  mark: boolean;
}

export function highlightSegments(text: string, ranges: readonly Range[]): Segment[] {
  const cps = Array.from(text);
  const sorted = ranges
    .map((r) => ({ start: Math.max(0, Math.min(cps.length, r.start)), end: Math.max(0, Math.min(cps.length, r.end)) }))
    .filter((r) => r.end > r.start)
    .sort((a, b) => a.start - b.start);
  // Merge overlapping or touching ranges.
  const merged: Range[] = [];
  for (const r of sorted) {
    const last = merged[merged.length - 1];
    if (last && r.start <= last.end) last.end = Math.max(last.end, r.end);
    else merged.push({ ...r });
  }
  const out: Segment[] = [];
  let pos = 0;
  for (const r of merged) {
    if (r.start > pos) out.push({ text: cps.slice(pos, r.start).join(""), mark: false });
    out.push({ text: cps.slice(r.start, r.end).join(""), mark: true });
    pos = r.end;
  }
  if (pos < cps.length) out.push({ text: cps.slice(pos).join(""), mark: false });
  return out;
}
