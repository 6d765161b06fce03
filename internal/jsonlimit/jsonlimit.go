// Package jsonlimit holds convo's one rule for the JSON it accepts, at
// every door (Connect, the HTTP routes, the worker runtimes; the SQL
// functions apply the same rule with convo._json_check):
//
//   - every number fits a 64-bit float: no overflow to infinity (1e400),
//     no non-zero value that rounds to zero (1e-400), and a literal of at
//     most MaxNumberLen characters;
//   - arrays and objects nest at most MaxDepth levels;
//   - no string or key holds U+0000 or an unpaired UTF-16 surrogate
//     escape, which PostgreSQL's jsonb cannot store.
//
// Check runs in one pass over the bytes, without decoding into values
// and without allocating for valid input, so it can run before anything
// expensive (a schema, a database round trip) sees a request. Sanitize
// is the readers' side: it rewrites what a reader cannot render into
// marked placeholders, so one stored value never makes a conversation
// unreadable.
package jsonlimit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	// MaxDepth is how many arrays and objects may enclose one another.
	MaxDepth = 64
	// MaxNumberLen bounds a number's literal: longer ones carry digits
	// no 64-bit float keeps, and cost big-number arithmetic in schemas.
	MaxNumberLen = 1000
)

// Placeholders a reader shows where Sanitize replaced a value.
const (
	PlaceholderNumber = "[convo: unrenderable number]"
	PlaceholderDeep   = "[convo: nested too deeply]"
	PlaceholderSyntax = "[convo: unrenderable JSON]"
)

// Kind is which part of the rule a refused value breaks.
type Kind int

const (
	// OutOfRange: a number a 64-bit float does not hold (1e400, 1e-400).
	OutOfRange Kind = iota + 1
	// LongNumber: a number's literal is longer than MaxNumberLen.
	LongNumber
	// TooDeep: arrays and objects nest deeper than MaxDepth.
	TooDeep
	// Unstorable: a string or key holds \u0000 or an unpaired surrogate,
	// which PostgreSQL's jsonb cannot store.
	Unstorable
)

// Error is a value the rule refuses. Path is the JSONPath of the value
// ($, $.a, $.list[3]); Kind is the part of the rule it breaks, and Reason
// says in words what is wrong with it.
type Error struct {
	Path   string
	Kind   Kind
	Reason string
}

func (e *Error) Error() string { return e.Path + ": " + e.Reason }

// errSyntax is returned, wrapped, for bytes that are not JSON.
var errSyntax = errors.New("not valid JSON")

// IsSyntax reports whether err (from Check) says the input is not JSON
// at all, as opposed to JSON the rule refuses.
func IsSyntax(err error) bool { return errors.Is(err, errSyntax) }

// Check reports the first value of raw the rule refuses, as an *Error,
// or an error that IsSyntax for input that is not one JSON value.
func Check(raw []byte) error {
	s := scanner{in: raw}
	s.value()
	if s.err == nil {
		s.space()
		if s.pos != len(s.in) {
			s.fail(errSyntaxAt(s.pos, "data after the value"))
		}
	}
	return s.err
}

// Valid is Check(raw) == nil.
func Valid(raw []byte) bool { return Check(raw) == nil }

// Sanitize returns raw with every number the rule refuses replaced by
// the string PlaceholderNumber and every array or object nested past
// MaxDepth replaced by PlaceholderDeep; strings are passed through.
// Valid input comes back unchanged (the same slice); input that is not
// JSON at all comes back as the JSON string PlaceholderSyntax, so a
// reader shows something rather than failing.
func Sanitize(raw []byte) []byte {
	if Check(raw) == nil {
		return raw
	}
	s := scanner{in: raw, out: make([]byte, 0, len(raw)), rewrite: true}
	s.value()
	if s.err != nil {
		return []byte(strconv.Quote(PlaceholderSyntax))
	}
	return s.out
}

type scanner struct {
	in  []byte
	pos int
	err error

	// path holds one frame per enclosing array or object, for errors.
	path []frame

	// rewrite makes the scanner copy its input to out, with placeholders
	// for what the rule refuses, instead of stopping at the first.
	rewrite bool
	out     []byte
}

type frame struct {
	array bool
	index int
	key   []byte // the raw key, quotes included
}

func errSyntaxAt(pos int, what string) error {
	return fmt.Errorf("%w: %s at byte %d", errSyntax, what, pos)
}

func (s *scanner) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// refuse records a value the rule refuses at the current path.
func (s *scanner) refuse(kind Kind, format string, args ...any) {
	s.fail(&Error{Path: s.pathString(), Kind: kind, Reason: fmt.Sprintf(format, args...)})
}

func (s *scanner) pathString() string {
	var b strings.Builder
	b.WriteString("$")
	for _, f := range s.path {
		if f.array {
			fmt.Fprintf(&b, "[%d]", f.index)
			continue
		}
		if f.key == nil { // the refused value is this key: the path is its object's
			break
		}
		key, err := strconv.Unquote(string(f.key))
		if err != nil {
			key = string(f.key[1 : len(f.key)-1])
		}
		if isIdent(key) {
			b.WriteString("." + key)
		} else {
			b.WriteString("[" + strconv.Quote(key) + "]")
		}
	}
	return b.String()
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9' {
			continue
		}
		return false
	}
	return true
}

func (s *scanner) space() {
	for s.pos < len(s.in) {
		switch s.in[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// emit copies in[from:s.pos] to out when rewriting.
func (s *scanner) emit(from int) {
	if s.rewrite {
		s.out = append(s.out, s.in[from:s.pos]...)
	}
}

func (s *scanner) value() {
	start := s.pos
	s.space()
	s.emit(start)
	if s.pos >= len(s.in) {
		s.fail(errSyntaxAt(s.pos, "unexpected end"))
		return
	}
	switch c := s.in[s.pos]; {
	case c == '{' || c == '[':
		s.container(c == '[')
	case c == '"':
		from := s.pos
		s.str()
		s.emit(from)
	case c == '-' || c >= '0' && c <= '9':
		s.number()
	default:
		from := s.pos
		for _, lit := range []string{"true", "false", "null"} {
			if strings.HasPrefix(string(s.in[s.pos:min(len(s.in), s.pos+5)]), lit) {
				s.pos += len(lit)
				s.emit(from)
				return
			}
		}
		s.fail(errSyntaxAt(s.pos, fmt.Sprintf("unexpected %q", c)))
	}
}

func (s *scanner) container(array bool) {
	if len(s.path) >= MaxDepth {
		if !s.rewrite {
			s.refuse(TooDeep, "nested deeper than %d levels", MaxDepth)
			return
		}
		// Skip the whole container and write the placeholder instead.
		saved := s.rewrite
		s.rewrite = false
		s.skipContainer()
		s.rewrite = saved
		if s.err == nil {
			s.out = strconv.AppendQuote(s.out, PlaceholderDeep)
		}
		return
	}
	s.pos++ // [ or {
	if array {
		s.out = appendIf(s.rewrite, s.out, '[')
	} else {
		s.out = appendIf(s.rewrite, s.out, '{')
	}
	s.path = append(s.path, frame{array: array})
	defer func() { s.path = s.path[:len(s.path)-1] }()
	closer := byte('}')
	if array {
		closer = ']'
	}
	from := s.pos
	s.space()
	s.emit(from)
	if s.pos < len(s.in) && s.in[s.pos] == closer {
		s.pos++
		s.out = appendIf(s.rewrite, s.out, closer)
		return
	}
	for i := 0; s.err == nil; i++ {
		f := &s.path[len(s.path)-1]
		f.index = i
		if !array {
			f.key = nil
			from := s.pos
			s.space()
			s.emit(from)
			if s.pos >= len(s.in) || s.in[s.pos] != '"' {
				s.fail(errSyntaxAt(s.pos, "expected a key"))
				return
			}
			from = s.pos
			s.str()
			s.emit(from)
			f.key = s.in[from:s.pos]
			from = s.pos
			s.space()
			if s.pos >= len(s.in) || s.in[s.pos] != ':' {
				s.fail(errSyntaxAt(s.pos, "expected ':'"))
				return
			}
			s.pos++
			s.emit(from)
		}
		s.value()
		if s.err != nil {
			return
		}
		from := s.pos
		s.space()
		if s.pos >= len(s.in) {
			s.fail(errSyntaxAt(s.pos, "unexpected end"))
			return
		}
		switch s.in[s.pos] {
		case ',':
			s.pos++
			s.emit(from)
		case closer:
			s.pos++
			s.emit(from)
			return
		default:
			s.fail(errSyntaxAt(s.pos, fmt.Sprintf("unexpected %q", s.in[s.pos])))
			return
		}
	}
}

func appendIf(ok bool, b []byte, c byte) []byte {
	if ok {
		return append(b, c)
	}
	return b
}

// skipContainer steps over one array or object, checking only its
// syntax (for Sanitize's placeholder).
func (s *scanner) skipContainer() {
	depth := 0
	for s.pos < len(s.in) {
		switch s.in[s.pos] {
		case '[', '{':
			depth++
			s.pos++
		case ']', '}':
			depth--
			s.pos++
			if depth == 0 {
				return
			}
		case '"':
			s.str()
			if s.err != nil {
				return
			}
		default:
			s.pos++
		}
	}
	s.fail(errSyntaxAt(s.pos, "unexpected end"))
}

// str steps over a string starting at its opening quote.
func (s *scanner) str() {
	s.pos++
	for s.pos < len(s.in) {
		c := s.in[s.pos]
		switch {
		case c == '"':
			s.pos++
			return
		case c < 0x20:
			s.fail(errSyntaxAt(s.pos, "control character in a string"))
			return
		case c == '\\':
			s.escape()
			if s.err != nil {
				return
			}
		case c < utf8.RuneSelf:
			s.pos++
		default:
			r, n := utf8.DecodeRune(s.in[s.pos:])
			if r == utf8.RuneError && n == 1 {
				s.fail(errSyntaxAt(s.pos, "invalid UTF-8"))
				return
			}
			s.pos += n
		}
	}
	s.fail(errSyntaxAt(s.pos, "unterminated string"))
}

// escape steps over one escape sequence at a backslash.
func (s *scanner) escape() {
	if s.pos+1 >= len(s.in) {
		s.fail(errSyntaxAt(s.pos, "unterminated string"))
		return
	}
	switch s.in[s.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.pos += 2
		return
	case 'u':
	default:
		s.fail(errSyntaxAt(s.pos, "invalid escape"))
		return
	}
	r, ok := s.hex4(s.pos + 2)
	if !ok {
		s.fail(errSyntaxAt(s.pos, "invalid \\u escape"))
		return
	}
	s.pos += 6
	switch {
	case r == 0:
		s.refuse(Unstorable, `a string holds \u0000, which PostgreSQL cannot store`)
	case r >= 0xD800 && r <= 0xDBFF:
		if s.pos+1 < len(s.in) && s.in[s.pos] == '\\' && s.in[s.pos+1] == 'u' {
			if lo, ok := s.hex4(s.pos + 2); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				s.pos += 6
				return
			}
		}
		s.refuse(Unstorable, `a string holds an unpaired surrogate \u%04x`, r)
	case r >= 0xDC00 && r <= 0xDFFF:
		s.refuse(Unstorable, `a string holds an unpaired surrogate \u%04x`, r)
	}
}

func (s *scanner) hex4(at int) (rune, bool) {
	if at+4 > len(s.in) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s.in[at:at+4]), 16, 32)
	return rune(v), err == nil
}

// number steps over a number and applies the rule to it.
func (s *scanner) number() {
	from := s.pos
	if s.in[s.pos] == '-' {
		s.pos++
	}
	digits := func() int {
		n := 0
		for s.pos < len(s.in) && s.in[s.pos] >= '0' && s.in[s.pos] <= '9' {
			s.pos++
			n++
		}
		return n
	}
	intStart := s.pos
	if n := digits(); n == 0 || n > 1 && s.in[intStart] == '0' {
		s.fail(errSyntaxAt(from, "invalid number"))
		return
	}
	mantissaEnd := s.pos
	if s.pos < len(s.in) && s.in[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			s.fail(errSyntaxAt(from, "invalid number"))
			return
		}
		mantissaEnd = s.pos
	}
	exp := 0 // the exponent's magnitude, capped
	if s.pos < len(s.in) && (s.in[s.pos] == 'e' || s.in[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.in) && (s.in[s.pos] == '+' || s.in[s.pos] == '-') {
			s.pos++
		}
		expStart := s.pos
		if digits() == 0 {
			s.fail(errSyntaxAt(from, "invalid number"))
			return
		}
		for _, d := range s.in[expStart:s.pos] {
			if exp = exp*10 + int(d-'0'); exp > 1000 {
				break
			}
		}
	}
	lit := s.in[from:s.pos]
	kind, reason := Kind(0), ""
	// Most numbers are plainly in range: a short literal with at most 20
	// characters of mantissa (a value between 1e-20 and 1e20 unless zero)
	// scaled by at most 10^±280. Only the others are parsed (ParseFloat
	// was most of the time of a check).
	if len(lit) > 40 || mantissaEnd-intStart > 20 || exp > 280 {
		kind, reason = numberProblem(lit, s.in[intStart:mantissaEnd])
	}
	switch {
	case reason == "":
		s.emit(from)
	case s.rewrite:
		s.out = strconv.AppendQuote(s.out, PlaceholderNumber)
	default:
		s.refuse(kind, "%s", reason)
	}
}

// numberProblem says what the rule refuses in a number's literal (its
// kind and in words), or "". mantissa is its digits and point, without
// sign or exponent.
func numberProblem(lit, mantissa []byte) (Kind, string) {
	if len(lit) > MaxNumberLen {
		return LongNumber, fmt.Sprintf("a number of %d characters (at most %d)", len(lit), MaxNumberLen)
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || f == 0 && strings.Trim(string(mantissa), "0.") != "" {
		shown := string(lit)
		if len(shown) > 32 {
			shown = shown[:32] + "…"
		}
		return OutOfRange, fmt.Sprintf("number %s is outside the range of a 64-bit float (magnitude between 5e-324 and 1.7e308, or 0)", shown)
	}
	return 0, ""
}
