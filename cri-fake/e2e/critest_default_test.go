//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCritestDefault runs critest v1.37.0's DEFAULT spec set (no focus) against cri-fake with the
// process simulation, inside a throw-away network namespace that acts as the host: cri-fake runs
// with --netns=real and the example conflist (examples/cni/10-plugsim.conflist) switched to
// cni-fake's veth mode, chained with the real portmap, so the port-mapping specs go through real
// veths and iptables DNAT. critest runs in the same namespace (nsenter), since it connects to the
// pods, to 127.0.0.1:<hostPort> and to the streaming server there. Nothing routes out of it.
//
// Every spec's outcome is pinned: the ones in critestDefaultFailures fail, the ones in
// critestDefaultSkips skip, every other one passes, and cri-fake is still running at the end. A
// spec that moves (a new failure, a new pass, a new skip) fails the test, naming the spec and the
// list to update. The failures need kernel features the simulation does not fake;
// cri-fake/README.md says which.
func TestCritestDefault(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the default critest run needs real network namespaces, veths and iptables: run as root")
	}
	critest := tool(t, "critest")
	tool(t, "cni-fake")
	tool(t, "portmap")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed: %v", err)
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Fatalf("nsenter (util-linux) is needed: %v", err)
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Fatalf("iptables is needed by portmap: %v", err)
	}
	// The new namespace's loopback starts down; the host-port specs connect to 127.0.0.1.
	f := startFakeWrapped(t, []string{unshare, "--net", "sh", "-c", `ip link set lo up && exec "$0" "$@"`}, "--netns", "real")
	writeVethConflist(t, f)

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	start := time.Now()
	jsonReport := filepath.Join(os.TempDir(), "cri-fake-critest-default.json")
	cmd := exec.CommandContext(ctx, nsenter, "--net=/proc/"+strconv.Itoa(f.pid)+"/ns/net", critest,
		"--runtime-endpoint", f.endpoint, "--image-endpoint", f.endpoint,
		"-ginkgo.no-color", "-ginkgo.v", "-ginkgo.json-report", jsonReport)
	cmd.Dir = f.dir
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	report := filepath.Join(os.TempDir(), "cri-fake-critest-default.out")
	os.WriteFile(report, out, 0o644)
	m := regexp.MustCompile(`(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("critest printed no summary (err %v):\n%s", err, out)
	}
	passed, _ := strconv.Atoi(string(m[1]))
	failed, _ := strconv.Atoi(string(m[2]))
	skipped, _ := strconv.Atoi(string(m[4]))
	t.Logf("critest v1.37.0 default spec set: %d passed, %d failed, %d skipped in %v (full output: %s, JSON report: %s)", passed, failed, skipped, wall.Round(time.Second), report, jsonReport)
	for _, name := range specsWith(out, `\[FAIL\]`) {
		t.Logf("failed: %s", name)
	}
	select {
	case <-f.exited:
		t.Errorf("cri-fake exited during critest (a crash):\n%s", f.log)
	default:
	}
	outcomes := readSpecOutcomes(t, jsonReport)
	for _, moved := range movedSpecs(outcomes, critestDefaultFailures(), critestDefaultSkips()) {
		t.Error(moved)
	}
	if n := len(critestDefaultFailures()); failed != n {
		t.Errorf("critest reports %d failed, the pinned list has %d", failed, n)
	}
}

// critestDefaultFailures are the specs of critest v1.37.0's default set that fail on cri-fake
// (run by `make e2e-cri`), each for a kernel feature the simulation does not fake
// (cri-fake/README.md, "What critest's default set fails and why"): none since issue 16's
// features (OOM, IPC, capabilities, seccomp, no_new_privs, mount propagation) are simulated.
func critestDefaultFailures() []string {
	return []string{}
}

// critestDefaultSkips are the specs critest v1.37.0 skips against cri-fake in its default set:
// its own verdicts on what the runtime reports (no NRI socket, AppArmor disabled on the host, no
// handler with user namespaces, recursive read-only mounts Unimplemented, no
// SupplementalGroupsPolicy feature, no CRI metrics) and the benchmark specs it leaves out without
// -benchmark. The AppArmor ones are the host's verdict (AppArmor is disabled on the VM the lists
// were taken on): on a host with AppArmor those nine run, and the test names each as moved.
func critestDefaultSkips() []string {
	return []string{
		"[k8s.io] AppArmor runtime should prefer new apparmor field should enforce a apparmor_profile blocking writes",
		"[k8s.io] AppArmor runtime should prefer new apparmor field should fail with an unloaded apparmor_profile",
		"[k8s.io] AppArmor runtime should prefer new apparmor field should work with apparmor profile",
		"[k8s.io] AppArmor runtime should support apparmor field should enforce a apparmor_profile blocking writes",
		"[k8s.io] AppArmor runtime should support apparmor field should enforce a permissive deprecated profile",
		"[k8s.io] AppArmor runtime should support apparmor field should fail with an unloaded apparmor_profile",
		"[k8s.io] AppArmor runtime should support deprecated apparmor_profile field should enforce a apparmor_profile blocking writes",
		"[k8s.io] AppArmor runtime should support deprecated apparmor_profile field should enforce a permissive deprecated profile",
		"[k8s.io] AppArmor runtime should support deprecated apparmor_profile field should fail with an unloaded apparmor_profile",
		"[k8s.io] Container Mount Readonly runtime should support readonly mounts should reject a recursive readonly mount with PROPAGATION_BIDIRECTIONAL",
		"[k8s.io] Container Mount Readonly runtime should support readonly mounts should reject a recursive readonly mount with PROPAGATION_HOST_TO_CONTAINER",
		"[k8s.io] Container Mount Readonly runtime should support readonly mounts should reject a recursive readonly mount with ReadOnly: false",
		"[k8s.io] Container Mount Readonly runtime should support readonly mounts should support recursive readonly mounts",
		"[k8s.io] Container benchmark about operations on Container benchmark about basic operations on Container",
		"[k8s.io] Image benchmark about operations on Image benchmark about basic operations on Image",
		"[k8s.io] Image benchmark about operations on Image benchmark about listing Image",
		"[k8s.io] NRI CreateContainer contract should fail CreateContainer when the NRI hook errors, leak nothing, and allow retry",
		"[k8s.io] NRI CreateContainer contract should not expose container while CreateContainer hook is in progress",
		"[k8s.io] NRI RunPodSandbox contract should fail RunPodSandbox and clean up when the NRI hook errors, then allow retry",
		"[k8s.io] NRI RunPodSandbox contract should not expose sandbox while RunPodSandbox hook is in progress",
		"[k8s.io] NRI RunPodSandbox contract should not start workload containers until RunPodSandbox hook completes",
		"[k8s.io] NRI StopPodSandbox contract should handle StopPodSandbox idempotently and never reuse sandbox",
		"[k8s.io] NRI StopPodSandbox contract should stop all workload containers and keep sandbox accessible while StopPodSandbox hook is in progress",
		"[k8s.io] NRI container lifecycle (failed container) should receive CreateContainer, StartContainer, StopContainer, and RemoveContainer for a container that exits with a non-zero code",
		"[k8s.io] NRI container lifecycle should receive CreateContainer, StartContainer, StopContainer, and RemoveContainer in strict order with correct metadata",
		"[k8s.io] NRI plugin synchronization should receive a callback for container created during the Synchronize call",
		"[k8s.io] NRI plugin synchronization should receive information about all containers without the race condition during initialization",
		"[k8s.io] NRI plugin synchronization should synchronize a newly connected plugin with existing pods and containers",
		"[k8s.io] NRI pod sandbox lifecycle should receive RunPodSandbox, StopPodSandbox, and RemovePodSandbox in strict order with correct metadata",
		"[k8s.io] PodSandbox benchmark about operations on PodSandbox benchmark about lifecycle of PodSandbox",
		"[k8s.io] PodSandbox benchmark about start a container from scratch benchmark about start a container from scratch",
		"[k8s.io] PodSandbox runtime should support metrics operations runtime should support listing pod sandbox metrics [Conformance]",
		"[k8s.io] PodSandbox runtime should support metrics operations runtime should support returning metrics descriptors [Conformance]",
		"[k8s.io] Security Context SupplementalGroupsPolicy when SupplementalGroupsPolicy=Merge (Default) if the container's primary UID belongs to some groups in the image, runtime should add SupplementalGroups to them",
		"[k8s.io] Security Context SupplementalGroupsPolicy when SupplementalGroupsPolicy=Strict even if the container's primary UID belongs to some groups in the image, runtime should not add SupplementalGroups to them",
		"[k8s.io] Security Context UserNamespaces when Host idmap mount support is needed runtime should support NamespaceMode_POD",
		"[k8s.io] Security Context UserNamespaces when Host idmap mount support is not needed runtime should fail if container ID 0 is not mapped",
		"[k8s.io] Security Context UserNamespaces when Host idmap mount support is not needed runtime should fail if more than one mapping provided",
		"[k8s.io] Security Context UserNamespaces when Host idmap mount support is not needed runtime should fail with NamespaceMode_CONTAINER",
		"[k8s.io] Security Context UserNamespaces when Host idmap mount support is not needed runtime should fail with NamespaceMode_TARGET",
		"[k8s.io] Security Context UserNamespaces when Host idmap mount support is not needed runtime should support NamespaceMode_NODE",
	}
}

// specOutcome is one spec's full name (its containers' texts and its own) and its state as
// ginkgo's JSON report gives it ("passed", "failed", "skipped", "panicked", ...).
type specOutcome struct{ name, state string }

// readSpecOutcomes reads the It specs of a ginkgo JSON report (-ginkgo.json-report).
func readSpecOutcomes(t *testing.T, path string) []specOutcome {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("critest wrote no JSON report: %v", err)
	}
	var reports []struct {
		SpecReports []struct {
			ContainerHierarchyTexts []string
			LeafNodeText            string
			LeafNodeType            string
			State                   string
		}
	}
	if err := json.Unmarshal(b, &reports); err != nil {
		t.Fatalf("critest's JSON report: %v", err)
	}
	var out []specOutcome
	for _, r := range reports {
		for _, sr := range r.SpecReports {
			if sr.LeafNodeType != "It" {
				continue
			}
			out = append(out, specOutcome{strings.Join(append(sr.ContainerHierarchyTexts, sr.LeafNodeText), " "), sr.State})
		}
	}
	if len(out) == 0 {
		t.Fatalf("critest's JSON report %s lists no specs", path)
	}
	return out
}

// movedSpecs compares the outcomes with the pinned lists: a spec must fail if it is in failures,
// skip if it is in skips, and pass otherwise. It returns one message per spec that moved, and per
// pinned spec critest no longer has.
func movedSpecs(outcomes []specOutcome, failures, skips []string) []string {
	want := map[string]string{}
	for _, n := range failures {
		want[n] = "failed"
	}
	for _, n := range skips {
		want[n] = "skipped"
	}
	var moved []string
	seen := map[string]bool{}
	for _, o := range outcomes {
		seen[o.name] = true
		w, ok := want[o.name]
		if !ok {
			w = "passed"
		}
		if o.state == w {
			continue
		}
		list := "critestDefaultFailures or critestDefaultSkips"
		switch {
		case w == "failed" || o.state == "failed":
			list = "critestDefaultFailures (and the failures in cri-fake/README.md)"
		case w == "skipped" || o.state == "skipped":
			list = "critestDefaultSkips"
		}
		moved = append(moved, fmt.Sprintf("spec %q: pinned as %s, now %s; if that is right, update %s in cri-fake/e2e/critest_default_test.go", o.name, w, o.state, list))
	}
	for _, n := range append(append([]string{}, failures...), skips...) {
		if !seen[n] {
			moved = append(moved, fmt.Sprintf("spec %q is pinned but critest did not report it (renamed or removed?): update cri-fake/e2e/critest_default_test.go", n))
		}
	}
	sort.Strings(moved)
	return moved
}

// writeVethConflist drops the example conflist with cni-fake in veth mode and its data and log in
// the test's directory.
func writeVethConflist(t *testing.T, f *fake) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "cni", "10-plugsim.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	var list map[string]any
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	plugins := list["plugins"].([]any)
	first := plugins[0].(map[string]any)
	first["mode"] = "veth"
	first["dataDir"] = filepath.Join(f.dir, "cni-data")
	first["logFile"] = filepath.Join(f.dir, "cni.jsonl")
	if last := plugins[len(plugins)-1].(map[string]any); last["type"] != "portmap" {
		t.Fatalf("examples/cni/10-plugsim.conflist no longer ends with portmap: %v", last)
	}
	b, _ = json.Marshal(list)
	if err := os.WriteFile(filepath.Join(f.confDir, "10-plugsim.conflist"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// specsWith lists the spec names of ginkgo's summary lines marked with tag ([FAIL]).
func specsWith(out []byte, tag string) []string {
	re := regexp.MustCompile(`(?m)^\s*` + tag + ` (.+)$`)
	var names []string
	for _, m := range re.FindAllSubmatch(out, -1) {
		names = append(names, strings.TrimSpace(string(m[1])))
	}
	sort.Strings(names)
	return names
}

// movedSpecs names each spec that moved, and only those.
func TestMovedSpecsNamesEachMove(t *testing.T) {
	outcomes := []specOutcome{{"a", "passed"}, {"b", "failed"}, {"c", "skipped"}, {"d", "passed"}, {"e", "failed"}}
	got := movedSpecs(outcomes, []string{"b", "d", "gone"}, []string{"c"})
	want := []string{`spec "d": pinned as failed, now passed`, `spec "e": pinned as passed, now failed`, `spec "gone" is pinned but critest did not report it`}
	if len(got) != len(want) {
		t.Fatalf("moved = %q, want %d messages", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("moved[%d] = %q, want it to start with %q", i, got[i], want[i])
		}
	}
	if moved := movedSpecs(outcomes[:3], []string{"b"}, []string{"c"}); len(moved) != 0 {
		t.Errorf("nothing moved, but: %q", moved)
	}
}
