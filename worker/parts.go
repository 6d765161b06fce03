package worker

import "encoding/json"

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
// wrong when Reason is FinishError and is ignored otherwise. Usage, when
// the model reports it, is the tokens the round took: the runtime adds up
// the rounds of a reply and reports the sum when it completes the prompt
// (convo.complete_prompt's usage; OpenAI's Responses API shows it).
type Finish struct {
	Reason FinishReason
	Error  string
	Usage  *Usage
	// ResponseID and ResponseModel, when the provider says them, are the
	// id it gave the response and the model that answered (the spans'
	// gen_ai.response.id and gen_ai.response.model); empty: not said.
	ResponseID, ResponseModel string
}

// Usage is the tokens a model took for a round: InputTokens read (of
// which CachedInputTokens came from the provider's cache), OutputTokens
// written (of which ReasoningTokens were reasoning).
type Usage struct {
	InputTokens       int64
	OutputTokens      int64
	CachedInputTokens int64
	ReasoningTokens   int64
}

// add adds u's tokens to a sum (nil: none yet) and returns it.
func (u *Usage) add(sum *Usage) *Usage {
	if u == nil {
		return sum
	}
	if sum == nil {
		sum = &Usage{}
	}
	sum.InputTokens += u.InputTokens
	sum.OutputTokens += u.OutputTokens
	sum.CachedInputTokens += u.CachedInputTokens
	sum.ReasoningTokens += u.ReasoningTokens
	return sum
}

// maxTokens is the largest count convo._usage_json takes: 2^53 - 1.
const maxTokens = 1<<53 - 1

// json is u as complete_prompt takes it, each count within 0 and
// 2^53 - 1 and each part within its whole (a provider's odd report must
// not fail the reply it took); nil for nil.
func (u *Usage) json() json.RawMessage {
	if u == nil {
		return nil
	}
	clamp := func(n, most int64) int64 { return max(0, min(n, most)) }
	in, out := clamp(u.InputTokens, maxTokens), clamp(u.OutputTokens, maxTokens)
	raw, _ := json.Marshal(map[string]int64{"inputTokens": in, "outputTokens": out,
		"cachedInputTokens": clamp(u.CachedInputTokens, in), "reasoningTokens": clamp(u.ReasoningTokens, out)})
	return raw
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
