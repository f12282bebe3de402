package wiring

import (
	"context"
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkStart is what a unit test pays for a node: Start until its clients can call
// (start-ms), and the first RunPodSandbox after that, one CNI ADD through the chain (pod-ms);
// medians, since the machine's noise lands on single rounds. "cni-in-process" is the default
// (cri-fake with cni-fake in its own process, and csi-fake); "cni-off" has no CNI at all;
// "cni-exec" execs a prebuilt cni-fake binary as a real runtime does (skipped when none is
// found: building one, 0.9-2.4 s a start, is what in-process CNI saves).
func BenchmarkStart(b *testing.B) {
	run := func(o Options) func(*testing.B) {
		return func(b *testing.B) {
			if o.ExecCNI && FindBinDir("") == "" {
				b.Skip("no cni-fake binary in $PLUGSIM_BIN: `make build`")
			}
			var starts, pods []time.Duration
			for b.Loop() {
				t0 := time.Now()
				n := Start(b, o)
				t1 := time.Now()
				if _, err := n.RuntimeClient.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
					Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1"},
				}}); err != nil {
					b.Fatal(err)
				}
				starts, pods = append(starts, t1.Sub(t0)), append(pods, time.Since(t1))
				if err := n.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(median(starts), "start-ms")
			b.ReportMetric(median(pods), "pod-ms")
		}
	}
	b.Run("cni-in-process", run(Options{}))
	b.Run("cni-off", run(Options{CNI: "off"}))
	b.Run("cni-exec", run(Options{ExecCNI: true}))
}

func median(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[len(d)/2]) / float64(time.Millisecond)
}
