package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkAddDel measures one ADD plus one DEL, each a separate exec as a runtime does it, for
// cni-fake (fake mode, built-in IPAM) and, in the same loop so that machine noise hits all alike,
// for the CNI project's noop test plugin (skel and nothing else: the floor for any Go plugin) and
// host-local alone (the reference IPAM). Figures are medians per ADD+DEL pair.
//
// Build flags matter more than code here: a cgo-enabled (dynamically linked) Go binary pays for
// ld.so and libc start-up on every exec. So cni-fake and noop are both built by the benchmark with
// CGO_ENABLED=0, as the Makefile builds cni-fake, for a like-for-like ratio (x-noop, target <= 1.2);
// noop and host-local as `make tools` builds them (cgo on) are measured too (x-noop-tools,
// x-host-local).
func BenchmarkAddDel(b *testing.B) {
	noopTools, hostLocal := toolPath(b, "noop"), toolPath(b, "host-local")
	dir := b.TempDir()
	static := func(name, pkg string) string {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("go build %s: %v\n%s", pkg, err, msg)
		}
		return out
	}
	fake := static("cni-fake", ".")
	noop := static("noop", "github.com/containernetworking/cni/plugins/test/noop")
	ipamConf := func(typ string) map[string]any {
		return map[string]any{"type": typ, "dataDir": filepath.Join(dir, typ),
			"ranges": [][]map[string]string{{{"subnet": "10.200.0.0/16"}}}, "routes": []map[string]string{{"dst": "0.0.0.0/0"}}}
	}
	noopConf := `{"cniVersion":"1.1.0","name":"testnet","type":"noop"}`
	plugins := []struct {
		name, path, conf string
		samples          []time.Duration
	}{
		{name: "cni-fake", path: fake, conf: testConf(dir, "1.1.0", map[string]any{"logFile": nil, "ipam": ipamConf("cni-fake")})},
		{name: "cni-fake+log", path: fake, conf: testConf(dir, "1.1.0", map[string]any{"name": "logged", "ipam": ipamConf("cni-fake")})},
		{name: "noop", path: noop, conf: noopConf},
		{name: "noop-tools", path: noopTools, conf: noopConf},
		{name: "host-local", path: hostLocal, conf: testConf(dir, "1.1.0", map[string]any{"type": "host-local", "logFile": nil, "ipam": ipamConf("host-local")})},
	}
	exec1 := func(b *testing.B, path, verb, conf string) {
		cmd := exec.Command(path)
		cmd.Env = []string{"CNI_COMMAND=" + verb, "CNI_CONTAINERID=bench", "CNI_NETNS=/var/run/netns/bench", "CNI_IFNAME=eth0", "CNI_PATH=" + cniPath()}
		cmd.Stdin = bytes.NewReader([]byte(conf))
		var out bytes.Buffer
		cmd.Stdout = &out
		if err := cmd.Run(); err != nil {
			b.Fatalf("%s %s: %v: %s", filepath.Base(path), verb, err, out.String())
		}
	}
	// Warm the page cache so the first plugin measured is not penalised.
	for _, p := range plugins {
		exec1(b, p.path, "ADD", p.conf)
		exec1(b, p.path, "DEL", p.conf)
	}
	b.ResetTimer()
	round := 0
	for b.Loop() {
		// Rotate who goes first: the first exec of a round runs on a colder cache.
		round++
		for k := range plugins {
			p := &plugins[(k+round)%len(plugins)]
			start := time.Now()
			exec1(b, p.path, "ADD", p.conf)
			exec1(b, p.path, "DEL", p.conf)
			p.samples = append(p.samples, time.Since(start))
		}
	}
	b.StopTimer()
	// Medians, not means: on a shared machine a burst of other work inflates a few rounds, and the
	// rounds are interleaved, so the medians compare like with like.
	per := func(i int) float64 {
		s := slices.Clone(plugins[i].samples)
		slices.Sort(s)
		return float64(s[len(s)/2].Nanoseconds())
	}
	for i, p := range plugins {
		b.ReportMetric(per(i), p.name+"-ns/add+del")
	}
	b.ReportMetric(per(0)/per(2), "x-noop")
	b.ReportMetric(per(1)/per(2), "log-x-noop")
	b.ReportMetric(per(0)/per(3), "x-noop-tools")
	b.ReportMetric(per(0)/per(4), "x-host-local")
	fmt.Fprintf(os.Stderr, "ADD+DEL per invocation pair (median of %d, dataDir in %s): cni-fake %.2fms (with logFile %.2fms), noop %.2fms, noop as make tools builds it %.2fms, host-local %.2fms; cni-fake/noop %.2fx (with logFile %.2fx), cni-fake/noop-tools %.2fx, cni-fake/host-local %.2fx\n",
		b.N, os.TempDir(), per(0)/1e6, per(1)/1e6, per(2)/1e6, per(3)/1e6, per(4)/1e6, per(0)/per(2), per(1)/per(2), per(0)/per(3), per(0)/per(4))
}
