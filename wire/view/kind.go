package view

// Kind is what a block is, whatever protocol shows it.
type Kind int

const (
	// Other is a block type a worker chose: its content and metadata are
	// whole only at its end, when protocols show them.
	Other Kind = iota
	// Text is prose ("text"), shown as it streams.
	Text
	// Reasoning is the model's reasoning ("reasoning"), shown as it
	// streams.
	Reasoning
	// Structured is JSON output ("structured"), whole only at its end.
	Structured
	// ToolUse is a tool call ("tool_use"): its content is the call's
	// arguments as they stream, its ToolCall the invocation.
	ToolUse
	// ToolResult repeats a tool call's output ("tool_result"): protocols
	// show the call's result on the call, not this block.
	ToolResult
	// File is a file a user's message holds ("file"): Block.File names it
	// (docs/files.md); its content is empty.
	File
)

// KindOf is a block type's Kind.
func KindOf(blockType string) Kind {
	switch blockType {
	case "text":
		return Text
	case "reasoning":
		return Reasoning
	case "structured":
		return Structured
	case "tool_use":
		return ToolUse
	case "tool_result":
		return ToolResult
	case "file":
		return File
	}
	return Other
}

// Streams reports whether protocols show a block of this kind as its text
// arrives (text, reasoning) rather than whole at its end.
func (k Kind) Streams() bool { return k == Text || k == Reasoning }

// IsTool reports whether the kind belongs to a tool call (tool_use,
// tool_result): a model step ends where a block that is not a tool's
// follows one that is.
func (k Kind) IsTool() bool { return k == ToolUse || k == ToolResult }
