package applets

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
)

// appletExpr is busybox's expr (coreutils/expr.c): ARG1 | ARG2, &, < <= = == != >= >, + - * / %,
// STRING : REGEXP (anchored BRE: the match's length, or its \( \) group), match, substr, index,
// length, quote and parentheses, with arbitrary-length words as busybox's 64-bit integers. Exit 0
// when the result is neither empty nor 0, 1 when it is, 2 for a syntax or arithmetic error.
func appletExpr(p *kernel.Proc) int {
	e := &exprParser{args: p.Args[1:]}
	if len(e.args) == 0 {
		p.Errorf("too few arguments")
		return 2
	}
	v, err := e.or()
	if err == nil && e.pos < len(e.args) {
		err = errExprSyntax
	}
	if err != nil {
		p.Errorf("%v", err)
		return 2
	}
	fmt.Fprintln(p.Stdout, v.String())
	if v.isNull() {
		return 1
	}
	return 0
}

var (
	errExprSyntax = fmt.Errorf("syntax error")
	errExprNonNum = fmt.Errorf("non-numeric argument")
	errExprDivide = fmt.Errorf("division by zero")
)

// exprValue is a string, or an integer when isInt.
type exprValue struct {
	s     string
	n     int64
	isInt bool
}

func exprInt(n int64) exprValue { return exprValue{n: n, isInt: true} }

func (v exprValue) String() string {
	if v.isInt {
		return strconv.FormatInt(v.n, 10)
	}
	return v.s
}

func (v exprValue) isNull() bool {
	if v.isInt {
		return v.n == 0
	}
	return v.s == "" || v.s == "0"
}

// toInt is expr.c toarith: a string of an optional sign and digits is a number.
func (v exprValue) toInt() (int64, bool) {
	if v.isInt {
		return v.n, true
	}
	n, err := strconv.ParseInt(v.s, 10, 64)
	return n, err == nil
}

type exprParser struct {
	args []string
	pos  int
	nest int
}

func (e *exprParser) peek() (string, bool) {
	if e.pos < len(e.args) {
		return e.args[e.pos], true
	}
	return "", false
}

func (e *exprParser) next() (string, error) {
	if e.pos >= len(e.args) {
		return "", errExprSyntax
	}
	e.pos++
	return e.args[e.pos-1], nil
}

func (e *exprParser) binary(ops []string, operand func() (exprValue, error), apply func(op string, l, r exprValue) (exprValue, error)) (exprValue, error) {
	l, err := operand()
	if err != nil {
		return l, err
	}
	for {
		t, ok := e.peek()
		if !ok || !contains(ops, t) {
			return l, nil
		}
		e.pos++
		r, err := operand()
		if err != nil {
			return r, err
		}
		if l, err = apply(t, l, r); err != nil {
			return l, err
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (e *exprParser) or() (exprValue, error) {
	return e.binary([]string{"|"}, e.and, func(_ string, l, r exprValue) (exprValue, error) {
		if !l.isNull() {
			return l, nil
		}
		if !r.isNull() {
			return r, nil
		}
		return exprInt(0), nil
	})
}

func (e *exprParser) and() (exprValue, error) {
	return e.binary([]string{"&"}, e.compare, func(_ string, l, r exprValue) (exprValue, error) {
		if l.isNull() || r.isNull() {
			return exprInt(0), nil
		}
		return l, nil
	})
}

func (e *exprParser) compare() (exprValue, error) {
	return e.binary([]string{"<", "<=", "=", "==", "!=", ">=", ">"}, e.sum, func(op string, l, r exprValue) (exprValue, error) {
		var c int
		ln, lok := l.toInt()
		rn, rok := r.toInt()
		if lok && rok {
			switch {
			case ln < rn:
				c = -1
			case ln > rn:
				c = 1
			}
		} else {
			c = strings.Compare(l.String(), r.String())
		}
		res := map[string]bool{"<": c < 0, "<=": c <= 0, "=": c == 0, "==": c == 0, "!=": c != 0, ">=": c >= 0, ">": c > 0}[op]
		if res {
			return exprInt(1), nil
		}
		return exprInt(0), nil
	})
}

func (e *exprParser) arith(op string, l, r exprValue) (exprValue, error) {
	a, ok1 := l.toInt()
	b, ok2 := r.toInt()
	if !ok1 || !ok2 {
		return l, errExprNonNum
	}
	switch op {
	case "+":
		return exprInt(a + b), nil
	case "-":
		return exprInt(a - b), nil
	case "*":
		return exprInt(a * b), nil
	}
	if b == 0 {
		return l, errExprDivide
	}
	if op == "/" {
		return exprInt(a / b), nil
	}
	return exprInt(a % b), nil
}

func (e *exprParser) sum() (exprValue, error) {
	return e.binary([]string{"+", "-"}, e.product, e.arith)
}

func (e *exprParser) product() (exprValue, error) {
	return e.binary([]string{"*", "/", "%"}, e.match, e.arith)
}

func (e *exprParser) match() (exprValue, error) {
	return e.binary([]string{":"}, e.primary, func(_ string, l, r exprValue) (exprValue, error) {
		return exprRegex(l.String(), r.String())
	})
}

// exprRegex is STRING : REGEXP, a basic regular expression anchored at the start.
func exprRegex(s, bre string) (exprValue, error) {
	re, err := regexp.Compile("^(?:" + breToRE2(bre) + ")")
	if err != nil {
		return exprValue{}, fmt.Errorf("invalid regular expression")
	}
	m := re.FindStringSubmatchIndex(s)
	if re.NumSubexp() > 0 {
		if m == nil || m[2] < 0 {
			return exprValue{}, nil
		}
		return exprValue{s: s[m[2]:m[3]]}, nil
	}
	if m == nil {
		return exprInt(0), nil
	}
	return exprInt(int64(len([]rune(s[:m[1]])))), nil
}

// breToRE2 turns a POSIX basic regular expression into RE2 syntax: \( \) \{ \} are the groups
// and intervals, ( ) { } + ? | are literal.
func breToRE2(bre string) string {
	var b strings.Builder
	for i := 0; i < len(bre); i++ {
		c := bre[i]
		if c == '\\' && i+1 < len(bre) {
			i++
			switch d := bre[i]; d {
			case '(', ')', '{', '}':
				b.WriteByte(d)
			default:
				b.WriteByte('\\')
				b.WriteByte(d)
			}
			continue
		}
		switch c {
		case '(', ')', '{', '}', '+', '?', '|':
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

func (e *exprParser) primary() (exprValue, error) {
	t, err := e.next()
	if err != nil {
		return exprValue{}, err
	}
	word := func() (string, error) { return e.next() }
	switch t {
	case "(":
		e.nest++
		if e.nest > 1000 {
			return exprValue{}, errExprSyntax
		}
		v, err := e.or()
		e.nest--
		if err != nil {
			return v, err
		}
		if c, err := e.next(); err != nil || c != ")" {
			return v, errExprSyntax
		}
		return v, nil
	case "quote", "+":
		w, err := word()
		return exprValue{s: w}, err
	case "length":
		w, err := word()
		return exprInt(int64(len(w))), err
	case "match":
		s, err := word()
		if err != nil {
			return exprValue{}, err
		}
		r, err := word()
		if err != nil {
			return exprValue{}, err
		}
		return exprRegex(s, r)
	case "index":
		s, err := word()
		if err != nil {
			return exprValue{}, err
		}
		chars, err := word()
		if err != nil {
			return exprValue{}, err
		}
		return exprInt(int64(strings.IndexAny(s, chars) + 1)), nil
	case "substr":
		s, err := word()
		if err != nil {
			return exprValue{}, err
		}
		posS, err := word()
		if err != nil {
			return exprValue{}, err
		}
		lenS, err := word()
		if err != nil {
			return exprValue{}, err
		}
		pos, err1 := strconv.ParseInt(posS, 10, 64)
		n, err2 := strconv.ParseInt(lenS, 10, 64)
		if err1 != nil || err2 != nil {
			return exprValue{}, errExprNonNum
		}
		if pos < 1 || n < 1 || pos > int64(len(s)) {
			return exprValue{}, nil
		}
		end := min(pos-1+n, int64(len(s)))
		return exprValue{s: s[pos-1 : end]}, nil
	case ")":
		return exprValue{}, errExprSyntax
	}
	return exprValue{s: t}, nil
}
