package worker

import (
	"encoding/json"
	"fmt"

	"github.com/convo-dev/convo/internal/jsonschema"
)

// compileSchema compiles a tool's parameters, a JSON schema of draft
// 2020-12 (or of the draft its $schema names) of "type": "object".
// References may point inside the schema ($defs, anchors) but never
// outside it: no file or network is read. The error says what is wrong
// with the schema and where.
func compileSchema(tool string, raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("tool %s: parameters are not a JSON schema object: %w", tool, err)
	}
	if typ, _ := doc.(map[string]any)["type"].(string); typ != "object" {
		return nil, fmt.Errorf(`tool %s: parameters must be a schema of "type": "object"`, tool)
	}
	s, err := jsonschema.Compile("tool:"+tool, doc)
	if err != nil {
		return nil, fmt.Errorf("tool %s: invalid parameters schema: %w", tool, err)
	}
	return s, nil
}

// validateArgs checks a call's arguments against the tool's compiled
// schema (jsonschema.Validate: the error names the JSON path of each bad
// value).
func validateArgs(s *jsonschema.Schema, args json.RawMessage) error {
	return jsonschema.Validate(s, args)
}
