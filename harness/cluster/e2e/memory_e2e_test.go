//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// mem is the memory of a set of processes, in MiB, three ways (the kernel's /proc/PID/smaps_rollup):
// RSS counts every page a process maps, its binary's text included, so N nodes running the same
// kubelet binary count that text N times though the machine holds it once; PSS shares each page
// among the processes that map it (the nodes' share of what they hold together); anonymous is what a
// process alone holds (heap, stacks): what one more node costs the machine, give or take its share
// of the binaries.
type mem struct{ RSS, PSS, Anon float64 }

func (m mem) add(o mem) mem { return mem{m.RSS + o.RSS, m.PSS + o.PSS, m.Anon + o.Anon} }
func (m mem) div(n int) mem {
	n = max(n, 1)
	return mem{m.RSS / float64(n), m.PSS / float64(n), m.Anon / float64(n)}
}
func (m mem) String() string { return fmt.Sprintf("%.1f / %.1f / %.1f", m.RSS, m.PSS, m.Anon) }

// memOf sums the memory of pids; a process gone meanwhile counts nothing.
func memOf(pids []int) mem {
	var m mem
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
		if err != nil {
			continue
		}
		for l := range strings.SplitSeq(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			kib, _ := strconv.ParseFloat(f[1], 64)
			switch f[0] {
			case "Rss:":
				m.RSS += kib / 1024
			case "Pss:":
				m.PSS += kib / 1024
			case "Anonymous:":
				m.Anon += kib / 1024
			}
		}
	}
	return m
}

// daemonSetPIDs are the processes of the program containers (cri-fake hands them to runc) of the
// DaemonSet pods on each node: what every node runs because it is a node (csi-fake as the node
// plugin of the CSI driver and of the ephemeral driver), unlike a Deployment's pods (CoreDNS, the CSI controller), which run on some node
// of any cluster. runc puts a container in the cgroup <cri-fake's --cgroup-parent>/<container ID>.
func (c *testCluster) daemonSetPIDs(tb testing.TB) map[string][]int {
	tb.Helper()
	var pods corev1.PodList
	if err := c.getJSON(&pods, "pods", "--all-namespaces"); err != nil {
		tb.Log(err)
		return nil
	}
	node := map[string]string{} // container ID → node
	for _, p := range pods.Items {
		ds := false
		for _, o := range p.OwnerReferences {
			ds = ds || o.Kind == "DaemonSet"
		}
		if !ds {
			continue
		}
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if _, id, ok := strings.Cut(s.ContainerID, "://"); ok && id != "" {
				node[id] = p.Spec.NodeName
			}
		}
	}
	out := map[string][]int{}
	if len(node) == 0 {
		return out
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "cgroup"))
		if err != nil {
			continue
		}
		for l := range strings.SplitSeq(string(b), "\n") {
			if n, ok := node[filepath.Base(l)]; ok {
				out[n] = append(out[n], pid)
				break
			}
		}
	}
	return out
}

// nodeMemory is the memory of what each plugsim node runs, over the nodes: its kubelet, cri-fake
// and kube-proxy (the cluster's processes named after it) and its DaemonSet pods' programs.
func (c *testCluster) nodeMemory(tb testing.TB) mem {
	tb.Helper()
	ds := c.daemonSetPIDs(tb)
	st := c.state()
	var total mem
	nodes := 0
	for _, n := range st.Nodes {
		if n.Kind != "" {
			continue
		}
		nodes++
		var pids []int
		for _, p := range st.Procs {
			if strings.HasPrefix(p.Name, n.Name+"-") {
				pids = append(pids, p.PID)
			}
		}
		total = total.add(memOf(append(pids, ds[n.Name]...)))
	}
	return total.div(nodes)
}
