package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// The fuzz targets of what a runtime hands cni-fake: the network configuration on stdin, CNI_ARGS,
// and the environment's names. `make fuzz` runs each for FUZZTIME; `go test` runs the seeds and
// whatever testdata/fuzz keeps (every crasher found stays there as a seed).

// fuzzConf is a complete, valid plugin entry, the seed the fuzzer mutates.
const fuzzConf = `{"cniVersion":"1.1.0","name":"net","type":"cni-fake","mode":"fake","mtu":1400,
"capabilities":{"portMappings":true,"ips":true},
"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}],"ips":["10.1.0.9/24"],
"dns":{"servers":["10.0.0.10"]},"bandwidth":{"ingressRate":1000}},
"args":{"cni":{"ips":["10.1.0.8"]}},
"faults":[{"verb":"DEL","code":11,"times":1}],
"ipam":{"type":"cni-fake","ranges":[[{"subnet":"10.1.0.0/24","rangeStart":"10.1.0.5","rangeEnd":"10.1.0.20","gateway":"10.1.0.1"}],[{"subnet":"fd00::/120"}]],
"routes":[{"dst":"0.0.0.0/0"},{"dst":"::/0","gw":"fd00::1"}]}}`

// FuzzParseConfig: parseConfig never panics; what it accepts has the invariants the verbs rely
// on (a mode, an absolute dataDir, an MTU in range), and its refusals carry a CNI code.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{fuzzConf, `{}`, `{"name":"n"}`, `{"name":"n","ipam":{"subnet":"10.0.0.0/31"}}`,
		`{"name":"n","ipam":{"ranges":[[{"subnet":"10.0.0.0/8","rangeStart":"10.255.255.255","rangeEnd":"10.0.0.1"}]]}}`,
		`{"name":"n","ipam":{"ranges":[[{"subnet":"::/0"}]]}}`, `{"name":"n","mtu":-1}`, `[]`, `null`,
		`{"name":"n","runtimeConfig":{"portMappings":[{"hostPort":70000}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stdin []byte) {
		conf, err := parseConfig(stdin)
		if err != nil {
			var cerr *types.Error
			if !errors.As(err, &cerr) || cerr.Code == 0 {
				t.Fatalf("refusal %v (%T) has no CNI code", err, err)
			}
			return
		}
		if conf.Mode != ModeFake && conf.Mode != ModeVeth || !filepath.IsAbs(conf.DataDir) || conf.MTU < 68 || conf.MTU > 65535 {
			t.Fatalf("accepted %+v", conf)
		}
		if !conf.delegated() {
			pool, err := conf.pool()
			if err == nil {
				for _, set := range pool.Sets {
					for _, r := range set {
						if r.End.Less(r.Start) || !r.Subnet.Contains(r.Start) || !r.Subnet.Contains(r.End) {
							t.Fatalf("range %+v of %s", r, stdin)
						}
					}
				}
			}
		}
		if _, err := conf.requestedIPs(cniArgs{}); err != nil {
			var cerr *types.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("requestedIPs: %v has no CNI code", err)
			}
		}
	})
}

// FuzzParseCNIArgs: CNI_ARGS never panics; a refusal is code 4 (invalid environment variables).
func FuzzParseCNIArgs(f *testing.F) {
	for _, s := range []string{"IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u",
		"IP=10.0.0.5,fd00::5", "PLUGSIM_CALLER=kubelet", ";;", "=", "IP=", "IP=10.0.0.1%eth0", "a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseCNIArgs(s)
		if err != nil {
			var cerr *types.Error
			if !errors.As(err, &cerr) || cerr.Code != types.ErrInvalidEnvironmentVariables {
				t.Fatalf("CNI_ARGS %q: %v, want code %d", s, err, types.ErrInvalidEnvironmentVariables)
			}
			return
		}
		for _, ip := range a.IP {
			if !ip.IsValid() {
				t.Fatalf("CNI_ARGS %q: invalid address accepted", s)
			}
		}
	})
}

// FuzzRun runs whole invocations (ADD, CHECK, DEL, as a runtime sends them) with a fuzzed
// configuration, CNI_ARGS, container ID and interface name. Paths the configuration names are
// pointed into the test's directory first (a fuzzer must not write where it likes); everything
// else, the names included, is as fuzzed. The invariants: no panic, every error a CNI error with a
// code, a successful ADD prints a result, and nothing appears outside the data directory.
func FuzzRun(f *testing.F) {
	f.Add([]byte(fuzzConf), "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p", "c1", "eth0")
	f.Add([]byte(fuzzConf), "IP=10.1.0.7", "../../x", "eth0")
	f.Add([]byte(`{"cniVersion":"0.4.0","name":"n","type":"cni-fake","ipam":{"subnet":"10.2.0.0/30"}}`), "", "c", "net1")
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"n","type":"cni-fake"}`), "", "c", "eth0")
	f.Fuzz(func(t *testing.T, stdin []byte, args, containerID, ifName string) {
		root := t.TempDir()
		data := filepath.Join(root, "data")
		var m map[string]any
		if json.Unmarshal(stdin, &m) == nil && m != nil {
			m["dataDir"] = data
			m["mode"] = ModeFake
			delete(m, "logFile")
			delete(m, "faultsFile")
			if ipam, ok := m["ipam"].(map[string]any); ok {
				if typ, _ := ipam["type"].(string); typ != "" && typ != builtinIPAM {
					ipam["type"] = builtinIPAM // no delegated plugin is exec'd from a fuzzer
				}
			}
			stdin, _ = json.Marshal(m)
		}
		for _, verb := range []string{"ADD", "CHECK", "DEL"} {
			var out bytes.Buffer
			env := []string{"CNI_COMMAND=" + verb, "CNI_CONTAINERID=" + containerID, "CNI_NETNS=/var/run/netns/fuzz",
				"CNI_IFNAME=" + ifName, "CNI_ARGS=" + args, "CNI_PATH=" + root}
			// A fault rule's delay waits on the context: bounded, so a fuzzed delay is not a hang.
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			cerr := Run(ctx, Invocation{Env: env, Stdin: stdin, Stdout: &out})
			cancel()
			if cerr != nil {
				if cerr.Code == 0 {
					t.Fatalf("%s: error without a code: %v", verb, cerr)
				}
				continue
			}
			if verb == "ADD" && out.Len() == 0 {
				t.Fatalf("ADD succeeded without a result")
			}
		}
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			if e.Name() != "data" {
				t.Fatalf("%s created outside the data directory", filepath.Join(root, e.Name()))
			}
		}
		filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type()&os.ModeSymlink != 0 {
				t.Fatalf("symlink %s in the data directory", p)
			}
			if strings.Contains(p, "..") {
				t.Fatalf("path %s", p)
			}
			return nil
		})
	})
}
