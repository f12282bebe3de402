package network

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cni-fake/inprocess"
)

// The fuzz targets of what cri-fake reads back from CNI: a plugin's result on stdout, the result
// libcni cached at ADD and reads again at DEL, the conf directory's first file, and the pod
// annotations and CIDRs that become capability args and a rendered config.

// fuzzResult is a result as cni-fake prints it (pod interface, a host side, both families).
const fuzzResult = `{"cniVersion":"1.1.0","interfaces":[{"name":"veth1","mac":"aa:bb:cc:dd:ee:ff"},{"name":"eth0","sandbox":"/var/run/netns/p"}],
"ips":[{"address":"10.88.0.5/16","gateway":"10.88.0.1","interface":1},{"address":"fd00::5/64","interface":1},{"address":"192.168.0.9/24","interface":0}],
"routes":[{"dst":"0.0.0.0/0"}],"dns":{"nameservers":["10.0.0.10"]}}`

// FuzzCNIResult is Setup's reading of a plugin's stdout: libcni's decoding (by cniVersion), the
// conversion to the 1.0 result, and the choice of pod IPs. No panic; every pod IP is an address
// of eth0 inside the sandbox (or of no interface), IPv4 first.
func FuzzCNIResult(f *testing.F) {
	for _, s := range []string{fuzzResult, `{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.0.0.2/24","interface":-1}]}`,
		`{"cniVersion":"0.2.0","ip4":{"ip":"10.0.0.2/24"}}`, `{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2/24","interface":99}]}`,
		`{"cniVersion":"1.0.0","ips":[{"address":"zz"}]}`, `{"cniVersion":"9.9.9"}`, `{}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stdout []byte) {
		res, err := create.CreateFromBytes(stdout)
		if err != nil {
			return
		}
		r, err := types100.NewResultFromResult(res)
		if err != nil {
			return
		}
		ips := podIPs(r)
		v6 := false
		for _, ip := range ips {
			if net.ParseIP(ip) == nil {
				t.Fatalf("pod IPs %v: %q is no IP address", ips, ip)
			}
			isV4 := !strings.Contains(ip, ":")
			if isV4 && v6 {
				t.Fatalf("pod IPs %v: IPv4 after IPv6", ips)
			}
			v6 = v6 || !isV4
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("the result does not marshal back: %v", err)
		}
	})
}

// FuzzCachedResult: the result file libcni cached at ADD, torn or edited, is what DEL reads
// again and hands cni-fake as prevResult. Teardown must answer (an error or not), never panic,
// and never touch anything outside its directories.
func FuzzCachedResult(f *testing.F) {
	f.Add([]byte(`{"kind":"cniCacheV1","containerId":"sb1","config":"eyJ9","ifName":"eth0","networkName":"net","result":` + fuzzResult + `}`))
	f.Add([]byte(`{"kind":"cniCacheV1","result":{"cniVersion":"0.1.0"}}`))
	f.Add([]byte(fuzzResult))
	f.Add([]byte(`{"kind":"cniCacheV1","result":null}`))
	f.Fuzz(func(t *testing.T, cache []byte) {
		root := t.TempDir()
		confDir, cacheDir, data := filepath.Join(root, "conf"), filepath.Join(root, "cache"), filepath.Join(root, "data")
		os.MkdirAll(confDir, 0o755)
		os.MkdirAll(filepath.Join(cacheDir, "results"), 0o755)
		conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"net","plugins":[{"type":"cni-fake","dataDir":%q,"ipam":{"subnet":"10.88.0.0/24"}}]}`, data)
		os.WriteFile(filepath.Join(confDir, "10-net.conflist"), []byte(conf), 0o644)
		os.WriteFile(filepath.Join(cacheDir, "results", "net-sb1-eth0"), cache, 0o600)
		c := NewCNI(CNIOptions{ConfDir: confDir, BinDirs: []string{filepath.Join(root, "bin")}, CacheDir: cacheDir, Exec: inprocess.New()})
		pod := Pod{ID: "sb1", NetNS: "/var/run/netns/p", Config: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u"}}}
		_ = c.Teardown(context.Background(), pod)
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			if n := e.Name(); n != "conf" && n != "cache" && n != "data" {
				t.Fatalf("%s appeared", n)
			}
		}
	})
}

// FuzzConfFile: the conf directory's first file loads or is reported, never panics.
func FuzzConfFile(f *testing.F) {
	for _, name := range []string{"10-plugsim.conflist", "20-calico-shape.conflist"} {
		if b, err := os.ReadFile(filepath.Join("..", "..", "examples", "cni", name)); err == nil {
			f.Add(b, true)
		}
	}
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"n","type":"bridge"}`), false)
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"n","plugins":[]}`), true)
	f.Add([]byte(`{"name":"n","plugins":[{}]}`), true)
	f.Fuzz(func(t *testing.T, file []byte, isList bool) {
		dir := t.TempDir()
		name := "10-n.conf"
		if isList {
			name = "10-n.conflist"
		}
		os.WriteFile(filepath.Join(dir, name), file, 0o644)
		c := NewCNI(CNIOptions{ConfDir: dir, CacheDir: t.TempDir()})
		if err := c.Ready(); err != nil {
			if c.LoadError() == nil {
				t.Fatal("not ready without a reason")
			}
			return
		}
		list, err := c.current()
		if err != nil || list == nil || len(list.Plugins) == 0 {
			t.Fatalf("ready with %v, %v", list, err)
		}
		_ = c.Info()
		if _, err := libcni.ConfListFromBytes(list.Bytes); err != nil && isList {
			t.Fatalf("loaded list does not parse again: %v", err)
		}
	})
}

// FuzzCapabilityArgs: pod annotations (the bandwidth ones parsed as quantities) and port
// mappings become runtimeConfig; a bad annotation is an error, never a panic, and an accepted
// rate is within the kubelet's 1k..1P.
func FuzzCapabilityArgs(f *testing.F) {
	f.Add("10M", "1G", int32(8080), int32(80), "cgroup")
	f.Add("1e400", "-1", int32(-1), int32(0), "")
	f.Add("0.5Ki", "9223372036854775807", int32(1), int32(65536), "/")
	f.Fuzz(func(t *testing.T, ingress, egress string, hostPort, containerPort int32, cgroup string) {
		cfg := &runtimeapi.PodSandboxConfig{
			Annotations:  map[string]string{"kubernetes.io/ingress-bandwidth": ingress, "kubernetes.io/egress-bandwidth": egress},
			PortMappings: []*runtimeapi.PortMapping{{HostPort: hostPort, ContainerPort: containerPort}},
			Linux:        &runtimeapi.LinuxPodSandboxConfig{CgroupParent: cgroup},
		}
		caps, err := CapabilityArgs(cfg)
		if err != nil {
			return
		}
		if bw, ok := caps[capBandwidth].(Bandwidth); ok {
			for _, r := range []uint64{bw.IngressRate, bw.EgressRate} {
				if r < 1000 || r > 1e15 {
					t.Fatalf("rate %d accepted from %q/%q", r, ingress, egress)
				}
			}
		}
		if _, err := json.Marshal(caps); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzPodCIDRs: UpdateRuntimeConfig's CIDRs; every accepted entry is a CIDR and there is a route
// per family present.
func FuzzPodCIDRs(f *testing.F) {
	for _, s := range []string{"10.88.0.0/24", "10.88.0.0/24,fd00::/64", "", ",", " 10.0.0.0/8 ", "::/0,::/0", "10.0.0.0/33"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParsePodCIDRs(s)
		if err != nil {
			return
		}
		if len(d.PodCIDRRanges) == 0 || d.PodCIDR != d.PodCIDRRanges[0] || len(d.Routes) == 0 || len(d.Routes) > 2 {
			t.Fatalf("%q: %+v", s, d)
		}
	})
}
