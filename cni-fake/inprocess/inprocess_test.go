package inprocess

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/plugsim/plugsim/harness/trace"
)

// chain is a conflist of cni-fake (its data and log in dir) followed by extra plugins.
func chain(t testing.TB, dir string, fake map[string]any, extra ...map[string]any) *libcni.NetworkConfigList {
	t.Helper()
	entry := map[string]any{
		"type": "cni-fake", "dataDir": filepath.Join(dir, "data"), "logFile": filepath.Join(dir, "cni.jsonl"),
		"capabilities": map[string]bool{"portMappings": true},
		"ipam":         map[string]any{"type": "cni-fake", "subnet": "10.66.0.0/16", "routes": []map[string]string{{"dst": "0.0.0.0/0"}}},
	}
	for k, v := range fake {
		entry[k] = v
	}
	plugins := []any{entry}
	for _, e := range extra {
		plugins = append(plugins, e)
	}
	b, _ := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": "inproc", "plugins": plugins})
	list, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func rt(id string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: id, NetNS: "/var/run/netns/" + id, IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", id}}}
}

// Many pods at once, as a runtime sets them up: every call runs in this process (the bin dir is
// empty), each gets its own address, every call is logged, and DEL gives every address back.
// Under -race this also shows the plugin code shares nothing between concurrent calls.
func TestConcurrentChainsInProcess(t *testing.T) {
	dir, bin := t.TempDir(), t.TempDir()
	cni := libcni.NewCNIConfigWithCacheDir([]string{bin}, filepath.Join(dir, "cache"), New())
	list := chain(t, dir, nil)
	const n = 24
	ips := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := cni.AddNetworkList(context.Background(), list, rt(fmt.Sprintf("pod%02d", i)))
			if err != nil {
				t.Errorf("ADD %d: %v", i, err)
				return
			}
			r, err := current.NewResultFromResult(res)
			if err != nil {
				t.Error(err)
				return
			}
			ips[i] = r.IPs[0].Address.IP.String()
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, ip := range ips {
		if ip == "" || seen[ip] {
			t.Fatalf("pod %d: address %q (all: %v)", i, ip, ips)
		}
		seen[ip] = true
	}
	for i := range n {
		wg.Go(func() {
			if err := cni.DelNetworkList(context.Background(), list, rt(fmt.Sprintf("pod%02d", i))); err != nil {
				t.Errorf("DEL %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if err := cni.GetStatusNetworkList(context.Background(), list); err != nil {
		t.Fatalf("STATUS: %v", err)
	}
	evs, err := trace.ReadFile(filepath.Join(dir, "cni.jsonl"))
	if err != nil || len(evs) != 2*n+1 {
		t.Fatalf("%d log lines, want %d: %v", len(evs), 2*n+1, err)
	}
	adds := 0
	for _, ev := range evs {
		if ev.Method == "ADD" && ev.Code == "OK" && ev.Callee == "cni-fake" && strings.HasPrefix(ev.Attrs["pod"], "default/pod") && ev.Attrs["ips"] != "" {
			adds++
		}
	}
	if adds != n {
		t.Fatalf("%d ADD lines naming their pod and address, want %d", adds, n)
	}
	if entries, _ := os.ReadDir(bin); len(entries) != 0 {
		t.Fatalf("the bin dir has %d entries; nothing should have been installed", len(entries))
	}
}

// recorder is a plugin binary chained after cni-fake: it saves its stdin (with cni-fake's result
// as prevResult) and answers with a result of its own, so the chain's result shows it ran last.
const recorder = `#!/bin/sh
cat > "$(dirname "$0")/seen-$CNI_COMMAND"
if [ "$CNI_COMMAND" = ADD ]; then
  printf '{"cniVersion":"1.1.0","interfaces":[{"name":"eth0","sandbox":"%s"}],"ips":[{"address":"10.99.0.9/24","interface":0}]}' "$CNI_NETNS"
fi
`

// The plugins after cni-fake are exec'd from the bin dir, with cni-fake's in-process result as
// their prevResult.
func TestOtherPluginsAreExecd(t *testing.T) {
	dir, bin := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "recorder"), []byte(recorder), 0o755); err != nil {
		t.Fatal(err)
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{bin}, filepath.Join(dir, "cache"), New())
	list := chain(t, dir, nil, map[string]any{"type": "recorder"})
	res, err := cni.AddNetworkList(context.Background(), list, rt("web"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := current.NewResultFromResult(res); err != nil || len(r.IPs) != 1 || r.IPs[0].Address.String() != "10.99.0.9/24" {
		t.Fatalf("the chain's result is not the recorder's: %v %v", res, err)
	}
	seen, err := os.ReadFile(filepath.Join(bin, "seen-ADD"))
	if err != nil {
		t.Fatalf("the recorder plugin was not exec'd: %v", err)
	}
	var in struct {
		PrevResult current.Result `json:"prevResult"`
	}
	if err := json.Unmarshal(seen, &in); err != nil || len(in.PrevResult.IPs) != 1 || !strings.HasPrefix(in.PrevResult.IPs[0].Address.String(), "10.66.") {
		t.Fatalf("the recorder's prevResult is not cni-fake's result: %s (%v)", seen, err)
	}
	// A plugin that is in neither place is reported as libcni reports it.
	_, err = cni.AddNetworkList(context.Background(), chain(t, dir, nil, map[string]any{"type": "missing"}), rt("x"))
	if err == nil || !strings.Contains(err.Error(), `failed to find plugin "missing"`) {
		t.Fatalf("missing plugin: %v", err)
	}
}

// A fault rule fails the chain with the rule's CNI error, which libcni hands back as a
// *types.Error (as it decodes a binary's); the count holds from call to call.
func TestFaultThroughLibcni(t *testing.T) {
	dir := t.TempDir()
	cni := libcni.NewCNIConfigWithCacheDir([]string{t.TempDir()}, filepath.Join(dir, "cache"), New())
	list := chain(t, dir, map[string]any{"faults": []any{
		map[string]any{"verb": "ADD", "code": 11, "message": "no IP addresses available", "after": 2, "times": 1},
		map[string]any{"id": "stall", "verb": "DEL", "delay": "1h", "match": map[string]string{"CNI_CONTAINERID": "stuck"}},
	}})
	for i := 1; i <= 4; i++ {
		_, err := cni.AddNetworkList(context.Background(), list, rt(fmt.Sprintf("p%d", i)))
		var ce *types.Error
		if i == 3 {
			if !errors.As(err, &ce) || ce.Code != types.ErrTryAgainLater || ce.Msg != "no IP addresses available" {
				t.Fatalf("ADD 3: %v", err)
			}
		} else if err != nil {
			t.Fatalf("ADD %d: %v", i, err)
		}
	}
	// A delay is cut short when the caller gives up, where an exec'd plugin would be killed.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := cni.DelNetworkList(ctx, list, rt("stuck"))
	if err == nil || !strings.Contains(err.Error(), "delay cut short") || time.Since(start) > time.Minute {
		t.Fatalf("DEL past its deadline: %v after %v", err, time.Since(start))
	}
}
