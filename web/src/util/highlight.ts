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

/**
 * plainSnippet removes markdown syntax from a snippet of a reply (emphasis
 * and strong markers, code backticks, backslash escapes, heading and quote
 * markers at the start of a line), so that it reads as text, and moves the
 * highlight ranges (in code points) to match. A `*` or `_` with spaces on
 * both sides, or an `_` inside a word, is text and stays.
 */
export function plainSnippet(text: string, ranges: readonly Range[]): { text: string; ranges: Range[] } {
  const cps = Array.from(text);
  const keep = cps.map(() => true);
  const isSpace = (c: string | undefined) => c === undefined || /\s/.test(c);
  const isWord = (c: string | undefined) => c !== undefined && /[\p{L}\p{N}]/u.test(c);
  let lineStart = true;
  for (let i = 0; i < cps.length; i++) {
    const c = cps[i];
    if (c === "\\" && i + 1 < cps.length && /[!-/:-@[-`{-~]/.test(cps[i + 1])) {
      keep[i] = false; // an escape: the next character is text
      i++;
      lineStart = false;
      continue;
    }
    if (lineStart && (c === "#" || c === ">")) {
      let j = i;
      while (j < cps.length && cps[j] === c) j++;
      if (j < cps.length && cps[j] === " ") {
        for (let k = i; k <= j; k++) keep[k] = false;
        i = j;
        continue;
      }
    }
    if (c === "`") keep[i] = false;
    else if (c === "*" || c === "_") {
      let j = i;
      while (j < cps.length && cps[j] === c) j++;
      const before = cps[i - 1];
      const after = cps[j];
      const literal = (isSpace(before) && isSpace(after)) || (c === "_" && isWord(before) && isWord(after));
      if (!literal) for (let k = i; k < j; k++) keep[k] = false;
      i = j - 1;
    }
    lineStart = c === "\n" || (lineStart && c === " ");
  }
  // kept[i]: how many code points before i stay.
  const kept = [0];
  for (let i = 0; i < cps.length; i++) kept.push(kept[i] + (keep[i] ? 1 : 0));
  const at = (n: number) => kept[Math.max(0, Math.min(cps.length, n))];
  return {
    text: cps.filter((_, i) => keep[i]).join(""),
    ranges: ranges.map((r) => ({ start: at(r.start), end: at(r.end) })).filter((r) => r.end > r.start),
  };
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
