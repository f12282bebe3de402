// Package diagram draws the boundary trace: every call that crossed an interface, as text lines
// (caller ──interface──▶ callee, method, duration), as a Mermaid sequence diagram and as a
// self-contained SVG.
//
//	kubelet ──CRI──▶ cri-fake  RunPodSandbox 1.2ms
//	cri-fake ──CNI ADD──▶ cni-fake → portmap
//	kubelet ──CSI──▶ csi-fake (node)  NodePublishVolume 0.3ms
package diagram

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/plugsim/plugsim/harness/trace"
)

// Section is a titled group of events: the calls one scenario step caused.
type Section struct {
	Title string
	// Failed marks a step whose expectation did not hold.
	Failed bool
	Events []trace.Event
}

// Roles says which Kubernetes component makes a CSI call, per the CSI sidecars and the kubelet
// (external-provisioner cmd/csi-provisioner, external-attacher pkg/controller/csi_handler.go, kubelet pkg/volume/csi): the external-provisioner creates and deletes volumes, the
// external-attacher publishes them to nodes, the kubelet does everything on the node.
var Roles = map[string]string{
	"CreateVolume":              "external-provisioner",
	"DeleteVolume":              "external-provisioner",
	"GetCapacity":               "external-provisioner",
	"ControllerPublishVolume":   "external-attacher",
	"ControllerUnpublishVolume": "external-attacher",
	"ListVolumes":               "external-attacher",
	"ControllerGetCapabilities": "external-provisioner",
	"ControllerExpandVolume":    "external-resizer",
	"ControllerModifyVolume":    "external-resizer",
	"CreateSnapshot":            "external-snapshotter",
	"DeleteSnapshot":            "external-snapshotter",
	"ListSnapshots":             "external-snapshotter",
}

// Polls are the calls a kubelet makes on a timer whatever happens to its pods (PLEG relists, stats,
// the status of the runtime and of each volume, the image file system), and the liveness checks of
// the CSI sidecars and the registrar. `harness trace --drop-polls` leaves them out, and the live view folds them into a counter, so what a user's action caused
// is not drowned: on a quiet one-node cluster they are over 95% of a minute's calls.
var Polls = map[string]bool{
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

// Role returns the component a harness step impersonates for a call.
func Role(iface, method string) string {
	if strings.EqualFold(iface, trace.CSI) {
		if r, ok := Roles[method]; ok {
			return r
		}
	}
	return "kubelet"
}

// Callee names the receiving side. CSI calls are told apart by the plugin half that serves them,
// because a driver comes in two parts: the controller plugin (a
// Deployment) and the node plugin (a DaemonSet).
func Callee(ev trace.Event) string {
	if ev.Interface == trace.CNI {
		if types := pluginTypes(ev); len(types) > 0 {
			return types[0]
		}
	}
	c := ev.Callee
	if c == "" {
		c = "?"
	}
	if ev.Interface != trace.CSI || strings.Contains(c, "(") {
		return c
	}
	switch {
	case strings.HasSuffix(ev.Service, ".Node"):
		return c + " (node)"
	case strings.HasSuffix(ev.Service, ".Controller"), strings.HasSuffix(ev.Service, ".GroupController"):
		return c + " (controller)"
	case strings.HasPrefix(ev.Caller, "external-"):
		return c + " (controller)"
	}
	return c + " (node)"
}

// Caller names the calling side.
func Caller(ev trace.Event) string {
	if ev.Caller == "" {
		return "?"
	}
	return ev.Caller
}

// Chain returns the plugins of a CNI call after the callee ("portmap"), from the attributes
// cri-fake or cni-fake record.
func Chain(ev trace.Event) []string {
	if ev.Interface == trace.CNI {
		if types := pluginTypes(ev); len(types) > 1 {
			return types[1:]
		}
	}
	for _, k := range []string{"chain", "plugins", "next"} {
		if v := ev.Attrs[k]; v != "" {
			var out []string
			for _, p := range strings.Split(v, ",") {
				if p = strings.TrimSpace(p); p != "" && p != ev.Callee {
					out = append(out, p)
				}
			}
			return out
		}
	}
	return nil
}

// pluginTypes are the plugin types of a CNI call on a whole network list, which the runtime
// records in Service ("cni-fake,portmap"), in chain order.
func pluginTypes(ev trace.Event) []string {
	if ev.Service == "" {
		return nil
	}
	var out []string
	for _, t := range strings.Split(ev.Service, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// FoldCNI drops the events a CNI plugin logged itself when the runtime (or the harness) recorded
// the same invocation of the whole chain: the chain event already says "cni-fake → portmap", and
// the trace should show each boundary crossing once.
func FoldCNI(events []trace.Event) []trace.Event {
	type key struct{ method, container string }
	chains := map[key]bool{}
	for _, ev := range events {
		if ev.Interface == trace.CNI && strings.Contains(ev.Service, ",") || (ev.Interface == trace.CNI && ev.Callee != ev.Service && ev.Service != "") {
			chains[key{ev.Method, ev.Attrs["containerID"]}] = true
		}
	}
	out := events[:0:0]
	for _, ev := range events {
		if ev.Interface == trace.CNI && ev.Callee == ev.Service && chains[key{ev.Method, ev.Attrs["containerID"]}] {
			continue
		}
		if ev.Interface == trace.CNI && ev.Callee != ev.Service && ev.Service != "" && ev.Attrs["network"] == "" {
			// The runtime records the network list's name as the callee; keep it where the
			// plugin's own event has it, so expectations can say attrs.network either way.
			attrs := map[string]string{"network": ev.Callee}
			for k, v := range ev.Attrs {
				attrs[k] = v
			}
			ev.Attrs = attrs
		}
		out = append(out, ev)
	}
	return out
}

// Label is what an arrow says: the interface, for CNI with the verb, for OCI with runc's
// command ("runc create").
func Label(ev trace.Event) string {
	switch ev.Interface {
	case trace.CNI:
		return "CNI " + ev.Method
	case trace.OCI:
		return "runc " + ev.Method
	}
	return ev.Interface
}

// Ms formats a duration for a trace: 1.2ms, 35µs, 2.1s.
func Ms(d time.Duration) string {
	switch {
	case d <= 0:
		return "0ms"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// Line renders one event as caller ──interface──▶ callee, then the method and its duration.
func Line(ev trace.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s ──%s──▶ %s", Caller(ev), Label(ev), Callee(ev))
	for _, p := range Chain(ev) {
		b.WriteString(" → " + p)
	}
	if ev.Interface == trace.OCI {
		if id := ev.Attrs["containerID"]; id != "" {
			b.WriteString("  container=" + short(id))
		}
	} else if ev.Interface != trace.CNI {
		b.WriteString("  " + ev.Method)
	} else {
		net := ev.Attrs["network"]
		if net == "" && ev.Callee != ev.Service {
			net = ev.Callee // the runtime records the network list's name as the callee
		}
		if net != "" {
			b.WriteString("  network=" + net)
		}
		if pod := ev.Attrs["pod"]; pod != "" {
			b.WriteString(" pod=" + pod)
		} else if id := ev.Attrs["containerID"]; id != "" {
			b.WriteString(" container=" + short(id))
		}
	}
	b.WriteString(" " + Ms(ev.Duration()))
	if ev.Code != "" && ev.Code != "OK" {
		fmt.Fprintf(&b, "  ✗ %s", ev.Code)
		if ev.Error != "" {
			b.WriteString(": " + oneLine(ev.Error, 100))
		}
	}
	return b.String()
}

func short(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) > max {
		s = string([]rune(s)[:max-1]) + "…"
	}
	return s
}

// Text writes the events as trace lines, each indented by indent.
func Text(w io.Writer, indent string, events []trace.Event) {
	for _, ev := range events {
		fmt.Fprintln(w, indent+Line(ev))
	}
}
