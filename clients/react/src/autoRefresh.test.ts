import { afterEach, describe, expect, it, vi } from "vitest";
import { autoRefresh } from "./autoRefresh.js";

describe("autoRefresh", () => {
  afterEach(() => vi.useRealTimers());

  function setup() {
    vi.useFakeTimers();
    const state = { online: true, visible: true };
    const target = new EventTarget();
    const load = vi.fn();
    const stop = autoRefresh(load, 10_000, { target, online: () => state.online, visible: () => state.visible });
    return { state, target, load, stop };
  }

  it("reloads on every interval while visible and online", () => {
    const { load } = setup();
    vi.advanceTimersByTime(30_000);
    expect(load).toHaveBeenCalledTimes(3);
  });

  it("skips the interval while hidden or offline, and reloads once back online", () => {
    const { state, target, load } = setup();
    state.visible = false;
    vi.advanceTimersByTime(10_000);
    state.visible = true;
    state.online = false;
    vi.advanceTimersByTime(20_000);
    target.dispatchEvent(new Event("focus"));
    expect(load).not.toHaveBeenCalled();

    state.online = true;
    target.dispatchEvent(new Event("online"));
    expect(load).toHaveBeenCalledTimes(1);
    target.dispatchEvent(new Event("focus"));
    expect(load).toHaveBeenCalledTimes(2);
  });

  it("does nothing more once stopped", () => {
    const { target, load, stop } = setup();
    stop();
    vi.advanceTimersByTime(30_000);
    target.dispatchEvent(new Event("focus"));
    target.dispatchEvent(new Event("online"));
    expect(load).not.toHaveBeenCalled();
  });
});
