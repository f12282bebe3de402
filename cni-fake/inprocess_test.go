package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/plugsim/plugsim/cni-fake/plugin"
	"github.com/plugsim/plugsim/harness/trace"
)

// runInProcess is the call through plugin.Run (what cni-fake/inprocess does inside a runtime),
// with the environment the binary would get and nothing process-wide touched.
func runInProcess(t testing.TB, c call) outcome {
	t.Helper()
	var out, errb bytes.Buffer
	err := plugin.Run(context.Background(), plugin.Invocation{Env: c.environ(), Stdin: []byte(c.stdin), Stdout: &out, Stderr: &errb})
	o := outcome{stdout: out.Bytes(), stderr: errb.String()}
	if err != nil {
		o.err = err
	}
	return o
}

// The in-process plugin (main's pluginMain in this process, and plugin.Run) must answer every
// call as the binary does: same result, same error code, message and details, same trace line. The table covers skel's checks, which dispatch
// re-implements (skel reads os.Getenv and os.Stdin, so an in-process call cannot use it), the
// verbs, and fault rules.
func TestInProcessMatchesTheBinary(t *testing.T) {
	type step struct {
		name string
		call func(conf func(extra map[string]any) string) call
	}
	v := func(version string) func(conf func(map[string]any) string) string {
		return func(conf func(map[string]any) string) string { return conf(map[string]any{"cniVersion": version}) }
	}
	steps := []step{
		{"VERSION", func(conf func(map[string]any) string) call {
			return call{cmd: "VERSION", stdin: `{"cniVersion":"1.1.0"}`}
		}},
		{"no command", func(conf func(map[string]any) string) call { return call{cmd: "", stdin: conf(nil)} }},
		{"unknown command", func(conf func(map[string]any) string) call { return call{cmd: "FROB", stdin: conf(nil)} }},
		{"ADD without variables", func(conf func(map[string]any) string) call { return call{cmd: "ADD", stdin: conf(nil)} }},
		{"ADD bad container ID", func(conf func(map[string]any) string) call {
			return call{cmd: "ADD", containerID: "../x", netns: "/x", ifName: "eth0", stdin: conf(nil)}
		}},
		{"ADD long interface name", func(conf func(map[string]any) string) call {
			return call{cmd: "ADD", containerID: "c", netns: "/x", ifName: "a-very-long-interface", stdin: conf(nil)}
		}},
		{"ADD not JSON", func(conf func(map[string]any) string) call {
			return call{cmd: "ADD", containerID: "c", netns: "/x", ifName: "eth0", stdin: "{"}
		}},
		{"ADD no name", func(conf func(map[string]any) string) call {
			return call{cmd: "ADD", containerID: "c", netns: "/x", ifName: "eth0", stdin: conf(map[string]any{"name": nil})}
		}},
		{"ADD bad network name", func(conf func(map[string]any) string) call {
			return call{cmd: "ADD", containerID: "c", netns: "/x", ifName: "eth0", stdin: conf(map[string]any{"name": "a/b"})}
		}},
		{"ADD unknown version", func(conf func(map[string]any) string) call {
			return call{cmd: "ADD", containerID: "c", netns: "/x", ifName: "eth0", stdin: v("9.9.9")(conf)}
		}},
		{"ADD own netns", func(conf func(map[string]any) string) call {
			return call{cmd: "ADD", containerID: "own", netns: "/proc/self/ns/net", ifName: "eth0", stdin: conf(nil)}
		}},
		{"ADD", func(conf func(map[string]any) string) call {
			return call{cmd: "ADD", containerID: "c1", netns: "/var/run/netns/c1", ifName: "eth0", args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web", stdin: conf(nil)}
		}},
		{"ADD again", func(conf func(map[string]any) string) call {
			return call{cmd: "ADD", containerID: "c1", netns: "/var/run/netns/c1", ifName: "eth0", stdin: conf(nil)}
		}},
		{"ADD at 0.3.1", func(conf func(map[string]any) string) call {
			return call{cmd: "ADD", containerID: "c2", netns: "/var/run/netns/c2", ifName: "eth0", stdin: v("0.3.1")(conf)}
		}},
		{"CHECK", func(conf func(map[string]any) string) call {
			return call{cmd: "CHECK", containerID: "c1", netns: "/var/run/netns/c1", ifName: "eth0", stdin: conf(nil)}
		}},
		{"CHECK at 0.3.1", func(conf func(map[string]any) string) call {
			return call{cmd: "CHECK", containerID: "c2", netns: "/var/run/netns/c2", ifName: "eth0", stdin: v("0.3.1")(conf)}
		}},
		{"CHECK unknown container", func(conf func(map[string]any) string) call {
			return call{cmd: "CHECK", containerID: "nope", netns: "/x", ifName: "eth0", stdin: conf(nil)}
		}},
		{"STATUS", func(conf func(map[string]any) string) call { return call{cmd: "STATUS", stdin: conf(nil)} }},
		{"STATUS at 1.0.0", func(conf func(map[string]any) string) call { return call{cmd: "STATUS", stdin: v("1.0.0")(conf)} }},
		{"GC at 1.0.0", func(conf func(map[string]any) string) call { return call{cmd: "GC", stdin: v("1.0.0")(conf)} }},
		{"fault", func(conf func(map[string]any) string) call {
			return call{cmd: "ADD", containerID: "c3", netns: "/x", ifName: "eth0", stdin: conf(map[string]any{"faults": []any{noIPs, map[string]any{"verb": "ADD", "code": 11, "message": "always"}}})}
		}},
		{"bad fault", func(conf func(map[string]any) string) call {
			return call{cmd: "ADD", containerID: "c3", netns: "/x", ifName: "eth0", stdin: conf(map[string]any{"faults": []any{map[string]any{"verb": "ADDD", "code": 11}}})}
		}},
		{"DEL", func(conf func(map[string]any) string) call {
			return call{cmd: "DEL", containerID: "c1", ifName: "eth0", stdin: conf(nil)}
		}},
		{"DEL again", func(conf func(map[string]any) string) call {
			return call{cmd: "DEL", containerID: "c1", ifName: "eth0", stdin: conf(nil)}
		}},
		{"GC", func(conf func(map[string]any) string) call {
			return call{cmd: "GC", stdin: conf(map[string]any{"cni.dev/valid-attachments": []any{}})}
		}},
	}
	// Three ways of making each call, each with a data dir of its own: the binary exec'd, main's
	// pluginMain in this process (run), and plugin.Run (runInProcess).
	ways := []struct {
		name string
		run  func(testing.TB, call) outcome
		dir  string
	}{{"binary", runBinary, t.TempDir()}, {"pluginMain", run, t.TempDir()}, {"plugin.Run", runInProcess, t.TempDir()}}
	norm := func(b []byte, dir string) string { return strings.ReplaceAll(string(b), dir, "DIR") }
	for _, s := range steps {
		var outs []outcome
		for _, w := range ways {
			outs = append(outs, w.run(t, s.call(func(extra map[string]any) string { return testConf(w.dir, "1.1.0", extra) })))
		}
		bin := outs[0]
		for i, o := range outs[1:] {
			w := ways[i+1]
			if bin.err == nil && norm(bin.stdout, ways[0].dir) != norm(o.stdout, w.dir) {
				t.Errorf("%s: stdout\nbinary: %s\n%s: %s", s.name, bin.stdout, w.name, o.stdout)
			}
			if be, oe := norm(errJSON(bin.err), ways[0].dir), norm(errJSON(o.err), w.dir); be != oe {
				t.Errorf("%s: error\nbinary: %s\n%s: %s", s.name, be, w.name, oe)
			}
		}
	}
	// The invocation logs hold the same lines, but for times and durations.
	read := func(dir string) []string {
		evs, err := trace.ReadFile(filepath.Join(dir, "cni.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, ev := range evs {
			ev.Time, ev.DurationNS = time.Time{}, 0
			b, _ := json.Marshal(ev)
			lines = append(lines, norm(b, dir))
		}
		return lines
	}
	bl := read(ways[0].dir)
	if len(bl) < len(steps)-3 {
		t.Fatalf("%d lines from the binary (%d steps)", len(bl), len(steps))
	}
	for _, w := range ways[1:] {
		wl := read(w.dir)
		if len(wl) != len(bl) {
			t.Fatalf("%d lines from the binary, %d from %s", len(bl), len(wl), w.name)
		}
		for i := range bl {
			if bl[i] != wl[i] {
				t.Errorf("log line %d\nbinary: %s\n%s: %s", i+1, bl[i], w.name, wl[i])
			}
		}
	}
}

func errJSON(e *types.Error) []byte {
	if e == nil {
		return nil
	}
	b, _ := json.Marshal(e)
	return b
}
