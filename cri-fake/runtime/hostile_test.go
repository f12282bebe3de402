package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/store"
	"github.com/plugsim/plugsim/internal/victimtest"
)

// hostileCRIIDs are sandbox and container IDs a client may send that would leave the state
// directory (<state>/sandboxes/<id>.json, <state>/containers/<id>.json) or the root directory
// (<root>/pods/<id>/logs, <root>/netns/cni-<id>) if one were ever joined to a path. cri-fake makes
// every ID itself, so a client's ID is only looked up.
func hostileCRIIDs(victim string) []string {
	return []string{
		"../victim",
		"../../victim/secret",
		"..",
		".",
		"/",
		victim,
		filepath.Join(victim, "secret"),
		"a/../../victim",
		"id\x00../victim",
		strings.Repeat("a", 256),             // one component over NAME_MAX
		strings.Repeat("../", 1366) + victim, // over PATH_MAX
	}
}

// TestHostileIDsNeverReachTheStateDir sends every hostile ID to every CRI call that takes a
// sandbox or container ID, with a pod and a container in the state directory: each is NotFound
// (or OK where containerd answers an unknown ID with OK: StopContainer, RemoveContainer,
// StopPodSandbox, RemovePodSandbox), and the state directory, the root directory and a victim beside them are as
// they were.
func TestHostileIDsNeverReachTheStateDir(t *testing.T) {
	base := t.TempDir()
	stateDir, victim := filepath.Join(base, "state"), filepath.Join(base, "victim")
	os.MkdirAll(victim, 0o755)
	os.WriteFile(filepath.Join(victim, "secret"), []byte("keep"), 0o644)
	os.WriteFile(filepath.Join(victim, "secret.json"), []byte("{}"), 0o644)
	var rootDir string
	s := newService(t, func(o *Options) {
		o.Persister = store.FileState{Dir: stateDir}
		rootDir = o.RootDir
	})
	pod := runPod(t, s, "p")
	startContainer(t, s, createContainer(t, s, pod, "c"))
	before := victimtest.Tree(t, base)
	root := victimtest.Tree(t, rootDir)

	ctx := context.Background()
	c := func(_ any, err error) error { return err }
	calls := []struct {
		name  string
		okToo bool // an unknown ID is OK here, as in containerd
		call  func(id string) error
	}{
		{"StartContainer", false, func(id string) error {
			return c(s.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}))
		}},
		{"StopContainer", true, func(id string) error {
			return c(s.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id}))
		}},
		{"RemoveContainer", true, func(id string) error {
			return c(s.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}))
		}},
		{"ContainerStatus", false, func(id string) error {
			return c(s.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id}))
		}},
		{"UpdateContainerResources", false, func(id string) error {
			return c(s.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: &runtimeapi.LinuxContainerResources{}}))
		}},
		{"ReopenContainerLog", false, func(id string) error {
			return c(s.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}))
		}},
		{"ContainerStats", false, func(id string) error {
			return c(s.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: id}))
		}},
		{"ExecSync", false, func(id string) error {
			return c(s.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"true"}}))
		}},
		{"Exec", false, func(id string) error {
			return c(s.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"true"}, Stdout: true}))
		}},
		{"Attach", false, func(id string) error {
			return c(s.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id, Stdout: true}))
		}},
		{"CreateContainer", false, func(id string) error {
			return c(s.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: id, Config: containerConfig("h"), SandboxConfig: podConfig("p")}))
		}},
		{"StopPodSandbox", true, func(id string) error {
			return c(s.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}))
		}},
		{"RemovePodSandbox", true, func(id string) error {
			return c(s.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}))
		}},
		{"PodSandboxStatus", false, func(id string) error {
			return c(s.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id}))
		}},
		{"PodSandboxStats", false, func(id string) error {
			return c(s.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: id}))
		}},
		{"UpdatePodSandboxResources", false, func(id string) error {
			return c(s.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: id}))
		}},
		{"PortForward", false, func(id string) error {
			return c(s.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: id, Port: []int32{80}}))
		}},
	}
	for _, id := range hostileCRIIDs(victim) {
		for _, rpc := range calls {
			err := rpc.call(id)
			if code := status.Code(err); code != codes.NotFound && !(rpc.okToo && code == codes.OK) {
				t.Errorf("%s(%.60q): %v, want NotFound", rpc.name, id, err)
			}
		}
	}
	if now := victimtest.Tree(t, base); now != before {
		t.Fatalf("the state directory or the victim beside it changed:\nbefore:\n%s\nafter:\n%s", before, now)
	}
	if now := victimtest.Tree(t, rootDir); now != root {
		t.Fatalf("the root directory changed:\nbefore:\n%s\nafter:\n%s", root, now)
	}
	if got := containerState(t, s, s.Containers().List()[0].ID).State; got != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("the container is %v after the hostile calls, want running", got)
	}
}

// TestOverlongLogPathsStayInLogDirectory: a log_path with a component over NAME_MAX or a whole
// path over PATH_MAX is refused at CreateContainer with InvalidArgument (containerd checks
// neither and fails only when the log is opened); one just under both limits is accepted;
// nothing is created outside the log directory.
func TestOverlongLogPathsStayInLogDirectory(t *testing.T) {
	root := t.TempDir()
	logDir := filepath.Join(root, "pods", "default_p_uid")
	os.MkdirAll(logDir, 0o755)
	os.MkdirAll(filepath.Join(root, "victim"), 0o755)
	before := victimtest.Tree(t, filepath.Join(root, "victim"))
	for _, lp := range []string{
		strings.Repeat("l", 256),
		"c/" + strings.Repeat("l", 256) + ".log",
		strings.Repeat("d/", 2100) + "0.log",
	} {
		s := newService(t)
		_, _, err := createWithLogPath(t, s, logDir, lp)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "_MAX") {
			t.Errorf("CreateContainer with a log_path of %d bytes: %v, want InvalidArgument naming the limit", len(lp), err)
		}
	}
	s := newService(t)
	_, resp, err := createWithLogPath(t, s, logDir, "c/"+strings.Repeat("l", 251)+".log")
	if err != nil {
		t.Fatalf("a 255-byte log file name: %v", err)
	}
	startContainer(t, s, resp.ContainerId)
	if _, err := s.ReopenContainerLog(context.Background(), &runtimeapi.ReopenContainerLogRequest{ContainerId: resp.ContainerId}); err != nil {
		t.Errorf("ReopenContainerLog of a 255-byte log file name: %v", err)
	}
	if now := victimtest.Tree(t, filepath.Join(root, "victim")); now != before {
		t.Fatalf("the victim changed:\n%s", now)
	}
	es, _ := os.ReadDir(root)
	if len(es) != 2 {
		t.Fatalf("%s holds %d entries, want pods and victim", root, len(es))
	}
}
