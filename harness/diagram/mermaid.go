package diagram

import (
	"fmt"
	"strings"

	"github.com/plugsim/plugsim/harness/trace"
)

// Mermaid renders the sections as a Mermaid sequence diagram (paste it into any Markdown viewer
// that renders ```mermaid blocks, GitHub's included).
func Mermaid(title string, sections []Section) string {
	ps := participants(sections)
	id := map[string]string{}
	var b strings.Builder
	b.WriteString("sequenceDiagram\n")
	if title != "" {
		fmt.Fprintf(&b, "    title %s\n", mermaidText(title))
	}
	for i, p := range ps {
		id[p] = fmt.Sprintf("p%d", i)
		fmt.Fprintf(&b, "    participant p%d as %s\n", i, mermaidText(p))
	}
	for _, s := range sections {
		if s.Title != "" && len(ps) > 0 {
			mark := "✓"
			if s.Failed {
				mark = "✗"
			}
			fmt.Fprintf(&b, "    Note over %s,%s: %s %s\n", id[ps[0]], id[ps[len(ps)-1]], mark, mermaidText(s.Title))
		}
		for _, ev := range s.Events {
			from, to := id[Caller(ev)], id[Callee(ev)]
			label := ev.Method
			if ev.Interface == trace.CNI || ev.Interface == trace.OCI {
				label = Label(ev)
			} else {
				label = ev.Interface + " " + label
			}
			label += " (" + Ms(ev.Duration()) + ")"
			arrow := "->>"
			if ev.Code != "" && ev.Code != "OK" {
				arrow = "-x"
				label += " ✗ " + ev.Code
			}
			fmt.Fprintf(&b, "    %s%s%s: %s\n", from, arrow, to, mermaidText(label))
			prev := to
			for _, p := range Chain(ev) {
				fmt.Fprintf(&b, "    %s->>%s: %s\n", prev, id[p], mermaidText("CNI "+ev.Method+" (chained)"))
				prev = id[p]
			}
		}
	}
	return b.String()
}

// mermaidText keeps a label on one line and away from Mermaid's syntax characters.
func mermaidText(s string) string {
	s = oneLine(s, 120)
	r := strings.NewReplacer(";", ",", "#", "", ":", " -", "\"", "'")
	return r.Replace(s)
}

// participants lists everyone in the sections, callers before callees, in first-appearance order,
// with the kubelet and sidecars on the left and the plugins they call to the right.
func participants(sections []Section) []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, s := range sections {
		for _, ev := range s.Events {
			add(Caller(ev))
			add(Callee(ev))
			for _, p := range Chain(ev) {
				add(p)
			}
		}
	}
	rank := func(p string) int {
		p, _, _ = strings.Cut(p, "@") // a cluster's participants are named after their node: kubelet@node1
		switch {
		case p == "kubelet" || p == "harness":
			return 0
		case strings.HasPrefix(p, "external-"):
			return 1
		case strings.HasPrefix(p, "cri"):
			return 2
		case p == "runc":
			return 3
		case strings.HasPrefix(p, "cni") || p == "portmap":
			return 4
		case strings.HasPrefix(p, "csi") && strings.Contains(p, "controller"):
			return 5
		case strings.HasPrefix(p, "csi"):
			return 6
		}
		return 7
	}
	// Stable insertion sort by rank keeps first appearance within a rank.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && rank(out[j]) < rank(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
