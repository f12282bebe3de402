package runtime

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unsafe"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/plugsim/plugsim/cri-fake/images"
)

// simPodRun runs a sandbox whose log directory is a temp dir and returns its ID and that directory.
func simPodRun(t *testing.T, s *Service, name string) (string, string) {
	t.Helper()
	cfg := podConfig(name)
	cfg.LogDirectory = t.TempDir()
	resp, err := s.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return resp.PodSandboxId, cfg.LogDirectory
}

// runCmd creates and starts a busybox container running cmd.
func runCmd(t *testing.T, s *Service, pod, name string, cmd ...string) string {
	t.Helper()
	cfg := containerConfig(name)
	cfg.Command = cmd
	resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	if err != nil {
		t.Fatalf("CreateContainer %v: %v", cmd, err)
	}
	startContainer(t, s, resp.ContainerId)
	return resp.ContainerId
}

// waitExited waits for a container to be EXITED and returns its status.
func waitExited(t *testing.T, s *Service, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	c, err := s.containers.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Exited():
	case <-time.After(20 * time.Second):
		t.Fatalf("container %s did not exit", id)
	}
	return containerState(t, s, id)
}

func execSync(t *testing.T, s *Service, id string, timeout int64, cmd ...string) (*runtimeapi.ExecSyncResponse, error) {
	t.Helper()
	return s.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: timeout})
}

// An exec probe (the kubelet's ExecSync of `cat /tmp/healthy`) passes or fails with the file.
func TestSimulatedExecProbe(t *testing.T) {
	s := newService(t)
	pod, _ := simPodRun(t, s, "probe")
	id := runCmd(t, s, pod, "app", "sleep", "3600")
	for _, step := range []struct {
		cmd      []string
		code     int32
		inStdout string
	}{
		{[]string{"cat", "/tmp/healthy"}, 1, ""},
		{[]string{"touch", "/tmp/healthy"}, 0, ""},
		{[]string{"cat", "/tmp/healthy"}, 0, ""},
		{[]string{"sh", "-c", "echo ok > /tmp/healthy"}, 0, ""},
		{[]string{"cat", "/tmp/healthy"}, 0, "ok"},
		{[]string{"rm", "/tmp/healthy"}, 0, ""},
		{[]string{"cat", "/tmp/healthy"}, 1, ""},
	} {
		resp, err := execSync(t, s, id, 5, step.cmd...)
		if err != nil {
			t.Fatalf("%v: %v", step.cmd, err)
		}
		if resp.ExitCode != step.code || !strings.Contains(string(resp.Stdout), step.inStdout) {
			t.Fatalf("%v: exit %d stdout %q stderr %q, want exit %d with %q", step.cmd, resp.ExitCode, resp.Stdout, resp.Stderr, step.code, step.inStdout)
		}
	}
}

func TestSimulatedExecSyncErrors(t *testing.T) {
	s := newService(t)
	pod, _ := simPodRun(t, s, "errs")
	id := runCmd(t, s, pod, "app", "sleep", "3600")
	_, err := execSync(t, s, id, 1, "sleep", "31")
	wantCode(t, err, codes.DeadlineExceeded)
	// The timed-out command is gone from the process table (pgrep does not list itself).
	resp, err := execSync(t, s, id, 5, "pgrep", "-f", "sleep 31")
	if err != nil || len(bytes.TrimSpace(resp.Stdout)) != 0 || resp.ExitCode != 1 {
		t.Fatalf("timed-out sleep still listed: %v %q", err, resp.GetStdout())
	}
	_, err = execSync(t, s, id, 5, "no-such-tool")
	wantCode(t, err, codes.Unknown)
	if !strings.Contains(err.Error(), "executable file not found in $PATH") {
		t.Fatalf("missing executable: %v", err)
	}
}

func TestSimulatedExits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cmd    []string
		code   int32
		reason string
		log    []string
	}{
		{"completed", []string{"sh", "-c", "echo done"}, 0, "Completed", []string{" stdout F done"}},
		{"error", []string{"sh", "-c", "echo about to fail; sleep 0.1; echo oops >&2; exit 1"}, 1, "Error", []string{" stdout F about to fail", " stderr F oops"}},
		{"partial last line", []string{"printf", "no newline"}, 0, "Completed", []string{" stdout P no newline"}},
		{"not found in sh", []string{"sh", "-c", "nope"}, 127, "Error", []string{"nope: not found"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t)
			pod, logDir := simPodRun(t, s, "exits")
			id := runCmd(t, s, pod, "app", tc.cmd...)
			st := waitExited(t, s, id)
			if st.ExitCode != tc.code || st.Reason != tc.reason || st.FinishedAt < st.StartedAt || st.FinishedAt == 0 {
				t.Fatalf("got exit %d %q started %d finished %d, want %d %q", st.ExitCode, st.Reason, st.StartedAt, st.FinishedAt, tc.code, tc.reason)
			}
			b, err := os.ReadFile(filepath.Join(logDir, "app", "0.log"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.log {
				if !strings.Contains(string(b), want) {
					t.Fatalf("log lacks %q:\n%s", want, b)
				}
			}
			// CRI log format: <RFC3339Nano> <stream> <F|P> <content>
			line, _, _ := strings.Cut(string(b), "\n")
			ts, _, _ := strings.Cut(line, " ")
			if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
				t.Fatalf("log line %q: timestamp: %v", line, err)
			}
		})
	}
}

func TestSimulatedStartErrors(t *testing.T) {
	s := newService(t)
	pod, _ := simPodRun(t, s, "start")
	cfg := containerConfig("missing")
	cfg.Command = []string{"no-such-binary"}
	resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: resp.ContainerId})
	wantCode(t, err, codes.Unknown)
	if !strings.Contains(err.Error(), `exec: "no-such-binary": executable file not found in $PATH`) {
		t.Fatalf("start error: %v", err)
	}
	if st := containerState(t, s, resp.ContainerId); st.ExitCode != 128 || st.Reason != "StartError" {
		t.Fatalf("after a failed start: %d %q", st.ExitCode, st.Reason)
	}
	// An unknown user fails the create, as containerd's spec generation does.
	cfg = containerConfig("nouser")
	cfg.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "nobody-here"}}
	_, err = s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	wantCode(t, err, codes.Unknown)
}

func TestSimulatedStop(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cmd     []string
		timeout int64
		code    int32
		minWait time.Duration
	}{
		{"trap ends cleanly on TERM", []string{"sh", "-c", "trap 'echo bye; exit 0' TERM; echo ready; while true; do sleep 1; done"}, 30, 0, 0},
		{"TERM ignored, KILL after the timeout", []string{"sh", "-c", "trap '' TERM; echo ready; while true; do sleep 1; done"}, 1, 137, time.Second},
		{"sleep ends on TERM", []string{"sleep", "3600"}, 30, 143, 0},
		{"timeout 0 kills", []string{"sleep", "3600"}, 0, 137, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t)
			pod, logDir := simPodRun(t, s, "stop")
			id := runCmd(t, s, pod, "app", tc.cmd...)
			if strings.Contains(tc.cmd[len(tc.cmd)-1], "echo ready") {
				// A signal sent before the trap is set would end the shell, as in a real container.
				waitFor(t, func() bool {
					b, _ := os.ReadFile(filepath.Join(logDir, "app", "0.log"))
					return bytes.Contains(b, []byte("ready"))
				})
			}
			start := time.Now()
			if _, err := s.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: tc.timeout}); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			st := containerState(t, s, id)
			if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != tc.code {
				t.Fatalf("got %v %d, want EXITED %d", st.State, st.ExitCode, tc.code)
			}
			if took < tc.minWait {
				t.Fatalf("stopped after %v: the stop timeout was not waited for", took)
			}
		})
	}
}

func TestSimulatedReopenLog(t *testing.T) {
	s := newService(t)
	pod, logDir := simPodRun(t, s, "logs")
	silent := runCmd(t, s, pod, "silent", "sleep", "3600")
	// A silent process has no file yet; ReopenContainerLog (the kubelet calls it when it finds
	// none) creates it.
	if _, err := s.ReopenContainerLog(context.Background(), &runtimeapi.ReopenContainerLogRequest{ContainerId: silent}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(logDir, "silent", "0.log")); err != nil {
		t.Fatalf("log file after ReopenContainerLog: %v", err)
	}
	id := runCmd(t, s, pod, "app", "sh", "-c", "i=0; while true; do echo line $i; i=$((i+1)); sleep 0.05; done")
	path := filepath.Join(logDir, "app", "0.log")
	waitFor(t, func() bool { b, _ := os.ReadFile(path); return bytes.Contains(b, []byte("line 1")) })
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReopenContainerLog(context.Background(), &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { b, _ := os.ReadFile(path); return bytes.Contains(b, []byte(" stdout F line ")) })
	old, _ := os.ReadFile(path + ".1")
	// Two more lines reach the new file after that read: a writer still appending to the
	// rotated file would have grown it by then.
	lines := func() int { b, _ := os.ReadFile(path); return bytes.Count(b, []byte("\n")) }
	n := lines()
	waitFor(t, func() bool { return lines() >= n+2 })
	again, _ := os.ReadFile(path + ".1")
	if !bytes.Equal(old, again) {
		t.Fatalf("the rotated file still grows after ReopenContainerLog: %d bytes, then %d", len(old), len(again))
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func TestSimulatedSessions(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	if _, err := s.images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "registry.k8s.io/e2e-test-images/nginx:1.14-2"}}); err != nil {
		t.Fatal(err)
	}
	pod, _ := simPodRun(t, s, "sessions")
	id := runCmd(t, s, pod, "app", "sleep", "3600")
	rt := s.SessionRuntime()

	var out bytes.Buffer
	if err := rt.Exec(ctx, id, []string{"sh", "-c", "echo hello; exit 3"}, nil, nopCloser{&out}, nopCloser{io.Discard}, false, nil); err == nil {
		t.Fatal("exit 3 is not an error")
	} else {
		var ce utilexec.CodeExitError
		if !errors.As(err, &ce) || ce.Code != 3 {
			t.Fatalf("exit 3: %v", err)
		}
	}
	if out.String() != "hello\n" {
		t.Fatalf("exec stdout %q", out.String())
	}

	// Attach: a stdin-reading shell gets the session's input.
	cfg := containerConfig("shell")
	cfg.Command, cfg.Stdin, cfg.StdinOnce = []string{"sh"}, true, true
	resp, err := s.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	startContainer(t, s, resp.ContainerId)
	var aout bytes.Buffer
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- rt.Attach(ctx, resp.ContainerId, pr, nopCloser{&lockedWriter{w: &aout}}, nil, false, nil)
	}()
	pw.Write([]byte("echo -n hello\n"))
	pw.Close()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if aout.String() != "hello" {
		t.Fatalf("attach output %q", aout.String())
	}

	// Port-forward reaches nginx through the pod's listener registry.
	ncfg := containerConfig("web")
	ncfg.Image = &runtimeapi.ImageSpec{Image: "registry.k8s.io/e2e-test-images/nginx:1.14-2"}
	ncfg.Command = nil
	nresp, err := s.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: ncfg})
	if err != nil {
		t.Fatal(err)
	}
	startContainer(t, s, nresp.ContainerId)
	var body string
	waitFor(t, func() bool {
		local, remote := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- rt.PortForward(ctx, pod, 80, remote); remote.Close() }()
		local.SetDeadline(time.Now().Add(5 * time.Second))
		local.Write([]byte("GET / HTTP/1.0\r\nHost: x\r\n\r\n"))
		b, _ := io.ReadAll(bufio.NewReader(local))
		local.Close()
		<-done
		body = string(b)
		return strings.Contains(body, "200 OK")
	})
	if !strings.Contains(body, "nginx") {
		t.Fatalf("port-forward to nginx: %q", body)
	}
}

type lockedWriter struct{ w io.Writer }

func (l *lockedWriter) Write(p []byte) (int, error) { return l.w.Write(p) }

// The image catalog's behaviour: exit with a code after a delay, memory shown in stats.
func TestSimulatedImageBehaviour(t *testing.T) {
	cat, err := images.NewCatalog(0, append(images.Builtin(), images.CatalogImage{
		Repositories: []string{"registry.example.com/job"}, Tags: []string{"v1"}, Cmd: []string{"sleep", "3600"},
		Behavior: []byte(`{"exitCode": 3, "exitAfter": "100ms", "memoryBytes": 67108864}`),
	})...)
	if err != nil {
		t.Fatal(err)
	}
	img := images.NewService(images.Options{Catalog: cat, FSPath: t.TempDir()})
	s, err := New(Options{RootDir: t.TempDir(), Images: img})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := context.Background()
	if _, err := img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "registry.example.com/job:v1"}}); err != nil {
		t.Fatal(err)
	}
	pod, _ := simPodRun(t, s, "job")
	cfg := containerConfig("job")
	cfg.Image = &runtimeapi.ImageSpec{Image: "registry.example.com/job:v1"}
	cfg.Command = nil
	resp, err := s.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	startContainer(t, s, resp.ContainerId)
	stats, err := s.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: resp.ContainerId})
	if err != nil {
		t.Fatal(err)
	}
	if ws := stats.Stats.Memory.WorkingSetBytes.Value; ws < 64<<20 {
		t.Fatalf("working set %d, want at least the behaviour's 64 MiB", ws)
	}
	if st := waitExited(t, s, resp.ContainerId); st.ExitCode != 3 || st.Reason != "Error" {
		t.Fatalf("exit %d %q, want 3 Error", st.ExitCode, st.Reason)
	}
}

// Every image of the example catalog starts, and the scripted ones end as their behaviour says.
func TestExampleCatalogImagesRun(t *testing.T) {
	cat, err := images.LoadCatalog("../../examples/cri/image-catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	img := images.NewService(images.Options{Catalog: cat, FSPath: t.TempDir()})
	s, err := New(Options{RootDir: t.TempDir(), Images: img})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := context.Background()
	pod, logDir := simPodRun(t, s, "catalog")
	exits := map[string]int32{"registry.example.com/tools/flaky-job:1.0": 3, "registry.example.com/broken/app:0.1": 2, "registry.example.com/tools/migrate:v3": 0}
	// What ps in the container shows once the command of a long-running image blocks: nginx's
	// workers start after its config is read and its ports bound; worker's sleep after its cat
	// and id; a generic program (/cart) blocks from the start.
	// (A ps line ends with TIME then COMMAND.)
	blocksIn := map[string]*regexp.Regexp{
		"registry.example.com/shop/frontend:2.4.1": regexp.MustCompile(`(?m) nginx: worker process$`),
		"registry.example.com/shop/unready:latest": regexp.MustCompile(`(?m) nginx: worker process$`),
		"registry.example.com/shop/cart:1.0.0":     regexp.MustCompile(`(?m):[0-9]{2} /cart$`),
		"registry.example.com/tools/chatty:latest": regexp.MustCompile(`(?m):[0-9]{2} sleep 86400$`),
		"registry.example.com/shop/cache:7":        regexp.MustCompile(`(?m):[0-9]{2} sleep 86400$`),
		"registry.example.com/shop/worker:2":       regexp.MustCompile(`(?m):[0-9]{2} sleep 86400$`),
	}
	for _, ci := range cat.Images() {
		if !strings.HasPrefix(ci.Repositories[0], "registry.example.com/") {
			continue // the built-in images
		}
		ref := ci.Repositories[0] + ":" + ci.Tags[0]
		t.Run(ref, func(t *testing.T) {
			if _, err := img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
				t.Fatal(err)
			}
			cfg := containerConfig(strings.NewReplacer("/", "-", ":", "-", ".", "-").Replace(ref))
			cfg.Image = &runtimeapi.ImageSpec{Image: ref}
			cfg.Command = nil
			resp, err := s.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			startContainer(t, s, resp.ContainerId)
			if want, ok := exits[ref]; ok {
				if st := waitExited(t, s, resp.ContainerId); st.ExitCode != want {
					t.Fatalf("exit %d, want %d", st.ExitCode, want)
				}
				return
			}
			if _, err := execSync(t, s, resp.ContainerId, 5, "true"); err != nil {
				t.Fatalf("exec in a running container: %v", err)
			}
			// Wait until the command has reached the part that blocks (its marker shows in ps):
			// from there only its behaviour or a signal ends it, so it must still be running.
			marker, ok := blocksIn[ref]
			if !ok {
				t.Fatalf("no entry in blocksIn for %s: name the process that shows in ps once its command blocks", ref)
			}
			var ps string
			waitFor(t, func() bool {
				r, err := execSync(t, s, resp.ContainerId, 5, "ps")
				if err == nil {
					ps = string(r.Stdout)
				}
				return marker.MatchString(ps)
			})
			if st := containerState(t, s, resp.ContainerId); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				b, _ := os.ReadFile(filepath.Join(logDir, cfg.LogPath))
				t.Fatalf("%v (exit %d) after ps matched %s:\n%s\nlog:\n%s", st.State, st.ExitCode, marker, ps, b)
			}
		})
	}
	b, _ := os.ReadFile(filepath.Join(logDir, "registry-example-com-shop-worker-2", "0.log"))
	if !strings.Contains(string(b), "queue=orders") || !strings.Contains(string(b), "uid=1500(worker)") {
		t.Fatalf("worker log:\n%s", b)
	}
}

// A process that ends by itself is reported as a STOPPED event carrying its exit.
func TestSimulatedExitEvent(t *testing.T) {
	s := newService(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &eventStream{ctx: ctx, ch: make(chan *runtimeapi.ContainerEventResponse, 100)}
	go s.GetContainerEvents(&runtimeapi.GetEventsRequest{}, st)
	for s.events.n.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	pod, _ := simPodRun(t, s, "ev")
	id := runCmd(t, s, pod, "job", "sh", "-c", "exit 7")
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-st.ch:
			if ev.ContainerId != id || ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
				continue
			}
			for _, cs := range ev.ContainersStatuses {
				if cs.Id == id && cs.State == runtimeapi.ContainerState_CONTAINER_EXITED && cs.ExitCode == 7 && cs.Reason == "Error" {
					return
				}
			}
			t.Fatalf("STOPPED event without the exit: %v", ev.ContainersStatuses)
		case <-deadline:
			t.Fatal("no STOPPED event for a container that exited by itself")
		}
	}
}

// Containers stopped before their start latency is up are passed over by the starter, and the
// ones scheduled after them still start on their own (nothing uses them to force a start) and
// run their command; the stopped ones end as killed before their command ran.
func TestSimulatedStarterSkipsStopped(t *testing.T) {
	s := newService(t, func(o *Options) {
		l := NewSimulated()
		l.StartLatency = 200 * time.Millisecond // long enough to stop the first ones before it
		o.Launcher = l
	})
	pod, logDir := simPodRun(t, s, "starter")
	var stopped []string
	for _, name := range []string{"a", "b"} {
		stopped = append(stopped, runCmd(t, s, pod, name, "sh", "-c", "echo ran"))
	}
	live := runCmd(t, s, pod, "c", "sh", "-c", "echo ran")
	for _, id := range stopped {
		if _, err := s.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 30}); err != nil {
			t.Fatal(err)
		}
		if st := containerState(t, s, id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 143 {
			t.Fatalf("stopped before its start: got %v %d, want EXITED 143", st.State, st.ExitCode)
		}
	}
	st := waitExited(t, s, live)
	if st.ExitCode != 0 || st.Reason != "Completed" {
		t.Fatalf("the container started after the stopped ones: got exit %d %q, want 0 Completed", st.ExitCode, st.Reason)
	}
	if b, err := os.ReadFile(filepath.Join(logDir, "c", "0.log")); err != nil || !bytes.Contains(b, []byte("stdout F ran")) {
		t.Fatalf("log of the container that started: %q, %v", b, err)
	}
	for _, name := range []string{"a", "b"} {
		if b, _ := os.ReadFile(filepath.Join(logDir, name, "0.log")); bytes.Contains(b, []byte("ran")) {
			t.Fatalf("container %s stopped before its start ran its command: %q", name, b)
		}
	}
}

// TestSimTaskFitsItsSizeClass: a node keeps one simTask per running container (30,000 in
// cri-fake/server's BenchmarkLargeNode); a field more takes it from the allocator's 384-byte
// class to the 416-byte one, a megabyte at that count.
func TestSimTaskFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(simTask{}); n > 384 {
		t.Fatalf("simTask is %d bytes, over the 384 of its size class", n)
	}
}
