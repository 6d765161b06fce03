import { describe, expect, it } from "vitest";
import { formatDuration, prettyJson, relativeTime } from "./format";

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
