package worker

// The model-facing streaming API. A Model streams Events; the runtime
// translates them into blocks and tool calls through the SQL worker API.
// These types are separate from the persisted ones (conversation.Block,
// conversation.ToolCall): a stream carries chunks of what will become a
// block, never a block. Both Event and Chunk are closed sets, so a model
// cannot hand the runtime anything it does not know how to translate.

// Event is one item of a model's stream: a Part, a Flush or a Finish.
type Event interface{ isEvent() }

// Part is a chunk of streamed output belonging to the output item Index
// (one item becomes one block). Every Part of an index carries the same
// kind of Chunk. Metadata, usually nil, is merged into the item's block
// metadata (top-level keys, later values win), for example a reasoning
// signature that arrives in pieces.
type Part struct {
	Index    int
	Chunk    Chunk
	Metadata map[string]any
}

// Flush closes the output item Index: its block ends, with Metadata merged
// into the block's metadata. Parts for a flushed index are an error. An
// index still open at Finish is flushed then.
type Flush struct {
	Index    int
	Metadata map[string]any
}

// Finish ends the stream (one round of the model). Error says what went
// wrong when Reason is FinishError and is ignored otherwise.
type Finish struct {
	Reason FinishReason
	Error  string
}

func (Part) isEvent()   {}
func (Flush) isEvent()  {}
func (Finish) isEvent() {}

// FinishReason says why a model stopped.
type FinishReason string

const (
	// FinishStop: the model finished its answer.
	FinishStop FinishReason = "stop"
	// FinishLength: the model hit its token limit; the answer is cut short
	// but the prompt completes.
	FinishLength FinishReason = "length"
	// FinishToolCalls: the model wants the results of the tool calls it
	// streamed before it continues.
	FinishToolCalls FinishReason = "tool_calls"
	// FinishCancelled: the model stopped because it was asked to.
	FinishCancelled FinishReason = "cancelled"
	// FinishError: the model failed; Finish.Error says why, and the prompt
	// fails with that message.
	FinishError FinishReason = "error"
)

// Chunk is what a Part carries: MessageChunk, ReasoningChunk,
// StructuredChunk, ToolCallStart or ToolCallArgs.
type Chunk interface{ isChunk() }

// MessageChunk is a piece of the answer's text: a "text" block.
type MessageChunk string

// ReasoningChunk is a piece of the model's reasoning: a "reasoning" block.
type ReasoningChunk string

// StructuredChunk is a piece of a structured (JSON) answer: a "structured"
// block, whose whole content must be valid JSON when the item is flushed.
type StructuredChunk string

// ToolCallStart names a tool call: a "tool_use" block. A provider may send
// it more than once for one index, spreading ID and Name over several
// deltas; for each field the first non-empty value wins.
type ToolCallStart struct {
	ID   string
	Name string
}

// ToolCallArgs is a piece of a tool call's argument JSON. The pieces are
// the tool_use block's deltas; at flush they are parsed into the tool
// call's input (invalid JSON fails that tool call, not the prompt).
type ToolCallArgs string

func (MessageChunk) isChunk()    {}
func (ReasoningChunk) isChunk()  {}
func (StructuredChunk) isChunk() {}
func (ToolCallStart) isChunk()   {}
func (ToolCallArgs) isChunk()    {}

// itemKind is the kind of block an index becomes.
type itemKind int

const (
	kindMessage itemKind = iota + 1
	kindReasoning
	kindStructured
	kindToolCall
)

// chunkKind returns the item kind c belongs to.
func chunkKind(c Chunk) itemKind {
	switch c.(type) {
	case MessageChunk:
		return kindMessage
	case ReasoningChunk:
		return kindReasoning
	case StructuredChunk:
		return kindStructured
	case ToolCallStart, ToolCallArgs:
		return kindToolCall
	}
	return 0
}

// blockType is the block an item of kind k becomes.
func (k itemKind) blockType() string {
	switch k {
	case kindMessage:
		return "text"
	case kindReasoning:
		return "reasoning"
	case kindStructured:
		return "structured"
	case kindToolCall:
		return "tool_use"
	}
	return ""
}

func (k itemKind) String() string {
	switch k {
	case kindMessage:
		return "message"
	case kindReasoning:
		return "reasoning"
	case kindStructured:
		return "structured output"
	case kindToolCall:
		return "tool call"
	}
	return "unknown"
}
