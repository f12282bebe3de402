package shell

import (
	"errors"
	"fmt"
	"strings"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
)

// The shell subset (see README "sh"): lists with ; & and newlines, && ||, ! and
// pipelines, simple commands with assignments and redirections
// (< > >> >| <> n>&m n<&m &>), if/elif/else, while/until, for, case, { },
// ( ), functions name() { }, and comments. Words are kept raw (quotes
// included) and expanded when the command runs.

type tokKind int

const (
	tWord tokKind = iota
	tOp
	tNewline
	tEOF
	tIONum
)

type token struct {
	kind tokKind
	val  string
	pos  int
}

// errIncomplete marks input that ends inside a construct or quote; an
// interactive shell reads another line and tries again.
var errIncomplete = errors.New("unexpected end of input")

type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return "syntax error: " + e.msg }

type lexer struct {
	src string
	pos int
	// ahead is the token peeked at, when has is set (one token of lookahead is all the parser needs)
	ahead token
	has   bool
	// pending here-documents whose bodies start after the next newline.
	pending []*heredoc
	// tokens is how many tokens were scanned; mem, when set, is charged tokenCost for each
	// (the tree they build), a chargeEvery at a time.
	tokens int
	mem    *kernel.Held
}

// chargeEvery is how many tokens the lexer scans between two charges of their tree.
const chargeEvery = 256

// heredoc is the body of a << redirection.
type heredoc struct {
	delim  string
	quoted bool // a quoted delimiter: the body is not expanded
	strip  bool // <<- strips leading tabs
	body   string
}

// readHeredocs reads the bodies of pending here-documents from l.pos.
func (l *lexer) readHeredocs() error {
	for _, h := range l.pending {
		var b strings.Builder
		for {
			if l.pos >= len(l.src) {
				return errIncomplete
			}
			end := strings.IndexByte(l.src[l.pos:], '\n')
			var line string
			if end < 0 {
				line = l.src[l.pos:]
				l.pos = len(l.src)
			} else {
				line = l.src[l.pos : l.pos+end]
				l.pos += end + 1
			}
			if h.strip {
				line = strings.TrimLeft(line, "\t")
			}
			if line == h.delim {
				break
			}
			b.WriteString(line)
			b.WriteByte('\n')
			if end < 0 {
				return errIncomplete
			}
		}
		h.body = b.String()
	}
	l.pending = nil
	return nil
}

var ops = []string{"<<-", "<<", "&&", "||", ";;", ">>", ">&", "<&", "<>", ">|", "&>", ";", "&", "|", "(", ")", "<", ">"}

func (l *lexer) peek() (token, error) {
	if !l.has {
		t, err := l.scan()
		if err != nil {
			return t, err
		}
		l.ahead, l.has = t, true
	}
	return l.ahead, nil
}

func (l *lexer) next() (token, error) {
	t, err := l.peek()
	if err != nil {
		return t, err
	}
	l.has = false
	return t, nil
}

func (l *lexer) scan() (token, error) {
	if l.tokens++; l.mem != nil && l.tokens%chargeEvery == 0 {
		if err := l.mem.Grow(chargeEvery * tokenCost); err != nil {
			return token{}, errTreeTooBig
		}
	}
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		if c == ' ' || c == '\t' || c == '\r' {
			l.pos++
			continue
		}
		if c == '\\' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '\n' {
			l.pos += 2
			continue
		}
		if c == '#' {
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
			continue
		}
		break
	}
	if l.pos >= len(l.src) {
		if len(l.pending) > 0 {
			return token{}, errIncomplete
		}
		return token{kind: tEOF, pos: l.pos}, nil
	}
	start := l.pos
	if l.src[l.pos] == '\n' {
		l.pos++
		if len(l.pending) > 0 {
			if err := l.readHeredocs(); err != nil {
				return token{}, err
			}
		}
		return token{kind: tNewline, pos: start}, nil
	}
	for _, op := range ops {
		if strings.HasPrefix(l.src[l.pos:], op) {
			l.pos += len(op)
			return token{kind: tOp, val: op, pos: start}, nil
		}
	}
	end, err := scanWord(l.src, l.pos)
	if err != nil {
		return token{}, err
	}
	w := l.src[start:end]
	l.pos = end
	if end < len(l.src) && (l.src[end] == '<' || l.src[end] == '>') && isDigits(w) {
		return token{kind: tIONum, val: w, pos: start}, nil
	}
	return token{kind: tWord, val: w, pos: start}, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// scanWord returns the end of the word starting at i, skipping over quotes,
// escapes and $( ), ${ }, $(( )) and backquotes.
func scanWord(s string, i int) (int, error) {
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ';' || c == '&' || c == '|' || c == '<' || c == '>' || c == '(' || c == ')':
			return i, nil
		case c == '\\':
			if i+1 >= len(s) {
				return i + 1, nil
			}
			i += 2
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return 0, errIncomplete
			}
			i += j + 2
		case c == '"':
			j, err := scanDouble(s, i+1)
			if err != nil {
				return 0, err
			}
			i = j
		case c == '`':
			j, err := scanBackquote(s, i+1)
			if err != nil {
				return 0, err
			}
			i = j
		case c == '$':
			j, err := scanDollar(s, i)
			if err != nil {
				return 0, err
			}
			i = j
		default:
			i++
		}
	}
	return i, nil
}

func scanDouble(s string, i int) (int, error) { return scanDoubleAt(s, i, 0) }

// errNesting is the parser's answer to constructs or expansions nested more than maxNest deep
// (ash would overflow its stack on them).
var errNesting = &syntaxError{fmt.Sprintf("nested too deeply (more than %d levels)", MaxNest)}

func scanDoubleAt(s string, i, depth int) (int, error) {
	if depth > MaxNest {
		return 0, errNesting
	}
	for i < len(s) {
		switch s[i] {
		case '\\':
			i += 2
		case '"':
			return i + 1, nil
		case '`':
			j, err := scanBackquote(s, i+1)
			if err != nil {
				return 0, err
			}
			i = j
		case '$':
			j, err := scanDollarAt(s, i, depth+1)
			if err != nil {
				return 0, err
			}
			i = j
		default:
			i++
		}
	}
	return 0, errIncomplete
}

func scanBackquote(s string, i int) (int, error) {
	for i < len(s) {
		switch s[i] {
		case '\\':
			i += 2
		case '`':
			return i + 1, nil
		default:
			i++
		}
	}
	return 0, errIncomplete
}

// scanDollar returns the end of the expansion starting at s[i] == '$'.
func scanDollar(s string, i int) (int, error) { return scanDollarAt(s, i, 0) }

func scanDollarAt(s string, i, depth int) (int, error) {
	if depth > MaxNest {
		return 0, errNesting
	}
	if i+1 >= len(s) {
		return i + 1, nil
	}
	switch s[i+1] {
	case '(':
		depth := 0
		j := i + 1
		for j < len(s) {
			switch s[j] {
			case '(':
				if depth++; depth > MaxNest {
					return 0, errNesting
				}
			case ')':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			case '\'':
				k := strings.IndexByte(s[j+1:], '\'')
				if k < 0 {
					return 0, errIncomplete
				}
				j += k + 1
			case '"':
				k, err := scanDoubleAt(s, j+1, depth+1)
				if err != nil {
					return 0, err
				}
				j = k - 1
			case '\\':
				j++
			}
			j++
		}
		return 0, errIncomplete
	case '{':
		j := i + 2
		for j < len(s) {
			switch s[j] {
			case '}':
				return j + 1, nil
			case '\\':
				j++
			case '\'':
				k := strings.IndexByte(s[j+1:], '\'')
				if k < 0 {
					return 0, errIncomplete
				}
				j += k + 1
			case '"':
				k, err := scanDoubleAt(s, j+1, depth+1)
				if err != nil {
					return 0, err
				}
				j = k - 1
			case '$':
				k, err := scanDollarAt(s, j, depth+1)
				if err != nil {
					return 0, err
				}
				j = k - 1
			}
			j++
		}
		return 0, errIncomplete
	}
	c := s[i+1]
	switch {
	case strings.IndexByte("?$!#@*-0123456789", c) >= 0:
		return i + 2, nil
	case c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		j := i + 2
		for j < len(s) && (s[j] == '_' || (s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') || (s[j] >= '0' && s[j] <= '9')) {
			j++
		}
		return j, nil
	}
	return i + 1, nil
}

// AST

type redir struct {
	fd     int    // file descriptor redirected
	op     string // < > >> >| <> >& <& &> << <<-
	target string // raw word
	here   *heredoc
}

func isRedirOp(op string) bool {
	switch op {
	case "<", ">", ">>", ">&", "<&", "<>", ">|", "&>", "<<", "<<-":
		return true
	}
	return false
}

type command interface{}

type simpleCmd struct {
	assigns []string
	words   []string
	redirs  []redir
}

type ifCmd struct {
	conds  []*list // if, elif conditions
	bodies []*list
	els    *list
}

type loopCmd struct {
	until bool
	cond  *list
	body  *list
}

type forCmd struct {
	name  string
	words []string
	inSet bool
	body  *list
}

type caseItem struct {
	patterns []string
	body     *list
}

type caseCmd struct {
	word  string
	items []caseItem
}

type groupCmd struct {
	body     *list
	subshell bool
}

type funcDef struct {
	name string
	body command
	cost int64 // what its tree takes (tokenCost per token), charged while it is defined
}

// compound wraps a compound command with its redirections.
type compound struct {
	cmd    command
	redirs []redir
}

type pipeline struct {
	bang bool
	cmds []command
}

type andOr struct {
	first *pipeline
	ops   []string
	rest  []*pipeline
}

type list struct {
	items []*andOr
	async []bool
}

type parser struct {
	lx *lexer
	// depth is how many compound commands enclose the one being parsed (see maxNest).
	depth int
}

// errTreeTooBig is a parse that the container's memory cannot hold (the OOM killer ends it).
var errTreeTooBig = &syntaxError{"out of memory"}

func parseScript(src string) (*list, error) { return parseHeld(src, nil) }

// newParser parses src, charging its tree to mem (nil: uncharged).
func newParser(src string, mem *kernel.Held) *parser { return &parser{lx: &lexer{src: src, mem: mem}} }

// parseHeld parses a whole script, charging its tree to mem (nil: uncharged).
func parseHeld(src string, mem *kernel.Held) (*list, error) {
	p := newParser(src, mem)
	l, err := p.list(nil)
	if err != nil {
		return nil, err
	}
	t, err := p.lx.peek()
	if err != nil {
		return nil, err
	}
	if t.kind != tEOF {
		return nil, &syntaxError{fmt.Sprintf("unexpected %q", tokText(t))}
	}
	return l, nil
}

// line parses the next complete command line of a script: and-or lists separated by ; and &,
// up to a newline outside any compound command; nil at the end of the script. A script runs one
// line at a time, as ash's cmdloop parses and runs one command at a time (parsecmd, evaltree),
// so however long a script is, its tree is never held whole: only the line's, and what its
// functions keep.
func (p *parser) line() (*list, error) {
	if err := p.skipNewlines(); err != nil {
		return nil, err
	}
	t, err := p.lx.peek()
	if err != nil || t.kind == tEOF {
		return nil, err
	}
	l := &list{}
	for {
		ao, err := p.andOr()
		if err != nil {
			return nil, err
		}
		t, err := p.lx.peek()
		if err != nil {
			return nil, err
		}
		separated, async := false, false
		if t.kind == tOp && (t.val == ";" || t.val == "&") {
			p.lx.next()
			separated, async = true, t.val == "&"
			if t, err = p.lx.peek(); err != nil {
				return nil, err
			}
		}
		l.items = append(l.items, ao)
		l.async = append(l.async, async)
		switch {
		case t.kind == tNewline:
			p.lx.next() // its here-documents' bodies, which follow it, are read with it
			return l, nil
		case t.kind == tEOF:
			return l, nil
		case !separated:
			return nil, &syntaxError{fmt.Sprintf("unexpected %q", tokText(t))}
		}
	}
}

func tokText(t token) string {
	switch t.kind {
	case tNewline:
		return "newline"
	case tEOF:
		return "end of file"
	}
	return t.val
}

func (p *parser) skipNewlines() error {
	for {
		t, err := p.lx.peek()
		if err != nil {
			return err
		}
		if t.kind != tNewline {
			return nil
		}
		p.lx.next()
	}
}

func isWord(t token, w string) bool { return t.kind == tWord && t.val == w }

// list parses until EOF, a closing operator or one of the stop keywords.
func (p *parser) list(stop []string) (*list, error) {
	l := &list{}
	for {
		if err := p.skipNewlines(); err != nil {
			return nil, err
		}
		t, err := p.lx.peek()
		if err != nil {
			return nil, err
		}
		if t.kind == tEOF || (t.kind == tOp && (t.val == ")" || t.val == ";;")) {
			return l, nil
		}
		if t.kind == tWord {
			for _, s := range stop {
				if t.val == s {
					return l, nil
				}
			}
		}
		ao, err := p.andOr()
		if err != nil {
			return nil, err
		}
		async := false
		t, err = p.lx.peek()
		if err != nil {
			return nil, err
		}
		if t.kind == tOp && (t.val == ";" || t.val == "&") {
			p.lx.next()
			async = t.val == "&"
		} else if t.kind != tNewline && t.kind != tEOF && !(t.kind == tOp && (t.val == ")" || t.val == ";;")) && !(t.kind == tWord && contains(stop, t.val)) {
			return nil, &syntaxError{fmt.Sprintf("unexpected %q", tokText(t))}
		}
		l.items = append(l.items, ao)
		l.async = append(l.async, async)
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

func (p *parser) andOr() (*andOr, error) {
	first, err := p.pipeline()
	if err != nil {
		return nil, err
	}
	ao := &andOr{first: first}
	for {
		t, err := p.lx.peek()
		if err != nil {
			return nil, err
		}
		if t.kind != tOp || (t.val != "&&" && t.val != "||") {
			return ao, nil
		}
		p.lx.next()
		if err := p.skipNewlines(); err != nil {
			return nil, err
		}
		next, err := p.pipeline()
		if err != nil {
			return nil, err
		}
		ao.ops = append(ao.ops, t.val)
		ao.rest = append(ao.rest, next)
	}
}

func (p *parser) pipeline() (*pipeline, error) {
	pl := &pipeline{}
	t, err := p.lx.peek()
	if err != nil {
		return nil, err
	}
	if isWord(t, "!") {
		p.lx.next()
		pl.bang = true
	}
	for {
		c, err := p.command()
		if err != nil {
			return nil, err
		}
		pl.cmds = append(pl.cmds, c)
		t, err := p.lx.peek()
		if err != nil {
			return nil, err
		}
		if t.kind != tOp || t.val != "|" {
			return pl, nil
		}
		p.lx.next()
		if err := p.skipNewlines(); err != nil {
			return nil, err
		}
	}
}

func (p *parser) expectWord(w string) error {
	if err := p.skipNewlines(); err != nil {
		return err
	}
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	if t.kind == tEOF {
		return errIncomplete
	}
	if !isWord(t, w) {
		return &syntaxError{fmt.Sprintf("unexpected %q (expecting %q)", tokText(t), w)}
	}
	return nil
}

func (p *parser) command() (command, error) {
	t, err := p.lx.peek()
	if err != nil {
		return nil, err
	}
	if t.kind == tEOF {
		return nil, errIncomplete
	}
	if isWord(t, "if") || isWord(t, "while") || isWord(t, "until") || isWord(t, "for") || isWord(t, "case") || isWord(t, "{") || (t.kind == tOp && t.val == "(") {
		if p.depth >= MaxNest {
			return nil, errNesting
		}
		p.depth++
		defer func() { p.depth-- }()
	}
	var c command
	switch {
	case isWord(t, "if"):
		c, err = p.ifCmd()
	case isWord(t, "while"), isWord(t, "until"):
		c, err = p.loop()
	case isWord(t, "for"):
		c, err = p.forCmd()
	case isWord(t, "case"):
		c, err = p.caseCmd()
	case isWord(t, "{"):
		p.lx.next()
		var body *list
		body, err = p.list([]string{"}"})
		if err == nil {
			err = p.expectWord("}")
		}
		c = &groupCmd{body: body}
	case t.kind == tOp && t.val == "(":
		p.lx.next()
		var body *list
		body, err = p.list(nil)
		if err == nil {
			var close token
			close, err = p.lx.next()
			if err == nil && close.kind == tEOF {
				err = errIncomplete
			} else if err == nil && (close.kind != tOp || close.val != ")") {
				err = &syntaxError{fmt.Sprintf("unexpected %q (expecting \")\")", tokText(close))}
			}
		}
		c = &groupCmd{body: body, subshell: true}
	case t.kind == tWord && isKeyword(t.val):
		return nil, &syntaxError{fmt.Sprintf("unexpected %q", t.val)}
	case t.kind == tOp && !isRedirOp(t.val):
		return nil, &syntaxError{fmt.Sprintf("unexpected %q", t.val)}
	case t.kind == tNewline:
		return nil, &syntaxError{"unexpected newline"}
	default:
		return p.simple()
	}
	if err != nil {
		return nil, err
	}
	redirs, err := p.redirs()
	if err != nil {
		return nil, err
	}
	return &compound{cmd: c, redirs: redirs}, nil
}

func isKeyword(w string) bool {
	switch w {
	case "then", "else", "elif", "fi", "do", "done", "esac", "}", "in":
		return true
	}
	return false
}

func (p *parser) redirs() ([]redir, error) {
	var out []redir
	for {
		r, ok, err := p.redir()
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, r)
	}
}

func (p *parser) redir() (redir, bool, error) {
	t, err := p.lx.peek()
	if err != nil {
		return redir{}, false, err
	}
	fd := -1
	if t.kind == tIONum {
		p.lx.next()
		fmt.Sscan(t.val, &fd)
		t, err = p.lx.peek()
		if err != nil {
			return redir{}, false, err
		}
	}
	if t.kind != tOp {
		return redir{}, false, nil
	}
	switch t.val {
	case "<", ">", ">>", ">&", "<&", "<>", ">|", "&>", "<<", "<<-":
	default:
		return redir{}, false, nil
	}
	p.lx.next()
	w, err := p.lx.next()
	if err != nil {
		return redir{}, false, err
	}
	if w.kind == tEOF {
		return redir{}, false, errIncomplete
	}
	if w.kind != tWord {
		return redir{}, false, &syntaxError{fmt.Sprintf("unexpected %q", tokText(w))}
	}
	if fd < 0 {
		fd = 1
		if t.val == "<" || t.val == "<&" || t.val == "<>" {
			fd = 0
		}
	}
	r := redir{fd: fd, op: t.val, target: w.val}
	if t.val == "<<" || t.val == "<<-" {
		if fd == 1 {
			r.fd = 0
		}
		delim := w.val
		quoted := strings.ContainsAny(delim, "'\"\\")
		if quoted {
			delim = strings.NewReplacer("'", "", "\"", "", "\\", "").Replace(delim)
		}
		r.here = &heredoc{delim: delim, quoted: quoted, strip: t.val == "<<-"}
		p.lx.pending = append(p.lx.pending, r.here)
	}
	return r, true, nil
}

func isAssignment(w string) bool {
	eq := strings.IndexByte(w, '=')
	if eq <= 0 {
		return false
	}
	return isName(w[:eq])
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9') {
			continue
		}
		return false
	}
	return true
}

func (p *parser) simple() (command, error) {
	sc := &simpleCmd{}
	for {
		r, ok, err := p.redir()
		if err != nil {
			return nil, err
		}
		if ok {
			sc.redirs = append(sc.redirs, r)
			continue
		}
		t, err := p.lx.peek()
		if err != nil {
			return nil, err
		}
		if t.kind != tWord {
			break
		}
		// name() { ... } defines a function.
		if len(sc.words) == 0 && len(sc.assigns) == 0 && isName(t.val) {
			p.lx.next()
			t2, err := p.lx.peek()
			if err != nil {
				return nil, err
			}
			if t2.kind == tOp && t2.val == "(" {
				p.lx.next()
				t3, err := p.lx.next()
				if err != nil {
					return nil, err
				}
				if t3.kind != tOp || t3.val != ")" {
					return nil, &syntaxError{"expected \")\" in function definition"}
				}
				if err := p.skipNewlines(); err != nil {
					return nil, err
				}
				from := p.lx.tokens
				body, err := p.command()
				if err != nil {
					return nil, err
				}
				return &funcDef{name: t.val, body: body, cost: int64(p.lx.tokens-from+1) * tokenCost}, nil
			}
			sc.words = append(sc.words, t.val)
			continue
		}
		p.lx.next()
		if len(sc.words) == 0 && isAssignment(t.val) {
			sc.assigns = append(sc.assigns, t.val)
		} else {
			sc.words = append(sc.words, t.val)
		}
	}
	if len(sc.words) == 0 && len(sc.assigns) == 0 && len(sc.redirs) == 0 {
		t, _ := p.lx.peek()
		if t.kind == tEOF {
			return nil, errIncomplete
		}
		return nil, &syntaxError{fmt.Sprintf("unexpected %q", tokText(t))}
	}
	return sc, nil
}

func (p *parser) ifCmd() (command, error) {
	p.lx.next() // if
	c := &ifCmd{}
	for {
		cond, err := p.list([]string{"then"})
		if err != nil {
			return nil, err
		}
		if err := p.expectWord("then"); err != nil {
			return nil, err
		}
		body, err := p.list([]string{"elif", "else", "fi"})
		if err != nil {
			return nil, err
		}
		c.conds = append(c.conds, cond)
		c.bodies = append(c.bodies, body)
		t, err := p.lx.next()
		if err != nil {
			return nil, err
		}
		switch {
		case isWord(t, "elif"):
			continue
		case isWord(t, "else"):
			els, err := p.list([]string{"fi"})
			if err != nil {
				return nil, err
			}
			c.els = els
			return c, p.expectWord("fi")
		case isWord(t, "fi"):
			return c, nil
		case t.kind == tEOF:
			return nil, errIncomplete
		default:
			return nil, &syntaxError{fmt.Sprintf("unexpected %q (expecting \"fi\")", tokText(t))}
		}
	}
}

func (p *parser) doBody() (*list, error) {
	if err := p.expectWord("do"); err != nil {
		return nil, err
	}
	body, err := p.list([]string{"done"})
	if err != nil {
		return nil, err
	}
	return body, p.expectWord("done")
}

func (p *parser) loop() (command, error) {
	t, _ := p.lx.next()
	cond, err := p.list([]string{"do"})
	if err != nil {
		return nil, err
	}
	body, err := p.doBody()
	if err != nil {
		return nil, err
	}
	return &loopCmd{until: t.val == "until", cond: cond, body: body}, nil
}

func (p *parser) forCmd() (command, error) {
	p.lx.next() // for
	name, err := p.lx.next()
	if err != nil {
		return nil, err
	}
	if name.kind == tEOF {
		return nil, errIncomplete
	}
	if name.kind != tWord || !isName(name.val) {
		return nil, &syntaxError{fmt.Sprintf("bad for loop variable %q", tokText(name))}
	}
	fc := &forCmd{name: name.val}
	if err := p.skipNewlines(); err != nil {
		return nil, err
	}
	t, err := p.lx.peek()
	if err != nil {
		return nil, err
	}
	if isWord(t, "in") {
		p.lx.next()
		fc.inSet = true
		for {
			t, err := p.lx.peek()
			if err != nil {
				return nil, err
			}
			if t.kind != tWord {
				break
			}
			p.lx.next()
			fc.words = append(fc.words, t.val)
		}
	}
	t, err = p.lx.peek()
	if err != nil {
		return nil, err
	}
	if t.kind == tOp && t.val == ";" {
		p.lx.next()
	}
	body, err := p.doBody()
	if err != nil {
		return nil, err
	}
	fc.body = body
	return fc, nil
}

func (p *parser) caseCmd() (command, error) {
	p.lx.next() // case
	w, err := p.lx.next()
	if err != nil {
		return nil, err
	}
	if w.kind == tEOF {
		return nil, errIncomplete
	}
	cc := &caseCmd{word: w.val}
	if err := p.expectWord("in"); err != nil {
		return nil, err
	}
	for {
		if err := p.skipNewlines(); err != nil {
			return nil, err
		}
		t, err := p.lx.next()
		if err != nil {
			return nil, err
		}
		if t.kind == tEOF {
			return nil, errIncomplete
		}
		if isWord(t, "esac") {
			return cc, nil
		}
		if t.kind == tOp && t.val == "(" {
			t, err = p.lx.next()
			if err != nil {
				return nil, err
			}
		}
		var item caseItem
		for {
			if t.kind != tWord {
				return nil, &syntaxError{fmt.Sprintf("unexpected %q in case pattern", tokText(t))}
			}
			item.patterns = append(item.patterns, t.val)
			sep, err := p.lx.next()
			if err != nil {
				return nil, err
			}
			if sep.kind == tOp && sep.val == ")" {
				break
			}
			if sep.kind != tOp || sep.val != "|" {
				return nil, &syntaxError{fmt.Sprintf("unexpected %q in case pattern", tokText(sep))}
			}
			t, err = p.lx.next()
			if err != nil {
				return nil, err
			}
		}
		body, err := p.list([]string{"esac"})
		if err != nil {
			return nil, err
		}
		item.body = body
		cc.items = append(cc.items, item)
		t, err = p.lx.peek()
		if err != nil {
			return nil, err
		}
		if t.kind == tOp && t.val == ";;" {
			p.lx.next()
		}
	}
}
