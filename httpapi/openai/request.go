package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
	"github.com/convo-dev/convo/wire"
)

// MaxCreateBytes bounds the body of POST /v1/responses: room for inline
// files and images (base64), as the AI SDK route's body has.
const MaxCreateBytes = 8 << 20

// Metadata bounds, OpenAI's: at most 16 pairs, keys of at most 64
// characters, values of at most 512.
const (
	maxMetadataPairs = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// createRequest is the body of POST /v1/responses: the fields convo
// takes. Others of OpenAI's (include, reasoning, text, truncation, …) are
// ignored; those convo cannot honour yet (tools, store false) are
// refused.
type createRequest struct {
	Model              *string           `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Conversation       json.RawMessage   `json:"conversation"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Background         bool              `json:"background"`
	Stream             bool              `json:"stream"`
	Store              *bool             `json:"store"`
	Metadata           map[string]string `json:"metadata"`
	Temperature        *float64          `json:"temperature"`
	MaxOutputTokens    *int32            `json:"max_output_tokens"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`

	text string
	// attachments are the input's input_image and input_file parts, in
	// order: the files the user's message holds.
	attachments    []httpx.Attachment
	conversationID uuid.UUID // uuid.Nil: none named
	previous       uuid.UUID // the previous response's prompt, uuid.Nil: none
	// previousSegment is the previous response's segment of its prompt
	// (segments.go); outputs, when set, answer its calls (tools.go).
	previousSegment int
	outputs         []toolOutput
	config          json.RawMessage
}

// stored is what a prompt's model configuration keeps of the request
// that made it, under "openai" (the worker reads only the fields it
// knows), for the Response to show it again.
type stored struct {
	Background         bool              `json:"background,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	PreviousResponseID string            `json:"previousResponseId,omitempty"`
	Instructions       *string           `json:"instructions,omitempty"`
	// Tools are the request's function tools as the Response shows them.
	Tools []json.RawMessage `json:"tools,omitempty"`
}

// modelConfig is the prompt's model configuration: convo's fields
// (model, systemPrompt, temperature, maxTokens) and the request's under
// "openai".
type modelConfig struct {
	Model        string   `json:"model,omitempty"`
	SystemPrompt string   `json:"systemPrompt,omitempty"`
	Temperature  *float64 `json:"temperature,omitempty"`
	MaxTokens    *int32   `json:"maxTokens,omitempty"`
	OpenAI       *stored  `json:"openai,omitempty"`
	// Tools are the request's function tools, declared to the worker as
	// client tools (tools.go).
	Tools []toolDecl `json:"tools,omitempty"`
}

// decodeCreate reads and checks a create request; models, when not
// empty, are the model names it may name. Errors are OpenAI's 400s
// naming the parameter.
func decodeCreate(models []string) func(http.ResponseWriter, *http.Request) (*createRequest, error) {
	return func(w http.ResponseWriter, r *http.Request) (*createRequest, error) {
		var req createRequest
		if err := httpx.DecodeJSON(w, r, MaxCreateBytes, &req, "a Responses API request (a JSON object with model and input)"); err != nil {
			if _, ok := err.(*httpx.BodyTooLarge); ok {
				return nil, err
			}
			return nil, invalid("", "invalid_json", err.Error())
		}
		if req.Model == nil || *req.Model == "" {
			return nil, invalid("model", "missing_required_parameter", "Missing required parameter: 'model'.")
		}
		if len(models) > 0 && !slices.Contains(models, *req.Model) {
			return nil, invalid("model", "model_not_found", fmt.Sprintf("The requested model '%s' does not exist (this server's models: %s).",
				clip(*req.Model), strings.Join(models, ", ")))
		}
		if req.Store != nil && !*req.Store {
			return nil, invalid("store", "unsupported_value", "store: false is not supported: convo stores every response (it is a reply of a conversation).")
		}
		decls, shownTools, err := parseTools(req.Tools)
		if err != nil {
			return nil, err
		}
		if err := checkToolChoice(req.ToolChoice, req.ParallelToolCalls); err != nil {
			return nil, err
		}
		outputs, isOutputs, err := toolOutputs(req.Input)
		if err != nil {
			return nil, err
		}
		if isOutputs {
			req.outputs = outputs
		} else {
			text, atts, err := inputText(req.Input)
			if err != nil {
				return nil, err
			}
			req.text, req.attachments = text, atts
		}
		if req.Instructions != nil {
			if err := wire.CheckText("instructions", *req.Instructions, false, wire.MaxMessageText); err != nil {
				return nil, invalid("instructions", "invalid_value", err.Error())
			}
		}
		if err := checkMetadata(req.Metadata); err != nil {
			return nil, err
		}
		if req.PreviousResponseID != nil && *req.PreviousResponseID != "" {
			if len(bytes.TrimSpace(req.Conversation)) > 0 && string(bytes.TrimSpace(req.Conversation)) != "null" {
				return nil, invalid("previous_response_id", "mutually_exclusive",
					"previous_response_id and conversation cannot be used together: a response continues one or the other.")
			}
			id, seg, ok := parseResponseRef(*req.PreviousResponseID)
			if !ok {
				return nil, invalid("previous_response_id", "invalid_value",
					fmt.Sprintf("previous_response_id '%s' is not a response id (resp_ and a UUID).", clip(*req.PreviousResponseID)))
			}
			req.previous, req.previousSegment = id, seg
		}
		if req.outputs != nil && req.previous == uuid.Nil {
			return nil, invalid("previous_response_id", "missing_required_parameter",
				"function_call_output items answer the function calls of a response: name it in previous_response_id.")
		}
		if id, err := conversationParam(req.Conversation); err != nil {
			return nil, err
		} else {
			req.conversationID = id
		}
		if req.MaxOutputTokens != nil && *req.MaxOutputTokens <= 0 {
			return nil, invalid("max_output_tokens", "invalid_value", "max_output_tokens must be positive.")
		}
		if t := req.Temperature; t != nil && (*t < 0 || *t > 2) {
			return nil, invalid("temperature", "invalid_value", "temperature must be between 0 and 2.")
		}
		cfg := modelConfig{Model: *req.Model, Temperature: req.Temperature, MaxTokens: req.MaxOutputTokens,
			OpenAI: &stored{Background: req.Background, Metadata: req.Metadata, Instructions: req.Instructions, Tools: shownTools},
			Tools:  decls}
		if req.Instructions != nil {
			cfg.SystemPrompt = *req.Instructions
		}
		if req.previous != uuid.Nil {
			cfg.OpenAI.PreviousResponseID = segmentID(req.previous, req.previousSegment)
		}
		req.config, _ = json.Marshal(cfg)
		return &req, nil
	}
}

// inputText reads input: a string, or input items, each a user message
// (type "message" or none, role "user") whose content is a string or
// input_text, input_image and input_file parts. The messages' texts are
// joined by a blank line: one convo message, which holds the files of
// the image and file parts (inputFile), in order. The text may be empty
// when there are files.
func inputText(raw json.RawMessage) (string, []httpx.Attachment, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, invalid("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	}
	var text string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", nil, invalid("input", "invalid_value", "input is not a string: "+err.Error())
		}
		return text, nil, checkInput("input", text)
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return "", nil, invalid("input", "invalid_type", "input must be a string or an array of input items: "+err.Error())
	}
	if len(items) == 0 {
		return "", nil, invalid("input", "empty_array", "input has no items: it needs a user message.")
	}
	var texts []string
	var atts []httpx.Attachment
	for i, it := range items {
		field := fmt.Sprintf("input[%d]", i)
		if it.Type != "" && it.Type != "message" {
			return "", nil, invalid(field+".type", "unsupported_value", fmt.Sprintf("%s is a %q item; convo takes user messages only for now.", field, clip(it.Type)))
		}
		if it.Role != "user" {
			return "", nil, invalid(field+".role", "unsupported_value", fmt.Sprintf("%s has role %q; convo takes user messages only (instructions go in instructions).", field, clip(it.Role)))
		}
		t, files, err := messageContent(field, conversation.RoleUser, it.Content)
		if err != nil {
			return "", nil, err
		}
		if t != "" || len(files) == 0 { // a message of files only adds no blank text
			texts = append(texts, t)
		}
		atts = append(atts, files...)
	}
	text = strings.Join(texts, "\n\n")
	if len(atts) > 0 {
		if err := wire.CheckText("input", text, false, wire.MaxMessageText); err != nil {
			return "", nil, invalid("input", "invalid_value", err.Error())
		}
		return text, atts, nil
	}
	return text, nil, checkInput("input", text)
}

// checkInput checks the message text as convo checks every message's.
func checkInput(field, text string) error {
	if err := wire.CheckMessageText(field, text); err != nil {
		return invalid(field, "invalid_value", err.Error())
	}
	return nil
}

func checkMetadata(m map[string]string) error {
	if len(m) > maxMetadataPairs {
		return invalid("metadata", "invalid_value", fmt.Sprintf("metadata has %d pairs; at most %d.", len(m), maxMetadataPairs))
	}
	for k, v := range m {
		if utf8.RuneCountInString(k) > maxMetadataKey {
			return invalid("metadata", "invalid_value", fmt.Sprintf("metadata key '%s' is longer than %d characters.", clip(k), maxMetadataKey))
		}
		if utf8.RuneCountInString(v) > maxMetadataValue {
			return invalid("metadata", "invalid_value", fmt.Sprintf("metadata['%s'] is longer than %d characters.", clip(k), maxMetadataValue))
		}
	}
	return nil
}

// conversationParam reads conversation: a convo conversation id, as a
// string or {"id": …}; absent, uuid.Nil.
func conversationParam(raw json.RawMessage) (uuid.UUID, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return uuid.Nil, nil
	}
	var id string
	if raw[0] == '{' {
		var obj struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return uuid.Nil, invalid("conversation", "invalid_value", "conversation must be a conversation id or {\"id\": …}.")
		}
		id = obj.ID
	} else if err := json.Unmarshal(raw, &id); err != nil {
		return uuid.Nil, invalid("conversation", "invalid_value", "conversation must be a conversation id or {\"id\": …}.")
	}
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return uuid.Nil, invalid("conversation", "invalid_value", fmt.Sprintf("conversation '%s' is not a convo conversation id (a UUID).", clip(id)))
	}
	return u, nil
}

// responsePrefix starts every response id: "resp_" and the prompt's id.
const responsePrefix = "resp_"

func responseID(prompt uuid.UUID) string { return responsePrefix + prompt.String() }

// parseResponseID reads a response id.
func parseResponseID(s string) (uuid.UUID, bool) {
	rest, ok := strings.CutPrefix(s, responsePrefix)
	if !ok || len(rest) != 36 {
		return uuid.Nil, false
	}
	id, err := uuid.Parse(rest)
	return id, err == nil
}
