package awk

import (
	"bytes"
	"strings"
	"testing"
)

// TestAwkSubset runs the programs plugsim's awk takes, and those it refuses, on the parser and
// runner alone (the busybox image's awk in a container: busybox_specs_test.go).
func TestAwkSubset(t *testing.T) {
	input := "root:x:0:0:root:/root:/bin/sh\n  daemon x  1  \nnobody:x:65534:65534\n"
	tests := []struct {
		prog, fs, want string
		err            string
	}{
		{prog: "{print $1}", want: "root:x:0:0:root:/root:/bin/sh\ndaemon\nnobody:x:65534:65534\n"},
		{prog: "{ print $1 }", fs: ":", want: "root\n  daemon x  1  \nnobody\n"},
		{prog: "{print $3, $1}", fs: ":", want: "0 root\n   daemon x  1  \n65534 nobody\n"},
		{prog: "{print $NF}", fs: ":", want: "/bin/sh\n  daemon x  1  \n65534\n"},
		{prog: "{print $(NF-1)}", want: "root:x:0:0:root:/root:/bin/sh\nx\nnobody:x:65534:65534\n"},
		{prog: `{print NR ": " NF}`, want: "1: 1\n2: 3\n3: 1\n"},
		{prog: "/daemon/", want: "  daemon x  1  \n"},
		{prog: "!/:/ {print $2}", want: "x\n"},
		{prog: "$3 == 65534 {print $1}", fs: ":", want: "nobody\n"},
		{prog: "$3 > 9 {print $1}", fs: ":", want: "nobody\n"}, // numbers compare as numbers: 65534 > 9
		{prog: `$1 ~ "^r" {print "r:", $1}`, fs: ":", want: "r: root\n"},
		{prog: "NR==2 {print; next} {print \"other\"}", want: "other\n  daemon x  1  \nother\n"},
		{prog: `BEGIN {print "start"} END {print NR}`, want: "start\n3\n"},
		{prog: `BEGIN {print 1.50, "a" "b"}`, want: "1.5 ab\n"},
		{prog: "{print $0}", want: input},
		{prog: "{x = 1}", err: `"x" is not in plugsim's awk`},
		{prog: "{printf \"%s\", $1}", err: `"printf" is not in plugsim's awk`},
		{prog: "{print $1 > \"/tmp/x\"}", err: "redirections"},
		{prog: "{print $1", err: "missing '}'"},
		{prog: "length($1) > 3", err: "functions and assignments"},
		{prog: "{print $99999999}", err: "a field number"},
	}
	for _, tc := range tests {
		prog, err := parseAwk(tc.prog)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one saying %q", tc.prog, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.prog, err)
			continue
		}
		var out bytes.Buffer
		run := &awkRun{prog: prog, vars: map[string]string{}, w: &out}
		split := awkSplitter(tc.fs)
		if !run.rules(awkBegin) {
			for _, line := range strings.SplitAfter(input, "\n") {
				if line == "" {
					continue
				}
				run.nr++
				run.record = strings.TrimSuffix(line, "\n")
				run.fields = split(run.record)
				run.rules(awkMain)
			}
			run.rules(awkEnd)
		}
		if out.String() != tc.want {
			t.Errorf("awk -F%q %q: %q, want %q", tc.fs, tc.prog, out.String(), tc.want)
		}
	}
}

// FuzzAwk parses any program a container passes and runs what parses over a few lines: no panic,
// and no output past what the input and program can make.
func FuzzAwk(f *testing.F) {
	for _, s := range []string{"{print $1}", "{print $(NF-1), NR}", "/x/ {print; next} END {print NR}", `$2 ~ "^a" {print "y" $3}`,
		"BEGIN {print 1.5e3}", "!/re/", "NR==2", "{print $0 \"\\t\" FILENAME}", "{print $", "{print $(NF-99)}"} {
		f.Add(s, ":")
	}
	f.Fuzz(func(t *testing.T, src, fs string) {
		prog, err := parseAwk(src)
		if err != nil {
			return
		}
		var out bytes.Buffer
		run := &awkRun{prog: prog, vars: map[string]string{"v": "1"}, w: &out}
		split := awkSplitter(fs)
		if !run.rules(awkBegin) {
			for _, line := range []string{"a:b c:d", "", "  x  y  "} {
				run.nr++
				run.record, run.fields = line, split(line)
				run.rules(awkMain)
			}
			run.rules(awkEnd)
		}
		if out.Len() > 64*(len(src)+64)*8 {
			t.Fatalf("%d bytes out of a %d-byte program", out.Len(), len(src))
		}
	})
}
