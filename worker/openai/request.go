package openai

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/convo-dev/convo/worker"
)

// chatRequest is the body of POST /chat/completions: the fields convo
// sends, in the wire format every OpenAI-compatible server reads.
type chatRequest struct {
	Model          string        `json:"model"`
	Messages       []chatMessage `json:"messages"`
	Tools          []chatTool    `json:"tools,omitempty"`
	Temperature    *float64      `json:"temperature,omitempty"`
	MaxTokens      *int64        `json:"max_tokens,omitempty"`
	ResponseFormat any           `json:"response_format,omitempty"`
	Stream         bool          `json:"stream"`
	// StreamOptions asks for the usage chunk at the end of the stream.
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, or a user message's array of contentParts
	// (one that holds files); it is left out of an assistant message that
	// only calls tools.
	Content    any            `json:"content,omitempty"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string           `json:"type"` // "function"
	Function chatToolFunction `json:"function"`
}

type chatToolFunction struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters"`
}

// request is the chat.completions request for req, streamed. max_tokens
// is sent, not max_completion_tokens: every compatible server knows it.
// A user message's files are read here (userContent). It fails for a
// tool's parameters that are not a JSON object, a response format that is
// not JSON, and a file that cannot be read (a *fileError).
func (m *model) request(ctx context.Context, req worker.Request) (chatRequest, error) {
	p := chatRequest{Model: req.Config.Model, Messages: []chatMessage{}, Stream: true,
		StreamOptions: &streamOptions{IncludeUsage: true}}
	if p.Model == "" {
		p.Model = m.opts.Model
	}
	text := func(s string) *string { return &s }
	for _, msg := range req.Messages {
		switch msg.Role {
		case worker.RoleSystem:
			p.Messages = append(p.Messages, chatMessage{Role: "system", Content: text(msg.Text)})
		case worker.RoleUser:
			content, err := m.userContent(ctx, msg)
			if err != nil {
				return p, err
			}
			p.Messages = append(p.Messages, chatMessage{Role: "user", Content: content})
		case worker.RoleAssistant:
			if msg.Text == "" && len(msg.ToolCalls) == 0 {
				continue
			}
			a := chatMessage{Role: "assistant"}
			if msg.Text != "" {
				a.Content = text(msg.Text)
			}
			for _, tc := range msg.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, chatToolCall{ID: tc.ID, Type: "function",
					Function: chatFunction{Name: tc.Name, Arguments: tc.Arguments}})
			}
			p.Messages = append(p.Messages, a)
		case worker.RoleTool:
			p.Messages = append(p.Messages, chatMessage{Role: "tool", Content: text(msg.Text), ToolCallID: msg.ToolCallID})
		}
	}
	for _, t := range req.Tools {
		var schema map[string]any
		if err := json.Unmarshal(t.Parameters, &schema); err != nil {
			return p, fmt.Errorf("tool %s: parameters: %w", t.Name, err)
		}
		p.Tools = append(p.Tools, chatTool{Type: "function",
			Function: chatToolFunction{Name: t.Name, Description: t.Description, Parameters: schema}})
	}
	p.Temperature = req.Config.Temperature
	if req.Config.MaxTokens != nil {
		n := int64(*req.Config.MaxTokens)
		p.MaxTokens = &n
	}
	if len(req.Config.ResponseFormat) > 0 {
		var rf any
		if err := json.Unmarshal(req.Config.ResponseFormat, &rf); err != nil {
			return p, fmt.Errorf("responseFormat: %w", err)
		}
		p.ResponseFormat = rf
	}
	return p, nil
}
