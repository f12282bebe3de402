package shell

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
)

// fieldBuilder accumulates the fields a word expands to. Quoted text never
// splits or globs; unquoted expansion results are split on IFS whitespace.
type fieldBuilder struct {
	fields []string
	globs  []bool
	// pieces make up the current field: what was added, not copied (a command substitution's
	// 15 MB output is held once, and is the field itself when it is all of it).
	pieces []piece
	curLen int
	have   bool
	glob   bool
	size   int          // bytes added, across fields (see maxHeldBytes)
	held   *kernel.Held // the fields it builds, charged as they grow (nil: uncharged)
	oom    bool         // a charge failed: the container is out of memory
}

// piece is part of a field: quoted text keeps its glob characters literal. An owned piece is a
// string of its own (a variable's value, a command substitution's output), which a field made of
// it alone can be without a copy; any other (the script's text, part of a split value) is copied
// into the field, so a variable never keeps a larger string alive than it is charged for.
type piece struct {
	s      string
	quoted bool
	owned  bool
}

// pieceOverhead is what a piece takes besides its bytes.
const pieceOverhead = 24

// newBuilder is a fieldBuilder charging the shell's container; release it when done.
func (s *shell) newBuilder() *fieldBuilder { return &fieldBuilder{held: s.p.Held()} }

// release gives back what the builder held (what it built is the caller's to charge).
func (b *fieldBuilder) release() { b.held.Release() }

// matches reports whether w matches the builder's word as a case pattern.
func (b *fieldBuilder) matches(w string) bool {
	ok, _ := path.Match(b.patternString(), w)
	return ok || b.curString() == w
}

// curString is the current field.
func (b *fieldBuilder) curString() string {
	if len(b.pieces) == 1 && b.pieces[0].owned {
		return b.pieces[0].s
	}
	var sb strings.Builder
	sb.Grow(b.curLen)
	for _, p := range b.pieces {
		sb.WriteString(p.s)
	}
	return sb.String()
}

// patternString is the current field as a glob pattern: its quoted glob characters escaped.
func (b *fieldBuilder) patternString() string {
	var sb strings.Builder
	for _, p := range b.pieces {
		if !p.quoted || !strings.ContainsAny(p.s, "*?[]\\") {
			sb.WriteString(p.s)
			continue
		}
		for _, r := range p.s {
			if strings.ContainsRune("*?[]\\", r) {
				sb.WriteByte('\\')
			}
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// errOutOfMemory is a word, or a command substitution's output, past maxHeldBytes: busybox's
// xmalloc failure ("sh: out of memory"), where a real container would meet its memory limit.
var errOutOfMemory = &expandError{"out of memory"}

func (b *fieldBuilder) add(s string, quoted bool) { b.addPiece(s, quoted, false) }

// addOwned adds a string of its own (see piece).
func (b *fieldBuilder) addOwned(s string, quoted bool) { b.addPiece(s, quoted, true) }

func (b *fieldBuilder) addPiece(s string, quoted, owned bool) {
	b.have = true
	if b.size += len(s); b.size > kernel.MaxHeldBytes || b.oom {
		return // expand reports errOutOfMemory; nothing more is held
	}
	if b.held.Grow(int64(len(s))+pieceOverhead) != nil { // the field it goes into, and the piece
		b.oom = true
		return
	}
	if !quoted && strings.ContainsAny(s, "*?[") {
		b.glob = true
	}
	b.pieces = append(b.pieces, piece{s, quoted, owned})
	b.curLen += len(s)
}

// addSplit adds an unquoted expansion result, splitting it into fields.
func (b *fieldBuilder) addSplit(s string, ifs string) {
	if s == "" {
		return
	}
	isSep := func(r rune) bool { return strings.ContainsRune(ifs, r) }
	parts := strings.FieldsFunc(s, isSep)
	if len(parts) == 0 {
		b.end()
		return
	}
	leading := isSep(rune(s[0]))
	trailing := isSep(rune(s[len(s)-1]))
	for i, p := range parts {
		if i > 0 || leading {
			b.end()
		}
		b.addPiece(p, false, len(p) == len(s))
	}
	if trailing {
		b.end()
	}
}

func (b *fieldBuilder) end() {
	if b.have {
		if b.glob {
			b.fields = append(b.fields, b.patternString())
		} else {
			b.fields = append(b.fields, b.curString())
		}
		b.globs = append(b.globs, b.glob)
	}
	b.pieces, b.curLen = b.pieces[:0], 0
	b.have = false
	b.glob = false
}

// expandWords expands raw words into fields (with splitting and globbing).
func (s *shell) expandWords(words []string) ([]string, error) {
	var out []string
	for _, w := range words {
		b := s.newBuilder()
		err := s.expand(w, b, true)
		b.release() // the fields are the caller's to charge
		if err != nil {
			return nil, err
		}
		if b.size > kernel.MaxHeldBytes || b.oom {
			return nil, errOutOfMemory
		}
		b.end()
		for i, f := range b.fields {
			if b.globs[i] {
				out = append(out, s.glob(f)...)
			} else {
				out = append(out, f)
			}
		}
	}
	return out, nil
}

// expandString expands a word without field splitting or globbing
// (assignments, redirection targets, case words).
func (s *shell) expandString(w string) (string, error) {
	b := s.newBuilder()
	err := s.expand(w, b, false)
	b.release() // the string is the caller's to charge
	if err != nil {
		return "", err
	}
	if b.size > kernel.MaxHeldBytes || b.oom {
		return "", errOutOfMemory
	}
	return b.curString(), nil
}

type expandError struct{ msg string }

func (e *expandError) Error() string { return e.msg }

// errUnterminatedQuote and unterminated are the syntax errors ash reports for an expansion that
// does not end (ash finds them when parsing; here a here-document's body meets them when it is
// expanded).
var errUnterminatedQuote = &syntaxError{"unterminated quoted string"}

func unterminated(rest string, err error) error {
	var se *syntaxError
	if errors.As(err, &se) {
		return err // too deeply nested
	}
	switch {
	case strings.HasPrefix(rest, "$(("):
		return &syntaxError{"missing '))'"}
	case strings.HasPrefix(rest, "$("):
		return &syntaxError{`unexpected end of file (expecting ")")`}
	case strings.HasPrefix(rest, "${"):
		return &syntaxError{"missing '}'"}
	}
	return &syntaxError{"EOF in backquote substitution"}
}

// expand walks a raw word. split=false keeps everything in one field.
func (s *shell) expand(w string, b *fieldBuilder, split bool) error {
	ifs := " \t\n"
	if v, ok := s.lookup("IFS"); ok {
		ifs = v
	}
	addExp := func(v string) {
		if split {
			b.addSplit(v, ifs)
		} else {
			b.addOwned(v, true)
		}
	}
	i := 0
	if strings.HasPrefix(w, "~") {
		end := strings.IndexByte(w, '/')
		if end < 0 {
			end = len(w)
		}
		if end == 1 {
			home, _ := s.lookup("HOME")
			b.add(home, true)
			i = 1
		}
	}
	for i < len(w) {
		if b.size > kernel.MaxHeldBytes || b.oom {
			return errOutOfMemory
		}
		c := w[i]
		switch c {
		case '\\':
			if i+1 < len(w) {
				b.add(w[i+1:i+2], true)
			}
			i += 2
		case '\'':
			j := strings.IndexByte(w[i+1:], '\'')
			if j < 0 {
				return errUnterminatedQuote
			}
			b.add(w[i+1:i+1+j], true)
			i += j + 2
		case '"':
			end, err := scanDouble(w, i+1)
			if err != nil {
				return errUnterminatedQuote
			}
			inner := w[i+1 : end-1]
			if err := s.expandDouble(inner, b); err != nil {
				return err
			}
			i = end
		case '$':
			end, err := scanDollar(w, i)
			if err != nil {
				return unterminated(w[i:], err)
			}
			v, multi, err := s.dollar(w[i:end], false)
			if err != nil {
				return err
			}
			if multi != nil && split {
				for k, m := range multi {
					if k > 0 {
						b.end()
					}
					b.addOwned(m, false)
				}
			} else {
				addExp(v)
			}
			i = end
		case '`':
			end, err := scanBackquote(w, i+1)
			if err != nil {
				return unterminated(w[i:], err)
			}
			v, err := s.commandSubst(unescapeBackquote(w[i+1 : end-1]))
			if err != nil {
				return err
			}
			addExp(v)
			i = end
		default:
			j := i
			for j < len(w) && !strings.ContainsRune("\\'\"$`", rune(w[j])) {
				j++
			}
			b.add(w[i:j], false)
			i = j
		}
	}
	return nil
}

func unescapeBackquote(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.ContainsRune("$`\\", rune(s[i+1])) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// expandDouble expands the inside of "...": only $, ` and \ are special.
func (s *shell) expandDouble(w string, b *fieldBuilder) error {
	b.have = true
	i := 0
	for i < len(w) {
		if b.size > kernel.MaxHeldBytes || b.oom {
			return errOutOfMemory
		}
		c := w[i]
		switch c {
		case '\\':
			if i+1 < len(w) && strings.ContainsRune("$`\"\\\n", rune(w[i+1])) {
				if w[i+1] != '\n' {
					b.add(w[i+1:i+2], true)
				}
				i += 2
				continue
			}
			b.add("\\", true)
			i++
		case '$':
			end, err := scanDollar(w, i)
			if err != nil {
				return unterminated(w[i:], err)
			}
			v, multi, err := s.dollar(w[i:end], true)
			if err != nil {
				return err
			}
			if multi != nil {
				// "$@": one field per positional parameter.
				for k, m := range multi {
					if k > 0 {
						b.end()
						b.have = true
					}
					b.addOwned(m, true)
				}
				if len(multi) == 0 && b.curLen == 0 {
					b.have = false
				}
			} else {
				b.addOwned(v, true)
			}
			i = end
		case '`':
			end, err := scanBackquote(w, i+1)
			if err != nil {
				return unterminated(w[i:], err)
			}
			v, err := s.commandSubst(unescapeBackquote(w[i+1 : end-1]))
			if err != nil {
				return err
			}
			b.addOwned(v, true)
			i = end
		default:
			j := i
			for j < len(w) && !strings.ContainsRune("\\$`", rune(w[j])) {
				j++
			}
			b.add(w[i:j], true)
			i = j
		}
	}
	return nil
}

// dollar expands one $-expression. multi is non-nil for $@ (and $* unquoted).
func (s *shell) dollar(e string, quoted bool) (string, []string, error) {
	if e == "$" {
		return "$", nil, nil
	}
	body := e[1:]
	switch {
	case strings.HasPrefix(body, "(("):
		v, err := s.arith(body[2 : len(body)-2])
		return strconv.FormatInt(v, 10), nil, err
	case strings.HasPrefix(body, "("):
		v, err := s.commandSubst(body[1 : len(body)-1])
		return v, nil, err
	case strings.HasPrefix(body, "{"):
		return s.braceParam(body[1 : len(body)-1])
	}
	name := body
	switch name {
	case "@":
		return strings.Join(s.params, " "), append([]string{}, s.params...), nil
	case "*":
		if quoted {
			return strings.Join(s.params, " "), nil, nil
		}
		return strings.Join(s.params, " "), append([]string{}, s.params...), nil
	}
	v, _ := s.param(name)
	return v, nil, nil
}

// param returns a variable or special parameter.
func (s *shell) param(name string) (string, bool) {
	switch name {
	case "?":
		return strconv.Itoa(s.status), true
	case "$":
		return strconv.Itoa(s.rootPid), true
	case "!":
		if s.lastBg == 0 {
			return "", false
		}
		return strconv.Itoa(s.lastBg), true
	case "#":
		return strconv.Itoa(len(s.params)), true
	case "0":
		return s.arg0, true
	case "-":
		if s.errexit {
			return "e", true
		}
		return "", true
	case "@", "*":
		return strings.Join(s.params, " "), true
	}
	if isDigits(name) {
		n, _ := strconv.Atoi(name)
		if n >= 1 && n <= len(s.params) {
			return s.params[n-1], true
		}
		return "", false
	}
	return s.lookup(name)
}

func (s *shell) braceParam(e string) (string, []string, error) {
	if strings.HasPrefix(e, "#") && len(e) > 1 {
		v, _ := s.param(e[1:])
		return strconv.Itoa(len([]rune(v))), nil, nil
	}
	n := 0
	for n < len(e) && (isName(e[:n+1]) || (n == 0 && strings.ContainsRune("?$!#@*0123456789-", rune(e[0])))) {
		n++
		if n == 1 && !isName(e[:1]) {
			if isDigits(e[:1]) {
				for n < len(e) && e[n] >= '0' && e[n] <= '9' {
					n++
				}
			}
			break
		}
	}
	name, op := e[:n], e[n:]
	if name == "" {
		return "", nil, &expandError{fmt.Sprintf("${%s}: bad substitution", e)}
	}
	if name == "@" && op == "" {
		return strings.Join(s.params, " "), append([]string{}, s.params...), nil
	}
	v, set := s.param(name)
	if op == "" {
		if !set && s.nounset {
			return "", nil, &expandError{name + ": parameter not set"}
		}
		return v, nil, nil
	}
	colon := strings.HasPrefix(op, ":")
	if colon {
		op = op[1:]
	}
	if op == "" {
		return "", nil, &expandError{fmt.Sprintf("${%s}: bad substitution", e)}
	}
	word := op[1:]
	unsetOrNull := !set || (colon && v == "")
	switch op[0] {
	case '-':
		if unsetOrNull {
			w, err := s.expandString(word)
			return w, nil, err
		}
		return v, nil, nil
	case '=':
		if unsetOrNull {
			w, err := s.expandString(word)
			if err != nil {
				return "", nil, err
			}
			s.setVar(name, w)
			return w, nil, nil
		}
		return v, nil, nil
	case '+':
		if unsetOrNull {
			return "", nil, nil
		}
		w, err := s.expandString(word)
		return w, nil, err
	case '?':
		if unsetOrNull {
			msg, _ := s.expandString(word)
			if msg == "" {
				msg = "parameter not set"
			}
			return "", nil, &expandError{name + ": " + msg}
		}
		return v, nil, nil
	case '#', '%':
		longest := len(word) > 0 && word[0] == op[0]
		if longest {
			word = word[1:]
		}
		pat, err := s.expandString(word)
		if err != nil {
			return "", nil, err
		}
		// A string of its own, not a part of v that would keep all of v alive.
		return strings.Clone(trimPattern(v, pat, op[0] == '#', longest)), nil, nil
	}
	return "", nil, &expandError{fmt.Sprintf("${%s}: bad substitution", e)}
}

func trimPattern(v, pat string, prefix, longest bool) string {
	if prefix {
		if longest {
			for i := len(v); i >= 0; i-- {
				if ok, _ := path.Match(pat, v[:i]); ok {
					return v[i:]
				}
			}
		} else {
			for i := 0; i <= len(v); i++ {
				if ok, _ := path.Match(pat, v[:i]); ok {
					return v[i:]
				}
			}
		}
		return v
	}
	if longest {
		for i := 0; i <= len(v); i++ {
			if ok, _ := path.Match(pat, v[i:]); ok {
				return v[:i]
			}
		}
	} else {
		for i := len(v); i >= 0; i-- {
			if ok, _ := path.Match(pat, v[i:]); ok {
				return v[:i]
			}
		}
	}
	return v
}

// commandSubst runs src in a subshell and returns its output without trailing newlines.
func (s *shell) commandSubst(src string) (string, error) {
	if s.nest >= MaxNest {
		return "", &expandError{fmt.Sprintf("command substitution: maximum nesting level exceeded (%d)", MaxNest)}
	}
	mem := s.p.Held() // the substitution's tree and its output, until the output is a word
	defer mem.Release()
	out := &substOutput{held: mem}
	sub := s.subshell()
	defer sub.release()
	sub.nest++
	l, err := parseHeld(src, mem)
	if err != nil {
		return "", &expandError{err.Error()}
	}
	// Past maxHeldBytes the output pipe breaks (the command stops as on SIGPIPE) and the
	// expansion fails: `x=$(cat /dev/zero)` costs 16 MiB, not all of cri-fake's memory.
	sub.broken = out
	io := s.io
	io.Out = out
	sub.io = io
	st := sub.runList(l, io)
	sub.runExitTrap(io)
	s.status = st
	s.substStatus = st
	v, full := out.finish()
	if full {
		return "", errOutOfMemory
	}
	return strings.TrimRight(v, "\n"), nil
}

// substOutput collects a command substitution's output up to maxHeldBytes; a write past it fails
// with EPIPE (and Broken stops the subshell, as SIGPIPE would). Once the substitution has its
// value (finish), writes fail with EPIPE too: a killed child whose goroutine has not noticed yet
// may still write.
type substOutput struct {
	mu     sync.Mutex
	b      bytes.Buffer
	full   bool
	closed bool
	held   *kernel.Held // the buffer, charged as it grows
}

// finish ends the output: what it holds, and whether it overflowed.
func (o *substOutput) finish() (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	return o.b.String(), o.full
}

func (o *substOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return 0, syscall.EPIPE
	}
	if o.full || o.b.Len()+len(p) > kernel.MaxHeldBytes {
		o.full = true
		return 0, syscall.EPIPE
	}
	was := o.b.Cap()
	n, err := o.b.Write(p)
	if o.held.Grow(int64(o.b.Cap()-was)) != nil {
		o.full = true // out of memory: the OOM killer is ending the container
		return n, syscall.EPIPE
	}
	return n, err
}

// Broken reports whether the output passed maxHeldBytes.
func (o *substOutput) Broken() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.full
}

// glob expands a pattern (quoted metacharacters escaped with \) against the
// file system; no match leaves the word as it was, as POSIX sh does.
func (s *shell) glob(pattern string) []string {
	literal := unescapeGlob(pattern)
	abs := strings.HasPrefix(pattern, "/")
	parts := strings.Split(strings.Trim(pattern, "/"), "/")
	cands := []string{""}
	for _, part := range parts {
		var next []string
		hasMeta := strings.ContainsAny(strings.ReplaceAll(part, "\\*", ""), "*?[")
		for _, c := range cands {
			dir := c
			if abs {
				dir = "/" + c
			}
			if !hasMeta {
				next = append(next, path.Join(c, unescapeGlob(part)))
				continue
			}
			ents, err := s.p.FS().ReadDir(s.p.Abs(dirOrDot(dir)))
			if err != nil {
				continue
			}
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".") && !strings.HasPrefix(part, ".") {
					continue
				}
				if ok, _ := path.Match(part, e.Name()); ok {
					next = append(next, path.Join(c, e.Name()))
				}
			}
		}
		cands = next
	}
	var out []string
	for _, c := range cands {
		p := c
		if abs {
			p = "/" + c
		}
		if _, err := s.p.FS().Lstat(s.p.Abs(p)); err == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return []string{literal}
	}
	sort.Strings(out)
	return out
}

func dirOrDot(d string) string {
	if d == "" {
		return "."
	}
	return d
}

func unescapeGlob(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// arith evaluates $(( )) with integers: + - * / % ( ) comparisons, ! && ||,
// and variables by name.
func (s *shell) arith(expr string) (int64, error) {
	expanded, err := s.expandString(expr)
	if err != nil {
		return 0, err
	}
	a := &arithParser{s: s, src: expanded}
	v, err := a.or()
	if err != nil {
		return 0, err
	}
	a.skip()
	if a.pos < len(a.src) {
		return 0, &expandError{fmt.Sprintf("arithmetic syntax error: %q", expr)}
	}
	return v, nil
}

type arithParser struct {
	s     *shell
	src   string
	pos   int
	depth int // nested parentheses and unary operators (see maxNest)
}

func (a *arithParser) skip() {
	for a.pos < len(a.src) && (a.src[a.pos] == ' ' || a.src[a.pos] == '\t' || a.src[a.pos] == '\n') {
		a.pos++
	}
}

func (a *arithParser) accept(op string) bool {
	a.skip()
	if strings.HasPrefix(a.src[a.pos:], op) {
		a.pos += len(op)
		return true
	}
	return false
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (a *arithParser) or() (int64, error) {
	l, err := a.and()
	for err == nil && a.accept("||") {
		var r int64
		r, err = a.and()
		l = b2i(l != 0 || r != 0)
	}
	return l, err
}

func (a *arithParser) and() (int64, error) {
	l, err := a.cmp()
	for err == nil && a.accept("&&") {
		var r int64
		r, err = a.cmp()
		l = b2i(l != 0 && r != 0)
	}
	return l, err
}

func (a *arithParser) cmp() (int64, error) {
	l, err := a.sum()
	for err == nil {
		var op string
		for _, o := range []string{"==", "!=", "<=", ">=", "<", ">"} {
			if a.accept(o) {
				op = o
				break
			}
		}
		if op == "" {
			return l, nil
		}
		var r int64
		if r, err = a.sum(); err != nil {
			return 0, err
		}
		switch op {
		case "==":
			l = b2i(l == r)
		case "!=":
			l = b2i(l != r)
		case "<=":
			l = b2i(l <= r)
		case ">=":
			l = b2i(l >= r)
		case "<":
			l = b2i(l < r)
		case ">":
			l = b2i(l > r)
		}
	}
	return l, err
}

func (a *arithParser) sum() (int64, error) {
	l, err := a.term()
	for err == nil {
		switch {
		case a.accept("+"):
			var r int64
			r, err = a.term()
			l += r
		case a.accept("-"):
			var r int64
			r, err = a.term()
			l -= r
		default:
			return l, nil
		}
	}
	return l, err
}

func (a *arithParser) term() (int64, error) {
	l, err := a.unary()
	for err == nil {
		var op byte
		switch {
		case a.accept("*"):
			op = '*'
		case a.accept("/"):
			op = '/'
		case a.accept("%"):
			op = '%'
		default:
			return l, nil
		}
		var r int64
		if r, err = a.unary(); err != nil {
			return 0, err
		}
		if op != '*' && r == 0 {
			return 0, &expandError{"arithmetic: division by zero"}
		}
		switch op {
		case '*':
			l *= r
		case '/':
			l /= r
		case '%':
			l %= r
		}
	}
	return l, err
}

func (a *arithParser) unary() (int64, error) {
	if a.depth >= MaxNest {
		// bash: "expression recursion level exceeded"; ash would overflow its stack.
		return 0, &expandError{"arithmetic: expression recursion level exceeded"}
	}
	a.depth++
	defer func() { a.depth-- }()
	switch {
	case a.accept("!"):
		v, err := a.unary()
		return b2i(v == 0), err
	case a.accept("-"):
		v, err := a.unary()
		return -v, err
	case a.accept("+"):
		return a.unary()
	case a.accept("("):
		v, err := a.or()
		if err == nil && !a.accept(")") {
			err = &expandError{"arithmetic: missing )"}
		}
		return v, err
	}
	a.skip()
	start := a.pos
	for a.pos < len(a.src) && (isName(a.src[start:a.pos+1]) || (a.src[a.pos] >= '0' && a.src[a.pos] <= '9')) {
		a.pos++
	}
	tok := a.src[start:a.pos]
	if tok == "" {
		return 0, &expandError{fmt.Sprintf("arithmetic syntax error: %q", a.src)}
	}
	if isName(tok) {
		v, _ := a.s.lookup(tok)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 0, 64)
		if err != nil {
			return 0, &expandError{fmt.Sprintf("arithmetic: bad number %q", v)}
		}
		return n, nil
	}
	n, err := strconv.ParseInt(tok, 0, 64)
	if err != nil {
		return 0, &expandError{fmt.Sprintf("arithmetic: bad number %q", tok)}
	}
	return n, nil
}
