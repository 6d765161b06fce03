// The rule's set is checked against the database's in the web app's
// tests (web/src/components/editing.test.tsx), which can read the repo.
import { describe, expect, it } from "vitest";
import { showsSomething } from "./text.js";

describe("showsSomething", () => {
  it("is false for text made only of whitespace, control, zero-width, bidi, other ignorable and blank characters", () => {
    for (const t of ["", " ", " \t\r\n", "\u0000", "\u00a0", "\u200b", "\u200b\u200c\u200d\u2060\ufeff", "\u200e\u200f", "\u202a\u202e\u2066\u2069", "\u00ad", "\u3164\u115f", "\ufe0f", "\u{e0041}", "\u{1d173}", "\u3000", "\u2800", "\u{1d159}"]) {
      expect(showsSomething(t), JSON.stringify(t)).toBe(false);
    }
  });

  it("is true once one character shows something", () => {
    for (const t of ["a", "\u200bok", " ☃ ", "👍", "\u202e\u0645", "1", "\u{1f600}\u200d"]) {
      expect(showsSomething(t), JSON.stringify(t)).toBe(true);
    }
  });
});
