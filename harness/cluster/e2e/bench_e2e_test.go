//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/plugsim/plugsim/harness/cluster"
)

// BenchmarkCluster measures issue 14's figures (make bench-cluster):
//
//	up/nodes=1, up/nodes=3: `harness cluster up` (tools built) to every node Ready, and the memory
//	    of a node (RSS of its kubelet, cri-fake and both csi-fakes) and of the control plane;
//	deployment-100: on a 3-node cluster, a Deployment of 100 replicas from apply to all 100 Running
//	    and Ready, and the memory per node with them running.
//
// Each iteration is a cluster of its own, stopped before the next (-benchtime 1x: one).
func BenchmarkCluster(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("up/nodes=%d", n), func(b *testing.B) {
			var up time.Duration
			var nodeMiB, cpMiB float64
			for i := 0; i < b.N; i++ {
				c := upCluster(b, n)
				up += c.upTook
				perNode, cp := c.memory(b)
				nodeMiB += perNode
				cpMiB += cp
				c.down(b)
			}
			b.ReportMetric(up.Seconds()/float64(b.N), "s-to-ready")
			b.ReportMetric(nodeMiB/float64(b.N), "MiB/node")
			b.ReportMetric(cpMiB/float64(b.N), "MiB-control-plane")
		})
	}
	b.Run("deployment-100", func(b *testing.B) {
		var took time.Duration
		var nodeMiB float64
		for i := 0; i < b.N; i++ {
			c := upCluster(b, 3)
			c.waitFor("the default service account", 60*time.Second, func() (bool, string) {
				out, err := c.kubectl("get", "serviceaccount", "default")
				return err == nil, out
			})
			start := time.Now()
			c.apply(`apiVersion: apps/v1
kind: Deployment
metadata: {name: hundred, namespace: default}
spec:
  replicas: 100
  selector: {matchLabels: {app: hundred}}
  template:
    metadata: {labels: {app: hundred}}
    spec:
      containers:
      - {name: app, image: busybox:1.36, command: ["sh", "-c", "while true; do sleep 10; done"]}
`)
			c.waitFor("100 replicas ready", 20*time.Minute, func() (bool, string) {
				var d appsv1.Deployment
				if err := c.getJSON(&d, "deployment", "hundred"); err != nil {
					return false, err.Error()
				}
				return d.Status.ReadyReplicas == 100, fmt.Sprintf("%d ready of %d", d.Status.ReadyReplicas, d.Status.Replicas)
			})
			took += time.Since(start)
			// Ready implies Running; counted from the pods too, and where they run.
			var pods corev1.PodList
			if err := c.getJSON(&pods, "pods", "-l", "app=hundred"); err != nil {
				b.Fatal(err)
			}
			perNode := map[string]int{}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					perNode[p.Spec.NodeName]++
				}
			}
			lo, hi := 100, 0
			for _, node := range []string{"node1", "node2", "node3"} {
				lo, hi = min(lo, perNode[node]), max(hi, perNode[node])
			}
			b.ReportMetric(float64(lo), "pods-on-emptiest-node")
			b.ReportMetric(float64(hi), "pods-on-busiest-node")
			m, _ := c.memory(b)
			nodeMiB += m
			c.down(b)
		}
		b.ReportMetric(took.Seconds()/float64(b.N), "s-to-100-running")
		b.ReportMetric(nodeMiB/float64(b.N), "MiB/node-with-pods")
	})
}

// BenchmarkClusterScale finds the largest cluster this machine holds Ready (make cluster-scale; not
// part of CI, opt in with PLUGSIM_CLUSTER_SCALE=1). It steps the node count through
// PLUGSIM_CLUSTER_SCALE_STEPS (default 8,16,32,48,64,96,128): each step is a cluster of its own that
// must have every node Ready when `up` returns and at every sample over PLUGSIM_CLUSTER_SCALE_HOLD
// (default 60s) after, so a node whose status updates starve is caught. It stops at the first step
// that fails, or before a step the machine cannot hold: too few free inotify instances, or too
// little free memory (MemAvailable against the memory per node measured so far, with room left for
// the rest of the machine).
func BenchmarkClusterScale(b *testing.B) {
	if os.Getenv("PLUGSIM_CLUSTER_SCALE") != "1" {
		b.Skip("set PLUGSIM_CLUSTER_SCALE=1 (make cluster-scale) to step the node count up until the machine holds no more")
	}
	steps := []int{8, 16, 32, 48, 64, 96, 128}
	if s := os.Getenv("PLUGSIM_CLUSTER_SCALE_STEPS"); s != "" {
		steps = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("PLUGSIM_CLUSTER_SCALE_STEPS: %q is not a node count", f)
			}
			steps = append(steps, n)
		}
	}
	hold := 60 * time.Second
	if s := os.Getenv("PLUGSIM_CLUSTER_SCALE_HOLD"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("PLUGSIM_CLUSTER_SCALE_HOLD: %v", err)
		}
		hold = d
	}
	largest := 0
	perNodeMiB := 150.0 // until measured: kubelet + cri-fake + two csi-fakes, a little over what up/nodes=3 shows
	// The node count is capped by the free inotify instances before memory (cluster.InotifyPerNode);
	// up would refuse a step they cannot hold; the scale stops before it.
	_, limit := cluster.InotifyFree()
	b.Logf("fs.inotify.max_user_instances %d", limit)
	for _, n := range steps {
		if limit > 0 {
			if free, _ := cluster.InotifyFree(); n*cluster.InotifyPerNode+cluster.InotifyControlPlane > free {
				need := n*cluster.InotifyPerNode + cluster.InotifyControlPlane
				b.Logf("stopping before %d nodes: they need %d inotify instances, %d of fs.inotify.max_user_instances=%d are free (raise it: sysctl fs.inotify.max_user_instances=1024)",
					n, need, free, limit)
				break
			}
		}
		// Memory the step would take, and a reserve of 4 GiB for the control plane, the page cache
		// and whatever else the machine runs.
		if avail := memAvailableMiB(); avail > 0 && float64(n)*perNodeMiB*1.25+4096 > avail {
			b.Logf("stopping before %d nodes: about %.0f MiB needed (%.0f MiB a node), %.0f MiB available", n, float64(n)*perNodeMiB*1.25, perNodeMiB, avail)
			break
		}
		ok := b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				// The default 5 minutes of `up` is for the suites' 1 and 3 nodes.
				c := upCluster(b, n, "--timeout", "30m")
				samples := 0
				for start, end := time.Now(), time.Now().Add(hold); ; {
					ready, desc := c.readyNodes()
					samples++
					if ready != n {
						b.Fatalf("%d nodes: only %d Ready %v after up returned: %s", n, ready, time.Since(start).Round(time.Second), desc)
					}
					if time.Now().After(end) {
						break
					}
					time.Sleep(5 * time.Second)
				}
				m, cp := c.memory(b)
				perNodeMiB = m
				b.ReportMetric(c.upTook.Seconds(), "s-to-ready")
				b.ReportMetric(m, "MiB/node")
				b.ReportMetric(cp, "MiB-control-plane")
				b.ReportMetric(float64(n), "nodes-ready")
				b.Logf("%d nodes Ready after %v, all still Ready over %v (%d samples); %.0f MiB a node, %.0f MiB control plane; load %s",
					n, c.upTook.Round(100*time.Millisecond), hold, samples, m, cp, loadAvg())
				c.down(b)
			}
		})
		if !ok {
			break
		}
		largest = n
	}
	b.Logf("largest node count held Ready: %d", largest)
}

// memory is the mean RSS per node (its kubelet, cri-fake, csi-fake and ephemeral csi-fake) and the
// RSS of the rest (etcd, the API server, controller-manager, scheduler, the sidecars, the relay), in MiB.
func (c *testCluster) memory(tb testing.TB) (perNode, controlPlane float64) {
	tb.Helper()
	st := c.state()
	var nodes float64
	for _, n := range st.Nodes {
		kib, _ := c.rss(n.Name + "-")
		nodes += float64(kib) / 1024
	}
	all, _ := c.rss("")
	if len(st.Nodes) > 0 {
		perNode = nodes / float64(len(st.Nodes))
	}
	return perNode, float64(all)/1024 - nodes
}

// readyNodes counts the nodes whose Ready condition is True, describing the others.
func (c *testCluster) readyNodes() (int, string) {
	var list corev1.NodeList
	if err := c.getJSON(&list, "nodes"); err != nil {
		return 0, err.Error()
	}
	ready := 0
	var not []string
	for i := range list.Items {
		if ok, desc := nodeReady(&list.Items[i]); ok {
			ready++
		} else {
			not = append(not, list.Items[i].Name+": "+desc)
		}
	}
	return ready, strings.Join(not, "; ")
}

// down stops the cluster now (its cleanup's second down is then a no-op), so a benchmark's next
// cluster does not share the machine with this one.
func (c *testCluster) down(tb testing.TB) {
	tb.Helper()
	if out, err := c.harness("cluster", "down", "--dir", c.dir); err != nil {
		tb.Fatalf("harness cluster down: %v\n%s", err, out)
	}
}

func readInt(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func memAvailableMiB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemAvailable:" {
			kib, _ := strconv.ParseFloat(f[1], 64)
			return kib / 1024
		}
	}
	return 0
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
