// Markdown cut off mid-stream: a code fence or an inline code span that
// the model opened and has not closed yet. Rendered as it is, the opening
// backticks show as text (an inline span) until the closing ones arrive,
// and then the text jumps into a code span. closeOpenMarkdown closes what
// is open for display, so a streaming reply looks as it will once done.

const fenceRE = /^ {0,3}(`{3,}|~{3,})(.*)$/;

/**
 * closeOpenMarkdown returns text with what the stream left open closed:
 * an open fenced code block gets its closing fence; an inline code span
 * opened in the last paragraph gets its closing backticks, or, when
 * nothing follows its opening backticks yet, loses them (a lone "`" or
 * the "``" of a fence still being written would show as text). Text with
 * nothing open is returned as it is. For display while a block streams:
 * the stored text is never changed.
 */
export function closeOpenMarkdown(text: string): string {
  const lines = text.split("\n");
  // Fenced code blocks, line by line (CommonMark: a fence closes with at
  // least as many of the same character, and nothing but spaces after).
  let open: { char: string; length: number } | null = null;
  let paragraphStart = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const m = fenceRE.exec(line);
    if (open) {
      if (m && m[1][0] === open.char && m[1].length >= open.length && m[2].trim() === "") {
        open = null;
        paragraphStart = i + 1;
      }
      continue;
    }
    // A backtick fence's info string may not hold a backtick.
    if (m && !(m[1][0] === "`" && m[2].includes("`"))) {
      open = { char: m[1][0], length: m[1].length };
      continue;
    }
    if (line.trim() === "") paragraphStart = i + 1;
  }
  if (open) return `${text}${text.endsWith("\n") ? "" : "\n"}${open.char.repeat(open.length)}`;
  // Inline code in the last paragraph (a code span does not cross a blank line).
  const head = lines.slice(0, paragraphStart).join("\n");
  const paragraph = lines.slice(paragraphStart).join("\n");
  const closed = closeInlineCode(paragraph);
  if (closed === paragraph) return text;
  return paragraphStart > 0 ? `${head}\n${closed}` : closed;
}

/** closeInlineCode closes (or drops, when empty) a code span left open at the end of paragraph. */
function closeInlineCode(paragraph: string): string {
  let i = 0;
  while (i < paragraph.length) {
    const c = paragraph[i];
    if (c === "\\") {
      i += 2; // an escaped character, a backtick included, is text
      continue;
    }
    if (c !== "`") {
      i++;
      continue;
    }
    let n = 0;
    while (paragraph[i + n] === "`") n++;
    const run = "`".repeat(n);
    // The span ends at the next run of exactly n backticks.
    let j = i + n;
    let end = -1;
    while (j < paragraph.length) {
      if (paragraph[j] !== "`") {
        j++;
        continue;
      }
      let k = 0;
      while (paragraph[j + k] === "`") k++;
      if (k === n) {
        end = j;
        break;
      }
      j += k;
    }
    if (end < 0) {
      const rest = paragraph.slice(i + n);
      if (rest.trim() === "") return paragraph.slice(0, i);
      // The closing run must not touch the span's own backticks.
      return `${paragraph}${rest.endsWith("`") ? " " : ""}${run}`;
    }
    i = end + n;
  }
  return paragraph;
}
