import type { BlockState } from "@convo/client";
import { blockAttrs } from "./attrs";
import { prettyJson } from "../../util/format";

/** StructuredBlock pretty-prints JSON, and shows the raw text while it is still incomplete. */
export function StructuredBlock({ block }: { block: BlockState }) {
  const { text } = prettyJson(block.content);
  return (
    <figure className="block block-structured" {...blockAttrs(block)}>
      <figcaption className="block-label">JSON</figcaption>
      <pre className="code">{text}</pre>
    </figure>
  );
}
