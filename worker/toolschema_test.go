package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
)

// TestValidateArgs checks tool arguments against draft 2020-12 schemas:
// every error names the JSON path of the bad value.
func TestValidateArgs(t *testing.T) {
	t.Parallel()
	compile := func(t *testing.T, schema string) func(doc string) error {
		t.Helper()
		s, err := compileSchema("t", json.RawMessage(schema))
		if err != nil {
			t.Fatal(err)
		}
		return func(doc string) error { return validateArgs(context.Background(), s, json.RawMessage(doc)) }
	}
	check := func(t *testing.T, validate func(string) error, valid []string, invalid map[string]string) {
		t.Helper()
		for _, doc := range valid {
			if err := validate(doc); err != nil {
				t.Errorf("%s: %v, want valid", doc, err)
			}
		}
		for doc, want := range invalid {
			if err := validate(doc); err == nil || err.Error() != want {
				t.Errorf("%s: %v\nwant %q", doc, err, want)
			}
		}
	}

	t.Run("CoreKeywords", func(t *testing.T) {
		t.Parallel()
		validate := compile(t, `{"type":"object","properties":{
			"unit":{"type":"string","enum":["c","f"]},
			"days":{"type":"integer","minimum":1,"maximum":14},
			"tags":{"type":"array","items":{"type":"string","maxLength":3}},
			"odd key":{"type":"boolean"}},
			"required":["unit"],"additionalProperties":false}`)
		check(t, validate, []string{`{"unit":"c","days":3,"tags":["a"]}`, `{"unit":"f","days":2.0,"odd key":true}`}, map[string]string{
			`[]`:                               "$: got array, want object",
			`{}`:                               "$: missing property 'unit'",
			`{"unit":"k"}`:                     "$.unit: value must be one of 'c', 'f'",
			`{"unit":"c","days":1.5}`:          "$.days: got number, want integer",
			`{"unit":"c","days":20}`:           "$.days: maximum: got 20, want 14",
			`{"unit":"c","tags":[1]}`:          "$.tags[0]: got number, want string",
			`{"unit":"c","tags":["ab4x"]}`:     "$.tags[0]: maxLength: got 4, want 3",
			`{"unit":"c","extra":true}`:        "$: additional properties 'extra' not allowed",
			`{"unit":"c","odd key":1}`:         `$["odd key"]: got number, want boolean`,
			`{"unit":"c","days":0,"tags":[7]}`: "$.days: minimum: got 0, want 1; $.tags[0]: got number, want string",
			`{"unit":`:                         "not JSON: unexpected EOF",
		})
	})

	t.Run("OneOf", func(t *testing.T) {
		t.Parallel()
		validate := compile(t, `{"type":"object","properties":{"when":{"oneOf":[
			{"type":"string","pattern":"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
			{"type":"integer","minimum":0}]}}}`)
		check(t, validate, []string{`{"when":"2026-11-24"}`, `{"when":1700000000}`}, map[string]string{
			`{"when":-1}`:     "$.when: got number, want string; $.when: minimum: got -1, want 0",
			`{"when":"soon"}`: "$.when: 'soon' does not match pattern '^[0-9]{4}-[0-9]{2}-[0-9]{2}$'; $.when: got string, want integer",
		})
	})

	t.Run("AViolationTwoBranchesFindIsListedOnce", func(t *testing.T) {
		t.Parallel()
		validate := compile(t, `{"type":"object","allOf":[
			{"properties":{"n":{"type":"integer"}}},
			{"properties":{"n":{"type":"integer","minimum":1}}}]}`)
		check(t, validate, []string{`{"n":2}`}, map[string]string{
			`{"n":"x"}`: "$.n: got string, want integer",
			`{"n":0}`:   "$.n: minimum: got 0, want 1",
		})
	})

	t.Run("RefToDefs", func(t *testing.T) {
		t.Parallel()
		validate := compile(t, `{"type":"object","$defs":{"point":{"type":"object",
			"properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}},
			"properties":{"path":{"type":"array","items":{"$ref":"#/$defs/point"},"minItems":2}}}`)
		check(t, validate, []string{`{"path":[{"x":0,"y":0},{"x":1.5,"y":2}]}`}, map[string]string{
			`{"path":[{"x":0,"y":0},{"x":1}]}`: "$.path[1]: missing property 'y'",
			`{"path":[{"x":0,"y":0}]}`:         "$.path: minItems: got 1, want 2",
		})
	})

	t.Run("InvalidSchemaIsReportedAtRegistration", func(t *testing.T) {
		t.Parallel()
		run := func(context.Context, json.RawMessage, io.Writer) (string, error) { return "", nil }
		for name, tc := range map[string]struct{ schema, want string }{
			"NotJSON":     {`{`, "tool t: parameters are not a JSON schema object"},
			"NotAnObject": {`{"type":"string"}`, `tool t: parameters must be a schema of "type": "object"`},
			"BadKeyword":  {`{"type":"object","properties":{"n":{"type":"integr"}}}`, "tool t: invalid parameters schema"},
			"BadMinimum":  {`{"type":"object","properties":{"n":{"minimum":"one"}}}`, "/properties/n/minimum"},
			"DanglingRef": {`{"type":"object","properties":{"n":{"$ref":"#/$defs/none"}}}`, "tool t: invalid parameters schema"},
			"ExternalRef": {`{"type":"object","properties":{"n":{"$ref":"file:///etc/passwd"}}}`, "tool t: invalid parameters schema"},
			"RemoteRef":   {`{"type":"object","properties":{"n":{"$ref":"http://127.0.0.1:1/s.json"}}}`, "tool t: invalid parameters schema"},
		} {
			_, err := NewTools(Tool{Name: "t", Run: run, Parameters: json.RawMessage(tc.schema)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", name, err, tc.want)
			}
		}
	})
}

// TestHostileParametersRefusedAtDeclaration: the schemas of the attack
// run are refused when the tool is declared, the error naming the tool
// and the limit; an ordinary recursive schema is not.
func TestHostileParametersRefusedAtDeclaration(t *testing.T) {
	t.Parallel()
	run := func(context.Context, json.RawMessage, io.Writer) (string, error) { return "", nil }
	chain := func(op string) string {
		var defs []string
		for i := range 20 {
			defs = append(defs, fmt.Sprintf(`"d%d":{%q:[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, op, i+1, i+1))
		}
		defs = append(defs, `"d20":{"type":"string"}`)
		return `{"type":"object","properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(defs, ",") + `}}`
	}
	entries := make([]string, 200_000)
	for i := range entries {
		entries[i] = strconv.Itoa(i)
	}
	alts := strings.Join(strings.Split("abcdefghijklmnop", ""), "|")
	for name, tc := range map[string]struct{ schema, want string }{
		"AnyOfChain":  {chain("anyOf"), "over the schema $ref expansion limit"},
		"AllOfChain":  {chain("allOf"), "over the schema $ref expansion limit"},
		"Pattern":     {`{"type":"object","properties":{"s":{"type":"string","pattern":"(` + alts + `){1,1000}z"}}}`, "over the schema pattern limit"},
		"Enum":        {`{"type":"object","properties":{"n":{"enum":[` + strings.Join(entries, ",") + `]}}}`, "over the schema size limit"},
		"Deep":        {`{"type":"object","properties":{"a":` + strings.Repeat(`{"type":"array","items":`, 40) + `{}` + strings.Repeat(`}`, 40) + `}}`, "over the schema depth limit"},
		"HugeMinimum": {`{"type":"object","properties":{"n":{"minimum":1e999999}}}`, "over the schema JSON limit"},
	} {
		_, err := NewTools(Tool{Name: "t", Run: run, Parameters: json.RawMessage(tc.schema)})
		if err == nil || !strings.HasPrefix(err.Error(), "tool t: invalid parameters schema: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	recursive := `{"type":"object","properties":{"tree":{"$ref":"#/$defs/node"}},
		"$defs":{"node":{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}}`
	if _, err := NewTools(Tool{Name: "t", Run: run, Parameters: json.RawMessage(recursive)}); err != nil {
		t.Errorf("recursive schema: %v", err)
	}
}

// TestHostileOutputSchemaRefusedAtDeclaration: a client tool's
// OutputSchema over the declaration budget is refused by NewTools, naming
// the limit, as request_input would refuse it.
func TestHostileOutputSchemaRefusedAtDeclaration(t *testing.T) {
	t.Parallel()
	entries := make([]string, 200_000)
	for i := range entries {
		entries[i] = strconv.Itoa(i)
	}
	_, err := NewTools(Tool{Name: "pick", OutputSchema: json.RawMessage(`{"enum":[` + strings.Join(entries, ",") + `]}`)})
	if err == nil || !strings.Contains(err.Error(), "tool pick: invalid OutputSchema: over the schema size limit") {
		t.Fatalf("NewTools: %v, want the size limit named", err)
	}
	if _, err := NewTools(Tool{Name: "pick", OutputSchema: json.RawMessage(`{"enum":[1,2,3]}`)}); err != nil {
		t.Fatalf("NewTools of an ordinary OutputSchema: %v", err)
	}
}
