package shell

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/plugsim/plugsim/internal/crashtest"
)

// FuzzShellParse is the parser of the simulated sh alone (parseScript, and parser.line, which
// `sh`, eval, . and a trap's action run a line at a time): any input parses or is refused with a
// syntax error or errIncomplete, never a panic or a stack overflow, parsing is deterministic, and a
// script parses a line at a time into the same commands as whole, or is refused both ways. FuzzShell
// (hostile_test.go) runs whole command lines; this one reaches far more inputs a second.
func FuzzShellParse(f *testing.F) {
	for _, s := range crashtest.Seeds(f, filepath.Join("..", "testdata", "hostile-commands.txt")) {
		f.Add(s)
	}
	for _, s := range []string{
		"a=1 b=$((a+1)) cmd >out 2>&1 <in; echo \"${x:-$(echo y)}\" 'q' `z` &",
		"if a; then b; elif c; then d; else e; fi && while f; do g; done || until h; do i; done",
		"for x in 1 2 3; do case $x in 1|2) echo a;; (*) echo b;; esac; done",
		"f() { { echo a; } | (cat) & }; ! f; cat <<-EOF\n\tbody $x\n\tEOF\nexec 3<>f 4>&3 5<&- &>all",
		"echo ${#a} ${a%%b*} ${a##*/} ${a:+x} ${a:=y} ${a:?z} $((1<<2|3&4^~5))",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 1<<16 {
			return
		}
		l, err := parseScript(src)
		items, lerr := parseLines(t, src)
		if err != nil {
			var se *syntaxError
			if !errors.As(err, &se) && !errors.Is(err, errIncomplete) {
				t.Fatalf("%q: error %v (%T) is neither a syntax error nor incomplete input", src, err, err)
			}
			if l != nil {
				t.Fatalf("%q: both a list and an error", src)
			}
			if lerr == nil {
				t.Fatalf("%q: refused whole (%v), parsed a line at a time", src, err)
			}
			return
		}
		if _, err2 := parseScript(src); err2 != nil {
			t.Fatalf("%q parsed once, then failed: %v", src, err2)
		}
		if lerr != nil || items != len(l.items) {
			t.Fatalf("%q: %d commands whole, %d a line at a time (%v)", src, len(l.items), items, lerr)
		}
	})
}

// parseLines parses src a line at a time, as a script runs (parser.line), and counts its and-or
// lists; every call must consume input, so it ends.
func parseLines(t *testing.T, src string) (int, error) {
	ps := newParser(src, nil)
	items := 0
	for range len(src) + 2 {
		l, err := ps.line()
		if err != nil || l == nil {
			return items, err
		}
		items += len(l.items)
	}
	t.Fatalf("%q: line() does not end", src)
	return 0, nil
}
