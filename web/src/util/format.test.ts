import { describe, expect, it } from "vitest";
import { countOf, formatDuration, modelLabel, prettyJson, relativeTime } from "./format";

describe("format", () => {
  it("formats durations", () => {
    expect(formatDuration(12.4)).toBe("12 ms");
    expect(formatDuration(1234)).toBe("1.23 s");
    expect(formatDuration(12_345)).toBe("12.3 s");
    expect(formatDuration(125_000)).toBe("2m 05s");
    expect(formatDuration(undefined)).toBe("—");
  });

  it("formats relative times", () => {
    const now = 1_000_000_000_000;
    expect(relativeTime(now - 5_000, now)).toBe("now");
    expect(relativeTime(now - 5 * 60_000, now)).toBe("5m");
    expect(relativeTime(now - 3 * 3_600_000, now)).toBe("3h");
  });

  it("pretty-prints JSON and leaves partial JSON alone", () => {
    expect(prettyJson('{"a":1}')).toEqual({ text: '{\n  "a": 1\n}', ok: true });
    expect(prettyJson('{"a":')).toEqual({ text: '{"a":', ok: false });
  });
});

describe("countOf and modelLabel", () => {
  it("counts in proper English", () => {
    expect(countOf(1, "char")).toBe("1 char");
    expect(countOf(0, "char")).toBe("0 chars");
    expect(countOf(1200, "char")).toBe("1,200 chars");
    expect(countOf(2, "reply", "replies")).toBe("2 replies");
  });

  it("names the model a reply was asked of", () => {
    expect(modelLabel({ model: "small" })).toBe("small");
    expect(modelLabel({ provider: "demo", temperature: 0.7 })).toBe("demo, temperature 0.7");
    expect(modelLabel({})).toBe("default model");
    expect(modelLabel(undefined)).toBe("default model");
  });
});
