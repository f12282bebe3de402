package process

import (
	"context"
	"io"
	"strings"
	"testing"
)

// fifteenMB is issue 24's variable: 15 MB of output in a command substitution.
const fifteenMB = `$(head -c 15000000 /dev/zero | tr '\0' a)`

// forty15MBVariables is issue 24's reproduction: 40 shell variables of 15 MB.
const forty15MBVariables = `for i in $(seq 40); do eval "v$i=\` + fifteenMB + `"; done; echo survived`

// TestOOMShellVariables: issue 24, item 5: a container limited to 32 MiB held 40 shell variables
// of 15 MB (cri-fake went from 318 MB to 1.05 GB, no OOM kill, stats said 1.3 MB). A shell's
// variables are its container's memory now: the OOM killer ends it (137, OOMKilled), and what
// cri-fake held on the way stays a small multiple of the limit.
func TestOOMShellVariables(t *testing.T) {
	if !measuredAlone(t) {
		return
	}
	base := heapInUse()
	peak := watchHeap(t)
	p := startProc(t, Spec{Args: []string{"sh", "-c", forty15MBVariables}, MemoryLimit: 32 << 20})
	if code := waitExit(t, p); code != 137 || !p.OOMKilled() {
		t.Fatalf("40 variables of 15 MB under 32 MiB: exit %d, OOMKilled %v; want 137, true", code, p.OOMKilled())
	}
	grown := heapGrowth(peak(), base)
	t.Logf("cri-fake held at most %d MiB more", grown>>20)
	if grown > 128<<20 {
		t.Fatalf("cri-fake held %d MiB more for a container limited to 32 MiB", grown>>20)
	}
}

// TestOOMShellVariablesWithoutLimit: without a memory limit the container is bounded all the same
// (DefaultMemoryLimit): the 40 variables end it with the OOM killer rather than growing cri-fake.
func TestOOMShellVariablesWithoutLimit(t *testing.T) {
	p := startProc(t, Spec{Args: []string{"sh", "-c", forty15MBVariables}})
	if code := waitExit(t, p); code != 137 || !p.OOMKilled() {
		t.Fatalf("40 variables of 15 MB without a limit: exit %d, OOMKilled %v; want 137, true", code, p.OOMKilled())
	}
}

// TestVariableInStats: a variable's memory shows in Stats while the shell holds it and is given
// back when it is unset; the subshells of a pipeline, which share it, do not count it again, as
// forked processes share its pages.
func TestVariableInStats(t *testing.T) {
	in, feed := io.Pipe()
	defer feed.Close()
	var out syncBuffer
	script := `x=` + fifteenMB + `; echo "${#x}" | cat | cat; read go; unset x; echo unset; sleep 100000`
	p := startProc(t, Spec{Args: []string{"sh", "-c", script}, Stdin: in, Stdout: &out, MemoryLimit: 40 << 20})
	waitFor(t, "the variable to be set", func() bool { return out.String() == "15000000\n" })
	if m := p.Stats().MemoryBytes; m < 15_000_000 {
		t.Fatalf("Stats: %d bytes with a 15 MB variable", m)
	}
	if p.OOMKilled() {
		t.Fatal("a 15 MB variable shared with three subshells was counted more than once under 40 MiB")
	}
	held := p.Stats().MemoryBytes
	io.WriteString(feed, "go\n")
	waitFor(t, "the variable to be unset", func() bool { return strings.HasSuffix(out.String(), "unset\n") })
	if m := p.Stats().MemoryBytes; m > held-14_000_000 {
		t.Fatalf("Stats: %d bytes after unset, %d before", m, held)
	}
}

// TestShScriptUnderLimit: issue 24: `sh` of a 15 MB script cost about 1 GB to parse (four at
// once: 5.2 GB). A script runs a line at a time now, each line's tree charged while it runs. Under
// a 64 MiB limit: 15 MB of `:` lines with an `exit 3` after the first 50,000 is parsed only as far
// as it runs (its file and the script read whole are 30 MB of the limit; the whole tree would
// have been 1.4 GB), and a 15 MB script whose one line would need a tree of a gigabyte is
// OOM-killed when its tree passes the limit. Either way cri-fake holds a small multiple of it.
func TestShScriptUnderLimit(t *testing.T) {
	if !measuredAlone(t) {
		return
	}
	ctx := context.Background()
	const size = 15_000_000
	lines := strings.Repeat(":\n", 50_000) + "exit 3\n"
	for _, tc := range []struct {
		name, script string
		code         int
	}{
		{"lines", lines + strings.Repeat(":\n", (size-len(lines))/2), 3},
		{"one line", strings.Repeat(":;", size/2), 137},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProc(t, Spec{Args: []string{"sleep", "100000"}, MemoryLimit: 64 << 20})
			if err := p.FS().WriteFile("/s.sh", []byte(tc.script), 0o755); err != nil {
				t.Fatal(err)
			}
			base := heapInUse()
			peak := watchHeap(t)
			_, stderr, code, err := p.ExecSync(ctx, []string{"sh", "/s.sh"}, 0)
			if err != nil || code != tc.code {
				t.Fatalf("sh of a %d-byte script: exit %d %q %v; want %d", len(tc.script), code, stderr, err, tc.code)
			}
			if (code == 137) != p.OOMKilled() {
				t.Fatalf("exit %d, OOMKilled %v", code, p.OOMKilled())
			}
			grown := heapGrowth(peak(), base)
			t.Logf("cri-fake held at most %d MiB more", grown>>20)
			if grown > 192<<20 {
				t.Fatalf("cri-fake held %d MiB more to run a 15 MB script under 64 MiB", grown>>20)
			}
		})
	}
}

// TestChargesGivenBack: whatever a shell and its programs held is given back when they end:
// after these execs (variables, exports, functions, positional parameters, traps, subshells,
// pipelines, command substitutions, here-documents, eval, read, loops, and the applets that hold
// their input) the container's memory is what it was, to the byte.
func TestChargesGivenBack(t *testing.T) {
	p := startProc(t, Spec{Args: []string{"sleep", "100000"}, MemoryLimit: 64 << 20})
	ctx := context.Background()
	before := p.Stats().MemoryBytes
	for _, script := range []string{
		`x=$(head -c 100000 /dev/zero | tr '\0' a); y=$x; export z=$x; unset y; echo ${#x}`,
		`f() { local v=$1; set -- a b c; shift; echo "$v $#"; }; f $(seq 1000); g() { :; }; unset -f g`,
		`trap 'echo bye' EXIT; trap 'echo usr1' USR1; trap - USR1; x=$(printf %5000s) ; (echo "$x" | cat | wc -c) & wait`,
		`for i in $(seq 2000); do v=$i; done; eval "w=$(printf %9000s)"; echo "${#w}"`,
		`cat <<EOF | sort | tail -n 1
$(seq 5000)
EOF`,
		`echo "$(seq 3000)" | grep 99 | cut -c 1-2 | sort -n | tail -n 2; read a b <<EOF
$(printf %6000s) rest
EOF`,
	} {
		if _, stderr, code, err := p.ExecSync(ctx, []string{"sh", "-c", script}, 0); err != nil || code != 0 {
			t.Fatalf("%q: exit %d %q %v", script, code, stderr, err)
		}
	}
	waitFor(t, "the memory to be given back", func() bool { return p.Stats().MemoryBytes == before })
	if p.OOMKilled() {
		t.Fatal("OOM-killed")
	}
}
