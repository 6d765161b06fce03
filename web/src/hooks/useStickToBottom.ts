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
 *
 * When it does not follow the bottom, it keeps the reader's place: the
 * element whose id is `anchorId` (the first message) stays where it was in
 * the list's content after a change, so that older messages put before it
 * do not move what the reader is looking at. (The scrolling element needs
 * `overflow-anchor: none`, or the browser's own anchoring moves it too.)
 */
export function useStickToBottom<T extends HTMLElement>(
  content: unknown,
  paused: boolean,
  anchorId?: string,
): { ref: RefObject<T | null>; onScroll: () => void; stick: () => void; release: () => void } {
  const ref = useRef<T>(null);
  const sticking = useRef(true);
  const anchor = useRef<{ el: Element; y: number } | null>(null);
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    if (sticking.current && !paused) {
      el.scrollTop = el.scrollHeight;
    } else if (anchor.current?.el.isConnected) {
      const moved = contentTop(el, anchor.current.el) - anchor.current.y;
      if (moved !== 0) el.scrollTop += moved;
    }
    const first = anchorId ? document.getElementById(anchorId) : null;
    anchor.current = first && el.contains(first) ? { el: first, y: contentTop(el, first) } : null;
  }, [content, paused, anchorId]);
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

/** contentTop is where child starts in the scrolling element's content (whatever its scroll position). */
function contentTop(scroller: Element, child: Element): number {
  return child.getBoundingClientRect().top - scroller.getBoundingClientRect().top + scroller.scrollTop;
}
