package diagram

import (
	"fmt"
	"html"
	"strings"

	"github.com/plugsim/plugsim/harness/trace"
)

// SVG geometry, in pixels.
const (
	colW      = 230 // distance between two lifelines
	margin    = 24
	headerH   = 64
	boxH      = 40
	rowH      = 34
	sectionH  = 28
	legendH   = 93
	maxEvents = 600 // a kubelet load trace is cut here; the text trace has everything
)

// Interface colours: one per boundary, so the eye sees which interface a call crosses.
var ifaceColour = map[string]string{
	trace.CRI:          "#1f6feb",
	trace.CNI:          "#d9480f",
	trace.CSI:          "#8250df",
	trace.Registration: "#57606a",
	trace.OCI:          "#1a7f37",
}

func colour(iface string) string {
	if c, ok := ifaceColour[iface]; ok {
		return c
	}
	return "#57606a"
}

// boxColour tints a participant by what it is: the kubelet and sidecars (callers), the runtime,
// the network plugins and the storage plugins.
func boxColour(p string) (fill, stroke string) {
	p, _, _ = strings.Cut(p, "@") // kubelet@node1 in a cluster's trace
	switch {
	case p == "kubelet" || p == "harness" || strings.HasPrefix(p, "external-"):
		return "#eef2f7", "#57606a"
	case strings.HasPrefix(p, "cri"):
		return "#ddeafe", "#1f6feb"
	case strings.HasPrefix(p, "cni") || p == "portmap":
		return "#fff0e6", "#d9480f"
	case strings.HasPrefix(p, "csi"):
		return "#f1e9fe", "#8250df"
	case p == "runc":
		return "#dafbe1", "#1a7f37"
	}
	return "#f6f8fa", "#57606a"
}

// SVG renders the sections as a self-contained sequence diagram: participants across the top,
// one arrow per call, coloured by interface, red with its gRPC code when the call failed, and a
// band per scenario step.
func SVG(title, subtitle string, sections []Section) []byte {
	ps := participants(sections)
	if len(ps) == 0 {
		ps = []string{"kubelet"}
	}
	x := map[string]int{}
	for i, p := range ps {
		x[p] = margin + colW/2 + i*colW
	}
	width := margin*2 + colW*len(ps)
	if width < 760 {
		width = 760
	}

	var body strings.Builder
	y := headerH + boxH + 16
	shown, cut := 0, 0
	for _, s := range sections {
		if s.Title != "" {
			fill, mark, tc := "#f6f8fa", "✓", "#1a7f37"
			if s.Failed {
				fill, mark, tc = "#ffebe9", "✗", "#cf222e"
			}
			fmt.Fprintf(&body, `<rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="%s"/>`+"\n",
				margin/2, y, width-margin, sectionH-6, fill)
			fmt.Fprintf(&body, `<text x="%d" y="%d" class="step"><tspan fill="%s">%s</tspan> %s</text>`+"\n",
				margin, y+16, tc, mark, esc(oneLine(s.Title, 110)))
			y += sectionH
		}
		for _, ev := range s.Events {
			if shown >= maxEvents {
				cut++
				continue
			}
			shown++
			y = arrow(&body, x, y, ev)
		}
	}
	if cut > 0 {
		fmt.Fprintf(&body, `<text x="%d" y="%d" class="note">… %d more calls not drawn (see the text trace)</text>`+"\n", margin, y+16, cut)
		y += rowH
	}
	height := y + legendH + margin

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Verdana, Arial, sans-serif">`+"\n",
		width, height, width, height)
	b.WriteString(`<style>
  text { font-size: 13px; fill: #1f2328; }
  .title { font-size: 18px; font-weight: bold; }
  .subtitle { font-size: 12px; fill: #57606a; }
  .box { font-size: 14px; font-weight: bold; }
  .step { font-size: 13px; font-weight: bold; }
  .call { font-size: 12.5px; font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; }
  .err { font-size: 11.5px; fill: #cf222e; font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; }
  .note { font-size: 12px; fill: #57606a; font-style: italic; }
</style>
`)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="30" class="title">%s</text>`+"\n", margin, esc(oneLine(title, 120)))
	if subtitle != "" {
		fmt.Fprintf(&b, `<text x="%d" y="50" class="subtitle">%s</text>`+"\n", margin, esc(oneLine(subtitle, 160)))
	}
	// Lifelines first, so arrows and bands are drawn over them.
	for _, p := range ps {
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#8c959f" stroke-dasharray="4 4"/>`+"\n",
			x[p], headerH+boxH, x[p], height-legendH-margin/2)
	}
	for _, p := range ps {
		fill, stroke := boxColour(p)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="%s" stroke="%s" stroke-width="1.5"/>`+"\n",
			x[p]-colW/2+14, headerH, colW-28, boxH, fill, stroke)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" class="box">%s</text>`+"\n", x[p], headerH+25, esc(p))
	}
	b.WriteString(body.String())
	// Legend: which colour is which interface, one per row so it fits any width.
	ly := height - legendH - margin/2 + 14
	for _, l := range []struct{ iface, text string }{
		{trace.CRI, "CRI: kubelet → container runtime (gRPC over a unix socket)"},
		{trace.CNI, "CNI: runtime → network plugin binaries (exec, config on stdin), dashed"},
		{trace.CSI, "CSI: kubelet and CSI sidecars → storage driver (gRPC over a unix socket)"},
		{trace.OCI, "OCI: runtime → runc, for a program container (runc's command line, one exec per call), dashed"},
		{"", "red: the call failed, with its gRPC code or CNI error number"},
	} {
		c := colour(l.iface)
		if l.iface == "" {
			c = "#cf222e"
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", margin, ly-4, margin+26, ly-4, c)
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="subtitle">%s</text>`+"\n", margin+34, ly, esc(l.text))
		ly += 17
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// arrow draws one call (and the chained CNI plugins after it) starting at row y, returning the
// next row's y. Arrowheads are drawn as polygons rather than SVG markers, and each label is one
// plain text element, so simple renderers (ImageMagick's, librsvg) draw the same as a browser.
func arrow(b *strings.Builder, x map[string]int, y int, ev trace.Event) int {
	from, to := x[Caller(ev)], x[Callee(ev)]
	failed := ev.Code != "" && ev.Code != "OK"
	c := colour(ev.Interface)
	if failed {
		c = "#cf222e"
	}
	ay := y + 22
	label := Label(ev)
	if ev.Interface != trace.CNI && ev.Interface != trace.OCI {
		label = ev.Method
	}
	line(b, from, to, ay, c, ev.Interface == trace.CNI || ev.Interface == trace.OCI)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" class="call">%s  %s</text>`+"\n",
		(from+to)/2, ay-7, esc(label), esc(Ms(ev.Duration())))
	y += rowH
	if failed {
		msg := ev.Code
		if ev.Error != "" {
			msg += ": " + ev.Error
		}
		// Start the message at the caller's end of the arrow and let it run right: centred on a
		// short arrow at the left edge, a long message would be cut off by the picture's edge.
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="start" class="err">✗ %s</text>`+"\n", min(from, to)+4, ay+15, esc(oneLine(msg, 80)))
		y += 10
	}
	prev := to
	for _, p := range Chain(ev) {
		ny := y + 22
		line(b, prev, x[p], ny, colour(trace.CNI), true)
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" class="call">%s  (chained)</text>`+"\n",
			(prev+x[p])/2, ny-7, esc("CNI "+ev.Method))
		prev = x[p]
		y += rowH
	}
	return y
}

// line draws a horizontal arrow from x1 to x2 at y with a filled head; dashed for exec (CNI).
func line(b *strings.Builder, x1, x2, y int, c string, dashed bool) {
	dir := sign(x2 - x1)
	if dir == 0 {
		dir = 1
	}
	tip := x2 - dir*2
	base := tip - dir*10
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="7 3"`
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", x1, y, base, y, c, dash)
	fmt.Fprintf(b, `<polygon points="%d,%d %d,%d %d,%d" fill="%s"/>`+"\n", tip, y, base, y-5, base, y+5, c)
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func esc(s string) string { return html.EscapeString(s) }
