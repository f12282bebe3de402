package oci_test

import (
	"bufio"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/server"
	"github.com/plugsim/plugsim/harness/trace"
)

// TestProgramExitAndOOM: a program's own exit code is the container's; one past its memory
// limit is killed by the kernel's OOM killer and reported OOMKilled, 137, as containerd reports it.
func TestProgramExitAndOOM(t *testing.T) {
	n := startNode(t, nil)
	pod, podCfg := n.pod(t, "exits", nil)
	exit3 := n.run(t, pod, podCfg, "exit3", nil, "exit", "3")
	if st := n.waitExited(t, exit3); st.GetExitCode() != 3 || st.GetReason() != "Error" {
		t.Errorf("exit 3: got %d %q, want 3 Error", st.GetExitCode(), st.GetReason())
	}
	hog := n.run(t, pod, podCfg, "hog", func(c *runtimeapi.ContainerConfig) {
		c.Linux.Resources = &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 32 << 20}
	}, "alloc", "256")
	st := n.waitExited(t, hog)
	if st.GetExitCode() != 137 || st.GetReason() != "OOMKilled" {
		t.Errorf("past its memory limit: got %d %q, want 137 OOMKilled", st.GetExitCode(), st.GetReason())
	}
}

// TestProgramStats: ContainerStats of a program container are its cgroup's figures.
func TestProgramStats(t *testing.T) {
	n := startNode(t, nil)
	pod, podCfg := n.pod(t, "stats", nil)
	id := n.run(t, pod, podCfg, "user", func(c *runtimeapi.ContainerConfig) {
		c.Linux.Resources = &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 256 << 20, OomScoreAdj: -997} // a Guaranteed pod's
	}, "alloc", "48")
	waitFor(t, "the allocation", func() bool {
		return logHas(readLog(t, filepath.Join(podCfg.LogDirectory, "user.log")), "stdout", "allocated 48 MiB")
	})
	resp, err := n.rt.ContainerStats(ctx(t), &runtimeapi.ContainerStatsRequest{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	ws := resp.GetStats().GetMemory().GetWorkingSetBytes().GetValue()
	cpu := resp.GetStats().GetCpu().GetUsageCoreNanoSeconds().GetValue()
	if ws < 48<<20 || ws > 200<<20 {
		t.Errorf("working set %d bytes: want the 48 MiB the program touched plus its runtime", ws)
	}
	if cpu == 0 {
		t.Errorf("CPU usage 0: want the cgroup's cpuacct figure")
	}
	list, err := n.rt.ListContainerStats(ctx(t), &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{Id: id}})
	if err != nil || len(list.GetStats()) != 1 || list.GetStats()[0].GetMemory().GetWorkingSetBytes().GetValue() < 48<<20 {
		t.Errorf("ListContainerStats: %v %v", list, err)
	}
}

// TestProgramSecurity: the CRI's user, groups, capabilities, no_new_privs, seccomp profile,
// read-only root, environment, working directory and hostname are what the process runs with.
func TestProgramSecurity(t *testing.T) {
	n := startNode(t, nil)
	pod, podCfg := n.pod(t, "secure", nil)
	id := n.run(t, pod, podCfg, "locked", func(c *runtimeapi.ContainerConfig) {
		sc := c.Linux.SecurityContext
		sc.RunAsUser = &runtimeapi.Int64Value{Value: 65532}
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: 65532}
		sc.SupplementalGroups = []int64{1234}
		sc.NoNewPrivs = true
		sc.ReadonlyRootfs = true
		sc.Capabilities = &runtimeapi.Capability{DropCapabilities: []string{"ALL"}, AddCapabilities: []string{"NET_BIND_SERVICE"}}
		sc.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
		c.Envs = []*runtimeapi.KeyValue{{Key: "GREETING", Value: []byte("hi")}}
		c.WorkingDir = "/tmp"
	}, "print", "up")
	res, err := n.rt.ExecSync(ctx(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"/progtest", "status"}, Timeout: 30})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.GetStdout())
	for _, want := range []string{"Uid:\t65532\t65532\t65532\t65532", "Gid:\t65532\t65532\t65532\t65532", "Groups:\t1234",
		"CapBnd:\t0000000000000400", "NoNewPrivs:\t1", "Seccomp:\t2", "Env: hi", "Cwd: /tmp", "Hostname: secure"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the process's status:\n%s", want, out)
		}
	}
	res, err = n.rt.ExecSync(ctx(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"/progtest", "write", "/data/x", "y"}, Timeout: 30})
	if err != nil || res.GetExitCode() == 0 || !strings.Contains(string(res.GetStderr()), "read-only file system") {
		t.Errorf("a write to the read-only root: exit %d, %q, %v", res.GetExitCode(), res.GetStderr(), err)
	}
}

// TestProgramPortForwardAndExec: a server in a program container is reached by PortForward in
// the pod's network namespace, and a streaming exec session gets its output and exit code.
func TestProgramPortForwardAndExec(t *testing.T) {
	n := startNode(t, nil)
	pod, podCfg := n.pod(t, "server", nil)
	n.run(t, pod, podCfg, "web", nil, "serve", "8080")
	waitFor(t, "the server", func() bool {
		return logHas(readLog(t, filepath.Join(podCfg.LogDirectory, "web.log")), "stdout", "listening on 8080")
	})
	here, there := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- n.srv.Runtime().SessionRuntime().PortForward(ctx(t), pod, 8080, there) }()
	line, err := bufio.NewReader(here).ReadString('\n')
	if err != nil || line != "hello from server\n" {
		t.Errorf("through PortForward: %q, %v", line, err)
	}
	here.Close()
	<-done

	// A streaming exec session, without and with a terminal (runc's console socket): the output
	// and the exit code.
	id := n.containerID(t, pod, "web")
	for _, tty := range []bool{false, true} {
		var out strings.Builder
		outW := nopCloser{&out}
		err := n.srv.Runtime().SessionRuntime().Exec(ctx(t), id, []string{"/progtest", "cat", "/etc/hostname"}, nil, outW, nil, tty, nil)
		if err != nil || strings.TrimSpace(out.String()) != "server" {
			t.Errorf("exec (tty %v): %q, %v", tty, out.String(), err)
		}
	}
	err = n.srv.Runtime().SessionRuntime().Exec(ctx(t), id, []string{"/progtest", "exit", "7"}, nil, nil, nil, false, nil)
	if err == nil || !strings.Contains(err.Error(), "exited with 7") {
		t.Errorf("exec exiting 7: %v", err)
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// containerID finds a container of a pod by name.
func (n *node) containerID(t testing.TB, pod, name string) string {
	t.Helper()
	resp, err := n.rt.ListContainers(ctx(t), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: pod}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range resp.GetContainers() {
		if c.GetMetadata().GetName() == name {
			return c.GetId()
		}
	}
	t.Fatalf("no container %s in pod %s", name, pod)
	return ""
}

// TestMixedPod: one pod holds a simulated container and a program container; only the program
// container's calls cross to runc, and a pod whose RuntimeClass handler is plugsim-gvisor runs
// the program image in the simulation (a generic silent process), never in runc.
func TestMixedPod(t *testing.T) {
	n := startNode(t, nil)
	pod, podCfg := n.pod(t, "mixed", nil)
	sim := n.run(t, pod, podCfg, "sim", func(c *runtimeapi.ContainerConfig) {
		c.Image.Image = "busybox"
		c.Command = []string{"sh", "-c", "echo simulated; sleep 3600"}
	})
	prog := n.run(t, pod, podCfg, "prog", nil, "print", "real")
	waitFor(t, "both logs", func() bool {
		return logHas(readLog(t, filepath.Join(podCfg.LogDirectory, "sim.log")), "stdout", "simulated") &&
			logHas(readLog(t, filepath.Join(podCfg.LogDirectory, "prog.log")), "stdout", "real")
	})
	if len(ociMethods(n, sim)) != 0 || len(ociMethods(n, prog)) == 0 {
		t.Errorf("runc calls: simulated container %v, program container %v", ociMethods(n, sim), ociMethods(n, prog))
	}

	gv, gvCfg := n.pod(t, "gvisor", func(c *runtimeapi.PodSandboxConfig) {
		c.Annotations = map[string]string{"test/handler": "plugsim-gvisor"}
	})
	// The simulation runs the image's entrypoint as a generic program: it starts, prints nothing
	// and waits for a signal.
	id := n.run(t, gv, gvCfg, "prog", nil, "print", "real")
	if st := n.status(t, id); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("program image under plugsim-gvisor: %v, want RUNNING in the simulation", st.GetState())
	}
	if l := readLog(t, filepath.Join(gvCfg.LogDirectory, "prog.log")); strings.Contains(l, "real") {
		t.Errorf("the program really ran under plugsim-gvisor: %q", l)
	}
	for _, ev := range n.srv.Recorder().Events() {
		if ev.Interface == trace.OCI && ev.Attrs["containerID"] == id {
			t.Errorf("a plugsim-gvisor container crossed to runc: %+v", ev)
		}
	}
}

// TestProgramAttachAndStdin: a container with stdin reads what an attached session sends.
func TestProgramAttachAndStdin(t *testing.T) {
	n := startNode(t, nil)
	pod, podCfg := n.pod(t, "attach", nil)
	id := n.run(t, pod, podCfg, "echo", func(c *runtimeapi.ContainerConfig) { c.Stdin, c.StdinOnce = true, true }, "echo")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- n.srv.Runtime().SessionRuntime().Attach(ctx(t), id, inR, outW, nil, false, nil)
	}()
	go func() {
		io.WriteString(inW, "ping\n")
		inW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Errorf("attached: %q, %v", line, err)
	}
	if st := n.waitExited(t, id); st.GetExitCode() != 0 {
		t.Errorf("after stdin closed: exit %d", st.GetExitCode())
	}
	<-done
}

// TestProgramsAfterRestart: a cri-fake restarted on its state dir starts its running program
// containers again from the beginning (as the simulation restarts its commands), and its Close
// leaves no runc container behind.
func TestProgramsAfterRestart(t *testing.T) {
	state := t.TempDir()
	var opts server.Options
	n := startNode(t, func(o *server.Options) {
		o.StateDir = state
		opts = *o
	})
	pod, podCfg := n.pod(t, "restart", nil)
	id := n.run(t, pod, podCfg, "long", nil, "print", "once")
	logPath := filepath.Join(podCfg.LogDirectory, "long.log")
	waitFor(t, "the first run", func() bool { return strings.Count(readLog(t, logPath), "stdout F once") == 1 })
	n.srv.Close()
	if list := n.runcList(t); len(list) != 0 {
		t.Fatalf("runc still has %v after Close", list)
	}
	n.start(t, opts)
	if st := n.status(t, id); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("after the restart: %v", st.GetState())
	}
	waitFor(t, "the second run", func() bool { return strings.Count(readLog(t, logPath), "stdout F once") == 2 })
	if list := n.runcList(t); len(list) != 1 || list[0].ID != id || list[0].Status != "running" {
		t.Errorf("runc after the restart: %+v", list)
	}
}

// TestNothingLeftBehind: after a pod's removal and the server's close, no runc container,
// bundle, process or cgroup of the node remains.
func TestNothingLeftBehind(t *testing.T) {
	n := startNode(t, nil)
	pod, podCfg := n.pod(t, "tidy", nil)
	id := n.run(t, pod, podCfg, "a", nil, "print", "x")
	st, err := n.runcPid(t, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.rt.StopPodSandbox(ctx(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.rt.RemovePodSandbox(ctx(t), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: pod}); err != nil {
		t.Fatal(err)
	}
	n.srv.Close()
	if list := n.runcList(t); len(list) != 0 {
		t.Errorf("runc containers left: %+v", list)
	}
	if ents, _ := os.ReadDir(filepath.Join(n.root, "oci", "bundles")); len(ents) != 0 {
		t.Errorf("bundles left: %v", ents)
	}
	if _, err := os.Stat("/proc/" + st); err == nil {
		t.Errorf("the container's process %s is still there", st)
	}
	matches, _ := filepath.Glob("/sys/fs/cgroup/*/" + n.cgroup)
	more, _ := filepath.Glob("/sys/fs/cgroup/*/*/*/" + n.cgroup)
	if len(matches)+len(more) != 0 {
		t.Errorf("cgroups left: %v %v", matches, more)
	}
}

// runcPid is the pid runc reports for a container.
func (n *node) runcPid(t testing.TB, id string) (string, error) {
	for _, s := range n.runcList(t) {
		if s.ID == id {
			return strconv.Itoa(s.Pid), nil
		}
	}
	return "", os.ErrNotExist
}

// TestProgramStopGrace: StopContainer sends the stop signal, and SIGKILL once the timeout has
// passed when the program ignores it (137), as containerd does.
func TestProgramStopGrace(t *testing.T) {
	n := startNode(t, nil)
	pod, podCfg := n.pod(t, "stubborn", nil)
	id := n.run(t, pod, podCfg, "ignorer", nil, "ignore")
	waitFor(t, "the program's start", func() bool {
		return logHas(readLog(t, filepath.Join(podCfg.LogDirectory, "ignorer.log")), "stdout", "ignoring SIGTERM")
	})
	start := time.Now()
	if _, err := n.rt.StopContainer(ctx(t), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 2}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	st := n.waitExited(t, id)
	if st.GetExitCode() != 137 || took < 2*time.Second {
		t.Errorf("stop after %v: exit %d, want 137 after the 2 s timeout", took, st.GetExitCode())
	}
	var kills []string
	for _, ev := range n.srv.Recorder().Events() {
		if ev.Interface == trace.OCI && ev.Method == "kill" && ev.Attrs["containerID"] == id {
			kills = append(kills, ev.Attrs["args"])
		}
	}
	if len(kills) != 2 || !strings.HasSuffix(kills[0], " 15") || !strings.HasSuffix(kills[1], " 9") {
		t.Errorf("runc kills %q: want the stop signal (15), then 9", kills)
	}
}
