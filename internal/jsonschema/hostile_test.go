package jsonschema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/convo-dev/convo/internal/jsonlimit/jsonlimittest"
)

// chain is a schema of levels $defs, each naming the next twice through
// op (anyOf, allOf): evaluated naively, 2^levels subschemas.
func chain(op string, levels int) string {
	defs := make([]string, 0, levels+1)
	for i := range levels {
		defs = append(defs, fmt.Sprintf(`"d%d":{%q:[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, op, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":{"type":"string"}`, levels))
	return `{"$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `}}`
}

// The hostile schemas: each is refused at declaration, naming its limit.
func hostileSchemas() map[string]struct{ schema, limit string } {
	alts := strings.Split("abcdefghijklmnop", "")
	bigEnum := make([]string, 200_000)
	for i := range bigEnum {
		bigEnum[i] = fmt.Sprint(i)
	}
	deep := strings.Repeat(`{"type":"array","items":`, 40) + `{}` + strings.Repeat(`}`, 40)
	// Past jsonlimit's depth too: refused by its rule, still as "depth".
	deeper := strings.Repeat(`{"items":`, 70) + `{}` + strings.Repeat(`}`, 70)
	return map[string]struct{ schema, limit string }{
		"AnyOfChain": {chain("anyOf", 20), "$ref expansion"},
		"AllOfChain": {chain("allOf", 20), "$ref expansion"},
		"Pattern":    {`{"type":"string","pattern":"(` + strings.Join(alts, "|") + `){1,1000}z"}`, "pattern"},
		"PatternProperties": {`{"type":"object","patternProperties":{"(` + strings.Join(alts, "|") + `){1,1000}z":{}}}`,
			"pattern"},
		"Enum":       {`{"enum":[` + strings.Join(bigEnum, ",") + `]}`, "size"},
		"Deep":       {deep, "depth"},
		"Deeper":     {deeper, "depth"},
		"HugeNumber": {`{"type":"array","items":{"type":"integer","minimum":1e999999}}`, "JSON"},
	}
}

// TestDeclareRefusesHostileSchemas: each schema of the attack run is
// refused when declared, with a *LimitError naming the bound, and fast.
func TestDeclareRefusesHostileSchemas(t *testing.T) {
	t.Parallel()
	for name, tc := range hostileSchemas() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			_, err := Declare("t", []byte(tc.schema))
			var le *LimitError
			if !errors.As(err, &le) || le.Limit != tc.limit {
				t.Fatalf("Declare: %v, want a LimitError of limit %q", err, tc.limit)
			}
			if !strings.Contains(err.Error(), "over the schema "+tc.limit+" limit") {
				t.Errorf("error %q does not name the limit", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("refused in %s, want well under 2s", d)
			}
		})
	}
}

// TestDeclareAcceptsOrdinarySchemas: schemas tools use stay within the
// budget, recursion included.
func TestDeclareAcceptsOrdinarySchemas(t *testing.T) {
	t.Parallel()
	for name, schema := range map[string]string{
		"Flat":      `{"type":"object","properties":{"unit":{"type":"string","enum":["c","f"]},"days":{"type":"integer","minimum":1,"maximum":14}},"required":["unit"]}`,
		"Email":     `{"type":"string","pattern":"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}$"}`,
		"Recursive": `{"$defs":{"node":{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}`,
		"ChainOf10": chain("anyOf", 10),
	} {
		if _, err := Declare("t", []byte(schema)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestValidateStopsAtBudget: a schema compiled without the declaration
// budget (a schema stored before it existed) that would evaluate 2^20
// subschemas, or run a huge pattern over a long text, stops at the
// validation's budget with ErrBudget (unmetered, the chains of 30 levels
// would evaluate 2^30 subschemas: hours).
func TestValidateStopsAtBudget(t *testing.T) {
	t.Parallel()
	alts := strings.Split("abcdefghijklmnop", "")
	for name, tc := range map[string]struct{ schema, value string }{
		"AnyOfChain": {chain("anyOf", 30), `7`},
		"AllOfChain": {chain("allOf", 30), `"x"`},
		"Pattern": {`{"type":"string","pattern":"(` + strings.Join(alts, "|") + `){1,1000}z"}`,
			`"` + strings.Repeat("abcdefghijklmnop", 100<<10/16) + `"`},
		// Recursion through the value under "not": every subschema
		// fails before its applicators are done, 2^30 of them.
		"RecursionUnderNot": {`{"not":{"$ref":"#/$defs/t"},"$defs":{"t":{"type":"array","items":{"$ref":"#/$defs/t"},"contains":{"$ref":"#/$defs/t"}}}}`,
			strings.Repeat("[", 30) + "1" + strings.Repeat("]", 30)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := compileRaw(t, tc.schema)
			start := time.Now()
			err := Validate(context.Background(), s, []byte(tc.value))
			if !errors.Is(err, ErrBudget) {
				t.Fatalf("Validate: %v, want ErrBudget", err)
			}
			// The budget is some 0.3 s of CPU: the bound is loose
			// for a machine shared with other tests.
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("stopped after %s, want well under 30s", d)
			}
		})
	}
}

// TestValidateStopsWhenCancelled: a validation whose context is done
// stops, with the context's error.
func TestValidateStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	s := compileRaw(t, chain("anyOf", 30))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// A budget no value reaches: only the cancellation can stop it.
	go func() { done <- s.validate(ctx, json.Number("7"), 1<<62) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Validate ended before the cancel: %v", err)
	default:
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Validate: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Validate still running 5s after its context was cancelled")
	}
	// The copy of the schema is usable again.
	if err := Validate(context.Background(), s, []byte(`"x"`)); err != nil {
		t.Fatalf("Validate after the cancel: %v", err)
	}
	// A context done already: not a subschema is evaluated.
	if err := Validate(ctx, s, []byte(`"x"`)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Validate with a done context: %v, want context.Canceled", err)
	}
}

// TestValidateRefusesHugeNumbersFast: jsonlimit's rule comes before the
// schema: 1 MB of 1e999999 is refused in one pass.
func TestValidateRefusesHugeNumbersFast(t *testing.T) {
	t.Parallel()
	s := compileRaw(t, `{"type":"array","items":{"type":"integer","minimum":0,"multipleOf":3}}`)
	value := []byte(jsonlimittest.HugeNumbers(1 << 20))
	start := time.Now()
	err := Validate(context.Background(), s, value)
	if err == nil || !strings.Contains(err.Error(), "not JSON: $[0]: number") {
		t.Fatalf("Validate: %v, want the first number refused", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("refused in %s, want well under 500ms", d)
	}
	if _, err := Decode(value); err == nil {
		t.Error("Decode accepted 1e999999")
	}
}

// TestFormatsKeepTheirMeaning: the meter's hooks take the place of
// "format" in the compiled schema; a draft that asserts formats still
// does, 2020-12 still does not, and messages name the schema's format.
func TestFormatsKeepTheirMeaning(t *testing.T) {
	t.Parallel()
	old := compileRaw(t, `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"at":{"type":"string","format":"date"}}}`)
	if err := Validate(context.Background(), old, []byte(`{"at":"2024-02-30x"}`)); err == nil || !strings.Contains(err.Error(), "$.at:") || !strings.Contains(err.Error(), "date") || strings.Contains(err.Error(), hookPrefix) {
		t.Errorf("draft-07 date: %v, want a format error naming date", err)
	}
	if err := Validate(context.Background(), old, []byte(`{"at":"2024-02-03"}`)); err != nil {
		t.Errorf("draft-07 valid date: %v", err)
	}
	current := compileRaw(t, `{"type":"object","properties":{"at":{"type":"string","format":"date"},"format":{"type":"integer"}}}`)
	if err := Validate(context.Background(), current, []byte(`{"at":"not a date","format":3}`)); err != nil {
		t.Errorf("2020-12 format is an annotation: %v", err)
	}
	if err := Validate(context.Background(), current, []byte(`{"format":"x"}`)); err == nil || err.Error() != "$.format: got string, want integer" {
		t.Errorf("a property named format: %v", err)
	}
}

func compileRaw(t testing.TB, schema string) *Schema {
	t.Helper()
	doc, err := Decode([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Compile("t", doc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// BenchmarkValidateHugeNumbers: 1 MB of [1e999999, …] against an array
// of integers with minimum and multipleOf.
func BenchmarkValidateHugeNumbers(b *testing.B) {
	s := compileRaw(b, `{"type":"array","items":{"type":"integer","minimum":0,"multipleOf":3}}`)
	value := []byte(jsonlimittest.HugeNumbers(1 << 20))
	b.SetBytes(int64(len(value)))
	for b.Loop() {
		if Validate(context.Background(), s, value) == nil {
			b.Fatal("accepted")
		}
	}
}

// BenchmarkValidateAtBudget: the 20-level anyOf chain, compiled without
// the declaration budget, until the budget of a small value stops it.
func BenchmarkValidateAtBudget(b *testing.B) {
	s := compileRaw(b, chain("anyOf", 20))
	for b.Loop() {
		if err := Validate(context.Background(), s, []byte(`7`)); !errors.Is(err, ErrBudget) {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateIntegers: an ordinary 1 MB answer (an array of
// integers) within its budget: the cost of the meter on linear work.
func BenchmarkValidateIntegers(b *testing.B) {
	s := compileRaw(b, `{"type":"array","items":{"type":"integer","minimum":0}}`)
	value := []byte("[" + strings.TrimSuffix(strings.Repeat("12345,", (1<<20)/6), ",") + "]")
	b.SetBytes(int64(len(value)))
	for b.Loop() {
		if err := Validate(context.Background(), s, value); err != nil {
			b.Fatal(err)
		}
	}
}

// TestValidateConcurrently: validations of one schema at once each have
// their own meter: one stopped at its budget or cancelled leaves the
// others' verdicts as they are.
func TestValidateConcurrently(t *testing.T) {
	t.Parallel()
	s := compileRaw(t, `{"type":"array","items":{"anyOf":[{"type":"integer"},{"$ref":"#/$defs/d0"}]},`+
		strings.TrimPrefix(chain("anyOf", 25), `{"$ref":"#/$defs/d0",`))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	errs := make(chan error, 24)
	for i := range 24 {
		go func() {
			switch i % 3 {
			case 0: // integers: the first alternative, cheap
				if err := Validate(context.Background(), s, []byte(`[1,2,3]`)); err != nil {
					errs <- fmt.Errorf("cheap value: %w", err)
					return
				}
			case 1: // a number that is not an integer: the chain, to the budget
				if err := Validate(context.Background(), s, []byte(`[1.5]`)); !errors.Is(err, ErrBudget) {
					errs <- fmt.Errorf("expensive value: %v, want ErrBudget", err)
					return
				}
			case 2:
				if err := Validate(cancelled, s, []byte(`[1.5]`)); !errors.Is(err, context.Canceled) {
					errs <- fmt.Errorf("cancelled: %v, want context.Canceled", err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 24 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
