package process

import (
	"errors"
	"testing"
)

// FuzzShellParse is the parser of the simulated sh alone (parseScript, what `sh -c`, eval, . and
// a trap's action all go through): any input parses or is refused with a syntax error or
// errIncomplete, never a panic or a stack overflow, and parsing is deterministic. FuzzShell
// (hostile_test.go) runs whole command lines; this one reaches far more inputs a second.
func FuzzShellParse(f *testing.F) {
	for _, s := range hostileSeeds {
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
		if err != nil {
			var se *syntaxError
			if !errors.As(err, &se) && !errors.Is(err, errIncomplete) {
				t.Fatalf("%q: error %v (%T) is neither a syntax error nor incomplete input", src, err, err)
			}
			if l != nil {
				t.Fatalf("%q: both a list and an error", src)
			}
			return
		}
		if _, err2 := parseScript(src); err2 != nil {
			t.Fatalf("%q parsed once, then failed: %v", src, err2)
		}
	})
}
