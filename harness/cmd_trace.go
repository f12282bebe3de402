package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/plugsim/plugsim/harness/collect"
	"github.com/plugsim/plugsim/harness/diagram"
	"github.com/plugsim/plugsim/harness/trace"
)

// polls are the calls a kubelet makes on a timer whatever happens to its pods (PLEG relists, stats,
// the status of the runtime and of each volume, the image file system), and the liveness checks of
// the CSI sidecars and the registrar. --drop-polls leaves them out, so what a user's action caused
// is not drowned: on a quiet one-node cluster they are over 95% of a minute's calls.
var polls = map[string]bool{
	"ListPodSandbox": true, "ListContainers": true, "PodSandboxStatus": true, "ContainerStatus": true,
	"ListPodSandboxStats": true, "ListContainerStats": true, "PodSandboxStats": true, "ContainerStats": true,
	"ListPodSandboxMetrics": true, "ListMetricsDescriptors": true, "ImageFsInfo": true, "ListImages": true,
	"Status": true, "Version": true, "RuntimeConfig": true, "GetContainerEvents": true,
	"Probe": true, "GetPluginInfo": true, "GetPluginCapabilities": true, "ControllerGetCapabilities": true,
	"NodeGetCapabilities": true, "NodeGetVolumeStats": true, "NodeGetInfo": true, "GetCapacity": true,
	"STATUS": true, "VERSION": true,
	// The external-attacher's reconciliation, every --reconcile-sync (1 minute).
	"ListVolumes": true,
}

// clusterTraces lists the trace files `harness cluster up` has its fakes write in dir, each with the
// node it belongs to ("" for the control plane's csi-fake).
func clusterTraces(dir string) (map[string]string, error) {
	files := map[string]string{}
	if f := filepath.Join(dir, "csi", "controller.jsonl"); exists(f) {
		files[f] = ""
	}
	nodes, err := filepath.Glob(filepath.Join(dir, "nodes", "*"))
	if err != nil {
		return nil, err
	}
	for _, nd := range nodes {
		for _, name := range []string{"cri.jsonl", "csi.jsonl", "csi-ephemeral.jsonl", "cni.jsonl"} {
			if f := filepath.Join(nd, name); exists(f) {
				files[f] = filepath.Base(nd)
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no cluster's trace files (csi/controller.jsonl, nodes/*/cri.jsonl, ...): is it the --dir of `harness cluster up`?", dir)
	}
	return files, nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// onNode names a node's participants after it: kubelet@node1, cri-fake@node1, cni-fake@node1 →
// portmap@node1. The CSI controller sidecars (callers named csi-* or external-*) run once for the
// cluster and keep their names. A CNI event names its plugins in Service (the runtime's event of a
// whole chain has the network's name as Callee; a plugin's own event has Callee == Service, which
// is how diagram.FoldCNI knows it), so there the plugin types are what is named.
func onNode(ev trace.Event, node string) trace.Event {
	if node == "" {
		return ev
	}
	if !strings.HasPrefix(ev.Caller, "csi-") && !strings.HasPrefix(ev.Caller, "external-") {
		ev.Caller += "@" + node
	}
	if ev.Interface != trace.CNI || ev.Service == "" {
		ev.Callee += "@" + node
		return ev
	}
	self := ev.Callee == ev.Service
	types := strings.Split(ev.Service, ",")
	for i, t := range types {
		types[i] = strings.TrimSpace(t) + "@" + node
	}
	ev.Service = strings.Join(types, ",")
	if self {
		ev.Callee = ev.Service
	}
	return ev
}

// parseWhen reads a --since/--until value: an RFC 3339 time, or a duration before now ("90s").
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-12-01T10:00:00Z) nor a duration before now (90s)", s)
	}
	return t, nil
}

// traceSource says in a diagram's subtitle where its calls come from: the trace files by name
// and, with --cluster, the trace files of the cluster. No directory is named: a committed diagram
// must not carry the temporary path of the machine that drew it.
func traceSource(files []string, cluster bool) string {
	var from []string
	for _, f := range files {
		from = append(from, filepath.Base(f))
	}
	if cluster {
		from = append(from, "the trace files of the cluster")
	}
	return strings.Join(from, ", ")
}

func cmdTrace(args []string) error {
	fs := newFlags("trace", "[--svg FILE] [--mermaid FILE] [--cluster DIR] [TRACE.jsonl...]", `Draws recorded trace files (cri-fake's, csi-fake's, cni-fake's logFile; several are merged by time)
as the boundary trace: one line per call, and optionally a Mermaid or SVG sequence diagram. Use it
on what a real kubelet did against the fakes.

With --cluster DIR it reads every trace file of a cluster started by 'harness cluster up --dir DIR'
(the controller's csi-fake, each node's cri-fake, csi-fakes and cni-fake) and names each node's
participants after their node: kubelet@node1 ──CSI──▶ csi-fake@node1 (node).
`)
	svg := fs.String("svg", "", "write an SVG sequence diagram here")
	mermaid := fs.String("mermaid", "", "write a Mermaid sequence diagram here")
	title := fs.String("title", "boundary trace", "diagram title")
	iface := fs.String("interface", "", "only this interface (CRI, CNI, CSI, REG)")
	method := fs.String("method", "", "only calls whose method contains this text (PLEG relists drown the rest: --method Sandbox)")
	clusterDir := fs.String("cluster", "", "read the trace files of the cluster in this directory")
	dropPolls := fs.Bool("drop-polls", false, "leave out the calls made on a timer (relists, stats, status, probes, capabilities)")
	since := fs.String("since", "", "only calls that ended at or after this time (RFC 3339, or a duration before now: 10m)")
	until := fs.String("until", "", "only calls that ended before this time (RFC 3339, or a duration before now)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 && *clusterDir == "" {
		fs.Usage()
		return exitError(2)
	}
	now := time.Now()
	from, err := parseWhen(*since, now)
	if err != nil {
		return fmt.Errorf("--since: %w", err)
	}
	to, err := parseWhen(*until, now)
	if err != nil {
		return fmt.Errorf("--until: %w", err)
	}
	files := map[string]string{}
	for _, f := range fs.Args() {
		files[f] = ""
	}
	if *clusterDir != "" {
		cf, err := clusterTraces(*clusterDir)
		if err != nil {
			return err
		}
		for f, node := range cf {
			files[f] = node
		}
	}
	names := make([]string, 0, len(files))
	for f := range files {
		names = append(names, f)
	}
	sort.Strings(names)
	var lists [][]trace.Event
	for _, f := range names {
		evs, err := trace.ReadFile(f)
		if err != nil {
			return err
		}
		for i := range evs {
			evs[i] = onNode(evs[i], files[f])
		}
		lists = append(lists, evs)
	}
	var kept []trace.Event
	for _, ev := range diagram.FoldCNI(collect.Merge(lists...)) {
		switch {
		case *iface != "" && !strings.EqualFold(ev.Interface, *iface),
			*method != "" && !strings.Contains(ev.Method, *method),
			*dropPolls && polls[ev.Method],
			!from.IsZero() && ev.Time.Before(from),
			!to.IsZero() && !ev.Time.Before(to):
			continue
		}
		kept = append(kept, ev)
	}
	for _, ev := range kept {
		fmt.Printf("%s  %s\n", ev.Time.Format("15:04:05.000"), diagram.Line(ev))
	}
	sub := fmt.Sprintf("%d calls from %s", len(kept), traceSource(fs.Args(), *clusterDir != ""))
	if *svg != "" {
		if err := os.WriteFile(*svg, diagram.SVG(*title, sub, []diagram.Section{{Events: kept}}), 0o644); err != nil {
			return err
		}
	}
	if *mermaid != "" {
		if err := os.WriteFile(*mermaid, []byte(diagram.Mermaid(*title, []diagram.Section{{Events: kept}})), 0o644); err != nil {
			return err
		}
	}
	return nil
}
