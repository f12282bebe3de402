package oci_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/trace"
)

// ociMethods are the runc commands the trace recorded for a container, in order.
func ociMethods(n *node, id string) []string {
	var out []string
	for _, ev := range n.srv.Recorder().Events() {
		if ev.Interface == trace.OCI && ev.Attrs["containerID"] == id {
			out = append(out, ev.Method)
		}
	}
	return out
}

// TestProgramLifecycle runs a program container through the CRI: its output in the CRI log,
// exec of a command its root has and of one it lacks (containerd's error), a graceful stop, and
// removal, which leaves no runc container, bundle or cgroup.
func TestProgramLifecycle(t *testing.T) {
	n := startNode(t, nil)
	pod, podCfg := n.pod(t, "life", nil)
	id := n.run(t, pod, podCfg, "printer", nil, "print", "hello", "world")
	logPath := filepath.Join(podCfg.LogDirectory, "printer.log")
	waitFor(t, "the program's output in its CRI log", func() bool {
		l := readLog(t, logPath)
		return logHas(l, "stdout", "world") && logHas(l, "stderr", "world!")
	})
	if st := n.status(t, id); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING || st.GetLogPath() != logPath {
		t.Fatalf("status %v, log path %q", st.GetState(), st.GetLogPath())
	}

	res, err := n.rt.ExecSync(ctx(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"/progtest", "status"}, Timeout: 30})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.GetStdout())
	// containerd's default capability set: chown dac_override fowner fsetid kill setgid setuid
	// setpcap net_bind_service net_raw sys_chroot mknod audit_write setfcap = 0xa80425fb.
	for _, want := range []string{"Uid:\t0\t0\t0\t0", "CapEff:\t00000000a80425fb", "NoNewPrivs:\t0", "Hostname: life"} {
		if !strings.Contains(out, want) {
			t.Errorf("exec status: no %q in\n%s", want, out)
		}
	}
	_, err = n.rt.ExecSync(ctx(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"ls", "/"}, Timeout: 30})
	if status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), `OCI runtime exec failed: exec failed: unable to start container process: exec: "ls": executable file not found in $PATH`) {
		t.Errorf("exec of a command the root lacks: %v, want containerd's Unknown with runc's executable file not found", err)
	}

	if _, err := n.rt.StopContainer(ctx(t), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	st := n.waitExited(t, id)
	if st.GetExitCode() != 0 || st.GetReason() != "Completed" {
		t.Errorf("stopped: exit %d %q, want 0 Completed (the program ends on SIGTERM)", st.GetExitCode(), st.GetReason())
	}
	if _, err := n.rt.RemoveContainer(ctx(t), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if list := n.runcList(t); len(list) != 0 {
		t.Errorf("runc still has %v after RemoveContainer", list)
	}
	if _, err := os.Stat(filepath.Join(n.root, "oci", "bundles", id)); !os.IsNotExist(err) {
		t.Errorf("bundle left after RemoveContainer: %v", err)
	}
	methods := ociMethods(n, id)
	for _, want := range []string{"create", "start", "exec", "kill", "delete"} {
		if !slices.Contains(methods, want) {
			t.Errorf("trace of runc calls %v: no %s", methods, want)
		}
	}
}
