import { memo } from "react";
import type { BlockState } from "@convo/client";
import { GenericBlock } from "./GenericBlock";
import { ReasoningBlock } from "./ReasoningBlock";
import { StructuredBlock } from "./StructuredBlock";
import { TextBlock } from "./TextBlock";
import { ToolCallPanel } from "./ToolCallPanel";
import { ToolResultBlock } from "./ToolResultBlock";

/**
 * BlockView renders a block by its type; it re-renders only when its block
 * changes. messageStopped says its reply failed or was cancelled.
 */
export const BlockView = memo(function BlockView({
  block,
  messageLive,
  messageStopped = false,
}: {
  block: BlockState;
  messageLive: boolean;
  messageStopped?: boolean;
}) {
  const live = messageLive && block.status === "streaming";
  switch (block.blockType) {
    case "text":
      return <TextBlock block={block} />;
    case "reasoning":
      return <ReasoningBlock block={block} live={live} />;
    case "tool_use":
      return (
        <ToolCallPanel
          block={block}
          live={messageLive && (block.status === "streaming" || isRunning(block))}
          stopped={messageStopped}
        />
      );
    case "tool_result":
      return <ToolResultBlock block={block} />;
    case "structured":
      return <StructuredBlock block={block} />;
    default:
      return <GenericBlock block={block} />;
  }
});

function isRunning(b: BlockState): boolean {
  return b.toolCall?.status === "started" || b.toolCall?.status === "running";
}
