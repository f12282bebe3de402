package network

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// recorderPlugin is a CNI plugin written as a shell script: it appends its environment and stdin
// to a log file and answers ADD with an address on eth0 (and one on another interface, which the
// runtime must not take as a pod IP).
const recorderPlugin = `#!/bin/sh
in=$(cat)
printf '%s|%s|%s|%s|%s\n' "$CNI_COMMAND" "$CNI_CONTAINERID" "$CNI_NETNS" "$CNI_IFNAME" "$CNI_ARGS" >> "$LOG"
printf '%s\n' "$in" >> "$LOG.stdin"
case "$CNI_COMMAND" in
ADD) printf '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"%s"},{"name":"other","sandbox":"%s"}],"ips":[{"address":"fd00::7/64","interface":0},{"address":"10.22.0.7/24","interface":0},{"address":"192.168.9.9/24","interface":1}]}' "$CNI_NETNS" "$CNI_NETNS" ;;
VERSION) printf '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0","1.1.0"]}' ;;
esac
`

func writePlugin(t testing.TB, dir string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "recorder"), []byte(recorderPlugin), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "calls")
	t.Setenv("LOG", log)
	return log
}

func TestCNIConfDirLifecycle(t *testing.T) {
	conf, bin := t.TempDir(), t.TempDir()
	writePlugin(t, bin)
	c := NewCNI(CNIOptions{ConfDir: conf, BinDirs: []string{bin}, CacheDir: t.TempDir()})
	if err := c.Ready(); err != ErrCNINotInitialized {
		t.Fatalf("empty conf dir: Ready() = %v", err)
	}
	// An invalid first file keeps the plugin uninitialised, even with a valid one after it.
	os.WriteFile(filepath.Join(conf, "05-broken.conflist"), []byte("{not json"), 0o644)
	os.WriteFile(filepath.Join(conf, "10-good.conflist"), []byte(`{"cniVersion":"1.0.0","name":"good","plugins":[{"type":"recorder"}]}`), 0o644)
	if err := c.Ready(); err == nil || !strings.Contains(c.LoadError().Error(), "05-broken") {
		t.Fatalf("broken first file: Ready %v, LoadError %v", err, c.LoadError())
	}
	os.Remove(filepath.Join(conf, "05-broken.conflist"))
	if err := c.Ready(); err != nil {
		t.Fatalf("after the broken file is gone: %v", err)
	}
	// The first file in name order wins.
	os.WriteFile(filepath.Join(conf, "01-first.conf"), []byte(`{"cniVersion":"1.0.0","name":"first","type":"recorder"}`), 0o644)
	info := c.Info()
	if !strings.Contains(info["cniconfig"], `"Name":"first"`) || info["lastCNILoadStatus"] != "OK" || !strings.HasSuffix(info["cniConfigFile"], "01-first.conf") {
		t.Fatalf("info after adding 01-first.conf: %v", info)
	}
	// A .conf file without a type is refused, as go-cni refuses it.
	os.WriteFile(filepath.Join(conf, "00-notype.conf"), []byte(`{"cniVersion":"1.0.0","name":"x"}`), 0o644)
	if c.Ready() == nil {
		t.Fatal("a conf without type was accepted")
	}
}

func TestCNISetupTeardownArgs(t *testing.T) {
	conf, bin := t.TempDir(), t.TempDir()
	log := writePlugin(t, bin)
	os.WriteFile(filepath.Join(conf, "10-rec.conflist"), []byte(`{"cniVersion":"1.0.0","name":"rec","plugins":[{"type":"recorder","capabilities":{"portMappings":true,"dns":true,"bandwidth":true,"io.kubernetes.cri.pod-annotations":true}}]}`), 0o644)
	var observed []string
	c := NewCNI(CNIOptions{ConfDir: conf, BinDirs: []string{bin}, CacheDir: t.TempDir(),
		Observe: func(verb string, _ Pod, _ *libcni.NetworkConfigList, _ *libcni.RuntimeConf, _ types.Result, _ error, _ time.Duration) {
			observed = append(observed, verb)
		}})
	pod := Pod{ID: "sandbox1", NetNS: "/var/run/netns/x", Config: &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "prod", Uid: "u-1"},
		PortMappings: []*runtimeapi.PortMapping{{ContainerPort: 80, HostPort: 8080}},
		DnsConfig:    &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}},
		Annotations:  map[string]string{"team": "blue"},
	}}
	res, err := c.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.IPs) != 2 || res.IPs[0] != "10.22.0.7" || res.IPs[1] != "fd00::7" {
		t.Fatalf("pod IPs %v: want eth0's addresses, IPv4 first", res.IPs)
	}
	if err := c.Teardown(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	calls, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
	wantArgs := "IgnoreUnknown=1;K8S_POD_NAMESPACE=prod;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=sandbox1;K8S_POD_UID=u-1"
	if len(lines) != 2 || lines[0] != "ADD|sandbox1|/var/run/netns/x|eth0|"+wantArgs || lines[1] != "DEL|sandbox1|/var/run/netns/x|eth0|"+wantArgs {
		t.Fatalf("plugin calls:\n%s", calls)
	}
	stdin, _ := os.ReadFile(log + ".stdin")
	for i, line := range strings.Split(strings.TrimSpace(string(stdin)), "\n") {
		var in struct {
			RuntimeConfig map[string]json.RawMessage `json:"runtimeConfig"`
		}
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"portMappings", "dns", "io.kubernetes.cri.pod-annotations"} {
			if _, ok := in.RuntimeConfig[k]; !ok {
				t.Errorf("call %d: runtimeConfig lacks %s: %s", i, k, line)
			}
		}
		if pm := string(in.RuntimeConfig["portMappings"]); pm != `[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]` {
			t.Errorf("call %d: portMappings %s", i, pm)
		}
	}
	if strings.Join(observed, ",") != "ADD,DEL" {
		t.Fatalf("observed %v", observed)
	}
}

func TestCNISetupPluginMissing(t *testing.T) {
	conf := t.TempDir()
	os.WriteFile(filepath.Join(conf, "10-x.conflist"), []byte(`{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"does-not-exist"}]}`), 0o644)
	c := NewCNI(CNIOptions{ConfDir: conf, BinDirs: []string{t.TempDir()}, CacheDir: t.TempDir()})
	_, err := c.Setup(context.Background(), Pod{ID: "s", NetNS: "/x", Config: &runtimeapi.PodSandboxConfig{}})
	if err == nil || !strings.Contains(err.Error(), "does-not-exist") {
		t.Fatalf("err %v", err)
	}
}

func TestInternalAllocator(t *testing.T) {
	n := NewInternal()
	seen := map[string]bool{}
	for i := range 300 {
		r, err := n.Setup(context.Background(), Pod{ID: string(rune('a'+i%26)) + strings.Repeat("x", i)})
		if err != nil {
			t.Fatal(err)
		}
		if seen[r.IPs[0]] {
			t.Fatalf("address %s handed out twice", r.IPs[0])
		}
		seen[r.IPs[0]] = true
	}
	n.SetPodCIDR("10.9.0.0/30") // two usable addresses, minus the gateway: one
	r, err := n.Setup(context.Background(), Pod{ID: "p1"})
	if err != nil || r.IPs[0] != "10.9.0.2" {
		t.Fatalf("got %v %v", r, err)
	}
	if _, err := n.Setup(context.Background(), Pod{ID: "p2"}); err == nil {
		t.Fatal("allocated beyond the CIDR")
	}
	n.Teardown(context.Background(), Pod{ID: "p1"})
	if _, err := n.Setup(context.Background(), Pod{ID: "p2"}); err != nil {
		t.Fatalf("freed address not reused: %v", err)
	}
}
