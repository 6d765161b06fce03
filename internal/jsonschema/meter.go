package jsonschema

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// How a validation is metered.
//
// The library offers no hook that runs before every evaluation of a
// subschema but one: an asserted "format". Compile gives every schema
// object of the document a format of its own (hookPrefix + its index;
// the format the schema named, if any, is remembered and still asserted
// where the draft asserts it), registered on the compiler with a
// validator that charges the evaluation to the validation's meter before
// the library does the work of that subschema. The library checks
// "type", "const" and "enum" before "format": an evaluation that fails
// those does no further work (no subschema, no pattern), and its parent
// charged for it.
//
// The charge of one evaluation of a subschema is the number of
// evaluations of subschemas it may start: one for each in-place
// applicator ($ref, allOf, anyOf, oneOf, not, if/then/else,
// dependentSchemas), one per item or property for each applicator of
// items or properties, an enum's entries at one per enumUnit, and a
// regular expression's work (program instructions × bytes matched) at
// one per patternUnit. A unit is about one evaluation of a small
// subschema: some 0.1–0.5 µs.
//
// The format's validator has no handle on the validation that calls it,
// so the meter belongs to a compiled copy of the schema: a Schema keeps
// a pool of copies, one per validation running at once.

// hookPrefix names the formats of the meter's hooks.
const hookPrefix = "convo-meter:"

const (
	// BudgetBase and BudgetPerByte make a validation's budget: Budget(n)
	// units for a value of n bytes. A value a schema of linear cost
	// checks uses far less (a 1 MB array of integers checked against
	// "items" is some 175,000 units); a schema whose work multiplies
	// (nested anyOf, recursion under not, patterns on long texts) meets
	// it. Measured on a loaded 2-core machine, the library spends about
	// 1–2.5 µs of CPU per unit: some 0.1–0.25 s for the base, some 2.5–5 s
	// at most for a value of 1 MB.
	BudgetBase    = 100_000
	BudgetPerByte = 2

	// enumUnit is how many entries of an enum cost one unit.
	enumUnit = 16
	// patternUnit is how many program instructions × bytes of a regular
	// expression's match cost one unit (measured: 30–50 ns per
	// instruction and byte).
	patternUnit = 8
)

// Budget is the budget, in units, of the validation of a value of n
// bytes: BudgetBase + BudgetPerByte×n.
func Budget(n int) int64 { return BudgetBase + BudgetPerByte*int64(n) }

// ErrBudget is the error (wrapped) of a validation stopped past its
// budget.
var ErrBudget = errors.New("validation is over its budget")

// Schema is a compiled schema, safe for concurrent use.
type Schema struct {
	loc     string
	doc     any          // the schema with a hook format in every schema object
	formats []nodeFormat // by hook index
	costs   []nodeCost   // by hook index

	mu   sync.Mutex
	free []*instance
}

// nodeFormat is the format a schema object named ("" for none), and its
// validator when the draft asserts it (nil otherwise).
type nodeFormat struct {
	name   string
	assert func(any) error
}

// nodeCost is what one evaluation of a subschema is charged (see above):
// same for in-place applicators, arr and obj per item or property,
// pattern and propPattern per byte of a string or of the property names.
type nodeCost struct {
	same, arr, obj, pattern, propPattern int64
}

func (c nodeCost) of(v any) int64 {
	n := c.same
	switch v := v.(type) {
	case []any:
		n += c.arr * int64(len(v))
	case map[string]any:
		n += c.obj * int64(len(v))
		if c.propPattern > 0 {
			var keys int64
			for k := range v {
				keys += int64(len(k)) + 1
			}
			n += c.propPattern * keys / patternUnit
		}
	case string:
		n += c.pattern * int64(len(v)+1) / patternUnit
	}
	return n
}

// instance is one compiled copy of a Schema with its meter.
type instance struct {
	sch *jsonschema.Schema
	m   *meter
}

// meter counts down a validation's budget.
type meter struct {
	ctx   context.Context
	left  int64
	ticks int
}

// abort carries why a validation stopped, from a hook (which can only
// panic) to validate (which recovers it).
type abort struct{ err error }

// ctxEvery is how many charges pass between two looks at the context.
const ctxEvery = 16

func (m *meter) charge(units int64) {
	m.left -= units
	if m.left < 0 {
		panic(abort{ErrBudget})
	}
	m.ticks++
	if m.ticks%ctxEvery == 0 {
		if err := m.ctx.Err(); err != nil {
			panic(abort{err})
		}
	}
}

// Compile compiles doc, a decoded JSON schema of draft 2020-12 (or of the
// draft its $schema names), known as name in errors, without the
// declaration budget (Declare applies it): for a schema checked already.
// References may point inside the schema ($defs, anchors) but never
// outside it: no file or network is read. Its validations are metered
// all the same.
func Compile(name string, doc any) (*Schema, error) {
	s := &Schema{loc: "urn:convo:schema:" + name}
	w := rewriter{}
	s.doc = w.schema(doc, false)
	s.formats = w.formats
	in, err := s.compile()
	if err != nil {
		return nil, err
	}
	s.costs = make([]nodeCost, len(s.formats))
	forEachNode(in.sch, func(n *jsonschema.Schema) {
		if i, ok := s.hookIndex(n); ok {
			s.costs[i] = costOf(n)
		}
	})
	s.free = append(s.free, in)
	return s, nil
}

// compile makes a compiled copy of s with a meter of its own.
func (s *Schema) compile() (*instance, error) {
	m := &meter{}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no loader for any scheme: nothing outside the schema
	c.AssertFormat()                          // the hooks are formats; a named format is asserted only as its draft says
	for i := range s.formats {
		assert := s.formats[i].assert
		c.RegisterFormat(&jsonschema.Format{Name: hookPrefix + strconv.Itoa(i), Validate: func(v any) error {
			if i < len(s.costs) {
				m.charge(s.costs[i].of(v))
			}
			if assert != nil {
				return assert(v)
			}
			return nil
		}})
	}
	if err := c.AddResource(s.loc, s.doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(s.loc)
	if err != nil {
		return nil, s.unhook(err)
	}
	return &instance{sch: sch, m: m}, nil
}

// unhook rewrites the hook formats' names in a compile error back to
// "format".
func (s *Schema) unhook(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, hookPrefix) {
		return err
	}
	return errors.New(strings.ReplaceAll(msg, hookPrefix, "format "))
}

func (s *Schema) hookIndex(n *jsonschema.Schema) (int, bool) {
	if n.Format == nil || !strings.HasPrefix(n.Format.Name, hookPrefix) {
		return 0, false
	}
	i, err := strconv.Atoi(strings.TrimPrefix(n.Format.Name, hookPrefix))
	return i, err == nil && i >= 0 && i < len(s.formats)
}

// formatName is the format a schema named where the validator names a
// hook.
func (s *Schema) formatName(hook string) string {
	i, err := strconv.Atoi(strings.TrimPrefix(hook, hookPrefix))
	if err != nil || !strings.HasPrefix(hook, hookPrefix) || i < 0 || i >= len(s.formats) {
		return hook
	}
	return s.formats[i].name
}

// validate validates v within budget units, stopping when ctx is done.
func (s *Schema) validate(ctx context.Context, v any, budget int64) (err error) {
	s.mu.Lock()
	var in *instance
	if n := len(s.free); n > 0 {
		in, s.free = s.free[n-1], s.free[:n-1]
	}
	s.mu.Unlock()
	if in == nil {
		if in, err = s.compile(); err != nil {
			return fmt.Errorf("compile a copy of the schema: %w", err)
		}
	}
	in.m.ctx, in.m.left, in.m.ticks = ctx, budget-1, 0 // the value itself is one evaluation
	defer func() {
		in.m.ctx = nil
		s.mu.Lock()
		s.free = append(s.free, in)
		s.mu.Unlock()
		if r := recover(); r != nil {
			a, ok := r.(abort)
			if !ok {
				panic(r)
			}
			if errors.Is(a.err, ErrBudget) {
				err = fmt.Errorf("%w (%d units, jsonschema.Budget): the schema costs too much for this value", ErrBudget, budget)
			} else {
				err = fmt.Errorf("validation stopped: %w", a.err)
			}
		}
	}()
	return in.sch.Validate(v)
}

// rewriter gives every schema object of a document a hook format,
// copying the document (the caller's is left as it is).
type rewriter struct {
	formats []nodeFormat
}

// schema rewrites v, a schema (an object; a boolean is left as it is).
// old says whether the draft asserts formats (drafts 4 to 7).
func (w *rewriter) schema(v any, old bool) any {
	obj, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if uri, ok := obj["$schema"].(string); ok {
		old = strings.Contains(uri, "json-schema.org/draft-0")
	}
	out := make(map[string]any, len(obj)+1)
	for k, val := range obj {
		switch k {
		case "enum", "const", "default", "examples", "$vocabulary", "dependentRequired", "format":
			// Data, not schemas.
			out[k] = val
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies":
			// Objects of schemas ("dependencies" also holds arrays
			// of names, left as they are).
			m, ok := val.(map[string]any)
			if !ok {
				out[k] = val
				continue
			}
			mm := make(map[string]any, len(m))
			for name, sub := range m {
				mm[name] = w.schema(sub, old)
			}
			out[k] = mm
		default:
			// A subschema, an array of them, or a keyword the
			// library does not know: a $ref may still point into
			// it, so its objects are treated as schemas too.
			out[k] = w.any(val, old)
		}
	}
	var nf nodeFormat
	if f, ok := obj["format"]; ok {
		name, ok := f.(string)
		if !ok {
			return out // not a format at all: the metaschema refuses it
		}
		nf.name = name
		if old {
			nf.assert = builtinFormat(name)
		}
	}
	out["format"] = hookPrefix + strconv.Itoa(len(w.formats))
	w.formats = append(w.formats, nf)
	return out
}

func (w *rewriter) any(v any, old bool) any {
	switch v := v.(type) {
	case map[string]any:
		return w.schema(v, old)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = w.any(e, old)
		}
		return out
	}
	return v
}

// builtins holds the library's validators of the formats it knows.
var builtins sync.Map // name -> func(any) error

// builtinFormat is the library's validator of the format name, nil for
// a name it does not know (which is not asserted).
func builtinFormat(name string) func(any) error {
	if f, ok := builtins.Load(name); ok {
		return f.(func(any) error)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if c.AddResource("urn:convo:format", map[string]any{"format": name}) != nil {
		return nil
	}
	sch, err := c.Compile("urn:convo:format")
	if err != nil || sch.Format == nil {
		return nil // not cached: the names a schema can make up are endless
	}
	builtins.Store(name, sch.Format.Validate)
	return sch.Format.Validate
}

// children calls f with each subschema s applies: to the value itself
// (same true) or to its items or properties.
func children(s *jsonschema.Schema, f func(c *jsonschema.Schema, where childKind)) {
	one := func(c *jsonschema.Schema, k childKind) {
		if c != nil {
			f(c, k)
		}
	}
	anySchema := func(v any, k childKind) {
		switch v := v.(type) {
		case *jsonschema.Schema:
			one(v, k)
		case []*jsonschema.Schema:
			for _, c := range v {
				one(c, k)
			}
		}
	}
	one(s.Ref, sameValue)
	one(s.RecursiveRef, sameValue)
	if s.DynamicRef != nil {
		one(s.DynamicRef.Ref, sameValue)
	}
	one(s.Not, sameValue)
	for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
		for _, c := range list {
			one(c, sameValue)
		}
	}
	one(s.If, sameValue)
	one(s.Then, sameValue)
	one(s.Else, sameValue)
	for _, c := range s.DependentSchemas {
		one(c, sameValue)
	}
	for _, d := range s.Dependencies {
		anySchema(d, sameValue)
	}
	one(s.ContentSchema, sameValue)
	for _, c := range s.Properties {
		one(c, propertyOne)
	}
	anySchema(s.AdditionalProperties, propertyOne)
	for _, c := range s.PatternProperties {
		one(c, propertyAll)
	}
	one(s.PropertyNames, propertyAll)
	one(s.UnevaluatedProperties, propertyAll)
	anySchema(s.Items, itemOne)
	anySchema(s.AdditionalItems, itemOne)
	for _, c := range s.PrefixItems {
		one(c, itemOne)
	}
	one(s.Items2020, itemOne)
	one(s.Contains, itemAll)
	one(s.UnevaluatedItems, itemAll)
}

// childKind says where a subschema applies.
type childKind int

const (
	sameValue   childKind = iota
	propertyOne           // to a property, in place of its siblings of this kind (properties, additionalProperties)
	propertyAll           // to a property, besides the others (patternProperties, propertyNames, unevaluatedProperties)
	itemOne               // to an item, in place of its siblings of this kind (items, prefixItems, additionalItems)
	itemAll               // to an item, besides the others (contains, unevaluatedItems)
)

// costOf is the charge of one evaluation of s (see the top of the file).
func costOf(s *jsonschema.Schema) nodeCost {
	var c nodeCost
	var prop, item int64 // the dearest of the applicators of which one applies to a property or an item
	children(s, func(ch *jsonschema.Schema, k childKind) {
		u := int64(1)
		if ch.Enum != nil {
			u += int64(len(ch.Enum.Values)) / enumUnit
		}
		switch k {
		case sameValue:
			c.same += u
		case propertyOne:
			prop = max(prop, u)
		case propertyAll:
			c.obj += u
		case itemOne:
			item = max(item, u)
		case itemAll:
			c.arr += u
		}
	})
	c.obj += prop
	c.arr += item
	if s.Pattern != nil {
		c.pattern = int64(patternInsts(s.Pattern.String()))
	}
	for re := range s.PatternProperties {
		c.propPattern += int64(patternInsts(re.String()))
	}
	return c
}

// forEachNode calls f once with each subschema reachable from root.
func forEachNode(root *jsonschema.Schema, f func(*jsonschema.Schema)) {
	seen := map[*jsonschema.Schema]bool{}
	stack := []*jsonschema.Schema{root}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[s] {
			continue
		}
		seen[s] = true
		f(s)
		children(s, func(c *jsonschema.Schema, _ childKind) { stack = append(stack, c) })
	}
}
