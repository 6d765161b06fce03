import { describe, expect, it } from "vitest";
import { highlightSegments } from "./highlight";

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
