// Package awk is the awk of the simulated busybox image: the field-printing subset (Main).
package awk

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/libbb"
)

// Main is busybox awk's field-printing subset, what the e2e specs and most shell one-liners use
// (`wc -l $f | awk {'print $1'}` in the Container Runtime blackbox spec, `df | awk '{print $2}'`):
// rules of an optional pattern (BEGIN, END, /regex/, !/regex/, or a comparison of two terms with ==,
// !=, <, <=, >, >=, ~, !~) and an action of print statements and next; a print's items are terms
// ($N, $NF, $(NF-1), $0, NR, NF, FILENAME, "strings", numbers, -v variables), adjacent terms
// concatenated, commas joined with a space. Fields split on runs of blanks, or on -F's separator (one
// character, or a regular expression). Anything else (arithmetic, assignments, functions, printf,
// if/while) is refused as busybox refuses a program it cannot parse, with a message naming the
// construct, rather than run wrong.
func Main(p *kernel.Proc) int {
	opts, args, err := libbb.Flags(p.Args[1:], "Fvf")
	if err != nil {
		return libbb.Usage(p, err)
	}
	if _, ok := opts['f']; ok {
		p.Errorf("cmd. line:1: -f (a program file) is not in plugsim's awk: give the program as an argument")
		return 1
	}
	if len(args) == 0 {
		return libbb.Usage(p, fmt.Errorf("no program"))
	}
	prog, err := parseAwk(args[0])
	if err != nil {
		p.Errorf("cmd. line:1: %v", err)
		return 1
	}
	vars := map[string]string{}
	if v, ok := opts['v']; ok {
		name, val, found := strings.Cut(v, "=")
		if !found || !awkIdent.MatchString(name) {
			p.Errorf("cmd. line:1: -v %s: want NAME=VALUE", v)
			return 1
		}
		vars[name] = val
	}
	split := awkSplitter(opts['F'])
	w := bufio.NewWriter(p.Stdout)
	defer w.Flush()
	run := &awkRun{prog: prog, vars: vars, w: w}
	if run.rules(awkBegin) {
		return 0
	}
	files := args[1:]
	if !prog.readsInput() {
		files = nil
	} else if len(files) == 0 {
		files = []string{"-"}
	}
	for _, f := range files {
		if name, val, ok := strings.Cut(f, "="); ok && awkIdent.MatchString(name) {
			vars[name] = val // an assignment operand, as awk takes it between files
			continue
		}
		r, err := open(p, f)
		if err != nil {
			p.Errorf("cmd. line:1: Can't open file %s", f) // busybox: "Can't open file" then dies
			return 2
		}
		run.file = f
		if !run.lines(p, r, split) {
			r.Close()
			break
		}
		r.Close()
	}
	run.rules(awkEnd)
	return 0
}

// awkRun is one run of a program: its records, fields and variables.
type awkRun struct {
	prog   *awkProgram
	vars   map[string]string
	w      io.Writer
	file   string
	nr     int
	record string
	fields []string
}

// lines feeds every line of r through the main rules; false when the process was stopped.
func (a *awkRun) lines(p *kernel.Proc, r io.Reader, split func(string) []string) bool {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), kernel.MaxHeldBytes)
	mem := p.Held() // the line buffer, charged as a long line grows it
	defer mem.Release()
	mem.Grow(64 << 10)
	sc.Split(mem.Split(bufio.ScanLines))
	for sc.Scan() {
		if p.Step() != nil {
			return false
		}
		a.nr++
		a.record = sc.Text()
		a.fields = split(a.record)
		a.rules(awkMain)
	}
	return true
}

// rules runs the rules of one kind; true when the program has only BEGIN rules (awk then reads
// nothing).
func (a *awkRun) rules(kind awkKind) bool {
	for _, r := range a.prog.rules {
		if r.kind != kind || (kind == awkMain && !r.pattern.match(a)) {
			continue
		}
		for _, s := range r.action {
			if s.next {
				return false
			}
			parts := make([]string, len(s.items))
			for i, it := range s.items {
				var b strings.Builder
				for _, t := range it {
					b.WriteString(t.value(a))
				}
				parts[i] = b.String()
			}
			if len(s.items) == 0 {
				parts = []string{a.record}
			}
			fmt.Fprintln(a.w, strings.Join(parts, " "))
		}
	}
	return kind == awkBegin && !a.prog.readsInput()
}

// awkSplitter splits a record as FS says: runs of blanks by default (leading and trailing ones
// dropped), one character literally, or a longer FS as a regular expression.
func awkSplitter(fs string) func(string) []string {
	switch {
	case fs == "" || fs == " ":
		return strings.Fields
	case fs == `\t` || fs == "t":
		fs = "\t"
	}
	if len(fs) == 1 {
		return func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, fs)
		}
	}
	re, err := regexp.Compile(fs)
	if err != nil {
		sep := fs
		return func(s string) []string { return strings.Split(s, sep) }
	}
	return func(s string) []string {
		if s == "" {
			return nil
		}
		return re.Split(s, -1)
	}
}

type awkKind int

const (
	awkMain awkKind = iota
	awkBegin
	awkEnd
)

type awkProgram struct{ rules []awkRule }

func (p *awkProgram) readsInput() bool {
	for _, r := range p.rules {
		if r.kind != awkBegin {
			return true
		}
	}
	return false
}

type awkRule struct {
	kind    awkKind
	pattern awkPattern
	action  []awkStmt
}

// awkStmt is a print (items, each a concatenation of terms) or next.
type awkStmt struct {
	next  bool
	items [][]awkTerm
}

// awkPattern selects records: none (every one), a regular expression matched against $0 (negated
// with !), or a comparison of two terms.
type awkPattern struct {
	re     *regexp.Regexp
	negate bool
	op     string
	l, r   awkTerm
}

func (pt awkPattern) match(a *awkRun) bool {
	switch {
	case pt.re != nil:
		return pt.re.MatchString(a.record) != pt.negate
	case pt.op == "":
		return true
	}
	l, r := pt.l.value(a), pt.r.value(a)
	switch pt.op {
	case "~", "!~":
		re, err := regexp.Compile(r)
		return err == nil && re.MatchString(l) == (pt.op == "~")
	}
	// Numbers compare as numbers when both look like numbers (awk's strnum), else as strings.
	c := strings.Compare(l, r)
	if lf, err1 := strconv.ParseFloat(strings.TrimSpace(l), 64); err1 == nil {
		if rf, err2 := strconv.ParseFloat(strings.TrimSpace(r), 64); err2 == nil {
			c = 0
			if lf < rf {
				c = -1
			} else if lf > rf {
				c = 1
			}
		}
	}
	switch pt.op {
	case "==":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	}
	return c >= 0 // ">="
}

// awkTerm is one value: a field ($N, or $NF less an offset), NR, NF, FILENAME, a variable, or a
// literal.
type awkTerm struct {
	field   int // $N when kind is 'f'
	nfLess  int // $(NF-k) when kind is 'F'
	kind    byte
	literal string
}

func (t awkTerm) value(a *awkRun) string {
	switch t.kind {
	case 'f', 'F':
		n := t.field
		if t.kind == 'F' {
			n = len(a.fields) - t.nfLess
		}
		if n == 0 {
			return a.record
		}
		if n < 0 || n > len(a.fields) {
			return ""
		}
		return a.fields[n-1]
	case 'R':
		return strconv.Itoa(a.nr)
	case 'N':
		return strconv.Itoa(len(a.fields))
	case 'n':
		return a.file
	case 'v':
		return a.vars[t.literal]
	}
	return t.literal
}

var awkIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// awkLexer reads the program text.
type awkLexer struct {
	s   string
	pos int
}

func (l *awkLexer) skipBlanks(newlines bool) {
	for l.pos < len(l.s) {
		c := l.s[l.pos]
		if c == ' ' || c == '\t' || (newlines && (c == '\n' || c == ';')) {
			l.pos++
			continue
		}
		if c == '#' {
			for l.pos < len(l.s) && l.s[l.pos] != '\n' {
				l.pos++
			}
			continue
		}
		return
	}
}

func (l *awkLexer) peek() byte {
	if l.pos < len(l.s) {
		return l.s[l.pos]
	}
	return 0
}

func (l *awkLexer) word() string {
	start := l.pos
	for l.pos < len(l.s) {
		c := l.s[l.pos]
		if c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (l.pos > start && c >= '0' && c <= '9') {
			l.pos++
			continue
		}
		break
	}
	return l.s[start:l.pos]
}

// parseAwk parses the subset; its errors name what it could not take.
func parseAwk(src string) (*awkProgram, error) {
	l := &awkLexer{s: src}
	prog := &awkProgram{}
	for {
		l.skipBlanks(true)
		if l.pos >= len(l.s) {
			return prog, nil
		}
		var r awkRule
		switch c := l.peek(); {
		case c == '{':
		case c == '/' || c == '!':
			negate := c == '!'
			if negate {
				l.pos++
				if l.peek() != '/' {
					return nil, fmt.Errorf("unexpected token after '!' (plugsim's awk takes !/regex/)")
				}
			}
			re, err := l.regex()
			if err != nil {
				return nil, err
			}
			r.pattern = awkPattern{re: re, negate: negate}
		default:
			save := l.pos
			w := l.word()
			switch w {
			case "BEGIN":
				r.kind = awkBegin
			case "END":
				r.kind = awkEnd
			default:
				l.pos = save
				pt, err := l.comparison()
				if err != nil {
					return nil, err
				}
				r.pattern = pt
			}
		}
		l.skipBlanks(false)
		if l.peek() != '{' {
			if r.kind != awkMain {
				return nil, fmt.Errorf("BEGIN and END need an action")
			}
			r.action = []awkStmt{{}} // a pattern alone prints the record
			prog.rules = append(prog.rules, r)
			continue
		}
		l.pos++
		action, err := l.action()
		if err != nil {
			return nil, err
		}
		r.action = action
		prog.rules = append(prog.rules, r)
	}
}

func (l *awkLexer) regex() (*regexp.Regexp, error) {
	l.pos++ // the opening /
	var b strings.Builder
	for l.pos < len(l.s) && l.s[l.pos] != '/' {
		if l.s[l.pos] == '\\' && l.pos+1 < len(l.s) && l.s[l.pos+1] == '/' {
			l.pos++
		}
		b.WriteByte(l.s[l.pos])
		l.pos++
	}
	if l.pos >= len(l.s) {
		return nil, fmt.Errorf("unterminated regexp")
	}
	l.pos++
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("bad regexp /%s/", b.String())
	}
	return re, nil
}

func (l *awkLexer) comparison() (awkPattern, error) {
	left, err := l.term()
	if err != nil {
		return awkPattern{}, err
	}
	l.skipBlanks(false)
	var op string
	for _, o := range []string{"==", "!=", "<=", ">=", "!~", "<", ">", "~"} {
		if strings.HasPrefix(l.s[l.pos:], o) {
			op = o
			break
		}
	}
	if op == "" {
		return awkPattern{}, fmt.Errorf("a pattern plugsim's awk takes is BEGIN, END, /regex/ or TERM OP TERM, at %q", l.rest())
	}
	l.pos += len(op)
	l.skipBlanks(false)
	right, err := l.term()
	if err != nil {
		return awkPattern{}, err
	}
	return awkPattern{op: op, l: left, r: right}, nil
}

func (l *awkLexer) rest() string {
	r := l.s[l.pos:]
	if len(r) > 20 {
		r = r[:20] + "…"
	}
	return r
}

// action parses statements up to the closing brace.
func (l *awkLexer) action() ([]awkStmt, error) {
	var out []awkStmt
	for {
		l.skipBlanks(true)
		if l.pos >= len(l.s) {
			return nil, fmt.Errorf("unexpected end of program (a missing '}')")
		}
		if l.peek() == '}' {
			l.pos++
			return out, nil
		}
		switch w := l.word(); w {
		case "next":
			out = append(out, awkStmt{next: true})
		case "print":
			s, err := l.printItems()
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		case "":
			return nil, fmt.Errorf("unexpected token at %q", l.rest())
		default:
			return nil, fmt.Errorf("%q is not in plugsim's awk (it runs print and next)", w)
		}
	}
}

func (l *awkLexer) printItems() (awkStmt, error) {
	var s awkStmt
	var item []awkTerm
	for {
		l.skipBlanks(false)
		switch c := l.peek(); c {
		case 0, '}', ';', '\n':
			if item != nil {
				s.items = append(s.items, item)
			} else if len(s.items) > 0 {
				return s, fmt.Errorf("an item missing after ','")
			}
			return s, nil
		case ',':
			if item == nil {
				return s, fmt.Errorf("unexpected ','")
			}
			s.items = append(s.items, item)
			item = nil
			l.pos++
			continue
		case '>', '|':
			return s, fmt.Errorf("print's redirections are not in plugsim's awk")
		}
		t, err := l.term()
		if err != nil {
			return s, err
		}
		item = append(item, t)
	}
}

// term parses one value.
func (l *awkLexer) term() (awkTerm, error) {
	switch c := l.peek(); {
	case c == '$':
		l.pos++
		if l.peek() == '(' {
			l.pos++
			l.skipBlanks(false)
			if l.word() != "NF" {
				return awkTerm{}, fmt.Errorf("$(...) in plugsim's awk is $(NF) or $(NF-N)")
			}
			l.skipBlanks(false)
			less := 0
			if l.peek() == '-' {
				l.pos++
				l.skipBlanks(false)
				n, err := l.number()
				if err != nil {
					return awkTerm{}, err
				}
				less = n
				l.skipBlanks(false)
			}
			if l.peek() != ')' {
				return awkTerm{}, fmt.Errorf("$(...) in plugsim's awk is $(NF) or $(NF-N)")
			}
			l.pos++
			return awkTerm{kind: 'F', nfLess: less}, nil
		}
		if strings.HasPrefix(l.s[l.pos:], "NF") {
			l.pos += 2
			return awkTerm{kind: 'F'}, nil
		}
		n, err := l.number()
		if err != nil {
			return awkTerm{}, fmt.Errorf("$ takes a field number, NF or (NF-N)")
		}
		return awkTerm{kind: 'f', field: n}, nil
	case c == '"':
		l.pos++
		var b strings.Builder
		for l.pos < len(l.s) && l.s[l.pos] != '"' {
			c := l.s[l.pos]
			if c == '\\' && l.pos+1 < len(l.s) {
				l.pos++
				switch e := l.s[l.pos]; e {
				case 'n':
					c = '\n'
				case 't':
					c = '\t'
				default:
					c = e
				}
			}
			b.WriteByte(c)
			l.pos++
		}
		if l.pos >= len(l.s) {
			return awkTerm{}, fmt.Errorf("unterminated string")
		}
		l.pos++
		return awkTerm{literal: b.String()}, nil
	case c >= '0' && c <= '9':
		start := l.pos
		for l.pos < len(l.s) && (l.s[l.pos] >= '0' && l.s[l.pos] <= '9' || l.s[l.pos] == '.') {
			l.pos++
		}
		lit := l.s[start:l.pos]
		if f, err := strconv.ParseFloat(lit, 64); err == nil {
			lit = strconv.FormatFloat(f, 'g', 6, 64) // awk prints a number by OFMT, %.6g
		}
		return awkTerm{literal: lit}, nil
	}
	switch w := l.word(); w {
	case "NR", "FNR":
		return awkTerm{kind: 'R'}, nil
	case "NF":
		return awkTerm{kind: 'N'}, nil
	case "FILENAME":
		return awkTerm{kind: 'n'}, nil
	case "":
		return awkTerm{}, fmt.Errorf("unexpected token at %q", l.rest())
	default:
		l.skipBlanks(false)
		if c := l.peek(); c == '(' || c == '=' && !strings.HasPrefix(l.s[l.pos:], "==") {
			return awkTerm{}, fmt.Errorf("%q: functions and assignments are not in plugsim's awk", w)
		}
		return awkTerm{kind: 'v', literal: w}, nil
	}
}

func (l *awkLexer) number() (int, error) {
	start := l.pos
	for l.pos < len(l.s) && l.s[l.pos] >= '0' && l.s[l.pos] <= '9' {
		l.pos++
	}
	n, err := strconv.Atoi(l.s[start:l.pos])
	if err != nil || n > 1<<20 {
		return 0, fmt.Errorf("a field number at %q", l.rest())
	}
	return n, nil
}

// open opens an input operand: "-" is standard input.
func open(p *kernel.Proc, name string) (io.ReadCloser, error) {
	if name == "-" || name == "/dev/stdin" {
		return io.NopCloser(p.Stdin), nil
	}
	return p.FS().Open(p.Abs(name))
}
