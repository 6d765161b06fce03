package demo

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
)

// maxExprLen and maxExprDepth bound what the calculator accepts, so that
// no expression costs more than a moment.
const (
	maxExprLen   = 1000
	maxExprDepth = 64
)

// calcFuncs are the calculator's functions, each of one number.
var calcFuncs = map[string]func(float64) float64{
	"sqrt": math.Sqrt, "abs": math.Abs, "round": math.Round, "floor": math.Floor, "ceil": math.Ceil,
	"ln": math.Log, "log": math.Log10, "log10": math.Log10, "sin": math.Sin, "cos": math.Cos, "tan": math.Tan,
}

// calcConstants are the calculator's names of numbers.
var calcConstants = map[string]float64{"pi": math.Pi, "e": math.E}

// calcEnv is all an expression can read: the constants.
var calcEnv = func() map[string]any {
	env := map[string]any{}
	for name, v := range calcConstants {
		env[name] = v
	}
	return env
}()

// calcOptions restrict github.com/expr-lang/expr to arithmetic on
// float64: no built-in functions, no environment but the constants, the
// functions above, and / and % that refuse a zero divisor.
var calcOptions = func() []expr.Option {
	opts := []expr.Option{
		expr.Env(calcEnv), expr.DisableAllBuiltins(), expr.AsFloat64(), expr.Patch(floatLiterals{}),
		expr.Function("div", func(p ...any) (any, error) {
			if p[1].(float64) == 0 {
				return nil, errors.New("division by zero")
			}
			return p[0].(float64) / p[1].(float64), nil
		}, new(func(float64, float64) float64)),
		expr.Function("mod", func(p ...any) (any, error) {
			if p[1].(float64) == 0 {
				return nil, errors.New("modulo by zero")
			}
			return math.Mod(p[0].(float64), p[1].(float64)), nil
		}, new(func(float64, float64) float64)),
		expr.Operator("/", "div"), expr.Operator("%", "mod"),
	}
	for name, fn := range calcFuncs {
		opts = append(opts, expr.Function(name, func(p ...any) (any, error) {
			return fn(p[0].(float64)), nil
		}, new(func(float64) float64)))
	}
	return opts
}()

// floatLiterals makes every integer literal a float, so that arithmetic
// is float64 throughout (7 / 2 is 3.5, and 2 ^ 3 is 8.0).
type floatLiterals struct{}

func (floatLiterals) Visit(node *ast.Node) {
	if n, ok := (*node).(*ast.IntegerNode); ok {
		ast.Patch(node, &ast.FloatNode{Value: float64(n.Value)})
	}
}

// arithmeticOnly refuses every node that is not arithmetic: the first
// refusal is kept in err. It counts the uses of each function's name, and
// the calls: a name used more often than called is a function without
// its argument.
type arithmeticOnly struct {
	err          error
	names, calls map[string]int
}

// check returns the first refusal, once the tree has been walked.
func (a *arithmeticOnly) check() error {
	if a.err != nil {
		return a.err
	}
	for name, n := range a.names {
		if n > a.calls[name] {
			return fmt.Errorf("%s needs an argument in parentheses", name)
		}
	}
	return nil
}

func (a *arithmeticOnly) Visit(node *ast.Node) {
	if a.err != nil {
		return
	}
	switch n := (*node).(type) {
	case *ast.IntegerNode, *ast.FloatNode:
	case *ast.UnaryNode:
		if n.Operator != "-" && n.Operator != "+" {
			a.err = fmt.Errorf("%q is not arithmetic", n.Operator)
		}
	case *ast.BinaryNode:
		switch n.Operator {
		case "+", "-", "*", "/", "%", "^", "**":
		default:
			a.err = fmt.Errorf("%q is not arithmetic", n.Operator)
		}
	case *ast.IdentifierNode:
		_, isConst := calcConstants[n.Value]
		_, isFunc := calcFuncs[n.Value]
		if !isConst && !isFunc {
			a.err = fmt.Errorf("unknown name %q", n.Value)
		} else if isFunc {
			a.names[n.Value]++
		}
	case *ast.BuiltinNode:
		// Parsed without options, round, abs, ceil and floor are
		// expr's built-ins; compiled, they are the calculator's.
		if calcFuncs[n.Name] == nil {
			a.err = fmt.Errorf("unknown function %q", n.Name)
		} else if len(n.Arguments) != 1 {
			a.err = fmt.Errorf("%s takes one argument, not %d", n.Name, len(n.Arguments))
		}
	case *ast.CallNode:
		callee, _ := n.Callee.(*ast.IdentifierNode)
		if callee == nil || calcFuncs[callee.Value] == nil {
			a.err = errors.New("only the listed functions can be called")
		} else if len(n.Arguments) != 1 {
			a.err = fmt.Errorf("%s takes one argument, not %d", callee.Value, len(n.Arguments))
		} else {
			a.calls[callee.Value]++
		}
	default:
		a.err = errors.New("only numbers, + - * / % ^, parentheses and the listed functions are allowed")
	}
}

// evaluate computes an arithmetic expression: numbers, + - * / % ^ (or
// **: power, right-associative), unary minus, parentheses, and the
// functions sqrt, abs, round, floor, ceil, ln, log10, sin, cos, tan; the
// constants pi and e. × and ÷ are accepted for * and /. It runs on
// github.com/expr-lang/expr, after checking that the expression is
// arithmetic only (no strings, comparisons, variables, member access or
// other functions); an expression over 1000 characters or nested over 64
// parentheses deep is refused before it is parsed. The error says what is
// wrong; it never panics.
func evaluate(input string) (float64, error) {
	if len(input) > maxExprLen {
		return 0, fmt.Errorf("the expression is longer than %d characters", maxExprLen)
	}
	depth := 0
	for _, r := range input {
		switch r {
		case '(', '[', '{':
			if depth++; depth > maxExprDepth {
				return 0, errors.New("parentheses nested too deeply")
			}
		case ')', ']', '}':
			depth--
		}
	}
	src := strings.NewReplacer("×", "*", "÷", "/", "−", "-", "π", "pi").Replace(strings.ToLower(input))
	if strings.TrimSpace(src) == "" {
		return 0, errors.New("the expression is empty")
	}
	tree, err := parser.Parse(src)
	if err != nil {
		return 0, exprError(err)
	}
	check := &arithmeticOnly{names: map[string]int{}, calls: map[string]int{}}
	ast.Walk(&tree.Node, check)
	if err := check.check(); err != nil {
		return 0, err
	}
	program, err := expr.Compile(src, calcOptions...)
	if err != nil {
		return 0, exprError(err)
	}
	out, err := expr.Run(program, calcEnv)
	if err != nil {
		return 0, exprError(err)
	}
	v, ok := out.(float64)
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errors.New("the result is not a finite number")
	}
	return v, nil
}

// exprPosition is the " (line:column)" expr adds to a message.
var exprPosition = regexp.MustCompile(`\s*\(\d+:(\d+)\)$`)

// exprError keeps the first line of expr's error (the rest draws the
// expression with a caret), with the position as a column.
func exprError(err error) error {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	msg = strings.Replace(msg, "unexpected token EOF", "unexpected end of the expression", 1)
	if m := exprPosition.FindStringSubmatch(msg); m != nil {
		msg = strings.TrimSuffix(msg, m[0]) + " at position " + m[1]
	}
	return errors.New(msg)
}

// formatNumber prints v without a useless fraction or exponent.
func formatNumber(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 12, 64)
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
