package openai

import (
	"encoding/json"

	"github.com/convo-dev/convo/worker"
)

// chatChunk is one streamed chunk of a chat completion: the fields convo
// reads.
type chatChunk struct {
	// ID and Model name the completion and the model that answers.
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int64      `json:"index"`
		Delta        chunkDelta `json:"delta"`
		FinishReason string     `json:"finish_reason"`
	} `json:"choices"`
	// Usage comes in a chunk of its own after the finish (asked for with
	// stream_options.include_usage), or with the finish on some servers.
	Usage *chatUsage `json:"usage"`
}

// chatUsage is a completion's token usage.
type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// usage is u as the runtime takes it.
func (u *chatUsage) usage() *worker.Usage {
	out := &worker.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil {
		out.CachedInputTokens = d.CachedTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	return out
}

type chunkDelta struct {
	Content string `json:"content"`
	Refusal string `json:"refusal"`
	// ReasoningContent (DeepSeek, vLLM, llama.cpp) and Reasoning
	// (Ollama, OpenRouter) carry reasoning text; kept raw, since a server
	// may send something else than a string there.
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
	ToolCalls        []struct {
		Index    int64        `json:"index"`
		ID       string       `json:"id"`
		Function chatFunction `json:"function"`
	} `json:"tool_calls"`
}

// textKind is the kind of text item a delta adds to.
type textKind int

const (
	textNone textKind = iota
	textMessage
	textReasoning
	textStructured
)

// mapper turns chunks into Events. Content and reasoning each form an item
// that lasts until the other kind (or a tool call) starts; every tool call
// (by its index in the stream) is an item of its own.
type mapper struct {
	structured bool
	next       int
	textIndex  int
	textKind   textKind
	tools      map[int64]int
	open       []int
	finished   bool
}

func (mp *mapper) alloc() int {
	i := mp.next
	mp.next++
	mp.open = append(mp.open, i)
	return i
}

func (mp *mapper) closeText() []worker.Event {
	if mp.textKind == textNone {
		return nil
	}
	mp.textKind = textNone
	return mp.flush(mp.textIndex)
}

func (mp *mapper) flush(index int) []worker.Event {
	for i, o := range mp.open {
		if o == index {
			mp.open = append(mp.open[:i], mp.open[i+1:]...)
			return []worker.Event{worker.Flush{Index: index}}
		}
	}
	return nil
}

func (mp *mapper) text(kind textKind, s string) []worker.Event {
	if s == "" {
		return nil
	}
	var events []worker.Event
	if mp.textKind != kind {
		events = mp.closeText()
		mp.textKind, mp.textIndex = kind, mp.alloc()
	}
	var c worker.Chunk
	switch kind {
	case textReasoning:
		c = worker.ReasoningChunk(s)
	case textStructured:
		c = worker.StructuredChunk(s)
	default:
		c = worker.MessageChunk(s)
	}
	return append(events, worker.Part{Index: mp.textIndex, Chunk: c})
}

// reasoning is the reasoning text of a delta: reasoning_content or
// reasoning, when a string.
func reasoning(d chunkDelta) []string {
	var out []string
	for _, raw := range []json.RawMessage{d.ReasoningContent, d.Reasoning} {
		var s string
		if len(raw) > 0 && json.Unmarshal(raw, &s) == nil && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// chunk maps one chunk; done is true once the answer finished.
func (mp *mapper) chunk(c chatChunk) (events []worker.Event, done bool) {
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // only the first choice is asked for
		}
		d := ch.Delta
		for _, r := range reasoning(d) {
			events = append(events, mp.text(textReasoning, r)...)
		}
		kind := textMessage
		if mp.structured {
			kind = textStructured
		}
		events = append(events, mp.text(kind, d.Content)...)
		events = append(events, mp.text(textMessage, d.Refusal)...)
		for _, tc := range d.ToolCalls {
			idx, ok := mp.tools[tc.Index]
			if !ok {
				// A tool call ends the text before it.
				events = append(events, mp.closeText()...)
				idx = mp.alloc()
				mp.tools[tc.Index] = idx
			}
			if tc.ID != "" || tc.Function.Name != "" {
				events = append(events, worker.Part{Index: idx, Chunk: worker.ToolCallStart{ID: tc.ID, Name: tc.Function.Name}})
			}
			if tc.Function.Arguments != "" {
				events = append(events, worker.Part{Index: idx, Chunk: worker.ToolCallArgs(tc.Function.Arguments)})
			}
		}
		if ch.FinishReason != "" {
			return append(events, mp.finish(ch.FinishReason)...), true
		}
	}
	return events, false
}

// finish flushes every open item and finishes.
func (mp *mapper) finish(reason string) []worker.Event {
	if mp.finished {
		return nil
	}
	mp.finished = true
	var events []worker.Event
	for _, i := range mp.open {
		events = append(events, worker.Flush{Index: i})
	}
	mp.open = nil
	switch reason {
	case "length":
		return append(events, worker.Finish{Reason: worker.FinishLength})
	case "tool_calls", "function_call":
		return append(events, worker.Finish{Reason: worker.FinishToolCalls})
	case "content_filter":
		return append(events, worker.Finish{Reason: worker.FinishError, Error: "the provider's content filter stopped the answer"})
	}
	return append(events, worker.Finish{Reason: worker.FinishStop})
}
