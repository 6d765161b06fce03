package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"time"

	"github.com/convo-dev/convo/internal/jsonschema"
)

// Tool is a function a model can call: a Go function (Run), or a client
// tool that the client runs (no Run).
type Tool struct {
	// Name is what the model calls it: letters, digits, _ and -, at most
	// 64 characters.
	Name string
	// Description tells the model what the tool does and when to use it.
	Description string
	// Parameters is the JSON schema (draft 2020-12 unless its $schema
	// names another) of the arguments object. The runtime validates the
	// arguments against it before Run, with every keyword of the draft;
	// $ref may point into the schema ($defs) but not outside it.
	Parameters json.RawMessage
	// Run performs the call. Text written to progress is streamed as the
	// tool call's output while it runs; the returned string is its result,
	// written as a tool_result block and given to the model. An error
	// fails the tool call, and the model is told the error. Run must
	// return soon after ctx ends.
	//
	// A tool without Run is a client tool: the client (a browser tab) runs
	// it. The runtime asks for its output (an input request of kind
	// client_tool) and the prompt waits for it, holding nothing (see
	// docs/workers.md, "Pauses").
	Run func(ctx context.Context, args json.RawMessage, progress io.Writer) (string, error)
	// OutputSchema, for a client tool, is the JSON schema of its output,
	// handed to the client with the request. Optional.
	OutputSchema json.RawMessage
	// NeedsApproval makes every call of the tool wait for the user's
	// approval before Run; NeedsApprovalFor, when set, decides per call
	// from the (valid) arguments instead. A denied call fails with the
	// user's reason, which the model reads as the tool's result.
	NeedsApproval    bool
	NeedsApprovalFor func(args json.RawMessage) bool
	// InputExpiry, when positive, is how long a call's request for input
	// (its approval, a client tool's output, ask_user's answer) waits
	// before it expires, which the model reads as a denial; 0:
	// Config.InputExpiry.
	InputExpiry time.Duration

	// askUser marks the built-in ask_user tool.
	askUser bool
}

// The kinds of input request (convo.request_input).
const (
	inputApproval   = "approval"
	inputClientTool = "client_tool"
	inputQuestion   = "question"
)

// AskUserName is the name of the tool AskUser returns.
const AskUserName = "ask_user"

// AskUser returns the built-in ask_user tool: the model asks the user a
// question ({"question": "…", "choices": ["…", …]}, choices optional),
// the prompt waits for the answer, holding nothing, and the answer is the
// tool's output. Add it to a registry to let models ask.
func AskUser() Tool {
	return Tool{
		Name:        AskUserName,
		Description: "Asks the user a question and waits for the answer. Use it when you need the user to decide or to tell you something only they know. Give choices when the answer is one of a few options.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"question":{"type":"string","minLength":1,"pattern":"\\S","description":"the question, as the user will read it"},` +
			`"choices":{"type":"array","items":{"type":"string","minLength":1,"pattern":"\\S"},"minItems":1,"uniqueItems":true,"description":"the answers the user may pick from (optional)"}},` +
			`"required":["question"],"additionalProperties":false}`),
		askUser: true,
	}
}

// pause says whether a call of t with args (valid against its schema)
// waits for a person, and what it asks: the kind and the request of its
// input request. An empty kind: the call runs at once.
func (t registeredTool) pause(args json.RawMessage) (kind string, request json.RawMessage) {
	switch {
	case t.askUser:
		// The arguments are the request: {question, choices?}.
		return inputQuestion, args
	case t.Run == nil:
		if len(t.OutputSchema) > 0 {
			b, _ := json.Marshal(map[string]json.RawMessage{"outputSchema": t.OutputSchema})
			return inputClientTool, b
		}
		return inputClientTool, json.RawMessage(`{}`)
	case t.NeedsApprovalFor != nil:
		if t.NeedsApprovalFor(args) {
			return inputApproval, json.RawMessage(`{}`)
		}
	case t.NeedsApproval:
		return inputApproval, json.RawMessage(`{}`)
	}
	return "", nil
}

// NewTool returns a Tool whose arguments are decoded into In (unknown
// fields are an error) before fn runs.
func NewTool[In any](name, description string, parameters json.RawMessage,
	fn func(ctx context.Context, in In, progress io.Writer) (string, error)) Tool {
	return Tool{
		Name: name, Description: description, Parameters: parameters,
		Run: func(ctx context.Context, args json.RawMessage, progress io.Writer) (string, error) {
			var in In
			dec := json.NewDecoder(bytes.NewReader(args))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return "", fmt.Errorf("decode arguments: %w", err)
			}
			return fn(ctx, in, progress)
		},
	}
}

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Tools is a registry of tools by name. The zero value is an empty
// registry.
type Tools struct {
	byName map[string]registeredTool
}

// registeredTool is a tool with its compiled parameters schema.
type registeredTool struct {
	Tool
	schema *jsonschema.Schema
}

// NewTools returns a registry holding tools. It fails for an invalid name,
// a duplicate name, a client tool (no Run) that needs approval, an
// OutputSchema on a tool with Run, one that is not a JSON object or one
// over the declaration budget (jsonschema.Declare: the error names the
// limit), or
// parameters that are not a valid JSON
// schema of an object (the error says what is wrong and where).
func NewTools(tools ...Tool) (*Tools, error) {
	ts := &Tools{byName: map[string]registeredTool{}}
	for _, t := range tools {
		if err := ts.Add(t); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// Add registers t; see NewTools for the errors.
func (ts *Tools) Add(t Tool) error {
	if !toolNameRE.MatchString(t.Name) {
		return fmt.Errorf("tool name %q: want 1 to 64 letters, digits, _ or -", t.Name)
	}
	if t.Run == nil && (t.NeedsApproval || t.NeedsApprovalFor != nil) {
		return fmt.Errorf("tool %s needs approval but has no Run function: a client tool (no Run) is approved by its client", t.Name)
	}
	if len(t.OutputSchema) > 0 {
		if t.Run != nil {
			return fmt.Errorf("tool %s has an OutputSchema but a Run function: only a client tool (no Run) has one", t.Name)
		}
		var v map[string]any
		if err := json.Unmarshal(t.OutputSchema, &v); err != nil {
			return fmt.Errorf("tool %s: OutputSchema is not a JSON object: %w", t.Name, err)
		}
		// Within the declaration budget, as request_input and the
		// server's answer path hold it (a schema over it would be
		// refused by the one and not applied by the other).
		var over *jsonschema.LimitError
		if _, err := jsonschema.Declare("output:"+t.Name, t.OutputSchema); errors.As(err, &over) {
			return fmt.Errorf("tool %s: invalid OutputSchema: %w", t.Name, err)
		}
	}
	if len(t.Parameters) == 0 {
		t.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	schema, err := compileSchema(t.Name, t.Parameters)
	if err != nil {
		return err
	}
	if ts.byName == nil {
		ts.byName = map[string]registeredTool{}
	}
	if _, dup := ts.byName[t.Name]; dup {
		return fmt.Errorf("tool %s is registered twice", t.Name)
	}
	ts.byName[t.Name] = registeredTool{Tool: t, schema: schema}
	return nil
}

// Lookup returns the tool called name.
func (ts *Tools) Lookup(name string) (Tool, bool) {
	t, ok := ts.lookup(name)
	return t.Tool, ok
}

func (ts *Tools) lookup(name string) (registeredTool, bool) {
	if ts == nil {
		return registeredTool{}, false
	}
	t, ok := ts.byName[name]
	return t, ok
}

// Specs describes every tool to a model, sorted by name.
func (ts *Tools) Specs() []ToolSpec {
	if ts == nil {
		return nil
	}
	specs := make([]ToolSpec, 0, len(ts.byName))
	for _, t := range ts.byName {
		specs = append(specs, ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return specs
}
