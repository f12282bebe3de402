package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/plugsim/plugsim/cni-fake/plugin"
	"github.com/plugsim/plugsim/harness/trace"
)

// runInProcess is run without the binary: plugin.Run with the environment the binary would get.
func runInProcess(t testing.TB, c call) outcome {
	t.Helper()
	env := []string{"CNI_COMMAND=" + c.cmd, "CNI_PATH=" + cniPath(), "PATH=" + os.Getenv("PATH")}
	for k, v := range map[string]string{"CNI_CONTAINERID": c.containerID, "CNI_NETNS": c.netns, "CNI_IFNAME": c.ifName, "CNI_ARGS": c.args} {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, c.env...)
	var out, errb bytes.Buffer
	err := plugin.Run(context.Background(), plugin.Invocation{Env: env, Stdin: []byte(c.stdin), Stdout: &out, Stderr: &errb})
	o := outcome{stdout: out.Bytes(), stderr: errb.String()}
	if err != nil {
		o.err = err
	}
	return o
}

// The in-process plugin must answer every call as the binary does: same result, same error
// code, message and details, same trace line. The table covers skel's checks, which dispatch
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
	exe, inp := t.TempDir(), t.TempDir()
	for _, s := range steps {
		bin := run(t, s.call(func(extra map[string]any) string { return testConf(exe, "1.1.0", extra) }))
		in := runInProcess(t, s.call(func(extra map[string]any) string { return testConf(inp, "1.1.0", extra) }))
		norm := func(b []byte, dir string) string { return strings.ReplaceAll(string(b), dir, "DIR") }
		if bin.err == nil && norm(bin.stdout, exe) != norm(in.stdout, inp) {
			t.Errorf("%s: stdout\nbinary:     %s\nin-process: %s", s.name, bin.stdout, in.stdout)
		}
		be, ie := errJSON(bin.err), errJSON(in.err)
		if norm(be, exe) != norm(ie, inp) {
			t.Errorf("%s: error\nbinary:     %s\nin-process: %s", s.name, be, ie)
		}
	}
	// The invocation logs hold the same lines, but for times and durations.
	read := func(dir string) []trace.Event {
		evs, err := trace.ReadFile(filepath.Join(dir, "cni.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range evs {
			evs[i].Time, evs[i].DurationNS = time.Time{}, 0
		}
		return evs
	}
	be, ie := read(exe), read(inp)
	if len(be) != len(ie) || len(be) < len(steps)-3 {
		t.Fatalf("%d lines from the binary, %d in-process (%d steps)", len(be), len(ie), len(steps))
	}
	for i := range be {
		b, _ := json.Marshal(be[i])
		n, _ := json.Marshal(ie[i])
		if bs, ns := strings.ReplaceAll(string(b), exe, "DIR"), strings.ReplaceAll(string(n), inp, "DIR"); bs != ns {
			t.Errorf("log line %d\nbinary:     %s\nin-process: %s", i+1, bs, ns)
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
