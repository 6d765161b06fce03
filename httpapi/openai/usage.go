package openai

import (
	"encoding/json"

	"github.com/convo-dev/convo/conversation"
)

// usage is OpenAI's ResponseUsage: the tokens a reply took, as its worker
// reported them when it completed the prompt (convo.complete_prompt's
// usage, kept in the promptCompleted event).
type usage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// usageOf is the Response's usage that a promptCompleted event carries
// (its payload's "usage", as convo._usage_json wrote it), or nil when the
// event is another or its worker reported none. It depends on the event
// alone, so every replay shows the same usage, byte for byte.
func usageOf(e conversation.Event) *json.RawMessage {
	if e.Kind != conversation.EventPromptCompleted {
		return nil
	}
	var p struct {
		Usage *struct {
			InputTokens       int64 `json:"inputTokens"`
			OutputTokens      int64 `json:"outputTokens"`
			CachedInputTokens int64 `json:"cachedInputTokens"`
			ReasoningTokens   int64 `json:"reasoningTokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(e.Payload, &p) != nil || p.Usage == nil {
		return nil
	}
	u := usage{InputTokens: p.Usage.InputTokens, OutputTokens: p.Usage.OutputTokens,
		TotalTokens: p.Usage.InputTokens + p.Usage.OutputTokens}
	u.InputTokensDetails.CachedTokens = p.Usage.CachedInputTokens
	u.OutputTokensDetails.ReasoningTokens = p.Usage.ReasoningTokens
	raw, err := json.Marshal(u)
	if err != nil {
		return nil
	}
	msg := json.RawMessage(raw)
	return &msg
}
