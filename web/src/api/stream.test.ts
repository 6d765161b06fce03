import { describe, expect, it } from "vitest";
import { backoffDelay } from "./stream";

describe("backoffDelay", () => {
  it("doubles from the initial delay up to the cap, with jitter between half and all of it", () => {
    const lo = () => 0;
    const hi = () => 0.999999;
    expect([0, 1, 2, 3].map((n) => backoffDelay(n, 500, 10_000, hi))).toEqual([500, 1000, 2000, 4000]);
    expect(backoffDelay(0, 500, 10_000, lo)).toBe(250);
    expect(backoffDelay(10, 500, 10_000, hi)).toBe(10_000);
    expect(backoffDelay(50, 500, 10_000, lo)).toBe(5_000);
  });
});
