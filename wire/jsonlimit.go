package wire

import (
	"errors"

	"github.com/convo-dev/convo/internal/jsonlimit"
)

// CheckJSONBody applies convo's rule for accepted JSON (jsonlimit: every
// number within a 64-bit float's range and at most 1,000 characters long,
// nesting at most 64 deep, no \u0000 and no lone surrogate) to a request's
// whole JSON document, a Connect or HTTP body, before anything decodes it.
// A refusal is Invalid naming the body and the value's JSONPath
// ("body: $.messages[2].parts[0].output[3]: number 1e400 is outside the
// range of a 64-bit float …"). Bytes that are not JSON at all pass: the
// decoder that follows says what is wrong with them, as it always has.
//
// The check is one pass over the bytes that stops at the first refused
// value, so it costs little beside the decoding it precedes (some
// milliseconds a megabyte), and nothing expensive (a schema, a database
// round trip) ever sees a number it would have to turn into a big one.
func CheckJSONBody(raw []byte) error {
	return checkJSON("body", raw)
}

// CheckJSONText applies the same rule to a string field that may carry
// JSON (a client tool's output): text that is JSON must follow it, as
// anything that reads it as JSON later (an output schema, the worker that
// hands it to a model) would otherwise choke on it; text that is not JSON
// passes. A refusal is Invalid naming field and the value's JSONPath in
// the text ("answer.clientTool.output: $[3]: number 1e999999 is outside
// the range of a 64-bit float …").
func CheckJSONText(field, text string) error {
	return checkJSON(field, []byte(text))
}

func checkJSON(field string, raw []byte) error {
	var refused *jsonlimit.Error
	if err := jsonlimit.Check(raw); errors.As(err, &refused) {
		return Invalid(field, "%s: %s", refused.Path, refused.Reason)
	}
	return nil
}
