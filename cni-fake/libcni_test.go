package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/plugsim/plugsim/cni-fake/netnstest"
	"github.com/plugsim/plugsim/cni-fake/plugin"
)

// exampleList loads examples/cni/10-plugsim.conflist the way a runtime would, with cni-fake's
// dataDir and logFile moved into dir, its mode set, and the list's cniVersion replaced. The chain
// needs the real portmap from $PLUGSIM_BIN (toolPath: the test skips, saying why, without
// $PLUGSIM_BIN, and fails when it is set and portmap is not there).
func exampleList(t testing.TB, dir, mode, cniVersion string) *libcni.NetworkConfigList {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", "cni", "10-plugsim.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["cniVersion"] = cniVersion
	plugins := m["plugins"].([]any)
	fake := plugins[0].(map[string]any)
	fake["dataDir"] = filepath.Join(dir, "data")
	fake["logFile"] = filepath.Join(dir, "cni.jsonl")
	fake["mode"] = mode
	toolPath(t, "portmap")
	if last := plugins[len(plugins)-1].(map[string]any); len(plugins) != 2 || last["type"] != "portmap" {
		t.Fatalf("examples/cni/10-plugsim.conflist is no longer cni-fake then portmap: %v", plugins)
	}
	b, _ = json.Marshal(m)
	list, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func libcniConfig(t testing.TB) *libcni.CNIConfig {
	paths := filepath.SplitList(cniPath())
	return libcni.NewCNIConfigWithCacheDir(paths, t.TempDir(), nil)
}

func atLeast(v, min string) bool {
	ok, _ := version.GreaterThanOrEqualTo(v, min)
	return ok
}

// containerdRuntimeConf is what containerd's CRI passes: K8S_POD_* labels plus IgnoreUnknown, and
// capability args (here the "dns" one the example declares).
func containerdRuntimeConf(id, netns string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: id,
		NetNS:       netns,
		IfName:      "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "pod-" + id},
			{"K8S_POD_INFRA_CONTAINER_ID", id}, {"K8S_POD_UID", "uid-" + id},
		},
		CapabilityArgs: map[string]any{"dns": map[string]any{"Servers": []string{"10.96.0.10"}}},
	}
}

// podResult parses a chain's result back in its own version and checks the shape every consumer
// needs.
func podResult(t testing.TB, r types.Result, wantVersion, netns string) *current.Result {
	t.Helper()
	if r.Version() != wantVersion {
		t.Fatalf("result version %s, want %s", r.Version(), wantVersion)
	}
	b, _ := json.Marshal(r)
	back, err := version.NewResult(wantVersion, b)
	if err != nil {
		t.Fatalf("result does not parse back as %s: %v\n%s", wantVersion, err, b)
	}
	res, err := current.NewResultFromResult(back)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Interfaces) != 2 || res.Interfaces[1].Name != "eth0" || res.Interfaces[1].Sandbox != netns {
		t.Fatalf("interfaces = %v", res.Interfaces)
	}
	if len(res.IPs) != 1 || res.IPs[0].Interface == nil || *res.IPs[0].Interface != 1 {
		t.Fatalf("ips = %v", res.IPs)
	}
	if len(res.DNS.Nameservers) != 1 || res.DNS.Nameservers[0] != "10.96.0.10" {
		t.Fatalf("dns = %+v (the dns capability)", res.DNS)
	}
	return res
}

func TestLibcniChainFakeMode(t *testing.T) {
	ctx := context.Background()
	for _, v := range allVersions {
		t.Run(v, func(t *testing.T) {
			dir := t.TempDir()
			list := exampleList(t, dir, plugin.ModeFake, v)
			cfg := libcniConfig(t)
			rt := containerdRuntimeConf("fake1", "/var/run/netns/plugsim-fake-1")
			r, err := cfg.AddNetworkList(ctx, list, rt)
			if err != nil {
				t.Fatalf("AddNetworkList: %v", err)
			}
			podResult(t, r, v, rt.NetNS)
			if atLeast(v, "0.4.0") {
				if err := cfg.CheckNetworkList(ctx, list, rt); err != nil {
					t.Fatalf("CheckNetworkList: %v", err)
				}
			}
			if err := cfg.GetStatusNetworkList(ctx, list); err != nil {
				t.Fatalf("GetStatusNetworkList: %v", err)
			}
			// GC that keeps the attachment leaves its lease alone.
			if err := cfg.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: "fake1", IfName: "eth0"}}}); err != nil {
				t.Fatalf("GCNetworkList: %v", err)
			}
			if l := networkLeases(t, dir, "plugsim"); len(l) != 1 {
				t.Fatalf("leases after GC keeping the pod: %v", l)
			}
			if err := cfg.DelNetworkList(ctx, list, rt); err != nil {
				t.Fatalf("DelNetworkList: %v", err)
			}
			if err := cfg.DelNetworkList(ctx, list, rt); err != nil {
				t.Fatalf("repeated DelNetworkList: %v", err)
			}
			if l := networkLeases(t, dir, "plugsim"); len(l) != 0 {
				t.Fatalf("leases after DEL: %v", l)
			}
			// GC with nothing valid: libcni DELs the cached attachment (any version) and, from
			// 1.1.0, cni-fake's own GC runs too.
			if _, err := cfg.AddNetworkList(ctx, list, rt); err != nil {
				t.Fatal(err)
			}
			if err := cfg.GCNetworkList(ctx, list, &libcni.GCArgs{}); err != nil {
				t.Fatalf("GCNetworkList: %v", err)
			}
			if l := networkLeases(t, dir, "plugsim"); len(l) != 0 {
				t.Fatalf("leases after GC with no valid attachment: %v", l)
			}
		})
	}
}

// STATUS reaches cni-fake through libcni and stops there with code 50 (libcni stops at the first
// failing plugin), which containerd turns into NetworkReady=false.
func TestLibcniStatusNotAvailable(t *testing.T) {
	dir := t.TempDir()
	list := exampleList(t, dir, plugin.ModeFake, "1.1.0")
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	var m map[string]any
	json.Unmarshal(list.Bytes, &m)
	m["plugins"].([]any)[0].(map[string]any)["dataDir"] = filepath.Join(file, "x")
	b, _ := json.Marshal(m)
	list, _ = libcni.NetworkConfFromBytes(b)
	err := libcniConfig(t).GetStatusNetworkList(context.Background(), list)
	var ce *types.Error
	if !errorsAs(err, &ce) || ce.Code != types.ErrPluginNotAvailable {
		t.Fatalf("GetStatusNetworkList = %v, want code 50", err)
	}
}

func errorsAs(err error, target **types.Error) bool {
	if e, ok := err.(*types.Error); ok {
		*target = e
		return true
	}
	return false
}

// veth mode through libcni, with the plugin exec'd inside a throw-away "host" namespace (the
// runtime's thread is in it, and exec'd children inherit it), the pod in a second namespace.
func TestLibcniChainVethMode(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx := context.Background()
	for _, v := range allVersions {
		t.Run(v, func(t *testing.T) {
			hostNS, podNS := netnstest.New(t), netnstest.New(t)
			dir := t.TempDir()
			list := exampleList(t, dir, plugin.ModeVeth, v)
			cfg := libcniConfig(t)
			rt := containerdRuntimeConf("veth1", podNS.Path())
			hostVeth := plugin.HostIfName("veth", "plugsim", "veth1", "eth0")
			var res *current.Result
			inHost(t, hostNS, func() error {
				r, err := cfg.AddNetworkList(ctx, list, rt)
				if err != nil {
					return fmt.Errorf("AddNetworkList: %w", err)
				}
				res = podResult(t, r, v, rt.NetNS)
				return nil
			})
			if res.Interfaces[0].Name != hostVeth {
				t.Fatalf("host interface %q, want %q", res.Interfaces[0].Name, hostVeth)
			}
			podAddr := res.IPs[0].Address.String()
			if got := addrsOf(t, podNS, "eth0"); !slices.Contains(got, podAddr) {
				t.Fatalf("eth0 in the pod has %v, want %s", got, podAddr)
			}
			mac := macOf(t, podNS, "eth0")
			if mac != res.Interfaces[1].Mac {
				t.Fatalf("result MAC %s, eth0 has %s", res.Interfaces[1].Mac, mac)
			}
			if !slices.Contains(netnstest.Links(t, hostNS), hostVeth) {
				t.Fatalf("host veth %s missing from the host namespace: %v", hostVeth, netnstest.Links(t, hostNS))
			}
			inHost(t, hostNS, func() error {
				if atLeast(v, "0.4.0") {
					if err := cfg.CheckNetworkList(ctx, list, rt); err != nil {
						return fmt.Errorf("CheckNetworkList: %w", err)
					}
				}
				if err := cfg.GetStatusNetworkList(ctx, list); err != nil {
					return fmt.Errorf("GetStatusNetworkList: %w", err)
				}
				return nil
			})
			// CHECK notices an address removed behind the plugin's back.
			if atLeast(v, "0.4.0") {
				inNS(t, podNS, func() error {
					l, _ := netlink.LinkByName("eth0")
					a, _ := netlink.ParseAddr(podAddr)
					return netlink.AddrDel(l, a)
				})
				inHost(t, hostNS, func() error {
					if err := cfg.CheckNetworkList(ctx, list, rt); err == nil || !strings.Contains(err.Error(), "missing: address") {
						return fmt.Errorf("CheckNetworkList after removing the address = %v, want a missing address", err)
					}
					return nil
				})
			}
			inHost(t, hostNS, func() error {
				if err := cfg.DelNetworkList(ctx, list, rt); err != nil {
					return fmt.Errorf("DelNetworkList: %w", err)
				}
				return cfg.DelNetworkList(ctx, list, rt)
			})
			if links := netnstest.Links(t, podNS); slices.Contains(links, "eth0") {
				t.Fatalf("eth0 still in the pod after DEL: %v", links)
			}
			if links := netnstest.Links(t, hostNS); slices.Contains(links, hostVeth) {
				t.Fatalf("%s still on the host after DEL: %v", hostVeth, links)
			}
			if l := networkLeases(t, dir, "plugsim"); len(l) != 0 {
				t.Fatalf("leases after DEL: %v", l)
			}
		})
	}
}

// GC in veth mode removes the veth and lease of an attachment the runtime no longer knows (here
// its libcni cache is gone, so only the plugin's own GC can find it), and keeps the valid one.
func TestLibcniGCRemovesStaleVeth(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx := context.Background()
	hostNS, pod1, pod2 := netnstest.New(t), netnstest.New(t), netnstest.New(t)
	dir := t.TempDir()
	list := exampleList(t, dir, plugin.ModeVeth, "1.1.0")
	cfg := libcniConfig(t)
	rt1, rt2 := containerdRuntimeConf("keep", pod1.Path()), containerdRuntimeConf("stale", pod2.Path())
	inHost(t, hostNS, func() error {
		for _, rt := range []*libcni.RuntimeConf{rt1, rt2} {
			if _, err := cfg.AddNetworkList(ctx, list, rt); err != nil {
				return err
			}
		}
		forgetful := libcni.NewCNIConfigWithCacheDir(filepath.SplitList(cniPath()), t.TempDir(), nil)
		return forgetful.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: "keep", IfName: "eth0"}}})
	})
	links := netnstest.Links(t, hostNS)
	if !slices.Contains(links, plugin.HostIfName("veth", "plugsim", "keep", "eth0")) || slices.Contains(links, plugin.HostIfName("veth", "plugsim", "stale", "eth0")) {
		t.Fatalf("host links after GC: %v; want keep's veth only", links)
	}
	if slices.Contains(netnstest.Links(t, pod2), "eth0") {
		t.Fatal("stale pod still has eth0")
	}
	if l := networkLeases(t, dir, "plugsim"); len(l) != 1 {
		t.Fatalf("leases after GC: %v, want keep's only", l)
	}
	inHost(t, hostNS, func() error { return cfg.DelNetworkList(ctx, list, rt1) })
}

var inHost, inNS = netnstest.Do, netnstest.Do

func addrsOf(t testing.TB, n ns.NetNS, ifName string) []string {
	var out []string
	inNS(t, n, func() error {
		l, err := netlink.LinkByName(ifName)
		if err != nil {
			return err
		}
		as, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		for _, a := range as {
			out = append(out, a.IPNet.String())
		}
		return err
	})
	return out
}

func macOf(t testing.TB, n ns.NetNS, ifName string) string {
	var mac net.HardwareAddr
	inNS(t, n, func() error {
		l, err := netlink.LinkByName(ifName)
		if err == nil {
			mac = l.Attrs().HardwareAddr
		}
		return err
	})
	return mac.String()
}

// Dual stack in veth mode: one address from each range set, both configured in the pod, and both
// reachable from the host namespace through the host routes (IPv6 with nodad, so at once).
func TestLibcniVethDualStack(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx := context.Background()
	hostNS, podNS := netnstest.New(t), netnstest.New(t)
	dir := t.TempDir()
	list := exampleList(t, dir, plugin.ModeVeth, "1.1.0")
	var m map[string]any
	json.Unmarshal(list.Bytes, &m)
	m["plugins"].([]any)[0].(map[string]any)["ipam"] = map[string]any{
		"type":   "cni-fake",
		"ranges": [][]map[string]string{{{"subnet": "10.88.0.0/16"}}, {{"subnet": "fd00:88::/64"}}},
		"routes": []map[string]string{{"dst": "0.0.0.0/0"}, {"dst": "::/0"}},
	}
	b, _ := json.Marshal(m)
	list, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	cfg := libcniConfig(t)
	rt := containerdRuntimeConf("dual", podNS.Path())
	var res *current.Result
	inHost(t, hostNS, func() error {
		r, err := cfg.AddNetworkList(ctx, list, rt)
		if err != nil {
			return err
		}
		res, err = current.NewResultFromResult(r)
		return err
	})
	if len(res.IPs) != 2 || res.IPs[1].Address.String() != "fd00:88::2/64" || res.IPs[1].Gateway.String() != "fd00:88::1" || len(res.Routes) != 2 || res.Routes[1].GW.String() != "fd00:88::1" {
		t.Fatalf("dual-stack result: %+v", res)
	}
	var ln net.Listener
	inNS(t, podNS, func() (err error) {
		ln, err = net.Listen("tcp", ":8080")
		return err
	})
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("ok"))
			c.Close()
		}
	}()
	inHost(t, hostNS, func() error {
		for _, ip := range res.IPs {
			c, err := net.Dial("tcp", net.JoinHostPort(ip.Address.IP.String(), "8080"))
			if err != nil {
				return fmt.Errorf("connect to the pod at %s from the host namespace: %v", ip.Address.IP, err)
			}
			c.Close()
		}
		return cfg.DelNetworkList(ctx, list, rt)
	})
	if slices.Contains(netnstest.Links(t, podNS), "eth0") {
		t.Fatal("eth0 left after DEL")
	}
}

// containerd closes the sandbox's netns before the DEL and then sends CNI_NETNS="": the kernel has
// destroyed the pair with the namespace, and DEL must still succeed and release the address.
func TestLibcniVethDelAfterNetnsGone(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx := context.Background()
	hostNS, podNS := netnstest.New(t), netnstest.New(t)
	dir := t.TempDir()
	list := exampleList(t, dir, plugin.ModeVeth, "1.1.0")
	cfg := libcniConfig(t)
	rt := containerdRuntimeConf("gone", podNS.Path())
	inHost(t, hostNS, func() error {
		_, err := cfg.AddNetworkList(ctx, list, rt)
		return err
	})
	podNS.Close()
	if err := testutils.UnmountNS(podNS); err != nil {
		t.Fatal(err)
	}
	closed := *rt
	closed.NetNS = ""
	inHost(t, hostNS, func() error { return cfg.DelNetworkList(ctx, list, &closed) })
	if l := networkLeases(t, dir, "plugsim"); len(l) != 0 {
		t.Fatalf("leases after DEL with an empty netns: %v", l)
	}
	if links := netnstest.Links(t, hostNS); slices.Contains(links, plugin.HostIfName("veth", "plugsim", "gone", "eth0")) {
		t.Fatalf("host veth left: %v", links)
	}
}
