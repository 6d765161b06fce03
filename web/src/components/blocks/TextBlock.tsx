import type { BlockState } from "@convo/client";
import { blockAttrs } from "./attrs";
import { Markdown } from "../Markdown";
import { closeOpenMarkdown } from "../../util/streamingMarkdown";

export function TextBlock({ block }: { block: BlockState }) {
  const streaming = block.status === "streaming";
  // While it streams, what the model opened and has not closed yet (a
  // code span, a fence) is closed for display: no stray backtick.
  return (
    <div className={`block block-text${streaming ? " is-streaming" : ""}`} {...blockAttrs(block)}>
      <Markdown text={streaming ? closeOpenMarkdown(block.content) : block.content} />
    </div>
  );
}
