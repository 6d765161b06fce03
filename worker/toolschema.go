package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// compileSchema compiles a tool's parameters, a JSON schema of draft
// 2020-12 (or of the draft its $schema names). References may point inside
// the schema ($defs, anchors) but never outside it: no file or network is
// read. The error says what is wrong with the schema and where.
func compileSchema(tool string, raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("tool %s: parameters are not a JSON schema object: %w", tool, err)
	}
	if typ, _ := doc.(map[string]any)["type"].(string); typ != "object" {
		return nil, fmt.Errorf(`tool %s: parameters must be a schema of "type": "object"`, tool)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no loader for any scheme: nothing outside the schema
	loc := "urn:convo:tool:" + tool
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("tool %s: invalid parameters schema: %w", tool, err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("tool %s: invalid parameters schema: %w", tool, err)
	}
	return s, nil
}

// schemaPrinter words the validator's messages.
var schemaPrinter = message.NewPrinter(language.English)

// maxSchemaErrors bounds how many violations one error lists.
const maxSchemaErrors = 5

// validateArgs checks a call's arguments against the tool's compiled
// schema. The error names the JSON path of each bad value (at most
// maxSchemaErrors, sorted), for example `$.unit: value must be one of
// 'c', 'f'`.
func validateArgs(s *jsonschema.Schema, args json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	err = s.Validate(v)
	var ve *jsonschema.ValidationError
	if err == nil || !errors.As(err, &ve) {
		return err
	}
	var msgs []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		msgs = append(msgs, jsonPath(v, e.InstanceLocation)+": "+e.ErrorKind.LocalizedString(schemaPrinter))
	}
	walk(ve)
	// The validator visits an object's properties in map order: sorted,
	// the same arguments always get the same error. Two branches of a
	// schema can report one violation twice: it is listed once.
	slices.Sort(msgs)
	msgs = slices.Compact(msgs)
	if len(msgs) > maxSchemaErrors {
		msgs = append(msgs[:maxSchemaErrors], fmt.Sprintf("and %d more", len(msgs)-maxSchemaErrors))
	}
	return errors.New(strings.Join(msgs, "; "))
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// jsonPath writes an instance location as a JSONPath: $, $.unit,
// $.tags[0], $["odd key"]. The value tells an array index from an object
// key that looks like one.
func jsonPath(v any, loc []string) string {
	var b strings.Builder
	b.WriteString("$")
	for _, tok := range loc {
		switch cur := v.(type) {
		case []any:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(cur) {
				fmt.Fprintf(&b, "[%d]", i)
				v = cur[i]
				continue
			}
		case map[string]any:
			v = cur[tok]
		default:
			v = nil
		}
		if identRE.MatchString(tok) {
			b.WriteString("." + tok)
		} else {
			q, _ := json.Marshal(tok)
			fmt.Fprintf(&b, "[%s]", q)
		}
	}
	return b.String()
}
