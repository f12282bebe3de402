package process

import (
	"testing"
)

func TestShellSubset(t *testing.T) {
	tests := []struct {
		name   string
		script string
		stdout string
		stderr string
		code   int
	}{
		{"echo", "echo hello world", "hello world\n", "", 0},
		{"echo -n", "echo -n hello", "hello", "", 0},
		{"sequence", "echo a; echo b", "a\nb\n", "", 0},
		{"and", "true && echo yes", "yes\n", "", 0},
		{"and short-circuit", "false && echo yes", "", "", 1},
		{"or", "false || echo fallback", "fallback\n", "", 0},
		{"or short-circuit", "true || echo no", "", "", 0},
		{"status", "false; echo $?", "1\n", "", 0},
		{"exit code", "exit 3", "", "", 3},
		{"exit in and-or", "true && exit 7; echo not reached", "", "", 7},
		{"variables", "A=1; B=two; echo $A ${B}", "1 two\n", "", 0},
		{"default value", "echo ${UNSET:-dflt}", "dflt\n", "", 0},
		{"single quotes", "echo '$A b'", "$A b\n", "", 0},
		{"double quotes", `A=x; echo "a $A  b"`, "a x  b\n", "", 0},
		{"escape", `echo a\ b`, "a b\n", "", 0},
		{"field splitting", `A="1  2"; for i in $A; do echo [$i]; done`, "[1]\n[2]\n", "", 0},
		{"no splitting in quotes", `A="1  2"; for i in "$A"; do echo "[$i]"; done`, "[1  2]\n", "", 0},
		{"command substitution", "echo $(echo inner):`echo back`", "inner:back\n", "", 0},
		{"arithmetic", "i=3; echo $((i*2+1))", "7\n", "", 0},
		{"if then", "if true; then echo t; else echo f; fi", "t\n", "", 0},
		{"if else", "if false; then echo t; else echo f; fi", "f\n", "", 0},
		{"elif", "if false; then echo 1; elif true; then echo 2; fi", "2\n", "", 0},
		{"test brackets", `if [ "a" = "a" ]; then echo eq; fi`, "eq\n", "", 0},
		{"while loop", "i=0; while [ $i -lt 3 ]; do echo $i; i=$((i+1)); done", "0\n1\n2\n", "", 0},
		{"until loop", "i=0; until [ $i -ge 2 ]; do i=$((i+1)); done; echo $i", "2\n", "", 0},
		{"for loop", "for x in a b c; do echo $x; done", "a\nb\nc\n", "", 0},
		{"break", "for x in 1 2 3; do if [ $x = 2 ]; then break; fi; echo $x; done", "1\n", "", 0},
		{"continue", "for x in 1 2 3; do if [ $x = 2 ]; then continue; fi; echo $x; done", "1\n3\n", "", 0},
		{"continue 2 leaves the inner loop", "for a in 1 2; do for b in x y; do [ $b = y ] && continue 2; echo $a$b; done; echo never; done", "1x\n2x\n", "", 0},
		{"continue in while", "i=0; while [ $i -lt 3 ]; do i=$((i+1)); [ $i = 2 ] && continue; echo $i; done", "1\n3\n", "", 0},
		{"break in until", "i=0; until false; do i=$((i+1)); [ $i = 3 ] && break; done; echo $i", "3\n", "", 0},
		{"while with sleep", "i=0; while true; do i=$((i+1)); sleep 0.01; [ $i -ge 2 ] && break; done; echo $i", "2\n", "", 0},
		{"pipe", "echo hello | cat", "hello\n", "", 0},
		{"pipe chain", "printf 'a\\nb\\nc\\n' | grep -v b | wc -l", "2\n", "", 0},
		{"pipe status is last", "false | true", "", "", 0},
		{"SIGPIPE ends a loop writer silently", "while true; do echo y; done | head -2", "y\ny\n", "", 0},
		{"SIGPIPE for a for loop", "for f in 1 2 3 4; do echo $f; done | head -1", "1\n", "", 0},
		{"PATH unset uses the default", "unset PATH; ls -d /tmp", "/tmp\n", "", 0},
		{"negation", "! false", "", "", 0},
		{"stderr redirect", "echo oops >&2", "", "oops\n", 0},
		{"2>&1", "ls /nonexistent 2>&1", "ls: /nonexistent: No such file or directory\n", "", 1},
		{"2>/dev/null", "ls /nonexistent 2>/dev/null; echo $?", "1\n", "", 0},
		{"redirect to file", "echo one > /tmp/f; echo two >> /tmp/f; cat /tmp/f", "one\ntwo\n", "", 0},
		{"redirect stdin", "echo data > /tmp/in; cat < /tmp/in", "data\n", "", 0},
		{"not found", "nosuchcmd", "", "sh: nosuchcmd: not found\n", 127},
		{"pgrep or true", "pgrep sleep || true", "", "", 0},
		{"case", "x=foo.txt; case $x in *.go) echo go;; *.txt) echo text;; esac", "text\n", "", 0},
		{"function", "greet() { echo hi $1; }; greet bob", "hi bob\n", "", 0},
		{"subshell", "A=1; (A=2; echo $A); echo $A", "2\n1\n", "", 0},
		{"group redirect", "{ echo a; echo b; } > /tmp/g; cat /tmp/g", "a\nb\n", "", 0},
		{"positional via -c", "set -- x y; echo $# $1 $2", "2 x y\n", "", 0},
		{"id substitution", "echo $(id -u):$(id -g)", "0:0\n", "", 0},
		{"touch and test", "cd /tmp && touch test.go && [ -f test.go ] && echo 'Found'", "Found\n", "", 0},
		{"syntax error", "if true; then", "", "sh: syntax error: unexpected end of file\n", 2},
		{"trap exit", "trap 'echo bye' EXIT; echo hi", "hi\nbye\n", "", 0},
		{"set -e", "set -e; false; echo no", "", "", 1},
		{"glob", "mkdir /tmp/gl && touch /tmp/gl/a.txt /tmp/gl/b.txt /tmp/gl/c.md && echo /tmp/gl/*.txt", "/tmp/gl/a.txt /tmp/gl/b.txt\n", "", 0},
		{"unmatched glob stays", "echo /nothing/*.x", "/nothing/*.x\n", "", 0},
		{"mkdir and loop append", "mkdir -p /var/lib/t && for i in $(seq 1 3); do echo hi >> /var/lib/t/f_$i; done; ls /var/lib/t", "f_1\nf_2\nf_3\n", "", 0},
		{"env prefix", "FOO=bar env | grep ^FOO=", "FOO=bar\n", "", 0},
		{"export", "export V=1; sh -c 'echo $V'", "1\n", "", 0},
		{"read", "echo 'x y z' | { read a b; echo $b; }", "y z\n", "", 0},
		{"background and wait", "sleep 0.01 & wait; echo done", "done\n", "", 0},
		{"string length", "A=hello; echo ${#A}", "5\n", "", 0},
		{"heredoc", "X=1; cat <<EOF\nhello $X\nEOF\necho after", "hello 1\nafter\n", "", 0},
		{"heredoc quoted", "cat <<'EOF'\n$X `x`\nEOF", "$X `x`\n", "", 0},
		{"heredoc strip tabs", "cat <<-END\n\tindented\n\tEND", "indented\n", "", 0},
		{"heredoc to file", "cat > /tmp/h <<EOF\na\nb\nEOF\nwc -l < /tmp/h", "2\n", "", 0},
		{"cd -", "cd /tmp; cd -; pwd", "/\n/\n", "", 0},
		{"function args", `f() { for a in "$@"; do echo "[$a]"; done; }; f "a b" c`, "[a b]\n[c]\n", "", 0},
		{"kill background job", `sleep 10 & pid=$!; kill $pid; wait $pid; echo "rc=$?"`, "rc=143\n", "", 0},
		{"pipe into while read", `echo one two | while read a b; do echo "$b $a"; done`, "two one\n", "", 0},
		{"suffix trim", "F=a.tar.gz; echo ${F%.gz} ${F%%.*} ${F#*.}", "a.tar a tar.gz\n", "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := sh(t, nil, tc.script)
			if out != tc.stdout || errOut != tc.stderr || code != tc.code {
				t.Errorf("sh -c %q\n got stdout %q stderr %q code %d\nwant stdout %q stderr %q code %d", tc.script, out, errOut, code, tc.stdout, tc.stderr, tc.code)
			}
		})
	}
}

func TestShellArg0InErrors(t *testing.T) {
	// busybox ash prefixes its errors with argv[0] as invoked.
	fsys := newFS(t, FSConfig{MaskedPaths: []string{"/bin/ls"}})
	_, errOut, code := runCmd(t, Spec{Args: []string{"/bin/sh", "-c", "ls"}, FS: fsys})
	if errOut != "/bin/sh: ls: Permission denied\n" || code != 126 {
		t.Fatalf("masked ls: stderr %q code %d", errOut, code)
	}
}
