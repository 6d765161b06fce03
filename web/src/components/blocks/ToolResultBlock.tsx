import type { BlockState } from "@convo/client";
import { blockAttrs } from "./attrs";
import { countOf, prettyJson } from "../../util/format";

/** ToolResultBlock shows what a tool returned to the model: JSON pretty-printed, other text as is. */
export function ToolResultBlock({ block }: { block: BlockState }) {
  const { text } = prettyJson(block.content);
  const isError = block.metadata.is_error === true || block.metadata.error === true;
  const name = typeof block.metadata.name === "string" ? block.metadata.name : typeof block.metadata.tool === "string" ? block.metadata.tool : "";
  return (
    <details className={`block block-tool-result${isError ? " is-error" : ""}`} {...blockAttrs(block)}>
      <summary>
        <span className="tool-icon" aria-hidden="true">↳</span>
        <span>Tool result{name ? `: ${name}` : ""}</span>
        <span className="muted small">{countOf(Array.from(block.content).length, "char")}</span>
      </summary>
      <pre className="code">{text}</pre>
    </details>
  );
}
