package worker

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// evaluate computes an arithmetic expression: numbers, + - * / % ^ (power,
// right-associative), unary minus, parentheses, and the functions sqrt,
// abs, round, floor, ceil, ln, log10, sin, cos, tan; the constants pi and
// e. × and ÷ are accepted for * and /.
func evaluate(expr string) (float64, error) {
	p := &calcParser{src: []rune(expr)}
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	p.space()
	if p.pos < len(p.src) {
		return 0, fmt.Errorf("unexpected %q at position %d", string(p.src[p.pos]), p.pos+1)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errors.New("the result is not a finite number")
	}
	return v, nil
}

// formatNumber prints v without a useless fraction or exponent.
func formatNumber(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 12, 64)
}

type calcParser struct {
	src   []rune
	pos   int
	depth int
}

func (p *calcParser) space() {
	for p.pos < len(p.src) && unicode.IsSpace(p.src[p.pos]) {
		p.pos++
	}
}

func (p *calcParser) peek() rune {
	p.space()
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

// expr = term { ("+" | "-") term }
func (p *calcParser) expr() (float64, error) {
	v, err := p.term()
	for err == nil {
		switch p.peek() {
		case '+':
			p.pos++
			var r float64
			if r, err = p.term(); err == nil {
				v += r
			}
		case '-', '−':
			p.pos++
			var r float64
			if r, err = p.term(); err == nil {
				v -= r
			}
		default:
			return v, nil
		}
	}
	return 0, err
}

// term = unary { ("*" | "/" | "%") unary }
func (p *calcParser) term() (float64, error) {
	v, err := p.unary()
	for err == nil {
		op := p.peek()
		switch op {
		case '*', '×', '/', '÷', '%':
			p.pos++
		default:
			return v, nil
		}
		var r float64
		if r, err = p.unary(); err != nil {
			break
		}
		switch op {
		case '*', '×':
			v *= r
		case '/', '÷':
			if r == 0 {
				return 0, errors.New("division by zero")
			}
			v /= r
		case '%':
			if r == 0 {
				return 0, errors.New("modulo by zero")
			}
			v = math.Mod(v, r)
		}
	}
	return 0, err
}

// unary = ("-" | "+") unary | power
func (p *calcParser) unary() (float64, error) {
	switch p.peek() {
	case '-', '−':
		p.pos++
		v, err := p.unary()
		return -v, err
	case '+':
		p.pos++
		return p.unary()
	}
	return p.power()
}

// power = primary [ "^" unary ]
func (p *calcParser) power() (float64, error) {
	v, err := p.primary()
	if err != nil {
		return 0, err
	}
	if p.peek() == '^' {
		p.pos++
		e, err := p.unary()
		if err != nil {
			return 0, err
		}
		return math.Pow(v, e), nil
	}
	return v, nil
}

// primary = number | name | name "(" expr ")" | "(" expr ")"
func (p *calcParser) primary() (float64, error) {
	c := p.peek()
	switch {
	case c == '(':
		p.depth++
		if p.depth > 100 {
			return 0, errors.New("parentheses nested too deeply")
		}
		p.pos++
		v, err := p.expr()
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			return 0, fmt.Errorf("missing ) at position %d", p.pos+1)
		}
		p.pos++
		p.depth--
		return v, nil
	case c >= '0' && c <= '9' || c == '.':
		start := p.pos
		for p.pos < len(p.src) && (unicode.IsDigit(p.src[p.pos]) || p.src[p.pos] == '.' || p.src[p.pos] == '_') {
			p.pos++
		}
		s := strings.ReplaceAll(string(p.src[start:p.pos]), "_", "")
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("bad number %q", s)
		}
		return v, nil
	case unicode.IsLetter(c):
		start := p.pos
		for p.pos < len(p.src) && (unicode.IsLetter(p.src[p.pos]) || unicode.IsDigit(p.src[p.pos])) {
			p.pos++
		}
		name := strings.ToLower(string(p.src[start:p.pos]))
		switch name {
		case "pi", "π":
			return math.Pi, nil
		case "e":
			return math.E, nil
		}
		fn, ok := calcFuncs[name]
		if !ok {
			return 0, fmt.Errorf("unknown name %q", name)
		}
		if p.peek() != '(' {
			return 0, fmt.Errorf("%s needs an argument in parentheses", name)
		}
		arg, err := p.primary()
		if err != nil {
			return 0, err
		}
		return fn(arg), nil
	case c == 0:
		return 0, errors.New("unexpected end of expression")
	}
	return 0, fmt.Errorf("unexpected %q at position %d", string(c), p.pos+1)
}

var calcFuncs = map[string]func(float64) float64{
	"sqrt": math.Sqrt, "abs": math.Abs, "round": math.Round, "floor": math.Floor, "ceil": math.Ceil,
	"ln": math.Log, "log": math.Log10, "log10": math.Log10, "sin": math.Sin, "cos": math.Cos, "tan": math.Tan,
}

// findExpression picks the longest arithmetic expression in a sentence,
// if there is one: "What is 6 times 7?" gives "6 * 7". It returns "" when
// the text holds no number combined with an operator.
func findExpression(text string) string {
	s := " " + strings.ToLower(text) + " "
	for _, w := range [][2]string{
		{" multiplied by ", " * "}, {" divided by ", " / "}, {" to the power of ", " ^ "},
		{" times ", " * "}, {" plus ", " + "}, {" minus ", " - "}, {" over ", " / "},
		{" squared ", " ^ 2 "}, {" x ", " * "},
	} {
		s = strings.ReplaceAll(s, w[0], w[1])
	}
	isExprRune := func(r rune) bool {
		return unicode.IsDigit(r) || strings.ContainsRune("+-−*/×÷^%().,_ ", r)
	}
	best := ""
	rs := []rune(s)
	for i := 0; i < len(rs); {
		if !isExprRune(rs[i]) {
			i++
			continue
		}
		j := i
		for j < len(rs) && isExprRune(rs[j]) {
			j++
		}
		cand := strings.TrimRight(strings.TrimSpace(string(rs[i:j])), ".,")
		cand = strings.ReplaceAll(cand, ",", "")
		if len(cand) > len(best) && strings.ContainsAny(cand, "0123456789") && strings.ContainsAny(cand, "+-−*/×÷^%") {
			if _, err := evaluate(cand); err == nil {
				best = cand
			}
		}
		i = j
	}
	return best
}
