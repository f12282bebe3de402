//go:build e2e

// Package e2e runs cni-fake with the real clients: the portmap plugin chained after it (DNAT that
// really reaches a listener in the pod), cnitool, and libcni, each inside throw-away network
// namespaces (a "host" with no route out of the machine, and pods). Run by `make e2e-cni`; the
// tools come from $PLUGSIM_BIN (`make tools`, `make build`), and a missing tool fails the suite.
package e2e

import (
	"bufio"
	"context"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/internal/testbin"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/plugsim/plugsim/cni-fake/netnstest"
	"github.com/plugsim/plugsim/harness/trace"
)

const (
	hostPort = 18080
	podPort  = 80
)

// binDir is $PLUGSIM_BIN with every tool the suite needs, or the test fails.
func binDir(t testing.TB) string {
	t.Helper()
	d := testbin.Dir(t, "cni-fake", "portmap", "host-local", "cnitool")
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Fatal("iptables not found: portmap needs it (`make deps` installs it)")
	}
	return d
}

// conflist loads one of the example conflists with cni-fake's state moved into dir, its mode set,
// and the network renamed (so that nothing here meets a runtime using the example on this machine).
func conflist(t testing.TB, file, dir, mode, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "cni", file))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["name"] = name
	fake := m["plugins"].([]any)[0].(map[string]any)
	fake["dataDir"] = filepath.Join(dir, "data")
	fake["logFile"] = filepath.Join(dir, "cni.jsonl")
	fake["mode"] = mode
	if ipam := fake["ipam"].(map[string]any); ipam["type"] == "host-local" {
		ipam["dataDir"] = filepath.Join(dir, "host-local")
	}
	b, _ = json.Marshal(m)
	return b
}

func portMappings() map[string]any {
	return map[string]any{"portMappings": []map[string]any{{"hostPort": hostPort, "containerPort": podPort, "protocol": "tcp"}}}
}

// natRules is `iptables -t nat -S` in the namespace the calling thread is in.
func natRules() (string, error) {
	out, err := exec.Command("iptables", "-w", "-t", "nat", "-S").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("iptables -t nat -S: %v: %s", err, out)
	}
	return string(out), nil
}

// serve answers every connection on the pod's port with one line naming the peer it saw.
func serve(t testing.TB, pod ns.NetNS) {
	t.Helper()
	var ln net.Listener
	netnstest.Do(t, pod, func() (err error) {
		ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", podPort)) // the socket stays in the pod netns
		return err
	})
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "hello from the pod, you are %s\n", c.RemoteAddr())
			c.Close()
		}
	}()
}

// dial connects from the host namespace and returns the pod's greeting.
func dial(addr string) (string, error) {
	c, err := net.DialTimeout("tcp4", addr, 3*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	return bufio.NewReader(c).ReadString('\n')
}

// TestPortmapDNATReachesThePod is the acceptance test: the real portmap chained after
// cni-fake in veth mode, hostPort 18080 → 80, a listener in the pod, a connection to the host
// namespace's port 18080 reaching it; then DEL with the same capability args removes portmap's
// rules and the veth. Both example conflists: cni-fake's own IPAM (1.1.0) and Calico's shape
// (0.3.1, IPAM delegated to host-local).
func TestPortmapDNATReachesThePod(t *testing.T) {
	netnstest.RequireRoot(t)
	bin := binDir(t)
	for _, file := range []string{"10-plugsim.conflist", "20-calico-shape.conflist"} {
		t.Run(file, func(t *testing.T) {
			ctx := context.Background()
			hostNS, podNS := netnstest.New(t), netnstest.New(t)
			dir := t.TempDir()
			list, err := libcni.NetworkConfFromBytes(conflist(t, file, dir, "veth", "plugsim-e2e"))
			if err != nil {
				t.Fatal(err)
			}
			cfg := libcni.NewCNIConfigWithCacheDir([]string{bin}, filepath.Join(dir, "cache"), nil)
			rt := &libcni.RuntimeConf{
				ContainerID: "e2e-dnat", NetNS: podNS.Path(), IfName: "eth0",
				Args:           [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "web"}},
				CapabilityArgs: portMappings(),
			}
			var res *current.Result
			netnstest.Do(t, hostNS, func() error {
				r, err := cfg.AddNetworkList(ctx, list, rt)
				if err != nil {
					return fmt.Errorf("AddNetworkList: %w", err)
				}
				res, err = current.NewResultFromResult(r)
				return err
			})
			podIP, gw := res.IPs[0].Address.IP.String(), res.IPs[0].Gateway.String()
			hostVeth := res.Interfaces[0].Name
			t.Logf("pod %s (gateway %s, host veth %s)", podIP, gw, hostVeth)
			serve(t, podNS)

			netnstest.Do(t, hostNS, func() error {
				rules, err := natRules()
				if err != nil {
					return err
				}
				if !strings.Contains(rules, "CNI-DN-") || !strings.Contains(rules, fmt.Sprintf("--to-destination %s:%d", podIP, podPort)) {
					return fmt.Errorf("no DNAT to %s:%d in the host namespace:\n%s", podIP, podPort, rules)
				}
				// The host namespace's own address on the host veth, and its loopback (portmap's
				// SNAT of 127.0.0.1 plus route_localnet on the veth make the latter work).
				for _, addr := range []string{net.JoinHostPort(gw, fmt.Sprint(hostPort)), fmt.Sprintf("127.0.0.1:%d", hostPort)} {
					got, err := dial(addr)
					if err != nil {
						return fmt.Errorf("connect to %s in the host namespace: %v", addr, err)
					}
					if !strings.HasPrefix(got, "hello from the pod") {
						return fmt.Errorf("%s answered %q", addr, got)
					}
					t.Logf("%s -> %s", addr, strings.TrimSpace(got))
				}
				// Without the mapping there is nothing: the pod's port is reached only through DNAT.
				if _, err := dial(net.JoinHostPort(gw, fmt.Sprint(hostPort+1))); err == nil {
					return fmt.Errorf("port %d answered without a mapping", hostPort+1)
				}
				if err := cfg.CheckNetworkList(ctx, list, rt); err != nil && list.CNIVersion != "0.3.1" {
					return fmt.Errorf("CheckNetworkList: %w", err)
				}
				if err := cfg.DelNetworkList(ctx, list, rt); err != nil {
					return fmt.Errorf("DelNetworkList: %w", err)
				}
				rules, err = natRules()
				if err != nil {
					return err
				}
				if strings.Contains(rules, "CNI-DN-") || strings.Contains(rules, podIP) {
					return fmt.Errorf("portmap rules left after DEL:\n%s", rules)
				}
				if _, err := dial(net.JoinHostPort(gw, fmt.Sprint(hostPort))); err == nil {
					return fmt.Errorf("port %d still answers after DEL", hostPort)
				}
				return nil
			})
			if links := netnstest.Links(t, hostNS); slices.Contains(links, hostVeth) {
				t.Fatalf("host veth %s left after DEL: %v", hostVeth, links)
			}
			if links := netnstest.Links(t, podNS); slices.Contains(links, "eth0") {
				t.Fatalf("pod eth0 left after DEL: %v", links)
			}
		})
	}
}

// In fake mode there is no interface at all, yet the real portmap accepts cni-fake's result as
// prevResult and installs (and on DEL removes) its DNAT rules for the fake address.
func TestPortmapAcceptsFakeModeResult(t *testing.T) {
	netnstest.RequireRoot(t)
	bin := binDir(t)
	ctx := context.Background()
	hostNS := netnstest.New(t)
	dir := t.TempDir()
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			var m map[string]any
			json.Unmarshal(conflist(t, "10-plugsim.conflist", dir, "fake", "plugsim-e2e-fake"), &m)
			m["cniVersion"] = v
			b, _ := json.Marshal(m)
			list, err := libcni.NetworkConfFromBytes(b)
			if err != nil {
				t.Fatal(err)
			}
			cfg := libcni.NewCNIConfigWithCacheDir([]string{bin}, filepath.Join(dir, "cache"), nil)
			rt := &libcni.RuntimeConf{ContainerID: "fake-" + strings.ReplaceAll(v, ".", ""), NetNS: "/var/run/netns/no-such-pod", IfName: "eth0", CapabilityArgs: portMappings()}
			netnstest.Do(t, hostNS, func() error {
				r, err := cfg.AddNetworkList(ctx, list, rt)
				if err != nil {
					return fmt.Errorf("AddNetworkList: %w", err)
				}
				if r.Version() != v {
					return fmt.Errorf("result version %s, want %s", r.Version(), v)
				}
				res, _ := current.NewResultFromResult(r)
				rules, err := natRules()
				if err != nil {
					return err
				}
				if want := fmt.Sprintf("--to-destination %s:%d", res.IPs[0].Address.IP, podPort); !strings.Contains(rules, want) {
					return fmt.Errorf("no rule %q:\n%s", want, rules)
				}
				if err := cfg.DelNetworkList(ctx, list, rt); err != nil {
					return fmt.Errorf("DelNetworkList: %w", err)
				}
				if rules, _ := natRules(); strings.Contains(rules, rt.ContainerID) {
					return fmt.Errorf("rules for %s left after DEL:\n%s", rt.ContainerID, rules)
				}
				return nil
			})
		})
	}
}

// cnitool add|check|status|del against the example conflist (NETCONFPATH, CNI_PATH, CAP_ARGS,
// CNI_ARGS), run inside the throw-away host namespace.
func TestCnitool(t *testing.T) {
	netnstest.RequireRoot(t)
	bin := binDir(t)
	hostNS, podNS := netnstest.New(t), netnstest.New(t)
	dir := t.TempDir()
	confDir := filepath.Join(dir, "net.d")
	os.MkdirAll(confDir, 0o755)
	const network = "plugsim-e2e-cnitool"
	var m map[string]any
	json.Unmarshal(conflist(t, "10-plugsim.conflist", dir, "veth", network), &m)
	// STATUS and GC carry no CNI_ARGS (libcni sends an empty RuntimeConf), so the trace's caller
	// for them comes from the config's "caller" key; ADD/CHECK/DEL also get PLUGSIM_CALLER.
	m["plugins"].([]any)[0].(map[string]any)["caller"] = "cnitool"
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(confDir, "10-plugsim.conflist"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	// cnitool keeps libcni's default result cache; its container ID is derived from the netns path.
	sum := sha512.Sum512([]byte(podNS.Path()))
	cacheFile := filepath.Join("/var/lib/cni/results", fmt.Sprintf("%s-cnitool-%x-eth0", network, sum[:10]))
	t.Cleanup(func() { os.Remove(cacheFile) })
	caps, _ := json.Marshal(portMappings())
	cnitool := func(verb string) (string, error) {
		cmd := exec.Command(filepath.Join(bin, "cnitool"), verb, network, podNS.Path())
		cmd.Env = append(os.Environ(), "CNI_PATH="+bin, "NETCONFPATH="+confDir, "CAP_ARGS="+string(caps), "CNI_ARGS=IgnoreUnknown=1;PLUGSIM_CALLER=cnitool")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("cnitool %s: %v: %s", verb, err, out)
		}
		return string(out), nil
	}
	netnstest.Do(t, hostNS, func() error {
		out, err := cnitool("add")
		if err != nil {
			return err
		}
		var res current.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.IPs) != 1 {
			return fmt.Errorf("cnitool add printed %q (%v)", out, err)
		}
		t.Logf("cnitool add: %s", strings.TrimSpace(out))
		for _, verb := range []string{"check", "status"} {
			if _, err := cnitool(verb); err != nil {
				return err
			}
		}
		if rules, err := natRules(); err != nil || !strings.Contains(rules, "CNI-DN-") {
			return fmt.Errorf("no portmap rules after cnitool add (%v):\n%s", err, rules)
		}
		if _, err := cnitool("del"); err != nil {
			return err
		}
		if _, err := cnitool("del"); err != nil { // DEL is repeatable
			return err
		}
		if rules, _ := natRules(); strings.Contains(rules, "CNI-DN-") {
			return fmt.Errorf("portmap rules left after cnitool del:\n%s", rules)
		}
		return nil
	})
	if slices.Contains(netnstest.Links(t, podNS), "eth0") {
		t.Fatal("eth0 left in the pod after cnitool del")
	}
	evs, err := trace.ReadFile(filepath.Join(dir, "cni.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, ev := range evs {
		if ev.Caller != "cnitool" || ev.Code != "OK" {
			t.Fatalf("trace event %s %s by %s: %s; want caller cnitool, code OK", ev.Method, ev.Code, ev.Caller, ev.Error)
		}
		verbs = append(verbs, ev.Method)
	}
	if got := strings.Join(verbs, " "); got != "ADD CHECK STATUS DEL DEL" {
		t.Fatalf("trace has %q, want ADD CHECK STATUS DEL DEL", got)
	}
}
