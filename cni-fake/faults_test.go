package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/plugsim/plugsim/cni-fake/plugin"
	"github.com/plugsim/plugsim/harness/faults/rules"
	"github.com/plugsim/plugsim/harness/trace"
)

// noIPs is the rule a runtime author writes to see how their runtime handles an exhausted pool on
// the third pod: code 11 is the spec's "try again later", what cni-fake itself answers then.
var noIPs = map[string]any{"verb": "ADD", "code": 11, "message": "no IP addresses available in range set 10.77.0.1-10.77.0.254", "after": 2, "times": 1}

func addCall(id, conf string) call {
	return call{cmd: "ADD", containerID: id, netns: "/var/run/netns/" + id, ifName: "eth0", stdin: conf}
}

// The counts of "after" and "times" hold across execs: the third ADD fails, and only it, with
// the rule's code and message; its trace line names the rule; it leaves no lease behind.
func TestFaultOnTheThirdAdd(t *testing.T) {
	dir := t.TempDir()
	conf := testConf(dir, "1.1.0", map[string]any{"faults": []any{noIPs}})
	for i := 1; i <= 5; i++ {
		o := run(t, addCall(fmt.Sprintf("pod%d", i), conf))
		switch {
		case i == 3 && (o.err == nil || o.err.Code != types.ErrTryAgainLater || o.err.Msg != noIPs["message"]):
			t.Fatalf("ADD %d: %+v, want code 11 %q", i, o.err, noIPs["message"])
		case i != 3 && o.err != nil:
			t.Fatalf("ADD %d: %v", i, o.err)
		}
	}
	if l := leaseFiles(t, dir); len(l) != 4 {
		t.Fatalf("leases %v: want four (the failed ADD must not hold one)", l)
	}
	evs, err := trace.ReadFile(filepath.Join(dir, "cni.jsonl"))
	if err != nil || len(evs) != 5 {
		t.Fatalf("trace: %d events, %v", len(evs), err)
	}
	for i, ev := range evs {
		want := ""
		if i == 2 {
			want = "rule-1"
		}
		if ev.Attrs["fault"] != want || (i == 2) != (ev.Code == "11") {
			t.Errorf("event %d: code %s fault %q, want fault %q", i+1, ev.Code, ev.Attrs["fault"], want)
		}
	}
	st := readFaultState(t, dir, "testnet")
	if len(st.Rules) != 1 {
		t.Fatalf("state %+v", st)
	}
	for k, c := range st.Rules {
		if !strings.HasPrefix(k, "rule-1/") || c.Matched != 3 || c.Hits != 1 {
			t.Fatalf("state %s = %+v, want 3 matched, 1 hit (a used-up rule stops counting)", k, c)
		}
	}
}

type faultState struct {
	Rules map[string]struct{ Matched, Hits int } `json:"rules"`
}

func readFaultState(t testing.TB, dir, network string) faultState {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "data", network, "faults.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st faultState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("faults.json: %v: %s", err, b)
	}
	return st
}

// Concurrent invocations (separate processes) count each call once: of 12 ADDs racing under a
// rule for four of them, exactly four fail.
func TestFaultCountsUnderConcurrency(t *testing.T) {
	dir := t.TempDir()
	conf := testConf(dir, "1.1.0", map[string]any{"faults": []any{map[string]any{"verb": "ADD", "code": 5, "times": 4}}})
	var mu sync.Mutex
	failed := 0
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			o := runBinary(t, addCall(fmt.Sprintf("c%d", i), conf))
			if o.err != nil {
				if o.err.Code != types.ErrIOFailure || o.err.Msg != "injected fault rule-1 on ADD" {
					t.Errorf("ADD %d: %v", i, o.err)
				}
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != 4 {
		t.Fatalf("%d ADDs failed, want 4", failed)
	}
}

func TestFaultMatching(t *testing.T) {
	for _, tc := range []struct {
		name  string
		match map[string]string
		call  func(conf string) call
		hit   bool
	}{
		{"container ID glob", map[string]string{"CNI_CONTAINERID": "abc*"}, func(c string) call { return addCall("abc123", c) }, true},
		{"container ID glob, no match", map[string]string{"CNI_CONTAINERID": "abc*"}, func(c string) call { return addCall("xabc", c) }, false},
		{"one CNI_ARGS pair", map[string]string{"CNI_ARGS.K8S_POD_NAME": "web-?"}, func(c string) call {
			cl := addCall("p1", c)
			cl.args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0"
			return cl
		}, true},
		{"a CNI_ARGS pair the call lacks", map[string]string{"CNI_ARGS.K8S_POD_NAME": "*"}, func(c string) call { return addCall("p1", c) }, false},
		{"netns path", map[string]string{"CNI_NETNS": "/var/run/netns/*"}, func(c string) call { return addCall("p1", c) }, true},
		{"config path", map[string]string{"args.cni.foo": "bar"}, func(c string) call { return addCall("p1", c) }, true},
		{"config number", map[string]string{"mtu": "9000"}, func(c string) call { return addCall("p1", c) }, true},
		{"config array index", map[string]string{"ipam.routes.0.dst": "0.0.0.0/0"}, func(c string) call { return addCall("p1", c) }, true},
		{"missing config path", map[string]string{"args.cni.nope": "*"}, func(c string) call { return addCall("p1", c) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			conf := testConf(dir, "1.1.0", map[string]any{
				"mtu":    9000,
				"args":   map[string]any{"cni": map[string]any{"foo": "bar"}},
				"faults": []any{map[string]any{"id": "r", "verb": "add", "code": 7, "message": "refused", "match": tc.match}},
			})
			o := run(t, tc.call(conf))
			if hit := o.err != nil && o.err.Msg == "refused"; hit != tc.hit {
				t.Fatalf("hit = %v (err %v), want %v", hit, o.err, tc.hit)
			}
		})
	}
}

// A rule only for DEL leaves ADD alone; a pure delay slows the call down and lets it through.
func TestFaultDelayAndVerb(t *testing.T) {
	dir := t.TempDir()
	conf := testConf(dir, "1.1.0", map[string]any{"faults": []any{
		map[string]any{"verb": "DEL", "code": 11, "message": "busy", "times": 1},
		map[string]any{"id": "slow", "verb": "CHECK", "delay": "300ms"},
	}})
	if o := run(t, addCall("c1", conf)); o.err != nil {
		t.Fatal(o.err)
	}
	start := time.Now()
	if o := run(t, call{cmd: "CHECK", containerID: "c1", netns: "/var/run/netns/c1", ifName: "eth0", stdin: conf}); o.err != nil {
		t.Fatal(o.err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("CHECK took %v, want at least the rule's 300ms", took)
	}
	del := call{cmd: "DEL", containerID: "c1", ifName: "eth0", stdin: conf}
	if o := run(t, del); o.err == nil || o.err.Code != types.ErrTryAgainLater || o.err.Msg != "busy" {
		t.Fatalf("first DEL: %v", o.err)
	}
	if l := leaseFiles(t, dir); len(l) != 1 {
		t.Fatalf("a failed DEL released the lease: %v", l)
	}
	if o := run(t, del); o.err != nil {
		t.Fatalf("second DEL: %v", o.err)
	}
	evs, _ := trace.ReadFile(filepath.Join(dir, "cni.jsonl"))
	if len(evs) != 4 || evs[1].Method != "CHECK" || evs[1].Attrs["fault"] != "slow" || evs[1].Code != "OK" || evs[2].Attrs["fault"] != "rule-1" {
		t.Fatalf("trace: %+v", evs)
	}
}

func TestFaultsFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "faults.json")
	os.WriteFile(file, []byte(`{"seed": 7, "rules": [{"verb": "ADD", "code": 11, "message": "from the file", "times": 1}]}`), 0o644)
	conf := testConf(dir, "1.1.0", map[string]any{
		"faults":     []any{map[string]any{"verb": "ADD", "code": 7, "match": map[string]string{"CNI_CONTAINERID": "never"}}},
		"faultsFile": file,
	})
	if o := run(t, addCall("c1", conf)); o.err == nil || o.err.Msg != "from the file" {
		t.Fatalf("first ADD: %v", o.err)
	}
	if o := run(t, addCall("c2", conf)); o.err != nil {
		t.Fatalf("second ADD: %v", o.err)
	}
	// Editing a rule starts its count afresh.
	os.WriteFile(file, []byte(`{"rules": [{"verb": "ADD", "code": 11, "message": "edited", "times": 1}]}`), 0o644)
	if o := run(t, addCall("c3", conf)); o.err == nil || o.err.Msg != "edited" {
		t.Fatalf("ADD after the edit: %v", o.err)
	}
}

// Probabilities draw from one sequence across execs; with a seed, the same sequence each time.
func TestFaultProbabilityIsRepeatable(t *testing.T) {
	outcomes := func() string {
		dir := t.TempDir()
		file := filepath.Join(dir, "faults.json")
		os.WriteFile(file, []byte(`{"seed": 42, "rules": [{"verb": "STATUS", "code": 50, "probability": 0.5}]}`), 0o644)
		conf := testConf(dir, "1.1.0", map[string]any{"faultsFile": file})
		var b strings.Builder
		for range 12 {
			if o := run(t, call{cmd: "STATUS", stdin: conf}); o.err != nil {
				b.WriteString("x")
			} else {
				b.WriteString(".")
			}
		}
		return b.String()
	}
	a, b := outcomes(), outcomes()
	if a != b || !strings.Contains(a, "x") || !strings.Contains(a, ".") {
		t.Fatalf("two runs with seed 42: %s and %s (want the same mix)", a, b)
	}
}

func TestBadFaultRules(t *testing.T) {
	dir := t.TempDir()
	yamlFile := filepath.Join(dir, "faults.yaml")
	os.WriteFile(yamlFile, []byte("rules:\n- verb: ADD\n  code: 11\n"), 0o644)
	for _, tc := range []struct {
		name string
		conf map[string]any
		want string
	}{
		{"misspelt verb", map[string]any{"faults": []any{map[string]any{"verb": "ADDD", "code": 11}}}, `faults[0]: fault rule for ADDD: "ADDD" is not a method of this fake (did you mean ADD?); the methods are ADD, CHECK, DEL, GC, STATUS`},
		{"VERSION", map[string]any{"faults": []any{map[string]any{"verb": "VERSION", "code": 11}}}, "VERSION carries no network configuration"},
		{"gRPC code", map[string]any{"faults": []any{map[string]any{"verb": "ADD", "code": "Unavailable"}}}, `code "Unavailable" is not a CNI error number`},
		{"no code or delay", map[string]any{"faults": []any{map[string]any{"verb": "ADD"}}}, "give a code, a delay, or both"},
		{"unknown key", map[string]any{"faults": []any{map[string]any{"verb": "ADD", "code": 11, "tims": 1}}}, `unknown field "tims"`},
		{"unknown CNI variable", map[string]any{"faults": []any{map[string]any{"verb": "ADD", "code": 11, "match": map[string]string{"CNI_CONTAINER": "x"}}}}, `match key "CNI_CONTAINER" is not a CNI variable`},
		// CNI_PATH is not in the invocation log: a rule may match only what the trace shows.
		{"CNI_PATH", map[string]any{"faults": []any{map[string]any{"verb": "ADD", "code": 11, "match": map[string]string{"CNI_PATH": "*"}}}}, `match key "CNI_PATH" is not a CNI variable (CNI_COMMAND, CNI_ARGS, CNI_CONTAINERID, CNI_IFNAME, CNI_NETNS`},
		{"not a list", map[string]any{"faults": map[string]any{"verb": "ADD"}}, "faults: want a list of fault rules"},
		{"relative faultsFile", map[string]any{"faultsFile": "faults.json"}, "not an absolute path"},
		{"missing faultsFile", map[string]any{"faultsFile": filepath.Join(dir, "nope.json")}, "no such file"},
		{"YAML faultsFile", map[string]any{"faultsFile": yamlFile}, "cni-fake reads JSON only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := run(t, addCall("c1", testConf(dir, "1.1.0", tc.conf)))
			if o.err == nil || o.err.Code != types.ErrInvalidNetworkConfig || !strings.Contains(o.err.Msg, tc.want) {
				t.Fatalf("err = %v, want code 7 containing %q", o.err, tc.want)
			}
		})
	}
	if l := leaseFiles(t, dir); len(l) != 0 {
		t.Fatalf("a refused config leased %v", l)
	}
}

// FaultFile changes the rules between calls and reads back the counts cni-fake kept.
func TestFaultFile(t *testing.T) {
	dir := t.TempDir()
	ff := plugin.FaultFile{Path: filepath.Join(dir, "faults.json"), DataDir: filepath.Join(dir, "data"), Network: "testnet"}
	conf := testConf(dir, "1.1.0", map[string]any{"faultsFile": ff.Path})
	if err := ff.Reset(); err != nil { // an empty file: no rules
		t.Fatal(err)
	}
	if o := run(t, addCall("c0", conf)); o.err != nil {
		t.Fatal(o.err)
	}
	ids, err := ff.Add(rules.Rule{Method: "ADD", Code: "11", Message: "no IP addresses available", After: 1, Times: 1})
	if err != nil || len(ids) != 1 || ids[0] != "cni-1" {
		t.Fatalf("Add: %v, %v", ids, err)
	}
	for i, want := range []bool{false, true, false} {
		o := run(t, addCall(fmt.Sprintf("c%d", i+1), conf))
		if (o.err != nil) != want {
			t.Fatalf("ADD %d: %v, want failure %v", i+1, o.err, want)
		}
	}
	rs, err := ff.Rules()
	if err != nil || len(rs) != 1 || rs[0].ID != "cni-1" || rs[0].Matched != 2 || rs[0].Hits != 1 || !rs[0].UsedUp() {
		t.Fatalf("Rules: %+v, %v", rs, err)
	}
	for _, bad := range []rules.Rule{{Method: "ADDD", Code: "11"}, {Method: "ADD", Code: "Unavailable"}, {Method: "VERSION", Code: "1"}, {ID: "cni-1", Method: "DEL", Code: "11"}} {
		if _, err := ff.Add(bad); err == nil {
			t.Errorf("Add(%+v) accepted", bad)
		}
	}
	if err := ff.Reset(); err != nil {
		t.Fatal(err)
	}
	if rs, err := ff.Rules(); err != nil || len(rs) != 0 {
		t.Fatalf("after Reset: %+v, %v", rs, err)
	}
}

// Issue 24, 4: three cni-fake rules of 1 MB match strings pushed the faults file past the 1 MiB
// cni-fake reads, and every CNI ADD then failed until the rules were cleared. A rule too big, or one
// that would make the file too big for cni-fake, is refused when it is added; the file stays usable.
func TestFaultFileRefusesWhatCNIFakeCouldNotRead(t *testing.T) {
	dir := t.TempDir()
	ff := plugin.FaultFile{Path: filepath.Join(dir, "faults.json"), DataDir: filepath.Join(dir, "data"), Network: "testnet"}
	conf := testConf(dir, "1.1.0", map[string]any{"faultsFile": ff.Path})
	if err := ff.Reset(); err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", 1<<20)
	for range 3 {
		if _, err := ff.Add(rules.Rule{Method: "ADD", Match: map[string]string{"CNI_CONTAINERID": huge}, Code: "11"}); err == nil || !strings.Contains(err.Error(), "more than 1024") {
			t.Fatalf("a rule with a 1 MB match string: %v, want it refused", err)
		}
	}
	// Rules within each bound, until the file would be more than cni-fake reads (or the set more
	// than it holds): refused at that Add, with the file as it was.
	msg := strings.Repeat("m", rules.MaxMessageBytes)
	rule := rules.Rule{Method: "DEL", Message: msg, Code: "11", Match: map[string]string{"CNI_CONTAINERID": "never-*"}}
	batch := make([]rules.Rule, 240) // near the bound in one write (244 fit); then one at a time
	for i := range batch {
		batch[i] = rule
	}
	if _, err := ff.Add(batch...); err != nil {
		t.Fatal(err)
	}
	var err error
	added := len(batch)
	for ; added <= rules.MaxRules; added++ {
		if _, err = ff.Add(rule); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "more than the 1048576 cni-fake reads") {
		t.Fatalf("after %d rules of 4 KiB messages: %v, want the next refused for the file's size", added, err)
	}
	if fi, _ := os.Stat(ff.Path); fi.Size() > 1<<20 {
		t.Fatalf("the faults file is %d bytes, more than cni-fake reads", fi.Size())
	}
	if o := run(t, addCall("c1", conf)); o.err != nil {
		t.Fatalf("ADD with the file full: %v", o.err)
	}
	t.Logf("%d rules of %d-byte messages fit; the next was refused: %v", added, rules.MaxMessageBytes, err)
}
