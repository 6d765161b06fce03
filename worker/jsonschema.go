package worker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// checkSchema checks the JSON value doc against schema, a JSON schema using
// the keywords tools need for their parameters: type, properties,
// required, additionalProperties (false), enum, items, minimum, maximum,
// minLength, maxLength. Other keywords are ignored. The error names the
// first offending path, for example `$.unit: want one of "c", "f"`.
func checkSchema(schema, doc json.RawMessage) error {
	var s, v any
	if err := json.Unmarshal(schema, &s); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return checkValue("$", s, v)
}

func checkValue(path string, schema, v any) error {
	s, ok := schema.(map[string]any)
	if !ok {
		return nil // true, or a schema we do not understand: anything goes
	}
	if typ, ok := s["type"]; ok {
		if err := checkType(path, typ, v); err != nil {
			return err
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if jsonEqual(e, v) {
				found = true
				break
			}
		}
		if !found {
			want := make([]string, len(enum))
			for i, e := range enum {
				b, _ := json.Marshal(e)
				want[i] = string(b)
			}
			return fmt.Errorf("%s: want one of %s", path, strings.Join(want, ", "))
		}
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				name, _ := r.(string)
				if _, ok := v[name]; !ok {
					return fmt.Errorf("%s: missing required property %q", path, name)
				}
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ps, known := props[k]
			if !known {
				if ap, ok := s["additionalProperties"].(bool); ok && !ap {
					return fmt.Errorf("%s: unknown property %q", path, k)
				}
				if ap, ok := s["additionalProperties"].(map[string]any); ok {
					ps = ap
				}
			}
			if err := checkValue(path+"."+k, ps, v[k]); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := checkValue(fmt.Sprintf("%s[%d]", path, i), s["items"], e); err != nil {
				return err
			}
		}
	case json.Number:
		f, _ := v.Float64()
		if lo, ok := s["minimum"].(float64); ok && f < lo {
			return fmt.Errorf("%s: %s is below the minimum %v", path, v, lo)
		}
		if hi, ok := s["maximum"].(float64); ok && f > hi {
			return fmt.Errorf("%s: %s is above the maximum %v", path, v, hi)
		}
	case string:
		n := float64(len([]rune(v)))
		if lo, ok := s["minLength"].(float64); ok && n < lo {
			return fmt.Errorf("%s: shorter than %v characters", path, lo)
		}
		if hi, ok := s["maxLength"].(float64); ok && n > hi {
			return fmt.Errorf("%s: longer than %v characters", path, hi)
		}
	}
	return nil
}

func checkType(path string, typ, v any) error {
	var types []string
	switch t := typ.(type) {
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok {
				types = append(types, s)
			}
		}
	default:
		return nil
	}
	got := jsonType(v)
	for _, t := range types {
		if t == got || (t == "number" && got == "integer") {
			return nil
		}
	}
	return fmt.Errorf("%s: want %s, got %s", path, strings.Join(types, " or "), got)
}

// jsonType is the JSON schema type of a value decoded with UseNumber.
func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case json.Number:
		if f, err := v.Float64(); err == nil && f == math.Trunc(f) && !strings.ContainsAny(v.String(), ".eE") {
			return "integer"
		}
		return "number"
	}
	return "unknown"
}

// jsonEqual compares an enum member (decoded without UseNumber) with a
// value (decoded with it).
func jsonEqual(a, b any) bool {
	if n, ok := b.(json.Number); ok {
		f, err := n.Float64()
		af, isNum := a.(float64)
		return err == nil && isNum && af == f
	}
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return bytes.Equal(ab, bb)
}
