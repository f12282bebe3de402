package applets

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"math"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/libbb"
	"github.com/plugsim/plugsim/cri-fake/process/shell"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

func appletTrue(*kernel.Proc) int  { return 0 }
func appletFalse(*kernel.Proc) int { return 1 }

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

func appletEcho(p *kernel.Proc) int {
	args := p.Args[1:]
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
	if _, err := io.WriteString(p.Stdout, s); err != nil {
		if errors.Is(err, syscall.EPIPE) {
			return 128 + int(syscall.SIGPIPE) // killed by SIGPIPE: no message
		}
		p.Errorf("write error: %s", vfs.Strerror(err))
		return 1
	}
	return 0
}

// appletPrintf implements printf FORMAT [ARG]...: %s %b %c %d %i %u %o %x %X
// %e %f %g %%, with flags, width and precision; the format is reused while
// arguments remain.
func appletPrintf(p *kernel.Proc) int {
	if len(p.Args) < 2 {
		p.Errorf("usage: printf FORMAT [ARG]...")
		return 1
	}
	format, args := p.Args[1], p.Args[2:]
	var out strings.Builder
	st := 0
	for {
		used := 0
		stop := false
		for i := 0; i < len(format) && !stop; i++ {
			c := format[i]
			if c == '\\' {
				j := i + 1
				if j >= len(format) {
					out.WriteByte('\\') // a trailing backslash is printed as it is
					continue
				}
				if format[j] >= '0' && format[j] <= '7' {
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
					p.Errorf("invalid number '%s'", arg)
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
					p.Errorf("invalid number '%s'", arg)
					st = 1
				}
				fmt.Fprintf(&out, "%"+spec+string(verb), f)
			default:
				out.WriteString(format[i-len(spec)-1 : i+1])
			}
		}
		args = args[min(used, len(args)):]
		// Each pass of the format goes out at once, so a wide format reused over many
		// arguments never piles up in memory.
		if _, err := io.WriteString(p.Stdout, out.String()); err != nil {
			return 1
		}
		out.Reset()
		if used == 0 || len(args) == 0 || stop {
			break
		}
	}
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

func appletGrep(p *kernel.Proc) int {
	opts, args, err := libbb.Flags(p.Args[1:], "em")
	if err != nil {
		p.Errorf("%v", err)
		return 2
	}
	var pattern string
	if e, ok := opts['e']; ok {
		pattern = e
	} else {
		if len(args) == 0 {
			p.Errorf("usage: grep [-qvicnlhEFxwo] PATTERN [FILE]...")
			return 2
		}
		pattern, args = args[0], args[1:]
	}
	ext := opts['E'] != "" || p.Name() == "egrep"
	fixed := opts['F'] != "" || p.Name() == "fgrep"
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
		p.Errorf("bad regex '%s': %v", pattern, err)
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
	w := bufio.NewWriter(p.Stdout)
	defer w.Flush()
	for _, f := range files {
		r, err := open(p, f)
		if err != nil {
			if opts['s'] == "" {
				p.Errorf("%s: %s", f, vfs.Strerror(err))
			}
			st = 2
			continue
		}
		name := f
		if f == "-" {
			name = "(standard input)"
		}
		mem := p.Held() // the line buffer, charged as a long line grows it
		defer mem.Release()
		sc := mem.Lines(r)
		n, lineNo := 0, 0
		for sc.Scan() {
			if p.Step() != nil {
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

func appletWc(p *kernel.Proc) int {
	opts, files, _ := libbb.Flags(p.Args[1:], "")
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
	st := eachInput(p, files, func(_ int, f string, r io.Reader) bool {
		l, w, c := count(p, r)
		tl, tw, tc = tl+l, tw+w, tc+c
		wcLine(p, show, l, w, c, f, len(files) > 0)
		return true
	})
	if len(files) > 1 {
		wcLine(p, show, tl, tw, tc, "total", true)
	}
	return st
}

// count counts lines, words (runs of bytes that are not ASCII white space, as busybox's
// isspace sees them) and bytes as they stream by, so `wc -c /dev/zero` holds nothing.
func count(p *kernel.Proc, r io.Reader) (lines, words, bytes int) {
	buf := make([]byte, 32<<10)
	inWord := false
	for p.Step() == nil {
		n, err := r.Read(buf)
		for _, c := range buf[:n] {
			switch c {
			case '\n':
				lines++
				inWord = false
			case ' ', '\t', '\v', '\f', '\r':
				inWord = false
			default:
				if !inWord {
					words++
					inWord = true
				}
			}
		}
		bytes += n
		if err != nil {
			break
		}
	}
	return lines, words, bytes
}

func wcLine(p *kernel.Proc, show []byte, l, w, c int, name string, withName bool) {
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
	fmt.Fprintln(p.Stdout, line)
}

// countArg turns the historical "-5" into "-n 5".
func countArg(args []string) []string {
	out := make([]string, 0, len(args)+1)
	for _, a := range args {
		if len(a) > 1 && a[0] == '-' && allDigits(a[1:]) {
			out = append(out, "-n", a[1:])
			continue
		}
		out = append(out, a)
	}
	return out
}

func appletHead(p *kernel.Proc) int {
	opts, files, err := libbb.Flags(countArg(p.Args[1:]), "nc")
	if err != nil {
		return libbb.Usage(p, err)
	}
	n := 10
	if v, ok := opts['n']; ok {
		n, _ = strconv.Atoi(v)
	}
	return eachInput(p, files, func(i int, f string, r io.Reader) bool {
		if len(files) > 1 {
			if i > 0 {
				fmt.Fprintln(p.Stdout)
			}
			fmt.Fprintf(p.Stdout, "==> %s <==\n", f)
		}
		if c, ok := opts['c']; ok {
			k, _ := strconv.Atoi(c)
			io.CopyN(p.Stdout, r, int64(k))
			return true
		}
		// Written as read, a line at a time or a buffer of it (busybox's getc/putchar
		// loop): a line without end streams instead of piling up.
		in := bufio.NewReader(r)
		for k := 0; k < n && p.Step() == nil; {
			chunk, err := in.ReadSlice('\n')
			if _, werr := p.Stdout.Write(chunk); werr != nil {
				break
			}
			if err == nil {
				k++
			} else if err != bufio.ErrBufferFull {
				break
			}
		}
		return true
	})
}

func appletTail(p *kernel.Proc) int {
	opts, files, err := libbb.Flags(countArg(p.Args[1:]), "nc")
	if err != nil {
		return libbb.Usage(p, err)
	}
	n := 10
	fromStart := false
	if v, ok := opts['n']; ok {
		if strings.HasPrefix(v, "+") {
			fromStart = true
		}
		n, _ = strconv.Atoi(strings.TrimPrefix(v, "+"))
	}
	return eachInput(p, files, func(_ int, f string, r io.Reader) bool {
		mem := p.Held() // the input, read whole, and its lines
		defer mem.Release()
		data, err := mem.ReadAll(r)
		if err != nil {
			p.Errorf("%s", kernel.LineError(err))
			return true
		}
		lines := strings.SplitAfter(string(data), "\n")
		if mem.Grow(int64(len(data))+16*int64(len(lines))) != nil {
			return false // out of memory: the OOM killer is ending the container
		}
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
		io.WriteString(p.Stdout, strings.Join(lines[start:], ""))
		if opts['f'] != "" && f != "-" {
			// Follow by polling, like busybox tail -f.
			size := len(data)
			for {
				select {
				case <-p.Ctx().Done():
					return false
				case <-time.After(200 * time.Millisecond):
				}
				data, err := p.FS().ReadFile(p.Abs(f))
				if err != nil {
					continue
				}
				if len(data) < size {
					size = 0
				}
				if len(data) > size {
					p.Stdout.Write(data[size:])
					size = len(data)
				}
			}
		}
		return true
	})
}

func appletTr(p *kernel.Proc) int {
	opts, args, _ := libbb.Flags(p.Args[1:], "")
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
		p.Errorf("missing operand")
		return 1
	}
	from := expand(args[0])
	var to []rune
	if len(args) > 1 {
		to = expand(args[1])
	}
	index := make(map[rune]int, len(from))
	for i := len(from) - 1; i >= 0; i-- {
		index[from[i]] = i // the first occurrence wins
	}
	if ascii(from) && ascii(to) {
		return trBytes(p, index, to, opts['d'] != "")
	}
	in := bufio.NewReader(p.Stdin)
	w := bufio.NewWriter(p.Stdout)
	defer w.Flush()
	for n := 0; ; n++ {
		if n%4096 == 0 && p.Step() != nil {
			return 1
		}
		r, _, err := in.ReadRune()
		if err != nil {
			break
		}
		idx, ok := index[r]
		switch {
		case opts['d'] != "" && ok:
		case ok && len(to) > 0:
			w.WriteRune(to[min(idx, len(to)-1)])
		default:
			w.WriteRune(r)
		}
	}
	return 0
}

// cutRange is one item of a cut LIST, zero-based and inclusive as busybox keeps it: end is -1
// for "1-0" and "-0" (busybox then prints the start position alone), math.MaxInt for "N-".
type cutRange struct{ start, end int }

// parseCutList parses cut's LIST the way busybox 1.36 does: items separated by commas (empty ones
// skipped), each N, N-, N-M or -M with non-negative decimal numbers (0 counts as 1); a number
// that is not one is "invalid number 'X'", a decreasing range "M<N" (busybox prints the zero-based
// start), and a list without items "missing list of positions". The ranges are sorted by start
// unless nosort (-D).
func parseCutList(list string, nosort bool) ([]cutRange, error) {
	num := func(s string) (int, error) {
		if !allDigits(s) {
			return 0, fmt.Errorf("invalid number '%s'", s)
		}
		n, err := strconv.Atoi(s)
		if err != nil || n > math.MaxInt32 {
			return 0, fmt.Errorf("number %s is not in 0..%d range", s, math.MaxInt32)
		}
		return n, nil
	}
	var out []cutRange
	for _, item := range strings.Split(list, ",") {
		if item == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(item, "-")
		var r cutRange
		if lo != "" {
			n, err := num(lo)
			if err != nil {
				return nil, err
			}
			r.start = max(n-1, 0)
		}
		switch {
		case !isRange:
			r.end = r.start
		case hi == "":
			r.end = math.MaxInt
		default:
			n, err := num(hi)
			if err != nil {
				return nil, err
			}
			if n < r.start {
				return nil, fmt.Errorf("%d<%d", n, r.start)
			}
			r.end = n - 1
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, errors.New("missing list of positions")
	}
	if !nosort {
		sort.SliceStable(out, func(i, j int) bool { return out[i].start < out[j].start })
	}
	return out, nil
}

// cutBytes prints the selected bytes of line (busybox counts -c in bytes too), each position once.
func cutBytes(line string, lists []cutRange) string {
	printed := make([]bool, len(line))
	var b strings.Builder
	for _, r := range lists {
		for pos := r.start; pos < len(line); pos++ {
			if !printed[pos] {
				printed[pos] = true
				b.WriteByte(line[pos])
			}
			if pos >= r.end {
				break
			}
		}
	}
	return b.String()
}

// cutFields selects the fields of line as busybox's cut does, walking the line once per range:
// a line without a delimiter is printed whole (or dropped with -s), fields are joined with odelim.
// ok is false when the line is suppressed.
func cutFields(line string, lists []cutRange, delim byte, odelim string, suppress, nosort bool) (out string, ok bool) {
	var b strings.Builder
	n := len(line)
	next, start, end, count, printed, cl := 0, 0, 0, 0, 0, 0
	for {
		if end == n || count > lists[cl].end {
			// This range is done: on to the next one.
			if cl++; cl >= len(lists) {
				break
			}
			if nosort {
				start, count, next = 0, 0, 0
			}
			end = 0
		}
		if next == n {
			// The end of the line closes the current field.
			if cl == 0 && count == 0 {
				if suppress {
					return "", false
				}
			} else if count < lists[cl].start {
				start = n
			}
			end = n
		} else {
			end = next
			next++
			if line[end] != delim {
				continue
			}
			count++
			if count <= lists[cl].start {
				start = next // not yet in the range
				continue
			}
		}
		if printed > 0 {
			b.WriteString(odelim)
		}
		printed++
		if start < end {
			b.WriteString(line[start:end])
		}
		start = next
		if count == 0 {
			break
		}
	}
	return b.String(), true
}

// appletCut is busybox's cut: -b/-c LIST (bytes), -f LIST with -d DELIM (default TAB), -s, -O
// OUTDELIM, -D (keep the list's order), -n (ignored); -d with a newline selects whole lines.
func ascii(rs []rune) bool {
	for _, r := range rs {
		if r >= 0x80 {
			return false
		}
	}
	return true
}

// trBytes is tr over sets of ASCII characters: a byte table, a buffer at a time.
func trBytes(p *kernel.Proc, index map[rune]int, to []rune, del bool) int {
	var table [256]int16 // -1 delete, else the byte to write
	for i := range table {
		table[i] = int16(i)
	}
	for r, idx := range index {
		switch {
		case del:
			table[r] = -1
		case len(to) > 0:
			table[r] = int16(to[min(idx, len(to)-1)])
		}
	}
	buf := make([]byte, 32<<10)
	for p.Step() == nil {
		n, err := p.Stdin.Read(buf)
		out := buf[:0]
		for _, c := range buf[:n] {
			if t := table[c]; t >= 0 {
				out = append(out, byte(t))
			}
		}
		if _, werr := p.Stdout.Write(out); werr != nil {
			return 1
		}
		if err != nil {
			return 0
		}
	}
	return 1
}

func appletCut(p *kernel.Proc) int {
	opts, files, err := libbb.Flags(p.Args[1:], "bcfdO")
	if err != nil {
		return libbb.Usage(p, err)
	}
	kinds := 0
	var list string
	for _, k := range []byte("bcf") {
		if v, ok := opts[k]; ok {
			kinds++
			list = v
		}
	}
	_, fields := opts['f']
	switch {
	case kinds == 0:
		p.Errorf("expected a list of bytes, characters, or fields")
		return 1
	case kinds > 1:
		p.Errorf("only one type of list may be specified")
		return 1
	case !fields && opts['s'] != "":
		p.Errorf("suppressing non-delimited lines makes sense only when operating on fields")
		return 1
	case !fields && opts['d'] != "":
		p.Errorf("a delimiter may be specified only when operating on fields")
		return 1
	}
	nosort := opts['D'] != ""
	lists, err := parseCutList(list, nosort)
	if err != nil {
		p.Errorf("%v", err)
		return 1
	}
	delim := "\t"
	if d := opts['d']; d != "" {
		delim = d
	}
	odelim, ok := opts['O']
	if !ok {
		odelim = delim[:1]
	}
	w := bufio.NewWriter(p.Stdout)
	defer w.Flush()
	if len(files) == 0 {
		files = []string{"-"}
	}
	st := 0
	for _, f := range files {
		r, err := open(p, f)
		if err != nil {
			p.Errorf("%s: %s", f, vfs.Strerror(err)) // busybox: fopen_or_warn_stdin
			st = 1
			continue
		}
		mem := p.Held() // the line buffer, charged as a long line grows it
		defer mem.Release()
		sc := mem.Lines(r)
		for lineNo := 0; sc.Scan() && p.Step() == nil; lineNo++ {
			line := sc.Text()
			switch {
			case !fields:
				w.WriteString(cutBytes(line, lists))
			case delim[0] == '\n':
				// Cutting "fields" separated by newlines selects lines.
				for _, r := range lists {
					if r.start <= lineNo && lineNo <= r.end {
						w.WriteString(line + "\n")
						break
					}
				}
				continue
			default:
				out, ok := cutFields(line, lists, delim[0], odelim, opts['s'] != "", nosort)
				if !ok {
					continue
				}
				w.WriteString(out)
			}
			w.WriteByte('\n')
		}
		if err := sc.Err(); err != nil {
			p.Errorf("%s: %s", f, kernel.LineError(err))
			st = 1
		}
		r.Close()
	}
	return st
}

// appletSeq is busybox's seq [-w] [-s SEP] [FIRST [INC]] LAST with its float arithmetic: the
// i-th number is FIRST + i*INC (never a running sum), printed with as many decimals as FIRST and
// INC have. Near 2^63 or 1e18 consecutive integers are one double apart or less, so
// `seq 9223372036854775806 9223372036854775807` prints 9223372036854775808 1025 times and
// `seq 1e18 1e18` prints 1000000000000000000 65 times before FIRST + i*INC passes LAST, exactly
// as busybox does; a count that never passes LAST (INC 0, inf) streams on like `yes` until the
// process is stopped. Arguments that look like negative numbers end the options (busybox 1.36).
func appletSeq(p *kernel.Proc) int {
	args := p.Args[1:]
	width, sep := false, "\n"
	for len(args) > 0 {
		a := args[0]
		if a == "--" {
			args = args[1:]
			break
		}
		if len(a) < 2 || a[0] != '-' || a[1] == '.' || (a[1] >= '0' && a[1] <= '9') {
			break
		}
		args = args[1:]
		for k := 1; k < len(a); k++ {
			switch a[k] {
			case 'w':
				width = true
			case 's':
				v := a[k+1:]
				if v == "" {
					if len(args) == 0 {
						p.Errorf("option requires an argument -- 's'")
						return seqUsage(p)
					}
					v, args = args[0], args[1:]
				}
				sep, k = v, len(a)
			default:
				p.Errorf("invalid option -- '%c'", a[k])
				return seqUsage(p)
			}
		}
	}
	if len(args) < 1 || len(args) > 3 {
		return seqUsage(p)
	}
	nums := make([]float64, len(args))
	for i, a := range args {
		// strtod: leading blanks are skipped, anything after the number, or a number out of
		// range (ERANGE), is a usage error.
		num := strings.TrimLeft(a, " \t\n\v\f\r")
		if l := strings.ToLower(num); strings.HasPrefix(strings.TrimLeft(l, "+-"), "0x") && !strings.Contains(l, "p") {
			num += "p0" // strtod reads 0x10 as 16; Go wants a binary exponent
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return seqUsage(p)
		}
		nums[i] = v
	}
	first, inc, last := 1.0, 1.0, nums[len(nums)-1]
	switch len(nums) {
	case 2:
		first = nums[0]
	case 3:
		first, inc = nums[0], nums[1]
	}
	// Width and decimals come from the arguments as written: the integer part's length of
	// each, the decimals of all but LAST.
	w, frac := 0, 0
	for i, a := range args {
		dot := strings.IndexByte(a, '.')
		if dot < 0 {
			dot = len(a)
		}
		w = max(w, dot)
		if i < len(args)-1 {
			frac = max(frac, len(a)-dot)
		}
	}
	if frac > 0 {
		if frac--; frac > 0 {
			w += frac + 1
		}
	}
	if !width {
		w = 0
	}
	out := bufio.NewWriter(p.Stdout)
	defer out.Flush()
	n := 0
	for v := first; (inc >= 0 && v <= last) || (inc < 0 && v >= last); v = first + float64(n)*inc {
		if n > 0 {
			out.WriteString(sep)
		}
		out.WriteString(cFloat(v, w, frac))
		n++
		if out.Buffered() > 0 && n%1024 == 0 {
			if err := out.Flush(); err != nil || p.Step() != nil {
				return 1 // a broken pipe, or the process was stopped
			}
		}
	}
	if n > 0 {
		out.WriteByte('\n')
	}
	if err := out.Flush(); err != nil {
		return 1
	}
	return 0
}

// cFloat is C's printf("%0*.*f", width, prec, v): inf and nan as C spells them, padded with blanks.
func cFloat(v float64, width, prec int) string {
	switch {
	case math.IsInf(v, 1):
		return fmt.Sprintf("%*s", width, "inf")
	case math.IsInf(v, -1):
		return fmt.Sprintf("%*s", width, "-inf")
	case math.IsNaN(v):
		return fmt.Sprintf("%*s", width, "nan")
	}
	return fmt.Sprintf("%0*.*f", width, prec, v)
}

func seqUsage(p *kernel.Proc) int {
	fmt.Fprint(p.Stderr, "BusyBox v1.36.1 (plugsim simulation) multi-call binary.\n\n"+
		"Usage: seq [-w] [-s SEP] [FIRST [INC]] LAST\n\n"+
		"Print numbers from FIRST to LAST, in steps of INC.\nFIRST, INC default to 1.\n\n"+
		"\t-w\tPad with leading zeros\n\t-s SEP\tString separator\n")
	return 1
}

func appletYes(p *kernel.Proc) int {
	s := "y"
	if len(p.Args) > 1 {
		s = strings.Join(p.Args[1:], " ")
	}
	for p.Step() == nil {
		if _, err := io.WriteString(p.Stdout, s+"\n"); err != nil {
			return 1
		}
	}
	return 0
}

// appletTest implements test and [: unary file and string tests, binary
// string and integer comparisons, !, -a, -o and parentheses.
func appletTest(p *kernel.Proc) int {
	args := p.Args[1:]
	if name := p.Name(); name == "[" || name == "[[" {
		closer := "]"
		if name == "[[" {
			closer = "]]"
		}
		if len(args) == 0 || args[len(args)-1] != closer {
			p.Errorf("missing %s", closer)
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
		p.Errorf("%v", err)
		return 2
	}
	if v {
		return 0
	}
	return 1
}

type testEval struct {
	p     *kernel.Proc
	args  []string
	pos   int
	depth int // nested ! and ( (see maxNest)
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
	if t.depth >= shell.MaxNest {
		// busybox's test recurses here until its stack overflows; cri-fake's stack is shared.
		return false, fmt.Errorf("expression too complex")
	}
	t.depth++
	defer func() { t.depth-- }()
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
		sa, ea := t.p.FS().Stat(t.p.Abs(a))
		sb, eb := t.p.FS().Stat(t.p.Abs(b))
		if ea != nil || eb != nil {
			return false, true, nil
		}
		switch op {
		case "-nt":
			return sa.ModTime().After(sb.ModTime()), true, nil
		case "-ot":
			return sa.ModTime().Before(sb.ModTime()), true, nil
		}
		return t.p.Abs(a) == t.p.Abs(b), true, nil
	}
	return false, false, nil
}

// unary evaluates -z -n and the file tests; ok is false for an unknown flag.
func (t *testEval) unary(flag byte, operand string) (v, ok bool) {
	fsys := t.p.FS()
	p := t.p.Abs(operand)
	switch flag {
	case 'z':
		return operand == "", true
	case 'n':
		return operand != "", true
	case 't':
		return t.p.TTY && operand == "0", true
	case 'L', 'h':
		st, err := fsys.Lstat(p)
		return err == nil && st.Mode()&iofs.ModeSymlink != 0, true
	case 'e', 'f', 'd', 's', 'r', 'w', 'x', 'c', 'p', 'S', 'b':
	default:
		return false, false
	}
	st, readOnly, err := fsys.StatReadOnly(p)
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
		return !readOnly, true
	case 'c':
		return st.Mode()&iofs.ModeCharDevice != 0, true
	case 'p', 'S', 'b':
		return false, true
	}
	return true, true // -e, -r
}

func appletTee(p *kernel.Proc) int {
	opts, files, _ := libbb.Flags(p.Args[1:], "")
	ws := []io.Writer{p.Stdout}
	st := 0
	for _, f := range files {
		w, err := p.OpenWrite(p.Abs(f), opts['a'] != "", 0o644)
		if err != nil {
			p.Errorf("%s: %s", f, vfs.Strerror(err))
			st = 1
			continue
		}
		defer w.Close()
		ws = append(ws, w)
	}
	libbb.Copy(p, io.MultiWriter(ws...), p.Stdin)
	return st
}

// readAll reads all operand files (or stdin), reporting missing files; past maxHeldBytes in all
// it reports "out of memory" and fails. What it read is charged to mem.
func readAll(p *kernel.Proc, files []string, mem *kernel.Held) ([]byte, int) {
	var out []byte
	oom := false
	st := eachInput(p, files, func(_ int, _ string, r io.Reader) bool {
		data, err := io.ReadAll(io.LimitReader(r, int64(kernel.MaxHeldBytes+1-len(out))))
		if mem.Grow(int64(len(data))) != nil {
			oom = true
			return false
		}
		out = append(out, data...)
		return err == nil && len(out) <= kernel.MaxHeldBytes
	})
	if oom {
		return nil, 1 // the OOM killer is ending the container
	}
	if len(out) > kernel.MaxHeldBytes {
		p.Errorf("%s", kernel.ErrTooBig)
		return nil, 1
	}
	return out, st
}

func appletSort(p *kernel.Proc) int {
	opts, files, _ := libbb.Flags(p.Args[1:], "tk")
	mem := p.Held() // the input, read whole, and its lines
	defer mem.Release()
	data, st := readAll(p, files, mem)
	if data == nil && st != 0 {
		return st
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(data) == 0 {
		lines = nil
	}
	if mem.Grow(int64(len(data))+16*int64(len(lines))) != nil {
		return 1 // out of memory: the OOM killer is ending the container
	}
	if opts['n'] != "" {
		num := func(s string) float64 {
			f, _ := strconv.ParseFloat(strings.Fields(s + " 0")[0], 64)
			return f
		}
		sort.SliceStable(lines, func(i, j int) bool { return num(lines[i]) < num(lines[j]) })
	} else {
		sort.Strings(lines)
	}
	if opts['r'] != "" {
		for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
			lines[i], lines[j] = lines[j], lines[i]
		}
	}
	prev := ""
	for i, l := range lines {
		if opts['u'] != "" && i > 0 && l == prev {
			continue
		}
		prev = l
		fmt.Fprintln(p.Stdout, l)
	}
	return st
}

func appletBasename(p *kernel.Proc) int {
	if len(p.Args) < 2 {
		p.Errorf("usage: basename FILE [SUFFIX]")
		return 1
	}
	b := path.Base(p.Args[1])
	if len(p.Args) > 2 && b != p.Args[2] {
		b = strings.TrimSuffix(b, p.Args[2])
	}
	fmt.Fprintln(p.Stdout, b)
	return 0
}

func appletDirname(p *kernel.Proc) int {
	if len(p.Args) < 2 {
		p.Errorf("usage: dirname FILENAME")
		return 1
	}
	fmt.Fprintln(p.Stdout, path.Dir(p.Args[1]))
	return 0
}

// allDigits reports whether s is a non-empty run of ASCII digits.
func allDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
