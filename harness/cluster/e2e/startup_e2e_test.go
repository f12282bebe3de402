//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/plugsim/plugsim/harness/cluster"
)

// podWatch follows the pods of one label selector through `kubectl get --watch`, as the pod
// start-up SLO measures them (sig-scalability's pod_startup_latency.md: from the pod's creation
// until it is seen Ready through a watch): it timestamps, on this machine's clock, when each pod
// is first seen and when it is first seen Ready.
type podWatch struct {
	mu      sync.Mutex
	created map[string]time.Time // by pod UID: first seen
	ready   map[string]time.Time // by pod UID: first seen Ready
	node    map[string]string
	changed chan struct{}
	cancel  context.CancelFunc
	done    chan error
}

func (c *testCluster) watchPods(tb testing.TB, namespace, selector string) *podWatch {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &podWatch{created: map[string]time.Time{}, ready: map[string]time.Time{}, node: map[string]string{},
		changed: make(chan struct{}, 1), cancel: cancel, done: make(chan error, 1)}
	// kubectl's watch can end (its connection through the relay, the server's watch timeout): it is
	// started again, listing what is there first, so a pod's times are at most that late.
	go func() {
		for restarts := 0; ; restarts++ {
			err := w.follow(ctx, c, namespace, selector)
			if ctx.Err() != nil {
				return
			}
			if restarts == 20 {
				w.done <- err
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	tb.Cleanup(w.stop)
	return w
}

// follow runs one `kubectl get --watch` until it ends.
func (w *podWatch) follow(ctx context.Context, c *testCluster, namespace, selector string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "kubectl"), "--kubeconfig", filepath.Join(c.dir, "kubeconfig"),
		"get", "pods", "-n", namespace, "-l", selector, "--watch", "--output-watch-events", "-o", "json", "--request-timeout", "0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	dec := json.NewDecoder(bufio.NewReaderSize(out, 1<<20))
	for {
		var ev struct {
			Type   string     `json:"type"`
			Object corev1.Pod `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			cmd.Wait()
			return fmt.Errorf("kubectl get --watch ended: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
		now := time.Now()
		uid := string(ev.Object.UID)
		w.mu.Lock()
		if _, ok := w.created[uid]; !ok {
			w.created[uid] = now
		}
		if ev.Object.Spec.NodeName != "" {
			w.node[uid] = ev.Object.Spec.NodeName
		}
		if _, ok := w.ready[uid]; !ok && podReady(&ev.Object) && ev.Type != "DELETED" {
			w.ready[uid] = now
		}
		w.mu.Unlock()
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
}

func (w *podWatch) stop() { w.cancel() }

// readyCount is how many pods have been seen Ready.
func (w *podWatch) readyCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ready)
}

// waitReady waits until n pods have been seen Ready, or fails after timeout.
func (w *podWatch) waitReady(tb testing.TB, n int, timeout time.Duration) {
	tb.Helper()
	deadline := time.After(timeout)
	for w.readyCount() < n {
		select {
		case <-w.changed:
		case err := <-w.done:
			tb.Fatal(err)
		case <-deadline:
			tb.Fatalf("%d of %d pods Ready after %v", w.readyCount(), n, timeout)
		}
	}
}

// startup is what a run of pods measured: how long from the apply to the last pod Ready, and each
// pod's start-up latency (first seen → first seen Ready).
type startup struct {
	pods      int
	took      time.Duration // apply → the last pod seen Ready
	latencies []time.Duration
	perNode   map[string]int
}

func (w *podWatch) startup(applied time.Time) startup {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := startup{pods: len(w.ready), perNode: map[string]int{}}
	for uid, r := range w.ready {
		s.latencies = append(s.latencies, r.Sub(w.created[uid]))
		s.took = max(s.took, r.Sub(applied))
		s.perNode[w.node[uid]]++
	}
	slices.Sort(s.latencies)
	return s
}

func (s startup) podsPerSecond() float64 { return float64(s.pods) / s.took.Seconds() }

// quantile is the q-quantile of the latencies (nearest rank).
func (s startup) quantile(q float64) time.Duration {
	if len(s.latencies) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(s.latencies)))) - 1
	return s.latencies[max(0, min(i, len(s.latencies)-1))]
}

func (s startup) String() string {
	return fmt.Sprintf("%d pods Ready in %v (%.1f pods/s); start-up p50 %v, p90 %v, p99 %v",
		s.pods, s.took.Round(10*time.Millisecond), s.podsPerSecond(),
		s.quantile(0.5).Round(10*time.Millisecond), s.quantile(0.9).Round(10*time.Millisecond), s.quantile(0.99).Round(10*time.Millisecond))
}

// cpuSeconds is the CPU time (user and system, the process's and that of the children it waited
// for: cri-fake's CNI plugins) of the processes with these pids, in seconds.
func cpuSeconds(pids []int) float64 {
	var ticks float64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The fields after the command (which may hold spaces) start after its ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		// utime, stime, cutime, cstime are fields 14-17 of stat: 12-15 after the command.
		for _, i := range []int{11, 12, 13, 14} {
			if i < len(f) {
				v, _ := strconv.ParseFloat(f[i], 64)
				ticks += v
			}
		}
	}
	return ticks / clockTicks
}

// clockTicks is sysconf(_SC_CLK_TCK), 100 on Linux.
const clockTicks = 100

// nodePIDs are the pids of the cluster's plugsim node processes (kubelet, cri-fake, csi-fakes of every
// node).
func (c *testCluster) nodePIDs() []int {
	var pids []int
	st := c.state()
	for _, p := range st.Procs {
		for _, n := range st.Nodes {
			if n.Kind == "" && strings.HasPrefix(p.Name, n.Name+"-") {
				pids = append(pids, p.PID)
			}
		}
	}
	return pids
}

// phases describes where the pods of selector spent their start-up, from their objects' timestamps
// (whole seconds, as the API keeps them): how long the creations took from the first to the last (the
// ReplicaSet controller's pace), and the median and slowest of creation → scheduled, scheduled → the
// container started (the kubelet and the runtime), started → Ready (the kubelet's status).
func (c *testCluster) phases(tb testing.TB, selector string) string {
	tb.Helper()
	var pods corev1.PodList
	if err := c.getJSON(&pods, "pods", "-l", selector); err != nil {
		return err.Error()
	}
	var first, last time.Time
	var sched, start, ready []time.Duration
	for _, p := range pods.Items {
		created := p.CreationTimestamp.Time
		if first.IsZero() || created.Before(first) {
			first = created
		}
		if created.After(last) {
			last = created
		}
		var scheduled, readyAt, started time.Time
		for _, cd := range p.Status.Conditions {
			switch cd.Type {
			case corev1.PodScheduled:
				scheduled = cd.LastTransitionTime.Time
			case corev1.PodReady:
				readyAt = cd.LastTransitionTime.Time
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil {
				started = cs.State.Running.StartedAt.Time
			}
		}
		if scheduled.IsZero() || started.IsZero() || readyAt.IsZero() {
			continue
		}
		sched = append(sched, scheduled.Sub(created))
		start = append(start, started.Sub(scheduled))
		ready = append(ready, readyAt.Sub(started))
	}
	q := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "-"
		}
		slices.Sort(ds)
		return fmt.Sprintf("%v/%v", ds[len(ds)/2], ds[len(ds)-1])
	}
	return fmt.Sprintf("created over %v; median/max: created→scheduled %s, scheduled→started %s, started→Ready %s",
		last.Sub(first), q(sched), q(start), q(ready))
}

// cpuByComponent is cpuSeconds per component of the plugsim nodes (kubelet, cri-fake, csi-fake,
// csi-fake-ephemeral), summed over the nodes; "cri-fake's CNI" is the part of cri-fake's that its CNI
// plugins (cni-fake, portmap) spent, the children it waited for; "control plane" is every other
// process of the cluster (etcd, the API server, the controllers, the scheduler, the CSI controller and
// its sidecars, the relay).
func (c *testCluster) cpuByComponent() map[string]float64 {
	out := map[string]float64{}
	st := c.state()
	for _, p := range st.Procs {
		if !slices.ContainsFunc(st.Nodes, func(n cluster.Node) bool { return strings.HasPrefix(p.Name, n.Name+"-") }) {
			out["control plane"] += cpuSeconds([]int{p.PID})
		}
		for _, n := range st.Nodes {
			if n.Kind == "" && strings.HasPrefix(p.Name, n.Name+"-") {
				name := strings.TrimPrefix(p.Name, n.Name+"-")
				out[name] += cpuSeconds([]int{p.PID})
				if name == "cri-fake" {
					out["cri-fake's CNI"] += childrenCPUSeconds(p.PID)
				}
			}
		}
	}
	return out
}

// childrenCPUSeconds is the CPU time of the children pid waited for (cutime and cstime).
func childrenCPUSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	var ticks float64
	for _, i := range []int{13, 14} {
		if i < len(f) {
			v, _ := strconv.ParseFloat(f[i], 64)
			ticks += v
		}
	}
	return ticks / clockTicks
}

// cpuDelta formats after-before per component.
func cpuDelta(before, after map[string]float64) string {
	var parts []string
	for k, v := range after {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, v-before[k]))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
