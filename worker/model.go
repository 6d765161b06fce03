package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strings"
)

// Model is an LLM provider. Stream runs one round of the model on req and
// yields its output as Events, ending with a Finish. It must stop, and
// return, soon after ctx ends or yield returns false. An error yielded
// (with a nil Event) fails the prompt with the error's message; it must be
// the last thing Stream yields.
type Model interface {
	Stream(ctx context.Context, req Request) iter.Seq2[Event, error]
}

// ModelFunc adapts a function to Model.
type ModelFunc func(ctx context.Context, req Request) iter.Seq2[Event, error]

// Stream implements Model.
func (f ModelFunc) Stream(ctx context.Context, req Request) iter.Seq2[Event, error] {
	return f(ctx, req)
}

// Request is what a model is asked: the conversation so far and the tools
// it may call.
type Request struct {
	// Config is the prompt's model configuration, with the provider's
	// defaults filled in (Model is never empty for a provider that has a
	// default model).
	Config ModelConfig
	// Messages is the conversation: the system prompt (if any), the
	// earlier messages, the user's message, and, in later rounds, the
	// assistant's tool calls and their results.
	Messages []Message
	// Tools are the tools the model may call.
	Tools []ToolSpec
}

// Role says who speaks a Message.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool is a tool's result, answering the assistant's tool call
	// ToolCallID.
	RoleTool Role = "tool"
)

// Message is one message of a model's context.
type Message struct {
	Role Role
	Text string
	// Files are the files a user message holds, in order, after its
	// text (which may be empty: a message of files only).
	Files []File
	// ToolCalls are the calls an assistant message makes; each is answered
	// by a RoleTool message that follows.
	ToolCalls []ToolCall
	// ToolCallID and ToolName say which call a RoleTool message answers.
	ToolCallID string
	ToolName   string
}

// ToolCall is a call of a tool by the model, as its context remembers it.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the argument JSON the model produced.
	Arguments string
}

// ToolSpec describes a tool to a model.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON schema of the arguments object.
	Parameters json.RawMessage
}

// LastUserText returns the text of the last user message of req, or "".
func (req Request) LastUserText() string {
	for _, m := range slices.Backward(req.Messages) {
		if m.Role == RoleUser {
			return m.Text
		}
	}
	return ""
}

// ModelConfig is the model configuration a prompt was asked with: the
// proto3 JSON of convo.v1.ModelConfig (lowerCamelCase names; the original
// snake_case names are accepted too). Every field is optional.
type ModelConfig struct {
	// Provider names the registered Model, for example "demo" or "openai".
	// Empty: the default provider, or the provider named by Model when
	// there is one (so {"model": "demo"} asks for the demo model).
	Provider string `json:"provider,omitempty"`
	// Model names the provider's model, for example "gpt-4o-mini".
	Model string `json:"model,omitempty"`
	// Temperature is the sampling temperature, 0 to 2.
	Temperature *float64 `json:"temperature,omitempty"`
	// MaxTokens bounds the length of each round's output.
	MaxTokens *int32 `json:"maxTokens,omitempty"`
	// SystemPrompt is prepended to the conversation as a system message.
	SystemPrompt string `json:"systemPrompt,omitempty"`
	// ResponseFormat, when set, asks for structured output; it is passed to
	// OpenAI-compatible servers as response_format (for example
	// {"type": "json_object"}), and the answer becomes a "structured" block.
	ResponseFormat json.RawMessage `json:"responseFormat,omitempty"`
	// Tools are client tools the prompt's client declared (an OpenAI
	// Responses request's function tools): the runtime offers them to
	// the model beside its own, as tools without Run, so that a call of
	// one waits for the client's output (see declared.go).
	Tools []ToolDeclaration `json:"tools,omitempty"`
}

// ToolDeclaration is a client tool a prompt's model configuration
// declares: its name, description and the JSON schema of its arguments.
type ToolDeclaration struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ParseModelConfig parses a prompt's model configuration. An empty or
// null value is the empty configuration.
func ParseModelConfig(raw json.RawMessage) (ModelConfig, error) {
	var c ModelConfig
	if len(raw) == 0 || string(raw) == "null" {
		return c, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return c, fmt.Errorf("model configuration is not a JSON object: %w", err)
	}
	// proto3 JSON parsers accept the original field names as well as the
	// lowerCamelCase ones.
	for snake, camel := range map[string]string{
		"max_tokens": "maxTokens", "system_prompt": "systemPrompt", "response_format": "responseFormat",
	} {
		if v, ok := fields[snake]; ok {
			if _, dup := fields[camel]; !dup {
				fields[camel] = v
			}
		}
	}
	set := func(name string, dst any) error {
		v, ok := fields[name]
		if !ok || string(v) == "null" {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return fmt.Errorf("model configuration: %s: %w", name, err)
		}
		return nil
	}
	for name, dst := range map[string]any{
		"provider": &c.Provider, "model": &c.Model, "temperature": &c.Temperature,
		"maxTokens": &c.MaxTokens, "systemPrompt": &c.SystemPrompt,
	} {
		if err := set(name, dst); err != nil {
			return ModelConfig{}, err
		}
	}
	if v, ok := fields["responseFormat"]; ok && string(v) != "null" {
		c.ResponseFormat = v
	}
	if err := set("tools", &c.Tools); err != nil {
		return ModelConfig{}, err
	}
	if c.MaxTokens != nil && *c.MaxTokens <= 0 {
		return ModelConfig{}, fmt.Errorf("model configuration: maxTokens must be positive, got %d", *c.MaxTokens)
	}
	return c, nil
}

// Models is a registry of providers by name, with a default. The zero
// value is empty; use NewModels.
type Models struct {
	byName map[string]Model
	// defaultName is the provider of a configuration that names none.
	defaultName string
	// defaultModel is each provider's model for a configuration that
	// names none.
	defaultModel map[string]string
}

// NewModels returns an empty registry whose default provider is
// defaultProvider (it must be registered before the registry is used).
func NewModels(defaultProvider string) *Models {
	return &Models{byName: map[string]Model{}, defaultName: defaultProvider, defaultModel: map[string]string{}}
}

// Register adds (or replaces) the provider name. defaultModel is the model
// name a configuration gets when it names none; it may be empty.
func (ms *Models) Register(name string, m Model, defaultModel string) {
	ms.byName[name] = m
	ms.defaultModel[name] = defaultModel
}

// Default is the name of the default provider.
func (ms *Models) Default() string { return ms.defaultName }

// SetDefault makes the registered provider name the default. It fails for
// a provider that is not registered, naming the ones that are.
func (ms *Models) SetDefault(name string) error {
	if _, ok := ms.byName[name]; !ok {
		return fmt.Errorf("%q is not configured (have %v)", name, ms.Names())
	}
	ms.defaultName = name
	return nil
}

// Names lists the registered providers, sorted.
func (ms *Models) Names() []string {
	names := make([]string, 0, len(ms.byName))
	for n := range ms.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Resolve picks the provider for c and fills in its default model. It
// fails for a provider that is not registered.
func (ms *Models) Resolve(c ModelConfig) (Model, ModelConfig, error) {
	name := c.Provider
	if name == "" {
		if _, ok := ms.byName[c.Model]; ok {
			// {"model": "demo"}: the model names a provider.
			name, c.Model = c.Model, ""
		} else {
			name = ms.defaultName
		}
	}
	m, ok := ms.byName[name]
	if !ok {
		return nil, c, fmt.Errorf("unknown model provider %q (this worker runs %s)", name, strings.Join(ms.Names(), ", "))
	}
	c.Provider = name
	if c.Model == "" {
		c.Model = ms.defaultModel[name]
	}
	return m, c, nil
}
