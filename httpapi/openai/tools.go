package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/internal/jsonlimit"
	"github.com/convo-dev/convo/internal/jsonschema"
	"github.com/convo-dev/convo/wire"
)

// maxTools bounds a request's function tools (OpenAI's bound too).
const maxTools = 128

// toolNameRE is OpenAI's rule for a function's name, and the Go worker
// runtime's for a tool's.
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// functionTool is one entry of a request's tools, as OpenAI's
// FunctionTool has it.
type functionTool struct {
	Type        string          `json:"type"`
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// toolDecl is a client tool as the prompt's model configuration declares
// it to the worker (its "tools": the Go runtime's worker.ToolDeclaration,
// docs/worker-api.md).
type toolDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// shownTool is a function tool as a Response shows it.
type shownTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// parseTools checks a request's tools, all function tools: a name of 1 to
// 64 letters, digits, _ or -, unique; parameters, when given, a JSON
// schema of an object within the declaration budget the worker holds
// tools to (jsonschema.Declare); a description of text. It returns the
// declarations for the worker and the tools as the Response shows them.
// Errors are 400s naming the entry's field (tools[1].name).
func parseTools(raw []json.RawMessage) ([]toolDecl, []json.RawMessage, error) {
	if len(raw) > maxTools {
		return nil, nil, invalid("tools", "array_above_max_length", fmt.Sprintf("tools has %d entries; at most %d.", len(raw), maxTools))
	}
	var decls []toolDecl
	var shown []json.RawMessage
	seen := map[string]int{}
	for i, one := range raw {
		field := fmt.Sprintf("tools[%d]", i)
		var t functionTool
		if err := json.Unmarshal(one, &t); err != nil {
			return nil, nil, invalid(field, "invalid_type", field+" must be a tool object: "+err.Error())
		}
		if t.Type != "function" {
			return nil, nil, invalid(field+".type", "unsupported_value", fmt.Sprintf(
				"%s is a %q tool; convo takes function tools only (its own tools run on its workers).", field, clip(t.Type)))
		}
		if t.Name == nil {
			return nil, nil, invalid(field+".name", "missing_required_parameter", "Missing required parameter: '"+field+".name'.")
		}
		if !toolNameRE.MatchString(*t.Name) {
			return nil, nil, invalid(field+".name", "invalid_value", fmt.Sprintf(
				"Invalid '%s.name': '%s'. Expected a string of 1 to 64 letters, digits, underscores or dashes.", field, clip(*t.Name)))
		}
		if j, dup := seen[*t.Name]; dup {
			return nil, nil, invalid(field+".name", "duplicate_value", fmt.Sprintf(
				"Duplicate function name '%s': tools[%d] has it too.", *t.Name, j))
		}
		seen[*t.Name] = i
		d := toolDecl{Name: *t.Name}
		if t.Description != nil {
			if err := wire.CheckText(field+".description", *t.Description, false, wire.MaxMessageText); err != nil {
				return nil, nil, invalid(field+".description", "invalid_value", err.Error())
			}
			d.Description = *t.Description
		}
		params := bytes.TrimSpace(t.Parameters)
		if len(params) > 0 && string(params) != "null" {
			if err := checkParameters(field+".parameters", params); err != nil {
				return nil, nil, err
			}
			d.Parameters = params
		} else {
			params = json.RawMessage("null")
		}
		decls = append(decls, d)
		s, _ := json.Marshal(shownTool{Type: "function", Name: d.Name, Description: t.Description, Parameters: params, Strict: t.Strict})
		shown = append(shown, s)
	}
	return decls, shown, nil
}

// checkParameters holds a function's parameters to what the worker takes
// of a tool's: JSON within convo's limits, a schema of "type": "object",
// within the declaration budget (docs/api.md, "Schemas").
func checkParameters(field string, params []byte) error {
	if err := jsonlimit.Check(params); err != nil {
		return invalid(field, "invalid_value", fmt.Sprintf("%s: %v", field, err))
	}
	if _, err := jsonschema.Declare(field, params); err != nil {
		return invalid(field, "invalid_value", fmt.Sprintf("%s is not a JSON schema convo takes: %v", field, err))
	}
	var top struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(params, &top) != nil || top.Type != "object" {
		return invalid(field, "invalid_value", fmt.Sprintf(`%s must be a JSON schema of "type": "object" (the function's arguments).`, field))
	}
	return nil
}

// checkToolChoice refuses what convo does not honour: tool_choice other
// than "auto" (the worker's model decides whether to call), and
// parallel_tool_calls false (a model may call several tools in a round).
func checkToolChoice(choice json.RawMessage, parallel *bool) error {
	c := bytes.TrimSpace(choice)
	if len(c) > 0 && string(c) != "null" && string(c) != `"auto"` {
		return invalid("tool_choice", "unsupported_value",
			fmt.Sprintf(`tool_choice %s is not supported: convo's models choose for themselves ("auto").`, clip(string(c))))
	}
	if parallel != nil && !*parallel {
		return invalid("parallel_tool_calls", "unsupported_value",
			"parallel_tool_calls: false is not supported: a model may call several tools in one turn.")
	}
	return nil
}

// toolOutput is a function_call_output input item, the output of a
// function call of the previous response, or an mcp_approval_response,
// the answer to one of its approval requests.
type toolOutput struct {
	field    string // "input[2]"
	approval bool   // an mcp_approval_response
	callID   uuid.UUID
	output   string
	approve  bool
	reason   string
}

// isAnswer reports whether an input item's type answers a call.
func isAnswer(typ string) bool {
	return typ == "function_call_output" || typ == "mcp_approval_response"
}

// toolOutputs reads input's function_call_output items. ok is false when
// input holds none (a text input, read by inputText). When it holds one,
// every item must be one: the outputs answer the previous response's
// calls, and a message cannot join them (the reply goes on with the
// outputs; a message follows it). An output is a string, or input_text
// parts (joined).
func toolOutputs(raw json.RawMessage) (outs []toolOutput, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, false, nil
	}
	var items []struct {
		Type              string          `json:"type"`
		CallID            *string         `json:"call_id"`
		Output            json.RawMessage `json:"output"`
		ApprovalRequestID *string         `json:"approval_request_id"`
		Approve           *bool           `json:"approve"`
		Reason            *string         `json:"reason"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return nil, false, nil // inputText says what is wrong
	}
	first := -1
	for i, it := range items {
		if isAnswer(it.Type) {
			first = i
			break
		}
	}
	if first < 0 {
		return nil, false, nil
	}
	for i, it := range items {
		field := fmt.Sprintf("input[%d]", i)
		if !isAnswer(it.Type) {
			return nil, true, invalid(field, "unsupported_value", fmt.Sprintf(
				"%s is a %q item beside the answers to a response's calls (input[%d] is one); convo takes those answers alone: send a message in a request of its own once the reply ends.",
				field, clip(orDefault(it.Type, "message")), first))
		}
		if it.Type == "mcp_approval_response" {
			if it.ApprovalRequestID == nil {
				return nil, true, invalid(field+".approval_request_id", "missing_required_parameter", "Missing required parameter: '"+field+".approval_request_id'.")
			}
			rest, _ := strings.CutPrefix(*it.ApprovalRequestID, "mcpr_")
			id, err := uuid.Parse(rest)
			if err != nil || len(rest) != 36 {
				return nil, true, invalid(field+".approval_request_id", "invalid_value", noApprovalFound(*it.ApprovalRequestID))
			}
			if it.Approve == nil {
				return nil, true, invalid(field+".approve", "missing_required_parameter", "Missing required parameter: '"+field+".approve'.")
			}
			o := toolOutput{field: field, approval: true, callID: id, approve: *it.Approve}
			if it.Reason != nil {
				o.reason = *it.Reason
			}
			outs = append(outs, o)
			continue
		}
		if it.CallID == nil {
			return nil, true, invalid(field+".call_id", "missing_required_parameter", "Missing required parameter: '"+field+".call_id'.")
		}
		id, err := uuid.Parse(*it.CallID)
		if err != nil || len(*it.CallID) != 36 {
			return nil, true, invalid(field+".call_id", "invalid_value", noCallFound(*it.CallID))
		}
		out, err := outputText(field+".output", it.Output)
		if err != nil {
			return nil, true, err
		}
		outs = append(outs, toolOutput{field: field, callID: id, output: out})
	}
	return outs, true, nil
}

func noApprovalFound(id string) string {
	return fmt.Sprintf("No approval request found with id %s.", clip(id))
}

func noCallFound(callID string) string {
	return fmt.Sprintf("No tool call found for function call output with call_id %s.", clip(callID))
}

// outputText reads a function_call_output's output: a string, or
// input_text parts joined.
func outputText(field string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", invalid(field, "missing_required_parameter", "Missing required parameter: '"+field+"'.")
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", invalid(field, "invalid_value", err.Error())
		}
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalid(field, "invalid_type", field+" must be a string or an array of input_text parts.")
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "input_text" || p.Text == nil {
			return "", invalid(fmt.Sprintf("%s[%d]", field, j), "unsupported_value", fmt.Sprintf(
				"%s[%d] is not an input_text part; convo takes a function's output as text.", field, j))
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

func orDefault(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// errNoSegment is a segment of a prompt that has not begun (yet).
var errNoSegment = errors.New("no such response")
