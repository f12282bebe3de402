package runtime

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// simTaskOf is the simulated task of a started container.
func simTaskOf(t *testing.T, s *Service, id string) *simTask {
	t.Helper()
	c, err := s.containers.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := c.Task().(*simTask)
	if !ok {
		t.Fatalf("container %s: task %T, want the simulation's", id, c.Task())
	}
	return st
}

// processGoroutines are the IDs of the goroutines that run a simulated program (sleep, pause)
// or that the kernel model started for a process. Sets, not counts: a process of a test before
// may still be ending while this one counts.
func processGoroutines() map[string]bool {
	buf := make([]byte, 64<<20)
	ids := map[string]bool{}
	for g := range strings.SplitSeq(string(buf[:goruntime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "applets.appletSleep(") || strings.Contains(g, "libbb.Pause(") ||
			strings.Contains(g, "created by github.com/plugsim/plugsim/cri-fake/process/kernel.(*container).run") {
			id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
			ids[id] = true
		}
	}
	return ids
}

// newSince counts the IDs of now that were not in before.
func newSince(before, now map[string]bool) int {
	n := 0
	for id := range now {
		if !before[id] {
			n++
		}
	}
	return n
}

// A container whose program only waits (sleep, pause) is dormant once its start is due: no
// goroutine, no process, no file system view, no attach fan-out, until something looks at it.
// Its stats are the model's, without starting it. Then it is a process as if it had run all
// along (exec sees it in ps, started when the container did, with the same figures), and a dormant sleep ends at its end with 0, a TERM ends it with 143 and a
// dormant pause gets its TERM from its handler, without any of them having been simulated.
// A node of 30,000 of them (cri-fake/server's BenchmarkLargeNode) held one goroutine and about
// 8 KB of simulation each before.
func TestDormantContainerHoldsNoProcess(t *testing.T) {
	s := newService(t, func(o *Options) {
		l := NewSimulated()
		l.StartLatency = time.Millisecond
		o.Launcher = l
	})
	pod, logDir := simPodRun(t, s, "dormant")
	base := processGoroutines()
	const n = 40
	ids := make([]string, n)
	for i := range ids {
		cmd := []string{"sleep", "3600"}
		if i%2 == 1 {
			cmd = []string{"sleep", "infinity"}
		}
		ids[i] = runCmd(t, s, pod, "c"+string(rune('a'+i%26))+string(rune('a'+i/26)), cmd...)
	}
	tasks := make([]*simTask, n)
	for i, id := range ids {
		tasks[i] = simTaskOf(t, s, id)
	}
	waitFor(t, func() bool {
		for _, tk := range tasks {
			if !tk.dormant() {
				return false
			}
		}
		return true
	})
	if got := newSince(base, processGoroutines()); got > 0 {
		t.Fatalf("%d dormant sleeps: %d goroutines of simulated processes, want none", n, got)
	}
	for i, tk := range tasks {
		tk.mu.Lock()
		live, spec, ready := tk.live, tk.procSpec, tk.ready
		tk.mu.Unlock()
		// The first container of an image and command builds one spec to look its command up
		// (execlookup.Cache); the others build none. Nobody waits on it: no channel either.
		if live != nil || (spec != nil && i > 0) || ready != nil {
			t.Fatalf("dormant container %d holds its process, attach fan-out and file system %v, spec %v, channel %v", i, live != nil, spec != nil, ready != nil)
		}
		if st := containerState(t, s, ids[i]); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("dormant container %d: %v, want RUNNING", i, st.State)
		}
	}

	// Its stats are the model's without starting it (the kubelet's CRI stats provider lists
	// them every 10 s), and they are the figures the started process then reports.
	stats := func(id string) *runtimeapi.ContainerStats {
		t.Helper()
		r, err := s.ContainerStats(context.Background(), &runtimeapi.ContainerStatsRequest{ContainerId: id})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetStats()
	}
	woken := tasks[3]
	dormantStats := stats(ids[3])
	if !woken.dormant() || dormantStats.GetMemory().GetWorkingSetBytes().GetValue() == 0 {
		t.Fatalf("ContainerStats of a dormant container: still dormant %v, memory %v", woken.dormant(), dormantStats.GetMemory())
	}

	// Looked at, it is a process that has run since its start.
	since := woken.doze.since
	r, err := execSync(t, s, ids[3], 0, "ps")
	if err != nil || r.ExitCode != 0 || !bytes.Contains(r.Stdout, []byte("sleep infinity")) {
		t.Fatalf("ps in a dormant container: %q %q, %v", r.GetStdout(), r.GetStderr(), err)
	}
	if woken.dormant() || woken.process() == nil {
		t.Fatal("an exec did not wake the dormant container")
	}
	if got := woken.process().Processes()[0].Started; !got.Equal(since) {
		t.Fatalf("the woken sleep started at %v, want when it went dormant, %v", got, since)
	}
	wokenStats := stats(ids[3])
	// The same but for the /etc files the started process's view writes (hosts, hostname,
	// resolv.conf: 1,340 bytes here) and its HOSTNAME variable, which the dormant one has not.
	if d, w := dormantStats.GetMemory().GetWorkingSetBytes().GetValue(), wokenStats.GetMemory().GetWorkingSetBytes().GetValue(); d > w || w-d > 4096 {
		t.Errorf("memory dormant %d, woken %d: want the same figure within the view's few KB", d, w)
	}
	if d, w := dormantStats.GetCpu().GetUsageCoreNanoSeconds().GetValue(), wokenStats.GetCpu().GetUsageCoreNanoSeconds().GetValue(); w < d {
		t.Errorf("CPU time dormant %d, woken %d: want it to go on from the dormant figure", d, w)
	}
	waitFor(t, func() bool { return newSince(base, processGoroutines()) >= 1 })
	if got := newSince(base, processGoroutines()); got != 1 {
		t.Fatalf("one woken sleep: %d new goroutines of simulated processes, want 1", got)
	}

	// Stopped while dormant: TERM ends a sleep with 143, without simulating it.
	if _, err := s.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: ids[0], Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	if st := containerState(t, s, ids[0]); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 143 || tasks[0].process() != nil {
		t.Fatalf("a dormant sleep stopped: %v %d (simulated %v), want EXITED 143 without a process", st.State, st.ExitCode, tasks[0].process() != nil)
	}
	// A woken one is stopped as a process.
	if err := woken.Kill(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if st := waitExited(t, s, ids[3]); st.ExitCode != 143 {
		t.Fatalf("the woken sleep stopped: %d, want 143", st.ExitCode)
	}

	// A short sleep ends at its end with 0, never simulated (its task is taken at once: the
	// store forgets it at the end, 2 s later).
	short := runCmd(t, s, pod, "short", "sleep", "2")
	shortTask := simTaskOf(t, s, short)
	if st := waitExited(t, s, short); st.ExitCode != 0 || st.Reason != "Completed" {
		t.Fatalf("a dormant sleep 2: exit %d %q, want 0 Completed", st.ExitCode, st.Reason)
	}
	if shortTask.process() != nil {
		t.Fatal("a sleep 2 nothing looked at was simulated")
	}

	// A dormant pause handles TERM: it is woken to take it, prints, and exits 0.
	const pauseImage = "registry.k8s.io/pause:3.10"
	if _, err := s.images.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: pauseImage}}); err != nil {
		t.Fatal(err)
	}
	cfg := containerConfig("pause")
	cfg.Image, cfg.Command = &runtimeapi.ImageSpec{Image: pauseImage}, nil
	resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	startContainer(t, s, resp.ContainerId)
	pause := simTaskOf(t, s, resp.ContainerId)
	waitFor(t, pause.dormant)
	if _, err := s.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: resp.ContainerId, Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	if st := containerState(t, s, resp.ContainerId); st.ExitCode != 0 {
		t.Fatalf("a dormant pause stopped: exit %d, want 0 from its handler", st.ExitCode)
	}
	if b, _ := os.ReadFile(filepath.Join(logDir, "pause", "0.log")); !bytes.Contains(b, []byte("Shutting down, got signal: Terminated")) {
		t.Fatalf("a dormant pause stopped: log %q, want its handler's line", b)
	}
}
