package conformance

import (
	"strings"
	"testing"
)

// A report shaped like e2e.test's junit_01.xml: no message attribute on failures (the framework's
// OmitFailureMessageAttr), the text in the element, skips as ginkgo writes them.
const report = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="8" disabled="2" errors="1" failures="3" time="100">
  <testsuite name="Kubernetes e2e suite" package="/e2e" tests="8">
    <testcase name="[sig-node] Pods should get a host IP [Conformance]" classname="Kubernetes e2e suite" status="passed" time="10"></testcase>
    <testcase name="[sig-network] DNS should provide DNS for services [Conformance]" classname="Kubernetes e2e suite" status="failed" time="300">
      <failure message="" type="failed">[FAILED] failed to get pod dns-test-1234: timed out in namespace dns-5678
In [It] at: test/e2e/network/dns_common.go:476 @ 12/01/26 23:59:00.000
</failure>
      <system-err>Dec  1 23:58:00.000: INFO: At 0001-01-01 00:00:00 +0000 UTC - event for dns-test: {kubelet node1} Failed: Failed to pull image &#34;registry.k8s.io/e2e-test-images/agnhost:2.66.1&#34;: rpc error: code = NotFound
Dec  1 23:58:01.000: INFO: again: Failed to pull image &#34;registry.k8s.io/e2e-test-images/agnhost:2.66.1&#34;: not found
Dec  1 23:58:02.000: INFO: Failed to pull image &#34;registry.k8s.io/e2e-test-images/busybox:1.37.0-2&#34;</system-err>
    </testcase>
    <testcase name="[sig-network] DNS should provide DNS for the cluster [Conformance]" classname="Kubernetes e2e suite" status="failed" time="300">
      <failure message="" type="failed">
[FAILED] failed to get pod dns-test-99: timed out in namespace dns-1
In [It] at: test/e2e/network/dns_common.go:476 @ 12/01/26 23:59:00.000
</failure>
      <system-out>quoted inside a message: Failed to pull image \&#34;registry.k8s.io/e2e-test-images/agnhost:2.66.1\&#34;</system-out>
    </testcase>
    <testcase name="[sig-apps] Job should run a job [Conformance]" classname="Kubernetes e2e suite" status="timedout" time="60">
      <failure message="" type="timedout">[TIMEDOUT] A suite timeout occurred
In [It] at: test/e2e/apps/job.go:1 @ 12/01/26 23:59:00.000</failure>
    </testcase>
    <testcase name="[sig-cli] Kubectl panics [Conformance]" classname="Kubernetes e2e suite" status="panicked" time="1">
      <error message="runtime error: index out of range" type="panicked">[PANICKED] Test Panicked</error>
    </testcase>
    <testcase name="[sig-node] Sysctls [Conformance]" classname="Kubernetes e2e suite" status="skipped" time="0.5">
      <skipped message="skipped - Only supported for providers [gce] (not skeleton)"></skipped>
    </testcase>
    <testcase name="[sig-node] Not focused [Conformance]" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[sig-storage] Not conformance" classname="Kubernetes e2e suite" status="failed" time="5">
      <failure message="" type="failed">[FAILED] something else</failure>
    </testcase>
  </testsuite>
</testsuites>`

func TestRead(t *testing.T) {
	s, err := Read(strings.NewReader(report), Options{NameContains: "[Conformance]"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Specs != 7 || s.Passed != 1 || s.Failed != 4 || s.Skipped != 1 || s.NotRun != 1 {
		t.Errorf("totals: %+v", s)
	}
	want := []struct {
		msg string
		n   int
	}{
		// The two DNS failures differ only in their random names: one group.
		{"failed to get pod dns-test-N: timed out in namespace dns-N", 2},
		{"A suite timeout occurred", 1},
		{"runtime error: index out of range", 1},
	}
	if len(s.Groups) != len(want) {
		t.Fatalf("groups: %+v", s.Groups)
	}
	for i, w := range want {
		if g := s.Groups[i]; g.Message != w.msg || len(g.Specs) != w.n {
			t.Errorf("group %d: %q ×%d, want %q ×%d", i, g.Message, len(g.Specs), w.msg, w.n)
		}
	}
	// Each spec counts once per image it failed to pull, however often its output says so.
	if len(s.Pulls) != 2 || s.Pulls[0].Message != "registry.k8s.io/e2e-test-images/agnhost:2.66.1" || len(s.Pulls[0].Specs) != 2 ||
		s.Pulls[1].Message != "registry.k8s.io/e2e-test-images/busybox:1.37.0-2" || len(s.Pulls[1].Specs) != 1 {
		t.Errorf("pulls: %+v", s.Pulls)
	}
	if s.PullFailed != 2 || len(s.Others) != 2 || s.Others[0].Message != "A suite timeout occurred" {
		t.Errorf("failures with no failed pull: %d, %+v", s.PullFailed, s.Others)
	}
	if len(s.Skips) != 1 || s.Skips[0].Message != "Only supported for providers [gce] (not skeleton)" {
		t.Errorf("skips: %+v", s.Skips)
	}

	all, err := Read(strings.NewReader(report), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if all.Specs != 8 || all.Failed != 5 {
		t.Errorf("without a filter: %+v", all)
	}
}

func TestFirstLine(t *testing.T) {
	for _, tc := range []struct{ message, description, want string }{
		{"", "\n\n[FAILED] boom\nmore", "boom"},
		{"attr wins", "[FAILED] description", "attr wins"},
		{"", "", "(no message)"},
		{"pod 3f2b1c9e-1a2b-4c3d-8e9f-0123456789ab gone", "", "pod UID gone"},
		{"", "[INTERRUPTED] Interrupted by User", "Interrupted by User"},
		{"image registry.k8s.io/e2e-test-images/agnhost:2.66.1 in v1.Pod: Timed out after 300.003s", "",
			"image registry.k8s.io/e2e-test-images/agnhost:N.N.N in v1.Pod: Timed out after N.Ns"},
		{"42 pods", "", "N pods"},
		{strings.Repeat("x", 500), "", strings.Repeat("x", maxLine) + "…"},
	} {
		if got := FirstLine(tc.message, tc.description); got != tc.want {
			t.Errorf("FirstLine(%q, %q) = %q, want %q", tc.message, tc.description, got, tc.want)
		}
	}
}

func TestReadRejects(t *testing.T) {
	for _, in := range []string{"", "not xml", "<testsuites><testsuite>"} {
		if _, err := Read(strings.NewReader(in), Options{}); err == nil {
			t.Errorf("Read(%q): no error", in)
		}
	}
}

func TestWrite(t *testing.T) {
	s, err := Read(strings.NewReader(report), Options{NameContains: "[Conformance]"})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.Write(&b, 1); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"specs 7: passed 1, failed 4, skipped 1, not run 1",
		"   2  failed to get pod dns-test-N: timed out in namespace dns-N\n        [sig-network] DNS should provide DNS for services [Conformance]\n        … and 1 more\n",
		"the 2 failures with no failed pull by first line of the message (2 groups):\n   1  A suite timeout occurred\n",
		"skips by first line of the message (1 groups):",
		"images the kubelet failed to pull, by the failed specs naming them (2 images, 2 specs):\n   2  registry.k8s.io/e2e-test-images/agnhost:2.66.1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// Each failure gets the first cause whose evidence it shows: a failed pull before the area of the
// spec, the area before what the message says.
func TestCauses(t *testing.T) {
	for _, c := range []struct{ spec, text, want string }{
		{"[sig-network] DNS should provide DNS for services [Conformance]", "event: Failed to pull image \"x\"", "an image the catalog lacks"},
		{"[sig-network] DNS should provide DNS for services [Conformance]", "[FAILED] timed out waiting for the condition", "cluster DNS"},
		{"[sig-api-machinery] Aggregator Should be able to support the 1.17 Sample API Server [Conformance]", "anything", "the aggregated API server"},
		{"[sig-api-machinery] AdmissionWebhook should deny [Conformance]", `error waiting for deployment "sample-webhook-deployment" status to match expectation`, "a webhook server's Deployment"},
		{"[sig-network] Services should serve endpoints [Conformance]", "service is not reachable within 2m0s timeout", "a Service did not carry"},
		{"[sig-network] Services should have session affinity work [Conformance]", `nc: getaddrinfo for host "affinity-clusterip" port 80: Name does not resolve`, "cluster DNS"},
		{"[sig-node] Probing container should restart [Conformance]", "Back-off restarting failed container app", "a container crashed"},
		{"[sig-apps] Job should run [Conformance]", "Timed out after 300.000s.\nexpected pod to be running", "a timeout waiting for a pod"},
		{"[sig-cli] Kubectl should print [Conformance]", "expected \"a\" to equal \"b\"", "other"},
	} {
		if got := causeOf(c.spec, c.text); !strings.HasPrefix(got.Name, c.want) {
			t.Errorf("%s with %q: cause %q, want %q…", c.spec, c.text, got.Name, c.want)
		}
	}
	s, err := Read(strings.NewReader(report), Options{NameContains: "[Conformance]"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range s.Causes {
		n += len(g.Specs)
	}
	if n != s.Failed {
		t.Errorf("%d failures have a cause, want all %d: %+v", n, s.Failed, s.Causes)
	}
	var b strings.Builder
	s.Write(&b, 1)
	if !strings.Contains(b.String(), "waits on: issue 25: cri-fake's image catalog\n") {
		t.Errorf("the summary does not say what the pull failures wait on:\n%s", b.String())
	}
}
