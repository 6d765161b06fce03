// Package jsonschema compiles and checks the JSON schemas of tools: a
// tool's parameters (package worker) and a client tool's output (the
// answers of pauses), on github.com/santhosh-tekuri/jsonschema/v6, with
// errors that name the JSON path of each bad value.
package jsonschema

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

// Schema is a compiled schema.
type Schema = jsonschema.Schema

// Compile compiles doc, a decoded JSON schema of draft 2020-12 (or of the
// draft its $schema names), known as name in errors. References may point
// inside the schema ($defs, anchors) but never outside it: no file or
// network is read.
func Compile(name string, doc any) (*Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no loader for any scheme: nothing outside the schema
	loc := "urn:convo:schema:" + name
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// Decode decodes JSON as Compile and Validate want it (numbers kept
// exact).
func Decode(raw []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}

// printer words the validator's messages.
var printer = message.NewPrinter(language.English)

// maxErrors bounds how many violations one error lists.
const maxErrors = 5

// Validate checks raw JSON against s. The error names the JSON path of
// each bad value (at most maxErrors, sorted), for example `$.unit: value
// must be one of 'c', 'f'`; JSON that does not decode is an error too.
func Validate(s *Schema, raw []byte) error {
	v, err := Decode(raw)
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
		msgs = append(msgs, jsonPath(v, e.InstanceLocation)+": "+e.ErrorKind.LocalizedString(printer))
	}
	walk(ve)
	// The validator visits an object's properties in map order: sorted,
	// the same value always gets the same error. Two branches of a
	// schema can report one violation twice: it is listed once.
	slices.Sort(msgs)
	msgs = slices.Compact(msgs)
	if len(msgs) > maxErrors {
		msgs = append(msgs[:maxErrors], fmt.Sprintf("and %d more", len(msgs)-maxErrors))
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
