import { describe, expect, it } from "vitest";
import { check, MAX_DEPTH } from "./jsonlimit.js";

// The same cases as Go's internal/jsonlimit TestCheck, with the same
// wording: the three runtimes and the server refuse alike.
describe("jsonlimit.check", () => {
  const range = "is outside the range of a 64-bit float (magnitude between 5e-324 and 1.7e308, or 0)";
  const deep = "[".repeat(MAX_DEPTH + 1) + "]".repeat(MAX_DEPTH + 1);
  const atLimit = "[".repeat(MAX_DEPTH) + "]".repeat(MAX_DEPTH);
  const cases: Array<[string, string | undefined]> = [
    ['{"a":[1,2.5,-3e10,1.7e308,5e-324,0,-0,0.0e-999999]}', undefined],
    [atLimit, undefined],
    ['"\\ud83d\\ude00 \\u00e9"', undefined],
    [" true ", undefined],
    ['{"s": "😀 é"}', undefined],
    ['{"expression": 1e400}', `$.expression: number 1e400 ${range}`],
    ["[1, -1e999999]", `$[1]: number -1e999999 ${range}`],
    ["[1e-400]", `$[0]: number 1e-400 ${range}`],
    [`[${"1".repeat(400)}e1]`, `$[0]: number ${"1".repeat(32)}… ${range}`],
    [`{"odd key":{"n":[0,${"1".repeat(1001)}]}}`, '$["odd key"].n[1]: a number of 1001 characters (at most 1000)'],
    [deep, "$" + "[0]".repeat(MAX_DEPTH) + ": nested deeper than 64 levels"],
    ['{"a":"x\\u0000"}', "$.a: a string holds \\u0000, which PostgreSQL cannot store"],
    ['{"\\u0000":1}', "$: a string holds \\u0000, which PostgreSQL cannot store"],
    ['["\\ud800"]', "$[0]: a string holds an unpaired surrogate \\ud800"],
    ['["\\udc00\\ud800"]', "$[0]: a string holds an unpaired surrogate \\udc00"],
    ['["\ud800"]', "$[0]: a string holds an unpaired surrogate \\ud800"],
    // Not JSON: JSON.parse says why, not this check.
    ['{"a": 1', undefined],
    ["[1e400", "$[0]: number 1e400 " + range],
    ["nope", undefined],
  ];
  it.each(cases)("check(%s)", (text, want) => {
    expect(check(text)).toBe(want);
  });

  it("reads 100,000 levels without recursion", () => {
    expect(check("[".repeat(100_000))).toBe("$" + "[0]".repeat(MAX_DEPTH) + ": nested deeper than 64 levels");
  });

  it("checks a megabyte quickly", () => {
    const body = "[" + "1e999999,".repeat(100_000) + "1]";
    const start = performance.now();
    expect(check("[" + "1,".repeat(500_000) + "1e999999]")).toBe(`$[500000]: number 1e999999 ${range}`);
    expect(check(body)).toBe(`$[0]: number 1e999999 ${range}`);
    expect(performance.now() - start).toBeLessThan(2_000);
  });
});
