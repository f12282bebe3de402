//go:build e2e

package kubelet_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// testDroppedCapability runs 6-dropped-capability.yaml through the kubelet: two containers of one
// pod run the same ping, one with containerd's default capabilities and one with NET_RAW
// dropped. The first exits 0 with a reply in its log, the second exits 1 with ping's permission
// error: the dropped capability, not a missing tool, is what stops it.
func testDroppedCapability(t *testing.T, n *node) {
	n.addManifest("6-dropped-capability.yaml")
	var codes map[string]int32
	n.waitPod("caps", 90*time.Second, func(p *corev1.Pod) bool {
		codes = map[string]int32{}
		for _, c := range []string{"with-net-raw", "without-net-raw"} {
			cs, ok := containerStatus(p, c)
			if !ok || cs.State.Terminated == nil {
				return false
			}
			codes[c] = cs.State.Terminated.ExitCode
		}
		return true
	})
	logOf := func(c string) string {
		logs, _ := filepath.Glob(n.path("logs", "default_caps-node1_*", c, "0.log"))
		if len(logs) != 1 {
			t.Fatalf("%s's log: found %v", c, logs)
		}
		b, err := os.ReadFile(logs[0])
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	with, without := logOf("with-net-raw"), logOf("without-net-raw")
	t.Logf("with NET_RAW, exit %d:\n%s\nwithout NET_RAW, exit %d:\n%s", codes["with-net-raw"], with, codes["without-net-raw"], without)
	if codes["with-net-raw"] != 0 || !strings.Contains(with, " stdout F 64 bytes from 127.0.0.1: seq=0") {
		t.Errorf("ping with the default capabilities: exit %d, want 0 and a reply in the log", codes["with-net-raw"])
	}
	if codes["without-net-raw"] != 1 || !strings.Contains(without, " stderr F ping: permission denied (are you root?)") {
		t.Errorf("ping without NET_RAW: exit %d, want 1 and ping's permission error in the log", codes["without-net-raw"])
	}
	for _, log := range []string{with, without} {
		if !strings.Contains(log, " stdout F PING 127.0.0.1 (127.0.0.1): 56 data bytes") {
			t.Errorf("ping's banner is missing from a log: the same command did not run in both")
		}
	}
}
