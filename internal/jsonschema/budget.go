package jsonschema

import (
	"bytes"
	"errors"
	"fmt"
	"regexp/syntax"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/convo-dev/convo/internal/jsonlimit"
)

// The declaration budget of a schema: what Declare refuses. Each bound
// is far above what a tool's schema needs and far below what makes a
// schema expensive to compile or to validate with.
const (
	// MaxBytes bounds a schema's encoded JSON. It also bounds an enum:
	// 200,000 entries are some 1.2 MB.
	MaxBytes = 64 << 10
	// MaxDepth bounds how many arrays and objects of a schema's JSON
	// enclose one another (a property of an object in an array of a
	// property is 6 levels).
	MaxDepth = 32
	// MaxNodes bounds the subschemas of a schema with every $ref
	// inlined (a $ref back to a subschema it is inside of, a recursion,
	// counts once): a chain of 20 anyOf through $defs, each naming the
	// next twice, is 2^20.
	MaxNodes = 10_000
	// MaxPatternInsts bounds the program of each regular expression
	// (pattern, a patternProperties name): the instructions Go's
	// regexp/syntax compiles it to, which a match runs over each byte
	// of its text. ^[a-z]{1,255}$ is 513; (a|b|…|p){1,1000}z is 4,002.
	MaxPatternInsts = 1_000
)

// LimitError is a schema over one of the declaration budget's bounds.
// Limit names the bound ("size", "depth", "JSON", "pattern", "$ref
// expansion"); Detail says by how much.
type LimitError struct {
	Limit  string
	Detail string
}

func (e *LimitError) Error() string {
	return "over the schema " + e.Limit + " limit: " + e.Detail
}

// Declare compiles raw, the JSON of a schema (as Compile does), after
// checking it against the declaration budget, cheapest check first: its
// size (MaxBytes), jsonlimit's rule (numbers within float64's range), its
// depth (MaxDepth), each regular expression's program (MaxPatternInsts),
// and, once compiled, its $ref expansion (MaxNodes). A schema over a
// bound is refused with a *LimitError naming it; JSON that is not a
// schema with the library's error.
func Declare(name string, raw []byte) (*Schema, error) {
	if len(raw) > MaxBytes {
		return nil, &LimitError{"size", fmt.Sprintf("%d bytes, at most %d", len(raw), MaxBytes)}
	}
	if err := jsonlimit.Check(raw); err != nil {
		if jsonlimit.IsSyntax(err) {
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		var le *jsonlimit.Error
		if errors.As(err, &le) && le.Kind == jsonlimit.TooDeep {
			return nil, &LimitError{"depth", fmt.Sprintf("nested deeper than %d levels", MaxDepth)}
		}
		return nil, &LimitError{"JSON", err.Error()}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if err := checkDoc(doc, 0, "$"); err != nil {
		return nil, err
	}
	s, err := Compile(name, doc)
	if err != nil {
		return nil, err
	}
	in := s.free[0]
	if n := expansion(in.sch, MaxNodes); n > MaxNodes {
		return nil, &LimitError{"$ref expansion", fmt.Sprintf("more than %d subschemas with every $ref inlined", MaxNodes)}
	}
	return s, nil
}

// checkDoc checks the depth of v, found at path, and the program of
// every regular expression of it, before the library compiles them. It
// looks for them by keyword, wherever it is: a "pattern" that is data
// (in an enum, say) is checked too, which costs nothing a schema needs.
func checkDoc(v any, depth int, path string) error {
	switch v := v.(type) {
	case map[string]any:
		if depth >= MaxDepth {
			return &LimitError{"depth", fmt.Sprintf("%s is nested deeper than %d levels", path, MaxDepth)}
		}
		for k, e := range v {
			at := path + "." + k
			switch k {
			case "pattern":
				if re, ok := e.(string); ok {
					if err := checkPattern(re, at); err != nil {
						return err
					}
				}
			case "patternProperties":
				if m, ok := e.(map[string]any); ok {
					for re := range m {
						if err := checkPattern(re, at); err != nil {
							return err
						}
					}
				}
			}
			if err := checkDoc(e, depth+1, at); err != nil {
				return err
			}
		}
	case []any:
		if depth >= MaxDepth {
			return &LimitError{"depth", fmt.Sprintf("%s is nested deeper than %d levels", path, MaxDepth)}
		}
		for i, e := range v {
			if err := checkDoc(e, depth+1, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkPattern(re, path string) error {
	if n := patternInsts(re); n > MaxPatternInsts {
		return &LimitError{"pattern", fmt.Sprintf("%s: the regular expression %.40q compiles to %d instructions, at most %d", path, re, n, MaxPatternInsts)}
	}
	return nil
}

// patternInsts is the size of re's program as Go's regexp runs it (0 if
// it does not parse: the library says what is wrong with it).
func patternInsts(re string) int {
	r, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return 0
	}
	prog, err := syntax.Compile(r.Simplify())
	if err != nil {
		return 0
	}
	return len(prog.Inst)
}

// expansion counts the subschemas of root with every $ref inlined, a
// recursion (a subschema reached again inside itself) counted once, and
// stops counting past limit. Each subschema's count is remembered, so the
// work is linear in the compiled schema, whatever its expansion.
func expansion(root *jsonschema.Schema, limit int) int {
	memo := map[*jsonschema.Schema]int{}
	onPath := map[*jsonschema.Schema]bool{}
	var count func(s *jsonschema.Schema) int
	count = func(s *jsonschema.Schema) int {
		if n, ok := memo[s]; ok {
			return n
		}
		if onPath[s] {
			return 1
		}
		onPath[s] = true
		n := 1
		children(s, func(c *jsonschema.Schema, _ childKind) {
			if n <= limit {
				n += count(c)
			}
		})
		onPath[s] = false
		n = min(n, limit+1)
		memo[s] = n
		return n
	}
	return count(root)
}
