import { useState } from "react";
import type { BlockState } from "@convo/client";
import { blockAttrs } from "./attrs";
import { Spinner } from "../Spinner";

/** ReasoningBlock is collapsible: open while the model thinks, closed once it is done, unless the reader chose. */
export function ReasoningBlock({ block, live }: { block: BlockState; live: boolean }) {
  const [chosen, setChosen] = useState<boolean | null>(null);
  const open = chosen ?? live;
  return (
    <details
      className="block block-reasoning"
      {...blockAttrs(block)}
      open={open}
      onToggle={(e) => {
        const now = (e.currentTarget as HTMLDetailsElement).open;
        if (now !== open) setChosen(now);
      }}
    >
      <summary>
        {live ? <Spinner /> : null}
        <span>{live ? "Thinking…" : "Reasoning"}</span>
        <span className="muted small">{wordCount(block.content)} words</span>
      </summary>
      <div className="reasoning-text">{block.content}</div>
    </details>
  );
}

function wordCount(s: string): number {
  const t = s.trim();
  return t ? t.split(/\s+/).length : 0;
}
