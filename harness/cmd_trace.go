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
	iface := fs.String("interface", "", "only this interface (CRI, CNI, CSI, REG, OCI)")
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
		cf, err := collect.ClusterTraces(*clusterDir)
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
			evs[i] = collect.OnNode(evs[i], files[f])
		}
		lists = append(lists, evs)
	}
	var kept []trace.Event
	for _, ev := range diagram.FoldCNI(collect.Merge(lists...)) {
		switch {
		case *iface != "" && !strings.EqualFold(ev.Interface, *iface),
			*method != "" && !strings.Contains(ev.Method, *method),
			*dropPolls && diagram.Polls[ev.Method],
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
