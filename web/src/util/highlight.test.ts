import { describe, expect, it } from "vitest";
import { highlightSegments, plainSnippet } from "./highlight";

describe("highlightSegments", () => {
  it("marks the ranges", () => {
    expect(highlightSegments("the quick fox", [{ start: 4, end: 9 }])).toEqual([
      { text: "the ", mark: false },
      { text: "quick", mark: true },
      { text: " fox", mark: false },
    ]);
  });

  it("counts code points, not UTF-16 units", () => {
    // "🌞" is one code point but two UTF-16 units.
    expect(highlightSegments("🌞 sunny day", [{ start: 2, end: 7 }])).toEqual([
      { text: "🌞 ", mark: false },
      { text: "sunny", mark: true },
      { text: " day", mark: false },
    ]);
  });

  it("merges overlaps, sorts, and clamps out-of-range values", () => {
    expect(
      highlightSegments("abcdef", [
        { start: 4, end: 99 },
        { start: 0, end: 2 },
        { start: 1, end: 3 },
        { start: 3, end: 3 },
      ]),
    ).toEqual([
      { text: "abc", mark: true },
      { text: "d", mark: false },
      { text: "ef", mark: true },
    ]);
  });

  it("leaves text without ranges whole", () => {
    expect(highlightSegments("plain", [])).toEqual([{ text: "plain", mark: false }]);
    expect(highlightSegments("", [{ start: 0, end: 3 }])).toEqual([]);
  });
});

describe("plainSnippet", () => {
  const plain = (text: string, ranges: { start: number; end: number }[] = []) => plainSnippet(text, ranges);

  it("drops emphasis, code and escape syntax and moves the highlights with the text", () => {
    const text = "## 6 \\* 7 = 42 … the **calculator** tool returned `42`";
    const start = Array.from(text).indexOf("c");
    const got = plain(text, [{ start, end: start + 10 }]);
    expect(got.text).toBe("6 * 7 = 42 … the calculator tool returned 42");
    const cps = Array.from(got.text);
    expect(cps.slice(got.ranges[0].start, got.ranges[0].end).join("")).toBe("calculator");
  });

  it("keeps what is text: a spaced asterisk, snake_case, a quote inside a line", () => {
    expect(plain("6 * 7 and snake_case_name > 3").text).toBe("6 * 7 and snake_case_name > 3");
    expect(plain("> quoted _em_ __strong__").text).toBe("quoted em strong");
  });

  it("drops a highlight that covered only syntax", () => {
    expect(plain("**x**", [{ start: 0, end: 2 }]).ranges).toEqual([]);
  });
});
