import { useCallback, useEffect, useRef, useState, type RefObject } from "react";

/**
 * OlderMessages stands above the first message while older ones are not
 * loaded (the server's snapshot holds only the latest: CONVO_SNAPSHOT_BYTES).
 * It loads the page before them when it scrolls into view (or its button
 * is pressed), one page at a time. `older` is the state's page token: a new
 * one means a page arrived, and a new observer then reports at once whether
 * this is still in view, so a short page is followed by the next. A failed
 * load shows its error and waits for the button or the next scroll.
 */
export function OlderMessages({
  scroller,
  older,
  load,
  error,
}: {
  scroller: RefObject<HTMLElement | null>;
  older: string;
  load: () => Promise<void>;
  error: string | null;
}) {
  const ref = useRef<HTMLDivElement>(null);
  const [loading, setLoading] = useState(false);
  const run = useCallback(() => {
    setLoading(true);
    void load().finally(() => setLoading(false));
  }, [load]);

  useEffect(() => {
    const el = ref.current;
    if (!el || typeof IntersectionObserver === "undefined") return;
    // Within a screen of the top already counts: the page is there before the reader gets to it.
    const io = new IntersectionObserver((entries) => entries.some((e) => e.isIntersecting) && run(), {
      root: scroller.current,
      rootMargin: "100% 0px 0px 0px",
    });
    io.observe(el);
    return () => io.disconnect();
  }, [older, run, scroller]);

  return (
    <div ref={ref} className="older-messages">
      <button type="button" className="ghost small" onClick={run} disabled={loading}>
        {loading ? "Loading earlier messages…" : "Load earlier messages"}
      </button>
      {error ? (
        <p className="muted" role="alert">
          {error}
        </p>
      ) : null}
    </div>
  );
}
