import type { BlockState } from "@convo/client";
import { blockAttrs } from "./attrs";
import { Markdown } from "../Markdown";

export function TextBlock({ block }: { block: BlockState }) {
  return (
    <div className={`block block-text${block.status === "streaming" ? " is-streaming" : ""}`} {...blockAttrs(block)}>
      <Markdown text={block.content} />
    </div>
  );
}
