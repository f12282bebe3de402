package conformance

import (
	"regexp"
	"strings"
)

// A Cause is why specs fail, as their report shows it: what the cluster lacks, named by the evidence in
// a failed spec's name, failure text or captured output (the namespace's events e2e.test dumps), and
// what it waits on. The first cause of causes whose evidence a spec shows is its cause.
type Cause struct {
	Name string
	// WaitsOn names the work that removes the cause: an issue of this project, or "-" when nothing
	// is known to (a failure to read up on).
	WaitsOn string
	// Spec matches the spec's name, Text its failure text and output; a cause with both needs both.
	Spec, Text *regexp.Regexp
}

// causes are the causes the summary knows, in the order they are tried: a run cut short first (the spec
// never had its chance), then the strongest evidence (an event naming the failure), then the area a
// spec tests, then what its failure says.
var causes = []Cause{
	{Name: "the run was cut while the spec ran (interrupted, or the suite timeout)", WaitsOn: "-",
		Text: regexp.MustCompile(`Interrupted by User|A suite timeout occurred|Interrupted by Other Ginkgo Process`)},
	{Name: "an image the catalog lacks (the kubelet's pull failed)", WaitsOn: "issue 25: cri-fake's image catalog",
		Text: regexp.MustCompile(`Failed to pull image`)},
	{Name: "the aggregated API server (a real sample-apiserver and etcd in a pod)", WaitsOn: "issue 26: real programs in pods",
		Spec: regexp.MustCompile(`\] Aggregator `)},
	// A client in a pod that could not resolve a name (nc, curl, wget, getent, nslookup say so), in
	// whatever spec; then the specs of the DNS area and those that look a Service up by name.
	{Name: dnsCause, WaitsOn: dnsIssue,
		Text: regexp.MustCompile(`Name does not resolve|Could not resolve host|bad address '|server can't find|getaddrinfo|no such host|connection timed out; no servers could be reached`)},
	{Name: dnsCause, WaitsOn: dnsIssue,
		Spec: regexp.MustCompile(`\[sig-network\] DNS |ExternalName|Guestbook application|mTLS|OIDC`),
		Text: regexp.MustCompile(`(?i)dns|timed out|timeout|Unable to read|lookup|nslookup|dig |could not resolve|getent`)},
	{Name: "a webhook server's Deployment never became ready", WaitsOn: "issue 25: agnhost webhook and crd-conversion-webhook",
		Text: regexp.MustCompile(`deployment "sample-(crd-conversion-)?webhook-deployment"|waiting for (the )?webhook configuration to be ready|failed calling webhook`)},
	{Name: "a Service did not carry the client's traffic", WaitsOn: "issue 27: Services and cluster DNS",
		Spec: regexp.MustCompile(`\[sig-network\] (Services|EndpointSlice|Networking)`),
		Text: regexp.MustCompile(`(?i)service|endpoint|not reachable|connection refused|failed to connect|hostName|affinity`)},
	{Name: "a container crashed (CrashLoopBackOff)", WaitsOn: "-",
		Text: regexp.MustCompile(`Back-off restarting failed container|CrashLoopBackOff`)},
	{Name: "a container could not be created (CreateContainerError)", WaitsOn: "-",
		Text: regexp.MustCompile(`CreateContainerError|Error: failed to (create|generate) container`)},
	{Name: "a probe kept failing", WaitsOn: "-",
		Text: regexp.MustCompile(`(Readiness|Liveness|Startup) probe failed`)},
	{Name: "a timeout waiting for a pod (no event says why)", WaitsOn: "-",
		Text: regexp.MustCompile(`(?is)(timed out|timeout).{0,200}pod|pod.{0,200}(timed out|timeout)|Pod didn't start|expected pod .* success`)},
}

const (
	dnsCause = "cluster DNS (no DNS server answers the pods)"
	dnsIssue = "issue 27: Services and cluster DNS"
)

// otherCause is the cause of a failure no cause of causes explains.
var otherCause = Cause{Name: "other (read the spec's failure)", WaitsOn: "-"}

// causeOf is the cause of one failed spec; text is its failure text and output.
func causeOf(name, text string) Cause {
	for _, c := range causes {
		if c.Spec != nil && !c.Spec.MatchString(name) {
			continue
		}
		if c.Text != nil && !c.Text.MatchString(text) {
			continue
		}
		return c
	}
	return otherCause
}

// causeKey is a cause as a group's key: its name and what it waits on.
func causeKey(c Cause) string { return c.Name + "\x00" + c.WaitsOn }

// splitCauseKey is causeKey backwards.
func splitCauseKey(k string) (name, waitsOn string) {
	name, waitsOn, _ = strings.Cut(k, "\x00")
	return name, waitsOn
}
