package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Tool is a Go function a model can call.
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
	Run func(ctx context.Context, args json.RawMessage, progress io.Writer) (string, error)
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
// a duplicate name, a missing Run, or parameters that are not a valid JSON
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
	if t.Run == nil {
		return fmt.Errorf("tool %s has no Run function", t.Name)
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
