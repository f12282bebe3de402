package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/plugsim/plugsim/cni-fake/plugin"
	"github.com/plugsim/plugsim/harness/trace"
)

var allVersions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

func TestVersionListsEverySupportedVersion(t *testing.T) {
	o := run(t, call{cmd: "VERSION", stdin: `{"cniVersion":"1.1.0"}`})
	if o.err != nil {
		t.Fatal(o.err)
	}
	var v struct {
		Supported []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal(o.stdout, &v); err != nil {
		t.Fatal(err)
	}
	if strings.Join(v.Supported, ",") != strings.Join(allVersions, ",") {
		t.Fatalf("supportedVersions = %v, want %v", v.Supported, allVersions)
	}
}

// The result must be printed in the version it was asked for, or the next plugin's
// version.ParsePrevResult fails (the CNI spec, "Section 5: Result Types",
// https://github.com/containernetworking/cni/blob/v1.3.1/SPEC.md#section-5-result-types); and it must have the shape portmap and containerd
// need: the pod interface with a sandbox, every address pointing at it.
func TestAddResultInEveryVersion(t *testing.T) {
	dir := t.TempDir()
	for i, v := range allVersions {
		t.Run(v, func(t *testing.T) {
			id := fmt.Sprintf("ctr%d", i)
			conf := testConf(dir, v, map[string]any{"dns": map[string]any{"nameservers": []string{"10.96.0.10"}}})
			o := run(t, call{cmd: "ADD", containerID: id, netns: "/var/run/netns/fake-" + id, ifName: "eth0", stdin: conf})
			if o.err != nil {
				t.Fatalf("ADD: %v", o.err)
			}
			var head struct {
				CNIVersion string `json:"cniVersion"`
			}
			json.Unmarshal(o.stdout, &head)
			if head.CNIVersion != v {
				t.Fatalf("result cniVersion %q, want %q: %s", head.CNIVersion, v, o.stdout)
			}
			parsed, err := version.NewResult(v, o.stdout)
			if err != nil {
				t.Fatalf("result does not parse as %s: %v\n%s", v, err, o.stdout)
			}
			r, err := current.NewResultFromResult(parsed)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Interfaces) != 2 || r.Interfaces[1].Name != "eth0" || r.Interfaces[1].Sandbox != "/var/run/netns/fake-"+id || r.Interfaces[0].Sandbox != "" {
				t.Fatalf("interfaces = %v", r.Interfaces)
			}
			if !strings.HasPrefix(r.Interfaces[0].Name, "veth") || r.Interfaces[0].Mac == "" || r.Interfaces[1].Mac == "" {
				t.Fatalf("interfaces lack a host veth name or MACs: %v %v", r.Interfaces[0], r.Interfaces[1])
			}
			if len(r.IPs) != 1 || r.IPs[0].Interface == nil || *r.IPs[0].Interface != 1 || r.IPs[0].Gateway.String() != "10.77.0.1" {
				t.Fatalf("ips = %v", r.IPs)
			}
			if len(r.Routes) != 1 || r.Routes[0].Dst.String() != "0.0.0.0/0" || r.DNS.Nameservers[0] != "10.96.0.10" {
				t.Fatalf("routes %v dns %v", r.Routes, r.DNS)
			}
			if o := run(t, call{cmd: "DEL", containerID: id, ifName: "eth0", stdin: conf}); o.err != nil {
				t.Fatalf("DEL: %v", o.err)
			}
		})
	}
	if l := leaseFiles(t, dir); len(l) != 0 {
		t.Fatalf("leases left after DEL: %v", l)
	}
}

func TestBadInputGivesTheRightCode(t *testing.T) {
	good := func(dir string) string { return testConf(dir, "1.1.0", nil) }
	for _, tc := range []struct {
		name  string
		setup func(dir string) // e.g. fill the pool
		call  func(dir string) call
		code  uint
		msg   string
	}{
		{"missing config", nil, func(dir string) call { return call{stdin: ""} }, types.ErrDecodingFailure, "unmarshal"},
		{"malformed config", nil, func(dir string) call { return call{stdin: `{"cniVersion": "1.1.0", "name": `} }, types.ErrDecodingFailure, ""},
		{"no network name", nil, func(dir string) call { return call{stdin: testConf(dir, "1.1.0", map[string]any{"name": nil})} }, types.ErrInvalidNetworkConfig, "missing network name"},
		{"unknown version", nil, func(dir string) call { return call{stdin: testConf(dir, "9.9.9", nil)} }, types.ErrIncompatibleCNIVersion, "incompatible"},
		{"too old a version", nil, func(dir string) call { return call{stdin: testConf(dir, "0.2.0", nil)} }, types.ErrIncompatibleCNIVersion, "incompatible"},
		{"missing CNI_CONTAINERID", nil, func(dir string) call { return call{containerID: "-", stdin: good(dir)} }, types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID"},
		{"missing CNI_IFNAME", nil, func(dir string) call { return call{ifName: "-", stdin: good(dir)} }, types.ErrInvalidEnvironmentVariables, "CNI_IFNAME"},
		{"interface name too long", nil, func(dir string) call { return call{ifName: "a-very-long-interface", stdin: good(dir)} }, types.ErrInvalidEnvironmentVariables, "interface name"},
		{"bad CNI_ARGS", nil, func(dir string) call { return call{args: "IgnoreUnknown=1;justakey", stdin: good(dir)} }, types.ErrInvalidEnvironmentVariables, "CNI_ARGS"},
		{"unknown mode", nil, func(dir string) call { return call{stdin: testConf(dir, "1.1.0", map[string]any{"mode": "bridge"})} }, types.ErrInvalidNetworkConfig, `mode: "bridge"`},
		{"no address range", nil, func(dir string) call {
			return call{stdin: testConf(dir, "1.1.0", map[string]any{"ipam": map[string]any{"type": "cni-fake"}})}
		}, types.ErrInvalidNetworkConfig, "no address range"},
		{"bad port mapping", nil, func(dir string) call {
			return call{stdin: testConf(dir, "1.1.0", map[string]any{"runtimeConfig": map[string]any{"portMappings": []map[string]any{{"hostPort": 0, "containerPort": 80}}}})}
		}, types.ErrInvalidNetworkConfig, "portMappings[0]"},
		{"delegated IPAM not in CNI_PATH", nil, func(dir string) call {
			return call{stdin: testConf(dir, "1.1.0", map[string]any{"ipam": map[string]any{"type": "no-such-ipam"}})}
		}, types.ErrInvalidNetworkConfig, `"no-such-ipam" not found`},
		{"exhausted range", func(dir string) {
			small := testConf(dir, "1.1.0", map[string]any{"ipam": map[string]any{"subnet": "10.9.9.0/30"}}) // one address: .2
			if o := run(t, call{cmd: "ADD", containerID: "first", netns: "/x", ifName: "eth0", stdin: small}); o.err != nil {
				t.Fatalf("first ADD: %v", o.err)
			}
		}, func(dir string) call {
			return call{stdin: testConf(dir, "1.1.0", map[string]any{"ipam": map[string]any{"subnet": "10.9.9.0/30"}})}
		}, types.ErrTryAgainLater, "no free address"},
		{"requested address taken", func(dir string) {
			if o := run(t, call{cmd: "ADD", containerID: "first", netns: "/x", ifName: "eth0", stdin: good(dir)}); o.err != nil {
				t.Fatalf("first ADD: %v", o.err)
			}
		}, func(dir string) call { return call{args: "IgnoreUnknown=1;IP=10.77.0.2", stdin: good(dir)} }, types.ErrTryAgainLater, "10.77.0.2 is already allocated"},
		{"second ADD of one attachment", func(dir string) {
			if o := run(t, call{cmd: "ADD", containerID: "c1", netns: "/x", ifName: "eth0", stdin: good(dir)}); o.err != nil {
				t.Fatalf("first ADD: %v", o.err)
			}
		}, func(dir string) call { return call{containerID: "c1", stdin: good(dir)} }, plugin.ErrAttachmentExists, "already holds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.setup != nil {
				tc.setup(dir)
			}
			before := leaseFiles(t, dir)
			c := tc.call(dir)
			c.cmd = "ADD"
			// "-" means: leave the variable out.
			if c.containerID == "" {
				c.containerID = "c1"
			}
			if c.ifName == "" {
				c.ifName = "eth0"
			}
			if c.containerID == "-" {
				c.containerID = ""
			}
			if c.ifName == "-" {
				c.ifName = ""
			}
			c.netns = "/var/run/netns/fake"
			o := run(t, c)
			if o.err == nil {
				t.Fatalf("ADD succeeded: %s", o.stdout)
			}
			if o.err.Code != tc.code || !strings.Contains(o.err.Msg, tc.msg) {
				t.Fatalf("error = code %d %q, want code %d containing %q", o.err.Code, o.err.Msg, tc.code, tc.msg)
			}
			if after := leaseFiles(t, dir); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Fatalf("leases changed by a failed ADD: before %v, after %v", before, after)
			}
		})
	}
}

// Concurrent ADDs are separate processes, as a runtime execs them: the lease file lock must
// serialise them, so this execs the binary.
func TestConcurrentAddsGetDistinctAddresses(t *testing.T) {
	dir := t.TempDir()
	conf := testConf(dir, "1.1.0", nil)
	const n = 64
	ips := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := runBinary(t, call{cmd: "ADD", containerID: fmt.Sprintf("pod%02d", i), netns: "/var/run/netns/fake", ifName: "eth0", stdin: conf})
			if o.err != nil {
				errs <- fmt.Errorf("ADD %d: %v", i, o.err)
				return
			}
			r, err := current.NewResult(o.stdout)
			if err != nil {
				errs <- err
				return
			}
			ips[i] = r.(*current.Result).IPs[0].Address.IP.String()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i, ip := range ips {
		if j, dup := seen[ip]; dup {
			t.Fatalf("pods %d and %d both got %s", j, i, ip)
		}
		seen[ip] = i
	}
	if l := leaseFiles(t, dir); len(l) != n {
		t.Fatalf("%d lease files, want %d", len(l), n)
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o := runBinary(t, call{cmd: "DEL", containerID: fmt.Sprintf("pod%02d", i), ifName: "eth0", stdin: conf}); o.err != nil {
				t.Errorf("DEL %d: %v", i, o.err)
			}
		}()
	}
	wg.Wait()
	if l := leaseFiles(t, dir); len(l) != 0 {
		t.Fatalf("leases left after 64 DELs: %v", l)
	}
	// The spec: DEL must succeed when there is nothing left to undo, with or without a netns.
	for _, netns := range []string{"", "/var/run/netns/gone"} {
		if o := run(t, call{cmd: "DEL", containerID: "pod00", netns: netns, ifName: "eth0", stdin: conf}); o.err != nil {
			t.Fatalf("repeated DEL (netns %q): %v", netns, o.err)
		}
	}
}

func TestStatus(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	os.WriteFile(file, nil, 0o600)
	small := map[string]any{"ipam": map[string]any{"subnet": "10.9.9.0/30"}}
	for _, tc := range []struct {
		name  string
		extra map[string]any
		fill  bool
		code  uint // 0: ready
		msg   string
	}{
		{"ready", nil, false, 0, ""},
		{"dataDir is a file", map[string]any{"dataDir": filepath.Join(file, "sub")}, false, types.ErrPluginNotAvailable, "dataDir"},
		{"pool exhausted", small, true, types.ErrPluginNotAvailable, "no free address"},
		{"pool with room", small, false, 0, ""},
		{"below 1.1.0", map[string]any{"cniVersion": "1.0.0"}, false, types.ErrIncompatibleCNIVersion, "STATUS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			conf := testConf(d, "1.1.0", tc.extra)
			if tc.fill {
				if o := run(t, call{cmd: "ADD", containerID: "c", netns: "/x", ifName: "eth0", stdin: conf}); o.err != nil {
					t.Fatal(o.err)
				}
			}
			o := run(t, call{cmd: "STATUS", stdin: conf})
			switch {
			case tc.code == 0 && o.err != nil:
				t.Fatalf("STATUS = %v, want ready", o.err)
			case tc.code != 0 && (o.err == nil || o.err.Code != tc.code || !strings.Contains(o.err.Msg, tc.msg)):
				t.Fatalf("STATUS = %v, want code %d containing %q", o.err, tc.code, tc.msg)
			}
		})
	}
}

func TestGCReleasesAllButValidAttachments(t *testing.T) {
	dir := t.TempDir()
	conf := testConf(dir, "1.1.0", nil)
	for _, id := range []string{"a", "b", "c"} {
		if o := run(t, call{cmd: "ADD", containerID: id, netns: "/x", ifName: "eth0", stdin: conf}); o.err != nil {
			t.Fatal(o.err)
		}
	}
	var m map[string]any
	json.Unmarshal([]byte(conf), &m)
	// libcni sends the list under both keys (cni#1101 → #1103); b comes only under the old one.
	m["cni.dev/valid-attachments"] = []map[string]string{{"containerID": "a", "ifname": "eth0"}}
	m["cni.dev/attachments"] = []map[string]string{{"containerID": "b", "ifname": "eth0"}}
	gc, _ := json.Marshal(m)
	if o := run(t, call{cmd: "GC", stdin: string(gc)}); o.err != nil {
		t.Fatal(o.err)
	}
	if l := leaseFiles(t, dir); len(l) != 2 {
		t.Fatalf("leases after GC: %v, want a's and b's", l)
	}
	// c's lease is gone, so CHECK of c reports an unknown container.
	o := run(t, call{cmd: "CHECK", containerID: "c", netns: "/x", ifName: "eth0", stdin: conf})
	if o.err == nil || o.err.Code != types.ErrUnknownContainer {
		t.Fatalf("CHECK after GC = %v, want code 3", o.err)
	}
	if o := run(t, call{cmd: "GC", stdin: conf}); o.err != nil { // no list: nothing is valid
		t.Fatal(o.err)
	}
	if l := leaseFiles(t, dir); len(l) != 0 {
		t.Fatalf("leases after GC with no valid attachments: %v", l)
	}
}

func TestCheckComparesPrevResultWithLeases(t *testing.T) {
	dir := t.TempDir()
	conf := testConf(dir, "1.0.0", nil)
	o := run(t, call{cmd: "ADD", containerID: "c1", netns: "/ns/c1", ifName: "eth0", stdin: conf})
	if o.err != nil {
		t.Fatal(o.err)
	}
	withPrev := func(prev string) string {
		var m map[string]any
		json.Unmarshal([]byte(conf), &m)
		var p any
		json.Unmarshal([]byte(prev), &p)
		m["prevResult"] = p
		b, _ := json.Marshal(m)
		return string(b)
	}
	if o := run(t, call{cmd: "CHECK", containerID: "c1", netns: "/ns/c1", ifName: "eth0", stdin: withPrev(string(o.stdout))}); o.err != nil {
		t.Fatalf("CHECK with the ADD result: %v", o.err)
	}
	tampered := strings.Replace(string(o.stdout), "10.77.0.2/24", "10.77.0.99/24", 1)
	for _, tc := range []struct {
		name, netns, stdin string
		code               uint
	}{
		{"address not leased", "/ns/c1", withPrev(tampered), types.ErrUnknownContainer},
		{"other sandbox", "/ns/other", withPrev(string(o.stdout)), types.ErrUnknownContainer},
		{"unparsable prevResult", "/ns/c1", withPrev(`{"cniVersion":"1.0.0","ips":[{"address":"nope"}]}`), types.ErrDecodingFailure},
		{"below 0.4.0", "/ns/c1", testConf(dir, "0.3.1", nil), types.ErrIncompatibleCNIVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := run(t, call{cmd: "CHECK", containerID: "c1", netns: tc.netns, ifName: "eth0", stdin: tc.stdin})
			if o.err == nil || o.err.Code != tc.code {
				t.Fatalf("CHECK = %v, want code %d", o.err, tc.code)
			}
		})
	}
}

// containerd's CRI sends K8S_POD_* labels with IgnoreUnknown=1 in an order that varies, and
// go-cni serialises capability args with capitalised keys (no json tags); both must work.
func TestContainerdStyleArgsAndCapabilities(t *testing.T) {
	dir := t.TempDir()
	var m map[string]any
	json.Unmarshal([]byte(testConf(dir, "1.1.0", nil)), &m)
	m["capabilities"] = map[string]bool{"portMappings": true, "dns": true, "bandwidth": true}
	m["runtimeConfig"] = map[string]any{
		"portMappings":                      []map[string]any{{"HostPort": 18080, "ContainerPort": 80, "Protocol": "tcp", "HostIP": ""}},
		"dns":                               map[string]any{"Servers": []string{"10.96.0.10"}, "Searches": []string{"default.svc.cluster.local"}, "Options": []string{"ndots:5"}},
		"bandwidth":                         map[string]any{"IngressRate": 1000000, "IngressBurst": 4294967295, "EgressRate": 2000000, "EgressBurst": 4294967295},
		"io.kubernetes.cri.pod-annotations": map[string]string{"a": "b"},
		"cgroupPath":                        "/kubepods/pod1",
	}
	conf, _ := json.Marshal(m)
	args := "K8S_POD_UID=1234;IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=c0ffee"
	// cri-fake's "placeholder" namespaces are empty regular files; fake mode takes them as they are.
	netns := filepath.Join(dir, "cni-c0ffee")
	os.WriteFile(netns, nil, 0o644)
	o := run(t, call{cmd: "ADD", containerID: "c0ffee", netns: netns, ifName: "eth0", args: args, stdin: string(conf)})
	if o.err != nil {
		t.Fatal(o.err)
	}
	r, _ := current.NewResult(o.stdout)
	res := r.(*current.Result)
	if res.Interfaces[1].Sandbox != netns {
		t.Fatalf("sandbox %q, want the placeholder %q", res.Interfaces[1].Sandbox, netns)
	}
	if strings.Join(res.DNS.Nameservers, ",") != "10.96.0.10" || res.DNS.Search[0] != "default.svc.cluster.local" || res.DNS.Options[0] != "ndots:5" {
		t.Fatalf("dns capability not applied: %+v", res.DNS)
	}
	evs, err := trace.ReadFile(filepath.Join(dir, "cni.jsonl"))
	if err != nil || len(evs) != 1 {
		t.Fatalf("log: %v, %v", evs, err)
	}
	if a := evs[0].Attrs; a["pod"] != "default/web-0" || a["portMappings"] != "1" || !strings.Contains(a["bandwidth"], "ingress=1000000") {
		t.Fatalf("log attrs = %v", a)
	}
}

func TestInvocationLogUsesTheTraceFormat(t *testing.T) {
	dir := t.TempDir()
	conf := testConf(dir, "1.1.0", map[string]any{"caller": "containerd"})
	run(t, call{cmd: "ADD", containerID: "c1", netns: "/ns/1", ifName: "eth0", stdin: conf})
	run(t, call{cmd: "ADD", containerID: "c1", netns: "/ns/1", ifName: "eth0", args: "IgnoreUnknown=1;PLUGSIM_CALLER=cnitool", stdin: conf})
	run(t, call{cmd: "DEL", containerID: "c1", ifName: "eth0", stdin: testConf(dir, "1.1.0", nil)})
	evs, err := trace.ReadFile(filepath.Join(dir, "cni.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3", len(evs))
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Time.Before(evs[j].Time) })
	add, dup, del := evs[0], evs[1], evs[2]
	if add.Interface != trace.CNI || add.Callee != "cni-fake" || add.Method != "ADD" || add.Code != "OK" || add.Caller != "containerd" {
		t.Fatalf("ADD event = %+v", add)
	}
	if add.Attrs["containerID"] != "c1" || add.Attrs["netns"] != "/ns/1" || add.Attrs["ifName"] != "eth0" || add.Attrs["ips"] != "10.77.0.2/24" {
		t.Fatalf("ADD attrs = %v", add.Attrs)
	}
	var req, resp map[string]any
	if json.Unmarshal(add.Request, &req) != nil || req["name"] != "testnet" {
		t.Fatalf("request is not the stdin config: %s", add.Request)
	}
	if json.Unmarshal(add.Response, &resp) != nil || resp["ips"] == nil {
		t.Fatalf("response is not the result: %s", add.Response)
	}
	if dup.Code != fmt.Sprint(plugin.ErrAttachmentExists) || dup.Caller != "cnitool" || !strings.Contains(dup.Error, "already holds") || !strings.Contains(string(dup.Response), `"code":100`) {
		t.Fatalf("failed ADD event = %+v", dup)
	}
	if del.Method != "DEL" || del.Caller != "cri-fake" || del.Attrs["released"] != "10.77.0.2" || del.DurationNS <= 0 {
		t.Fatalf("DEL event = %+v", del)
	}
}

func TestDelegatedIPAM(t *testing.T) {
	toolPath(t, "host-local")
	dir := t.TempDir()
	for _, v := range []string{"0.3.1", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			hl := filepath.Join(dir, "host-local-"+v) // a fresh store: host-local's round robin starts at .2
			conf := testConf(dir, v, map[string]any{"ipam": map[string]any{
				"type": "host-local", "dataDir": hl, "ranges": [][]map[string]string{{{"subnet": "10.66.0.0/24"}}},
				"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
			}})
			o := run(t, call{cmd: "ADD", containerID: "d1", netns: "/ns/d1", ifName: "eth0", stdin: conf})
			if o.err != nil {
				t.Fatal(o.err)
			}
			r, err := version.NewResult(v, o.stdout)
			if err != nil {
				t.Fatal(err)
			}
			res, _ := current.NewResultFromResult(r)
			if len(res.Interfaces) != 2 || *res.IPs[0].Interface != 1 || res.IPs[0].Address.String() != "10.66.0.2/24" || res.Routes[0].GW.String() != "10.66.0.1" {
				t.Fatalf("result = %s", o.stdout)
			}
			// host-local refuses a second allocation for the attachment; its error passes through.
			if o := run(t, call{cmd: "ADD", containerID: "d1", netns: "/ns/d1", ifName: "eth0", stdin: conf}); o.err == nil || !strings.Contains(o.err.Msg, "delegated IPAM host-local") {
				t.Fatalf("second ADD = %v", o.err)
			}
			if v == "1.1.0" {
				for _, verb := range []string{"CHECK", "STATUS"} {
					if o := run(t, call{cmd: verb, containerID: "d1", netns: "/ns/d1", ifName: "eth0", stdin: conf}); o.err != nil {
						t.Fatalf("%s: %v", verb, o.err)
					}
				}
			}
			if o := run(t, call{cmd: "DEL", containerID: "d1", ifName: "eth0", stdin: conf}); o.err != nil {
				t.Fatal(o.err)
			}
			entries, _ := os.ReadDir(filepath.Join(hl, "testnet"))
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), "10.") {
					t.Fatalf("host-local lease %s left after DEL", e.Name())
				}
			}
		})
	}
}

// A configuration larger than a pipe buffer (64 KiB on Linux; a runtime's large prevResult, or
// args as here) reaches skel whole, in-process and from the binary: main hands skel its stdin
// through a pipe, and writing that much inline would block before skel reads.
func TestConfigLargerThanAPipeBuffer(t *testing.T) {
	for _, way := range []struct {
		name string
		run  func(testing.TB, call) outcome
	}{{"in-process", run}, {"binary", runBinary}} {
		t.Run(way.name, func(t *testing.T) {
			dir := t.TempDir()
			pad := strings.Repeat("x", 100<<10)
			conf := testConf(dir, "1.1.0", map[string]any{"args": map[string]any{"cni": map[string]any{"padding": pad}}})
			o := way.run(t, call{cmd: "ADD", containerID: "big", netns: "/var/run/netns/big", ifName: "eth0", stdin: conf})
			if o.err != nil {
				t.Fatalf("ADD with a %d-byte config: %v", len(conf), o.err)
			}
			evs, err := trace.ReadFile(filepath.Join(dir, "cni.jsonl"))
			if err != nil || len(evs) != 1 || !strings.Contains(string(evs[0].Request), pad) {
				t.Fatalf("the log does not hold the whole config: %d events, %v", len(evs), err)
			}
		})
	}
}
