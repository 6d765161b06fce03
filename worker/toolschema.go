package worker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/convo-dev/convo/internal/jsonschema"
)

// compileSchema compiles a tool's parameters, a JSON schema of draft
// 2020-12 (or of the draft its $schema names) of "type": "object", within
// the declaration budget (jsonschema.Declare: size, depth, numbers,
// regular expressions, $ref expansion; the error names the limit).
// References may point inside the schema ($defs, anchors) but never
// outside it: no file or network is read. The error says what is wrong
// with the schema and where.
func compileSchema(tool string, raw json.RawMessage) (*jsonschema.Schema, error) {
	if !json.Valid(raw) {
		return nil, fmt.Errorf("tool %s: parameters are not a JSON schema object", tool)
	}
	s, err := jsonschema.Declare("tool:"+tool, raw)
	if err != nil {
		return nil, fmt.Errorf("tool %s: invalid parameters schema: %w", tool, err)
	}
	var top struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(raw, &top) != nil || top.Type != "object" {
		return nil, fmt.Errorf(`tool %s: parameters must be a schema of "type": "object"`, tool)
	}
	return s, nil
}

// validateArgs checks a call's arguments against the tool's compiled
// schema (jsonschema.Validate: the error names the JSON path of each bad
// value; the validation stops past its budget or when ctx is done).
func validateArgs(ctx context.Context, s *jsonschema.Schema, args json.RawMessage) error {
	return jsonschema.Validate(ctx, s, args)
}
