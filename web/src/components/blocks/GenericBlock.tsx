import type { BlockState } from "@convo/client";
import { blockAttrs } from "./attrs";

/** GenericBlock shows a block of a type this app does not know: its type and its text. */
export function GenericBlock({ block }: { block: BlockState }) {
  return (
    <figure className="block block-generic" {...blockAttrs(block)}>
      <figcaption className="block-label">{block.blockType}</figcaption>
      <pre className="code">{block.content}</pre>
    </figure>
  );
}
