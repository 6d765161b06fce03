import { useLayoutEffect, useMemo, useRef, type RefObject } from "react";

/** How close to the bottom (px) still counts as "at the bottom". */
const NEAR_BOTTOM = 80;

/**
 * useStickToBottom keeps a scrolling list at its bottom while the reader is
 * there: after each change of `content` it scrolls to the end, unless the
 * reader scrolled up (or `paused`, e.g. while a linked message is shown).
 * Attach `ref` and `onScroll` to the scrolling element; `stick()` brings
 * the list back to the bottom at the next change (after sending), and
 * `release()` stops following it. The returned object is the same on every
 * render.
 */
export function useStickToBottom<T extends HTMLElement>(
  content: unknown,
  paused: boolean,
): { ref: RefObject<T | null>; onScroll: () => void; stick: () => void; release: () => void } {
  const ref = useRef<T>(null);
  const sticking = useRef(true);
  useLayoutEffect(() => {
    const el = ref.current;
    if (el && sticking.current && !paused) el.scrollTop = el.scrollHeight;
  }, [content, paused]);
  return useMemo(
    () => ({
      ref,
      onScroll: () => {
        const el = ref.current;
        if (el) sticking.current = el.scrollHeight - el.scrollTop - el.clientHeight < NEAR_BOTTOM;
      },
      stick: () => {
        sticking.current = true;
      },
      release: () => {
        sticking.current = false;
      },
    }),
    [],
  );
}
