//go:build e2e

package kubelet_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/plugsim/plugsim/harness/trace"
)

// TestKubeletOOMKilled: a real kubelet runs 7-oomkill.yaml, a pod limited to 64 MiB whose
// container allocates 128 MiB. The kubelet passes the limit to cri-fake (CreateContainer's
// memory_limit_in_bytes), the simulation's OOM killer ends the container, and the kubelet shows
// what it shows for containerd: last state terminated, reason OOMKilled, exit code 137, and the
// container restarted. A node of its own, so the suite's other pods do not share its memory
// figures or its restarts.
func TestKubeletOOMKilled(t *testing.T) {
	n := newNode(t)
	n.startFakes()
	n.addManifest("7-oomkill.yaml")
	n.waitPod("oomkill", 3*time.Minute, func(p *corev1.Pod) bool {
		cs, ok := containerStatus(p, "hog")
		last := cs.LastTerminationState.Terminated
		return ok && cs.RestartCount >= 1 && last != nil && last.Reason == "OOMKilled" && last.ExitCode == 137
	})
	p, _ := n.pod("oomkill")
	t.Logf("the kubelet's status of the pod: %s", describe(p))
	// The limit the simulation enforced is the one the kubelet sent.
	limited := 0
	for _, ev := range n.traceEvents("cri.jsonl") {
		if ev.Interface == trace.CRI && ev.Method == "CreateContainer" && strings.Contains(string(ev.Request), "67108864") {
			limited++
		}
	}
	if limited < 2 {
		t.Errorf("%d CreateContainer calls with the 64 MiB limit (67108864) in cri-fake's trace, want one per attempt (2 or more)", limited)
	}
}
