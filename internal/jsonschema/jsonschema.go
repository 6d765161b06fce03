// Package jsonschema compiles and checks the JSON schemas of tools: a
// tool's parameters (package worker) and a client tool's output (the
// answers of pauses), on github.com/santhosh-tekuri/jsonschema/v6, with
// errors that name the JSON path of each bad value.
//
// Two guards keep a schema from costing more than it should:
//
//   - Declare checks a schema's budget before it is compiled for use
//     (budget.go): its size, depth, numbers, the size of its regular
//     expressions and its $ref expansion. A schema over one is refused
//     with a *LimitError naming the limit.
//   - Validate meters the work of each validation (meter.go): it stops
//     with ErrBudget past a bound on the subschemas it evaluates, and
//     with the context's error when its context is done.
//
// Values are checked with jsonlimit's rule (numbers within float64's
// range, nesting at most jsonlimit.MaxDepth) before the library sees
// them, so no number ever costs big-number arithmetic.
package jsonschema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/convo-dev/convo/internal/jsonlimit"
)

// Decode decodes JSON as Compile and Validate want it (numbers kept
// exact), after jsonlimit.Check: JSON the rule refuses (a number past
// float64's range, nesting past jsonlimit.MaxDepth) is an error in one
// linear pass, before any number is made exact.
func Decode(raw []byte) (any, error) {
	if err := jsonlimit.Check(raw); err != nil && !jsonlimit.IsSyntax(err) {
		return nil, err
	}
	// Bytes that are not JSON at all: the decoder says why, as before.
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}

// printer words the validator's messages.
var printer = message.NewPrinter(language.English)

// maxErrors bounds how many violations one error lists.
const maxErrors = 5

// Validate checks raw JSON against s. The error names the JSON path of
// each bad value (at most maxErrors, sorted), for example `$.unit: value
// must be one of 'c', 'f'`; JSON that does not decode, or that
// jsonlimit's rule refuses, is an error too ("not JSON: …"; a refusal of
// the rule wraps its *jsonlimit.Error, for errors.As). Validation
// is metered: past its budget (see Budget) the error is ErrBudget, and
// when ctx is done it is ctx's error (errors.Is works for both); either
// stops the validation within a bounded amount of work.
func Validate(ctx context.Context, s *Schema, raw []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := Decode(raw)
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	err = s.validate(ctx, v, Budget(len(raw)))
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
		k := e.ErrorKind
		if f, ok := k.(*kind.Format); ok {
			// The metered schema names its formats after its nodes:
			// the message says the format the schema asked for.
			k = &kind.Format{Got: f.Got, Want: s.formatName(f.Want), Err: f.Err}
		}
		msgs = append(msgs, jsonPath(v, e.InstanceLocation)+": "+k.LocalizedString(printer))
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
