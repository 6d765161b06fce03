import type { BlockState } from "@convo/client";

/** blockAttrs are the data attributes every block element carries (for styling, tests and debugging). */
export function blockAttrs(b: BlockState) {
  return {
    "data-block-type": b.blockType,
    "data-block-id": b.id,
    "data-status": b.status,
    "data-length": b.content.length,
  };
}
