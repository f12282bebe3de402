//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// unreachableKubeconfig points at a loopback port nobody serves: a sidecar builds its client from
// it, does its CSI start-up calls, and then only retries the API server, which this test does not
// need.
const unreachableKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
`

// TestSidecarsNamedInTrace runs each real sidecar (make sidecars) against csi-fake's controller
// socket and checks that csi-fake's trace names it: the sidecars send no user agent or name of
// their own, so the name comes from the socket's peer process (harness/trace.PeerListener). Each
// must be seen making its start-up calls (Probe, GetPluginInfo, ControllerGetCapabilities) under
// its component's name.
func TestSidecarsNamedInTrace(t *testing.T) {
	dir := t.TempDir()
	sock, traceFile, kubeconfig := filepath.Join(dir, "csi.sock"), filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(unreachableKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	startFake(t, nil, "--mode", "controller", "--endpoint", "unix://"+sock, "--node-id", "controller",
		"--known-nodes", "*", "--trace", traceFile)
	for _, sc := range []struct{ bin, caller string }{
		{"csi-provisioner", "external-provisioner"},
		{"csi-attacher", "external-attacher"},
		{"csi-resizer", "external-resizer"},
		{"csi-snapshotter", "external-snapshotter"},
	} {
		t.Run(sc.bin, func(t *testing.T) {
			cmd := exec.Command(tool(t, sc.bin), "--kubeconfig", kubeconfig, "--csi-address", sock, "--v", "2")
			logPath := filepath.Join(dir, sc.bin+".log")
			logFile, err := os.Create(logPath)
			if err != nil {
				t.Fatal(err)
			}
			defer logFile.Close()
			cmd.Stdout, cmd.Stderr = logFile, logFile
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cmd.Process.Kill()
				cmd.Wait()
			}()
			want := []string{"Probe", "GetPluginInfo", "ControllerGetCapabilities"}
			deadline := time.Now().Add(2 * time.Minute)
			for {
				seen := callsBy(t, traceFile, sc.caller)
				missing := ""
				for _, m := range want {
					if !seen[m] {
						missing = m
						break
					}
				}
				if missing == "" {
					return
				}
				if time.Now().After(deadline) {
					log, _ := os.ReadFile(logPath)
					t.Fatalf("no %s from caller %q in csi-fake's trace after 2 min (seen %v)\n%s log:\n%s", missing, sc.caller, seen, sc.bin, log)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// callsBy reads the trace file and returns the methods recorded with that caller. A line still
// being written does not decode and is read again next time.
func callsBy(t testing.TB, traceFile, caller string) map[string]bool {
	t.Helper()
	f, err := os.Open(traceFile)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Caller, Method string
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Caller == caller {
			seen[ev.Method] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return seen
}
