package process

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func appletTrue(*proc) int  { return 0 }
func appletFalse(*proc) int { return 1 }

// unescapeEcho handles the backslash escapes of echo -e and printf %b.
// stop reports \c (no further output).
func unescapeEcho(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'e':
			b.WriteByte(0x1b)
		case '\\':
			b.WriteByte('\\')
		case 'c':
			return b.String(), true
		case '0':
			j := i + 1
			for j < len(s) && j < i+4 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint("0"+s[i+1:j], 8, 8)
			b.WriteByte(byte(v))
			i = j - 1
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String(), false
}

func appletEcho(p *proc) int {
	args := p.args[1:]
	newline, escapes := true, false
	for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && strings.Trim(args[0][1:], "neE") == "" {
		for _, c := range args[0][1:] {
			switch c {
			case 'n':
				newline = false
			case 'e':
				escapes = true
			case 'E':
				escapes = false
			}
		}
		args = args[1:]
	}
	s := strings.Join(args, " ")
	if escapes {
		var stop bool
		s, stop = unescapeEcho(s)
		if stop {
			newline = false
		}
	}
	if newline {
		s += "\n"
	}
	if _, err := io.WriteString(p.stdout, s); err != nil {
		if errors.Is(err, syscall.EPIPE) {
			return 128 + int(syscall.SIGPIPE) // killed by SIGPIPE: no message
		}
		p.errorf("write error: %s", strerror(err))
		return 1
	}
	return 0
}

// appletPrintf implements printf FORMAT [ARG]...: %s %b %c %d %i %u %o %x %X
// %e %f %g %%, with flags, width and precision; the format is reused while
// arguments remain.
func appletPrintf(p *proc) int {
	if len(p.args) < 2 {
		p.errorf("usage: printf FORMAT [ARG]...")
		return 1
	}
	format, args := p.args[1], p.args[2:]
	var out strings.Builder
	st := 0
	for {
		used := 0
		stop := false
		for i := 0; i < len(format) && !stop; i++ {
			c := format[i]
			if c == '\\' {
				j := i + 1
				if j < len(format) && format[j] >= '0' && format[j] <= '7' {
					k := j
					for k < len(format) && k < j+3 && format[k] >= '0' && format[k] <= '7' {
						k++
					}
					v, _ := strconv.ParseUint(format[j:k], 8, 8)
					out.WriteByte(byte(v))
					i = k - 1
					continue
				}
				s, _ := unescapeEcho(format[i : i+2])
				out.WriteString(s)
				i++
				continue
			}
			if c != '%' {
				out.WriteByte(c)
				continue
			}
			j := i + 1
			for j < len(format) && strings.IndexByte("-+ #0123456789.", format[j]) >= 0 {
				j++
			}
			if j >= len(format) {
				out.WriteString(format[i:])
				break
			}
			spec := format[i+1 : j]
			verb := format[j]
			i = j
			if verb == '%' {
				out.WriteByte('%')
				continue
			}
			arg := ""
			if used < len(args) {
				arg = args[used]
			}
			used++
			switch verb {
			case 's':
				fmt.Fprintf(&out, "%"+spec+"s", arg)
			case 'b':
				s, st2 := unescapeEcho(arg)
				fmt.Fprintf(&out, "%"+spec+"s", s)
				stop = st2
			case 'c':
				if arg != "" {
					out.WriteByte(arg[0])
				}
			case 'd', 'i', 'u', 'o', 'x', 'X':
				n, err := parseNum(arg)
				if err != nil {
					p.errorf("invalid number '%s'", arg)
					st = 1
				}
				v := verb
				if v == 'i' || v == 'u' {
					v = 'd'
				}
				fmt.Fprintf(&out, "%"+spec+string(v), n)
			case 'e', 'f', 'g', 'E', 'G':
				f, err := strconv.ParseFloat(arg, 64)
				if err != nil && arg != "" {
					p.errorf("invalid number '%s'", arg)
					st = 1
				}
				fmt.Fprintf(&out, "%"+spec+string(verb), f)
			default:
				out.WriteString(format[i-len(spec)-1 : i+1])
			}
		}
		args = args[min(used, len(args)):]
		if used == 0 || len(args) == 0 || stop {
			break
		}
	}
	io.WriteString(p.stdout, out.String())
	return st
}

func parseNum(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if len(s) > 1 && (s[0] == '\'' || s[0] == '"') {
		return int64(s[1]), nil
	}
	return strconv.ParseInt(s, 0, 64)
}

// breToGo converts a POSIX basic regular expression to Go syntax: in a BRE
// \( \) \{ \} \| \+ \? are operators and the bare characters are literals.
func breToGo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			n := s[i+1]
			i++
			if strings.IndexByte("(){}|+?", n) >= 0 {
				b.WriteByte(n)
			} else {
				b.WriteByte('\\')
				b.WriteByte(n)
			}
			continue
		}
		if strings.IndexByte("(){}|+?", c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

func appletGrep(p *proc) int {
	opts, args, err := flags(p.args[1:], "em")
	if err != nil {
		p.errorf("%v", err)
		return 2
	}
	var pattern string
	if e, ok := opts['e']; ok {
		pattern = e
	} else {
		if len(args) == 0 {
			p.errorf("usage: grep [-qvicnlhEFxwo] PATTERN [FILE]...")
			return 2
		}
		pattern, args = args[0], args[1:]
	}
	ext := opts['E'] != "" || p.name() == "egrep"
	fixed := opts['F'] != "" || p.name() == "fgrep"
	expr := pattern
	switch {
	case fixed:
		expr = regexp.QuoteMeta(pattern)
	case !ext:
		expr = breToGo(pattern)
	}
	if opts['w'] != "" {
		expr = `\b(?:` + expr + `)\b`
	}
	if opts['x'] != "" {
		expr = `^(?:` + expr + `)$`
	}
	if opts['i'] != "" {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		p.errorf("bad regex '%s': %v", pattern, err)
		return 2
	}
	files := args
	if len(files) == 0 {
		files = []string{"-"}
	}
	prefix := len(files) > 1 && opts['h'] == ""
	quiet, invert, count, number, listFiles, only := opts['q'] != "", opts['v'] != "", opts['c'] != "", opts['n'] != "", opts['l'] != "", opts['o'] != ""
	maxCount := -1
	if m, ok := opts['m']; ok {
		maxCount, _ = strconv.Atoi(m)
	}
	matched := false
	st := 1
	w := bufio.NewWriter(p.stdout)
	defer w.Flush()
	for _, f := range files {
		r, err := p.open(f)
		if err != nil {
			if opts['s'] == "" {
				p.errorf("%s: %s", f, strerror(err))
			}
			st = 2
			continue
		}
		name := f
		if f == "-" {
			name = "(standard input)"
		}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 16<<20)
		n, lineNo := 0, 0
		for sc.Scan() {
			if p.ctx().Err() != nil {
				break
			}
			lineNo++
			line := sc.Text()
			if re.MatchString(line) == invert {
				continue
			}
			matched = true
			n++
			if quiet {
				r.Close()
				return 0
			}
			if listFiles {
				break
			}
			if !count {
				pre := ""
				if prefix {
					pre = name + ":"
				}
				if number {
					pre += strconv.Itoa(lineNo) + ":"
				}
				if only && !invert {
					for _, m := range re.FindAllString(line, -1) {
						fmt.Fprintf(w, "%s%s\n", pre, m)
					}
				} else {
					fmt.Fprintf(w, "%s%s\n", pre, line)
				}
				w.Flush()
			}
			if maxCount >= 0 && n >= maxCount {
				break
			}
		}
		r.Close()
		if count {
			if prefix {
				fmt.Fprintf(w, "%s:%d\n", name, n)
			} else {
				fmt.Fprintf(w, "%d\n", n)
			}
		}
		if listFiles && n > 0 {
			fmt.Fprintln(w, name)
		}
	}
	if matched && st != 2 {
		return 0
	}
	if matched {
		return 0
	}
	return st
}

func appletWc(p *proc) int {
	opts, files, _ := flags(p.args[1:], "")
	show := []byte{}
	for _, c := range []byte("lwc") {
		if opts[c] != "" {
			show = append(show, c)
		}
	}
	if len(show) == 0 {
		show = []byte("lwc")
	}
	var tl, tw, tc int
	st := p.eachInput(files, func(_ int, f string, r io.Reader) bool {
		data, _ := io.ReadAll(r)
		l, w, c := bytes.Count(data, []byte("\n")), len(bytes.Fields(data)), len(data)
		tl, tw, tc = tl+l, tw+w, tc+c
		p.wcLine(show, l, w, c, f, len(files) > 0)
		return true
	})
	if len(files) > 1 {
		p.wcLine(show, tl, tw, tc, "total", true)
	}
	return st
}

func (p *proc) wcLine(show []byte, l, w, c int, name string, withName bool) {
	var parts []string
	for _, s := range show {
		v := map[byte]int{'l': l, 'w': w, 'c': c}[s]
		if len(show) == 1 && !withName {
			parts = append(parts, strconv.Itoa(v))
		} else {
			parts = append(parts, fmt.Sprintf("%9d", v))
		}
	}
	line := strings.Join(parts, " ")
	if withName {
		line += " " + name
	}
	fmt.Fprintln(p.stdout, line)
}

// countArg turns the historical "-5" into "-n 5".
func countArg(args []string) []string {
	out := make([]string, 0, len(args)+1)
	for _, a := range args {
		if len(a) > 1 && a[0] == '-' && isDigits(a[1:]) {
			out = append(out, "-n", a[1:])
			continue
		}
		out = append(out, a)
	}
	return out
}

func appletHead(p *proc) int {
	opts, files, err := flags(countArg(p.args[1:]), "nc")
	if err != nil {
		return p.usage(err)
	}
	n := 10
	if v, ok := opts['n']; ok {
		n, _ = strconv.Atoi(v)
	}
	return p.eachInput(files, func(i int, f string, r io.Reader) bool {
		if len(files) > 1 {
			if i > 0 {
				fmt.Fprintln(p.stdout)
			}
			fmt.Fprintf(p.stdout, "==> %s <==\n", f)
		}
		if c, ok := opts['c']; ok {
			k, _ := strconv.Atoi(c)
			io.CopyN(p.stdout, r, int64(k))
			return true
		}
		lr := lineReader{r}
		for k := 0; k < n; k++ {
			line, err := lr.readLine()
			io.WriteString(p.stdout, line)
			if err != nil {
				break
			}
		}
		return true
	})
}

func appletTail(p *proc) int {
	opts, files, err := flags(countArg(p.args[1:]), "nc")
	if err != nil {
		return p.usage(err)
	}
	n := 10
	fromStart := false
	if v, ok := opts['n']; ok {
		if strings.HasPrefix(v, "+") {
			fromStart = true
		}
		n, _ = strconv.Atoi(strings.TrimPrefix(v, "+"))
	}
	return p.eachInput(files, func(_ int, f string, r io.Reader) bool {
		data, _ := io.ReadAll(r)
		lines := strings.SplitAfter(string(data), "\n")
		if len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		start := len(lines) - n
		if fromStart {
			start = n - 1
		}
		if start < 0 {
			start = 0
		}
		if start > len(lines) {
			start = len(lines)
		}
		io.WriteString(p.stdout, strings.Join(lines[start:], ""))
		if opts['f'] != "" && f != "-" {
			// Follow by polling, like busybox tail -f.
			size := len(data)
			for {
				select {
				case <-p.ctx().Done():
					return false
				case <-time.After(200 * time.Millisecond):
				}
				data, err := p.c.fs.ReadFile(p.abs(f))
				if err != nil {
					continue
				}
				if len(data) < size {
					size = 0
				}
				if len(data) > size {
					p.stdout.Write(data[size:])
					size = len(data)
				}
			}
		}
		return true
	})
}

func appletTr(p *proc) int {
	opts, args, _ := flags(p.args[1:], "")
	expand := func(s string) []rune {
		s, _ = unescapeEcho(s)
		switch s {
		case "[:upper:]":
			s = "A-Z"
		case "[:lower:]":
			s = "a-z"
		case "[:digit:]":
			s = "0-9"
		case "[:space:]":
			s = " \t\n\r\v\f"
		}
		rs := []rune(s)
		var out []rune
		for i := 0; i < len(rs); i++ {
			if i+2 < len(rs) && rs[i+1] == '-' {
				for c := rs[i]; c <= rs[i+2]; c++ {
					out = append(out, c)
				}
				i += 2
				continue
			}
			out = append(out, rs[i])
		}
		return out
	}
	if len(args) == 0 {
		p.errorf("missing operand")
		return 1
	}
	from := expand(args[0])
	var to []rune
	if len(args) > 1 {
		to = expand(args[1])
	}
	data, _ := io.ReadAll(p.stdin)
	var b strings.Builder
	for _, r := range string(data) {
		idx := -1
		for i, f := range from {
			if f == r {
				idx = i
				break
			}
		}
		switch {
		case opts['d'] != "" && idx >= 0:
		case idx >= 0 && len(to) > 0:
			if idx >= len(to) {
				idx = len(to) - 1
			}
			b.WriteRune(to[idx])
		default:
			b.WriteRune(r)
		}
	}
	io.WriteString(p.stdout, b.String())
	return 0
}

func appletCut(p *proc) int {
	opts, files, err := flags(p.args[1:], "dfc")
	if err != nil {
		return p.usage(err)
	}
	data, st := p.readAll(files)
	delim := "\t"
	if d, ok := opts['d']; ok && d != "" {
		delim = d[:1]
	}
	sel := func(spec string, n int) []int {
		var out []int
		for _, part := range strings.Split(spec, ",") {
			lo, hi, isRange := strings.Cut(part, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if isRange {
				if hi == "" {
					b = n
				} else {
					b, _ = strconv.Atoi(hi)
				}
				if lo == "" {
					a = 1
				}
			}
			for i := a; i <= b && i <= n; i++ {
				out = append(out, i-1)
			}
		}
		return out
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if f, ok := opts['f']; ok {
			parts := strings.Split(line, delim)
			if len(parts) == 1 {
				fmt.Fprintln(p.stdout, line)
				continue
			}
			var out []string
			for _, i := range sel(f, len(parts)) {
				out = append(out, parts[i])
			}
			fmt.Fprintln(p.stdout, strings.Join(out, delim))
		} else if c, ok := opts['c']; ok {
			rs := []rune(line)
			var out []rune
			for _, i := range sel(c, len(rs)) {
				out = append(out, rs[i])
			}
			fmt.Fprintln(p.stdout, string(out))
		}
	}
	return st
}

func appletSeq(p *proc) int {
	args := p.args[1:]
	first, inc, last := 1.0, 1.0, 0.0
	nums := make([]float64, len(args))
	for i, a := range args {
		v, err := strconv.ParseFloat(a, 64)
		if err != nil {
			p.errorf("invalid number '%s'", a)
			return 1
		}
		nums[i] = v
	}
	switch len(nums) {
	case 1:
		last = nums[0]
	case 2:
		first, last = nums[0], nums[1]
	case 3:
		first, inc, last = nums[0], nums[1], nums[2]
	default:
		p.errorf("usage: seq [FIRST [INC]] LAST")
		return 1
	}
	if inc == 0 {
		return 1
	}
	w := bufio.NewWriter(p.stdout)
	defer w.Flush()
	for v := first; (inc > 0 && v <= last) || (inc < 0 && v >= last); v += inc {
		fmt.Fprintln(w, strconv.FormatFloat(v, 'f', -1, 64))
	}
	return 0
}

func appletYes(p *proc) int {
	s := "y"
	if len(p.args) > 1 {
		s = strings.Join(p.args[1:], " ")
	}
	for p.ctx().Err() == nil {
		if _, err := io.WriteString(p.stdout, s+"\n"); err != nil {
			return 1
		}
	}
	return 0
}

// appletTest implements test and [: unary file and string tests, binary
// string and integer comparisons, !, -a, -o and parentheses.
func appletTest(p *proc) int {
	args := p.args[1:]
	if name := p.name(); name == "[" || name == "[[" {
		closer := "]"
		if name == "[[" {
			closer = "]]"
		}
		if len(args) == 0 || args[len(args)-1] != closer {
			p.errorf("missing %s", closer)
			return 2
		}
		args = args[:len(args)-1]
	}
	t := &testEval{p: p, args: args}
	if len(args) == 0 {
		return 1
	}
	v, err := t.or()
	if err == nil && t.pos < len(t.args) {
		err = fmt.Errorf("%s: unknown operand", t.args[t.pos])
	}
	if err != nil {
		p.errorf("%v", err)
		return 2
	}
	if v {
		return 0
	}
	return 1
}

type testEval struct {
	p    *proc
	args []string
	pos  int
}

func (t *testEval) peek() string {
	if t.pos < len(t.args) {
		return t.args[t.pos]
	}
	return ""
}

func (t *testEval) or() (bool, error) {
	v, err := t.and()
	for err == nil && t.peek() == "-o" {
		t.pos++
		var r bool
		r, err = t.and()
		v = v || r
	}
	return v, err
}

func (t *testEval) and() (bool, error) {
	v, err := t.not()
	for err == nil && t.peek() == "-a" {
		t.pos++
		var r bool
		r, err = t.not()
		v = v && r
	}
	return v, err
}

func (t *testEval) not() (bool, error) {
	if t.peek() == "!" && t.pos+1 < len(t.args) {
		t.pos++
		v, err := t.not()
		return !v, err
	}
	return t.primary()
}

func (t *testEval) primary() (bool, error) {
	if t.pos >= len(t.args) {
		return false, fmt.Errorf("argument expected")
	}
	a := t.args[t.pos]
	if a == "(" {
		t.pos++
		v, err := t.or()
		if err != nil {
			return false, err
		}
		if t.peek() != ")" {
			return false, fmt.Errorf("missing )")
		}
		t.pos++
		return v, nil
	}
	if t.pos+2 < len(t.args) {
		if v, ok, err := t.binary(a, t.args[t.pos+1], t.args[t.pos+2]); ok || err != nil {
			t.pos += 3
			return v, err
		}
	}
	if len(a) == 2 && a[0] == '-' && t.pos+1 < len(t.args) {
		if v, ok := t.unary(a[1], t.args[t.pos+1]); ok {
			t.pos += 2
			return v, nil
		}
	}
	t.pos++
	return a != "", nil
}

// binary evaluates string and integer comparisons; ok is false for an
// unknown operator.
func (t *testEval) binary(a, op, b string) (v, ok bool, err error) {
	switch op {
	case "=", "==":
		return a == b, true, nil
	case "!=":
		return a != b, true, nil
	case "<":
		return a < b, true, nil
	case ">":
		return a > b, true, nil
	case "-eq", "-ne", "-lt", "-le", "-gt", "-ge":
		x, err := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
		if err != nil {
			return false, true, fmt.Errorf("%s: bad number", a)
		}
		y, err := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
		if err != nil {
			return false, true, fmt.Errorf("%s: bad number", b)
		}
		switch op {
		case "-eq":
			return x == y, true, nil
		case "-ne":
			return x != y, true, nil
		case "-lt":
			return x < y, true, nil
		case "-le":
			return x <= y, true, nil
		case "-gt":
			return x > y, true, nil
		}
		return x >= y, true, nil
	case "-nt", "-ot", "-ef":
		sa, ea := t.p.c.fs.Stat(t.p.abs(a))
		sb, eb := t.p.c.fs.Stat(t.p.abs(b))
		if ea != nil || eb != nil {
			return false, true, nil
		}
		switch op {
		case "-nt":
			return sa.ModTime().After(sb.ModTime()), true, nil
		case "-ot":
			return sa.ModTime().Before(sb.ModTime()), true, nil
		}
		return t.p.abs(a) == t.p.abs(b), true, nil
	}
	return false, false, nil
}

// unary evaluates -z -n and the file tests; ok is false for an unknown flag.
func (t *testEval) unary(flag byte, operand string) (v, ok bool) {
	fsys := t.p.c.fs
	p := t.p.abs(operand)
	switch flag {
	case 'z':
		return operand == "", true
	case 'n':
		return operand != "", true
	case 't':
		return t.p.tty && operand == "0", true
	case 'L', 'h':
		st, err := fsys.Lstat(p)
		return err == nil && st.Mode()&iofs.ModeSymlink != 0, true
	case 'e', 'f', 'd', 's', 'r', 'w', 'x', 'c', 'p', 'S', 'b':
	default:
		return false, false
	}
	st, l, err := fsys.stat(p, true)
	if err != nil {
		return false, true
	}
	switch flag {
	case 'f':
		return st.Mode().IsRegular(), true
	case 'd':
		return st.IsDir(), true
	case 's':
		return st.Size() > 0, true
	case 'x':
		return st.Mode().Perm()&0o111 != 0, true
	case 'w':
		return !l.ro, true
	case 'c':
		return st.Mode()&iofs.ModeCharDevice != 0, true
	case 'p', 'S', 'b':
		return false, true
	}
	return true, true // -e, -r
}
