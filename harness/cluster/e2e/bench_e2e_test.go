//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"slices"
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
			var nodeMem mem
			var cpMiB float64
			for i := 0; i < b.N; i++ {
				c := upCluster(b, n)
				up += c.upTook
				perNode, cp := c.memory(b)
				nodeMem = nodeMem.add(perNode)
				cpMiB += cp
				c.down(b)
			}
			nodeMem = nodeMem.div(b.N)
			b.ReportMetric(up.Seconds()/float64(b.N), "s-to-ready")
			b.ReportMetric(nodeMem.RSS, "MiB/node")
			b.ReportMetric(nodeMem.PSS, "MiB-PSS/node")
			b.ReportMetric(nodeMem.Anon, "MiB-anon/node")
			b.ReportMetric(cpMiB/float64(b.N), "MiB-control-plane")
		})
	}
	b.Run("deployment-100", func(b *testing.B) {
		var took time.Duration
		var nodeMem mem
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
			nodeMem = nodeMem.add(m)
			c.down(b)
		}
		nodeMem = nodeMem.div(b.N)
		b.ReportMetric(took.Seconds()/float64(b.N), "s-to-100-running")
		b.ReportMetric(nodeMem.RSS, "MiB/node-with-pods")
		b.ReportMetric(nodeMem.PSS, "MiB-PSS/node-with-pods")
		b.ReportMetric(nodeMem.Anon, "MiB-anon/node-with-pods")
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
	steps := []int{8, 16, 32, 48, 64, 96, 128, 160, 200, 240}
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
	// What a node takes of the machine's memory, until measured: its PSS (mem), not its RSS, which
	// counts the binaries' text the nodes share once per node (3 nodes in make bench-cluster: 207 MiB
	// RSS a node, 96 PSS, 48 anonymous idle; 112-115 PSS with 30 pods a node; 100 nodes: 60 PSS).
	perNodeMiB := 120.0
	// The node count is capped by the free inotify instances and watches before memory
	// (cluster.CheckInotify): up would refuse a step they cannot hold; the scale stops before it.
	b.Logf("fs.inotify.max_user_instances %d, fs.inotify.max_user_watches %d",
		readInt("/proc/sys/fs/inotify/max_user_instances"), readInt("/proc/sys/fs/inotify/max_user_watches"))
	for _, n := range steps {
		if err := cluster.CheckInotify(n, 0); err != nil {
			b.Logf("stopping before %d nodes: %v", n, err)
			break
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
				cpu0, held := c.cpuByComponent(), time.Now()
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
				cpu1, took := c.cpuByComponent(), time.Since(held).Seconds()
				var nodeCPU float64
				for k, v := range cpu1 {
					if k != "control plane" && k != "cri-fake's CNI" {
						nodeCPU += v - cpu0[k]
					}
				}
				b.Logf("%d nodes idle over %.0f s: %.1f%% of a core a node (%s), the control plane %.0f%% of a core",
					n, took, 100*nodeCPU/took/float64(n), cpuDelta(cpu0, cpu1), 100*(cpu1["control plane"]-cpu0["control plane"])/took)
				m, cp := c.memory(b)
				perNodeMiB = m.PSS
				b.ReportMetric(c.upTook.Seconds(), "s-to-ready")
				b.ReportMetric(m.RSS, "MiB/node")
				b.ReportMetric(m.PSS, "MiB-PSS/node")
				b.ReportMetric(m.Anon, "MiB-anon/node")
				b.ReportMetric(cp, "MiB-control-plane")
				b.ReportMetric(float64(n), "nodes-ready")
				b.Logf("%d nodes Ready after %v, all still Ready over %v (%d samples); MiB a node (RSS / PSS / anonymous) %v, %.0f MiB control plane; load %s",
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

// memory is the memory per plugsim node (nodeMemory: its kubelet, cri-fake, kube-proxy and its
// DaemonSet pods' programs) and the RSS of the rest of the cluster's processes (etcd, the API server,
// controller-manager, scheduler, the relay), in MiB.
func (c *testCluster) memory(tb testing.TB) (perNode mem, controlPlane float64) {
	tb.Helper()
	st := c.state()
	var nodes float64
	for _, n := range st.Nodes {
		kib, _ := c.rss(n.Name + "-")
		nodes += float64(kib) / 1024
	}
	all, _ := c.rss("")
	return c.nodeMemory(tb), float64(all)/1024 - nodes
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

// BenchmarkPodThroughput is issue 29's throughput and start-up goals on plugsim alone: on 3 nodes, a Deployment of 90 pause replicas (30 a node, where the goal is
// start-up p99 <= 5 s) and then one of 300 (where it is >= 20 pods/s), each measured from the
// apply to every pod Ready, each pod from its creation to Ready as a watch sees them, and the CPU
// the nodes' processes spent per pod.
//
// PLUGSIM_THROUGHPUT_UP_ARGS adds arguments to its `harness cluster up` (--extra-args …), to measure a
// setting against another.
func BenchmarkPodThroughput(b *testing.B) {
	for i := 0; i < b.N; i++ {
		c := upCluster(b, 3, strings.Fields(os.Getenv("PLUGSIM_THROUGHPUT_UP_ARGS"))...)
		c.waitFor("the default service account", 60*time.Second, func() (bool, string) {
			out, err := c.kubectl("get", "serviceaccount", "default")
			return err == nil, out
		})
		// What the nodes cost idle: the CPU each component of the 3 nodes spends in 30 s.
		idle0 := c.cpuByComponent()
		time.Sleep(30 * time.Second)
		b.Logf("plugsim, 3 idle nodes, CPU-s in 30 s by component: %s; load %s", cpuDelta(idle0, c.cpuByComponent()), loadAvg())
		for _, n := range []int{90, 300} {
			s, cpu, phases := c.deployPause(b, fmt.Sprintf("pause-%d", n), n)
			b.Logf("plugsim, %d replicas on 3 nodes: %v; %.3f CPU-s per pod on the nodes; load %s\n  %s", n, s, cpu/float64(n), loadAvg(), phases)
			b.ReportMetric(s.podsPerSecond(), fmt.Sprintf("pods/s-%d", n))
			b.ReportMetric(s.quantile(0.99).Seconds(), fmt.Sprintf("s-p99-%d", n))
			b.ReportMetric(s.quantile(0.5).Seconds(), fmt.Sprintf("s-p50-%d", n))
			b.ReportMetric(cpu/float64(n), fmt.Sprintf("cpu-s/pod-%d", n))
		}
		c.down(b)
	}
}

// deployPause applies a Deployment of n pause replicas named name, waits until all are Ready and
// measures them (and the CPU seconds the nodes spent meanwhile), then deletes it and waits until
// its pods are gone.
func (c *testCluster) deployPause(tb testing.TB, name string, n int) (startup, float64, string) {
	tb.Helper()
	before := c.cpuByComponent()
	r := c.runPause(tb, name, n, "", c.nodePIDs())
	r.phases += "\n  CPU-s on the nodes by component: " + cpuDelta(before, c.cpuByComponent())
	c.deletePause(tb, name)
	return r.startup, r.cpu, r.phases
}

// pauseRun is one Deployment of pause replicas, measured.
type pauseRun struct {
	startup
	cpu    float64 // CPU seconds the given processes spent from the apply to the last pod Ready
	phases string
	// cpCPU is the control plane's CPU seconds over the same time (controlPlanePIDs), and writes
	// and events the API server's write requests and event creations (apiWrites): what each pod
	// of the kind costs the shared control plane.
	cpCPU          float64
	writes, events float64
}

// runPause applies a Deployment of n pause replicas named name (on the nodes labelled
// plugsim.dev/node-kind=kind, unless kind is empty), waits until all are Ready, and measures them and
// the CPU seconds the processes pids spent meanwhile. The Deployment stays.
func (c *testCluster) runPause(tb testing.TB, name string, n int, kind string, pids []int) pauseRun {
	tb.Helper()
	w := c.watchPods(tb, "default", "app="+name)
	selector := ""
	if kind != "" {
		selector = fmt.Sprintf("\n      nodeSelector: {%s: %s}", cluster.NodeKindLabel, kind)
	}
	cpu0, cp0 := cpuSeconds(pids), cpuSeconds(c.controlPlanePIDs())
	writes0, events0 := c.apiWrites(tb)
	applied := time.Now()
	c.apply(fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: default}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:%[3]s
      terminationGracePeriodSeconds: 1
      containers:
      - {name: pause, image: registry.k8s.io/pause:3.10}
`, name, n, selector))
	w.waitReady(tb, n, 20*time.Minute)
	r := pauseRun{startup: w.startup(applied), cpu: cpuSeconds(pids) - cpu0, cpCPU: cpuSeconds(c.controlPlanePIDs()) - cp0}
	writes, events := c.apiWrites(tb)
	r.writes, r.events = writes-writes0, events-events0
	w.stop()
	r.phases = c.phases(tb, "app="+name)
	return r
}

// controlPlanePIDs are the pids of the processes that belong to no node: etcd, the API server, the
// controllers, the scheduler, the CSI controller and its sidecars, the relay. KWOK's controller, which
// plays its nodes, is not one of them.
func (c *testCluster) controlPlanePIDs() []int {
	var pids []int
	st := c.state()
	for _, p := range st.Procs {
		if p.Name != "kwok" && !slices.ContainsFunc(st.Nodes, func(n cluster.Node) bool { return strings.HasPrefix(p.Name, n.Name+"-") }) {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// apiWrites is how many write requests (POST, PUT, PATCH, DELETE, APPLY) the API server has served,
// and how many of them created events, from its apiserver_request_total counters.
func (c *testCluster) apiWrites(tb testing.TB) (writes, events float64) {
	tb.Helper()
	out, err := c.kubectl("get", "--raw", "/metrics")
	if err != nil {
		tb.Fatalf("reading the API server's metrics: %v: %s", err, out)
	}
	for line := range strings.Lines(out) {
		labels, value, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "apiserver_request_total")), "} ")
		if !ok || !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		verb := labelValue(labels, "verb")
		if !slices.Contains([]string{"POST", "PUT", "PATCH", "DELETE", "APPLY"}, verb) {
			continue
		}
		writes += v
		if verb == "POST" && labelValue(labels, "resource") == "events" {
			events += v
		}
	}
	return writes, events
}

// labelValue is the value of name in a Prometheus label set `{a="x",b="y"` (values here hold no
// quotes).
func labelValue(labels, name string) string {
	rest := strings.TrimPrefix(labels, "{")
	for rest != "" {
		key, after, ok := strings.Cut(rest, `="`)
		if !ok {
			return ""
		}
		value, after, _ := strings.Cut(after, `"`)
		if key == name {
			return value
		}
		rest = strings.TrimPrefix(after, ",")
	}
	return ""
}

// deletePause deletes the Deployment name and waits until its pods are gone.
func (c *testCluster) deletePause(tb testing.TB, name string) {
	tb.Helper()
	c.mustKubectl("delete", "deployment", name, "--wait=true")
	c.waitFor("the pods of "+name+" gone", 10*time.Minute, func() (bool, string) {
		out, err := c.kubectl("get", "pods", "-l", "app="+name, "-o", "name")
		return err == nil && strings.TrimSpace(out) == "", fmt.Sprintf("%d left", strings.Count(out, "\n"))
	})
}

// BenchmarkClusterKinds is issue 29's side-by-side benchmark (make bench-cluster): on one control
// plane, 3 plugsim nodes, 3 kubemark hollow nodes and 3 KWOK nodes, each kind given the same
// Deployments of pause replicas by node selector, one kind after the other (their order rotating, so
// the machine's load drifts over all of them): 90 replicas (30 a node: the pod start-up SLO's p99) and
// 300 (the throughput). Per kind: pods/s from the apply to the last pod Ready, start-up latency
// p50/p90/p99 (each pod from its creation to Ready as a watch sees it), memory per node with 30 pods
// (RSS of what a node runs; KWOK: its controller's RSS over its nodes), CPU seconds per pod started,
// and what each pod cost the shared control plane: its CPU seconds and the API server's write requests
// (of them, events created) per pod.
func BenchmarkClusterKinds(b *testing.B) {
	const perKind = 3
	type kind struct {
		name, label, lacks string
		pids               func(c *testCluster) []int
	}
	procs := func(c *testCluster, match func(cluster.Process) bool) []int {
		var pids []int
		for _, p := range c.state().Procs {
			if match(p) {
				pids = append(pids, p.PID)
			}
		}
		return pids
	}
	kinds := []kind{
		{"plugsim", "plugsim", "(does everything the table's columns need; probes, volumes, CNI, logs and exec are real)",
			func(c *testCluster) []int { return c.nodePIDs() }},
		{"kubemark", cluster.KindKubemark, "no probes (a fake prober), no volumes (a fake mounter), no CNI (no pod network), no logs or exec (the upstream fake runtime), no events from its kubelet (a fake recorder)",
			func(c *testCluster) []int {
				return procs(c, func(p cluster.Process) bool { return strings.HasPrefix(p.Name, "hollow-node") })
			}},
		{"KWOK", cluster.KindKWOK, "no kubelet: no runtime, probes, volumes, CNI, logs or exec; a pod is Ready when its stage is played",
			func(c *testCluster) []int { return procs(c, func(p cluster.Process) bool { return p.Name == "kwok" }) }},
	}
	for i := 0; i < b.N; i++ {
		c := upCluster(b, perKind, "--kubemark-nodes", strconv.Itoa(perKind), "--kwok-nodes", strconv.Itoa(perKind))
		c.waitFor("the default service account", 60*time.Second, func() (bool, string) {
			out, err := c.kubectl("get", "serviceaccount", "default")
			return err == nil, out
		})
		type result struct {
			slo, burst pauseRun
			mem        mem
		}
		res := map[string]*result{}
		for _, k := range kinds {
			res[k.name] = &result{}
		}
		for si, n := range []int{30 * perKind, 300} {
			for ki := range kinds {
				k := kinds[(ki+si)%len(kinds)]
				name := fmt.Sprintf("pause-%s-%d", strings.ToLower(k.name), n)
				r := c.runPause(b, name, n, k.label, k.pids(c))
				if n == 30*perKind {
					res[k.name].slo = r
					res[k.name].mem = c.kindMem(b, k.label, k.pids(c))
				} else {
					res[k.name].burst = r
				}
				b.Logf("%s, %d replicas on %d nodes: %v; %.3f CPU-s per pod, the control plane's %.3f; %.1f API writes per pod, %.1f of them events; load %s\n  %s",
					k.name, n, perKind, r.startup, r.cpu/float64(n), r.cpCPU/float64(n), r.writes/float64(n), r.events/float64(n), loadAvg(), r.phases)
				c.deletePause(b, name)
			}
		}
		q := func(r pauseRun) string {
			return fmt.Sprintf("%.1f / %.1f / %.1f", r.quantile(0.5).Seconds(), r.quantile(0.9).Seconds(), r.quantile(0.99).Seconds())
		}
		var t strings.Builder
		fmt.Fprintf(&t, "side by side on one control plane, %d nodes of each kind, %s (load %s):\n", perKind, time.Now().UTC().Format("2006-01-02"), loadAvg())
		fmt.Fprintf(&t, "| kind | pods/s, 300 pods | start-up p50 / p90 / p99 (s), 30 a node | the same, 100 a node | MiB a node, 30 pods: RSS / PSS / anonymous | CPU-s per pod | control plane's CPU-s per pod | API writes per pod (events) | does not do |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, k := range kinds {
			r := res[k.name]
			pods := float64(r.slo.pods + r.burst.pods)
			fmt.Fprintf(&t, "| %s | %.1f | %s | %s | %s | %.3f | %.3f | %.1f (%.1f) | %s |\n", k.name, r.burst.podsPerSecond(), q(r.slo), q(r.burst), r.mem,
				(r.slo.cpu+r.burst.cpu)/pods, (r.slo.cpCPU+r.burst.cpCPU)/pods, (r.slo.writes+r.burst.writes)/pods, (r.slo.events+r.burst.events)/pods, k.lacks)
			b.ReportMetric(r.burst.podsPerSecond(), k.name+"-pods/s")
			b.ReportMetric(r.slo.quantile(0.99).Seconds(), k.name+"-s-p99-30/node")
			b.ReportMetric(r.mem.RSS, k.name+"-MiB/node")
			b.ReportMetric(r.mem.PSS, k.name+"-MiB-PSS/node")
			b.ReportMetric(r.mem.Anon, k.name+"-MiB-anon/node")
		}
		fmt.Print(t.String())
		b.Log("\n" + t.String())
		c.down(b)
	}
}

// kindMem is the memory a node of one kind takes: a plugsim node's (nodeMemory), or the processes
// pids over the nodes labelled plugsim.dev/node-kind=kind (a hollow node's kubemark kubelet and
// proxy; KWOK's controller, shared by its nodes).
func (c *testCluster) kindMem(tb testing.TB, kind string, pids []int) mem {
	if kind == "plugsim" {
		return c.nodeMemory(tb)
	}
	nodes := 0
	for _, n := range c.state().Nodes {
		if n.Kind == kind {
			nodes++
		}
	}
	return memOf(pids).div(nodes)
}
