package oci

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/runtime"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// Options configure the program launcher.
type Options struct {
	// Runc is the runc binary.
	Runc string
	// ProgramDir holds the programs the catalog names (images.Program.Binary): the only host
	// files a program container can run.
	ProgramDir string
	// StateDir holds the bundles (bundles/<id>), runc's state (runc/) and runc's logs (logs/);
	// it is made owner-only.
	StateDir string
	// CgroupParent is the cgroup the containers' cgroups are made in (see cgroups).
	CgroupParent string
	// Handlers are the runtime handlers (RuntimeClass) whose pods hand program images to runc;
	// nil means DefaultHandlers. A pod of any other handler runs every image in Fallback.
	Handlers []string
	// Fallback runs every other container (the process simulation, runtime.NewSimulated).
	Fallback runtime.Launcher
	// Observe is told of every runc call (the OCI lane of cri-fake's trace).
	Observe func(Call)
	// Logf reports what fails no call (a delete that failed after an exit).
	Logf func(format string, args ...any)
}

// DefaultHandlers are the handlers whose pods run program images under runc: the default
// handler (no RuntimeClass) and "runc", containerd's name for it. cri-fake's other handler,
// plugsim-gvisor, stands for a sandboxed runtime: its pods run every image in the simulation,
// so a RuntimeClass visibly picks the low-level runtime.
var DefaultHandlers = []string{"", "runc"}

// Launcher is a runtime.Launcher that hands the containers of program images (in pods of its
// handlers) to runc and every other container to Fallback. A pod may hold both kinds.
type Launcher struct {
	opts    Options
	runc    *Runc
	bundles string
	cg      *cgroups
	minOOM  int    // the lowest oom_score_adj runc can give (SpecInput.MinOOMScoreAdj)
	held    uint64 // the capabilities this process holds (SpecInput.HeldCapabilities)

	mu    sync.Mutex
	tasks map[string]*programTask // running or ending program containers, by container ID
	owned map[string]string       // program containers created and not yet removed → their sandbox
	wg    sync.WaitGroup          // the tasks' exit handlers
}

var _ runtime.Launcher = (*Launcher)(nil)

// New checks the options (runc and the program directory exist, cgroups are usable), makes the
// state directory and makes this process a child subreaper.
func New(opts Options) (*Launcher, error) {
	if opts.Fallback == nil {
		return nil, errors.New("oci: Options.Fallback is required")
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Handlers == nil {
		opts.Handlers = DefaultHandlers
	}
	if opts.CgroupParent == "" {
		opts.CgroupParent = "plugsim-cri-fake"
	}
	if st, err := os.Stat(opts.Runc); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("runc %q is not an executable file (make runc builds bin/runc): %v", opts.Runc, err)
	}
	if st, err := os.Stat(opts.ProgramDir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("program directory %q: %v", opts.ProgramDir, err)
	}
	if opts.StateDir == "" {
		return nil, errors.New("oci: Options.StateDir is required")
	}
	l := &Launcher{opts: opts, bundles: filepath.Join(opts.StateDir, "bundles"), tasks: map[string]*programTask{}, owned: map[string]string{}}
	for _, d := range []string{opts.StateDir, l.bundles, filepath.Join(opts.StateDir, "runc"), filepath.Join(opts.StateDir, "logs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, err
		}
	}
	var err error
	if l.cg, err = newCgroups(opts.CgroupParent); err != nil {
		return nil, err
	}
	if err := l.writeCgroups(); err != nil {
		return nil, err
	}
	l.minOOM = minOOMScoreAdj()
	l.held = heldCapabilities()
	if err := subreaper(); err != nil {
		return nil, fmt.Errorf("become a child subreaper: %w", err)
	}
	l.runc = &Runc{Binary: opts.Runc, Root: filepath.Join(opts.StateDir, "runc"), LogDir: filepath.Join(opts.StateDir, "logs"), Observe: opts.Observe}
	return l, nil
}

// Runc is the runc driver the launcher uses.
func (l *Launcher) Runc() *Runc { return l.runc }

// CgroupDirs are the directories of the containers' parent cgroup, one per hierarchy.
func (l *Launcher) CgroupDirs() []string { return l.cg.Dirs() }

// Handlers are the runtime handlers whose pods run program images under runc.
func (l *Launcher) Handlers() []string { return slices.Clone(l.opts.Handlers) }

// isProgram tells whether a container runs under runc: its image names a program and its pod's
// handler is one of the launcher's.
func (l *Launcher) isProgram(ts task.Spec) bool {
	return ts.Image.Config != nil && ts.Image.Config.Program != nil && slices.Contains(l.opts.Handlers, ts.RuntimeHandler)
}

// programFile is the program's host path, refused unless it is an executable regular file of
// the program directory (not a symlink out of it).
func (l *Launcher) programFile(ts task.Spec) (string, error) {
	p := ts.Image.Config.Program
	file := filepath.Join(l.opts.ProgramDir, p.Binary)
	st, err := os.Lstat(file)
	if err != nil {
		return "", fmt.Errorf("image %s runs the program %q, which is not in %s (make programs builds it): %w", ts.Image.ID, p.Binary, l.opts.ProgramDir, err)
	}
	if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("program %s is not an executable regular file", file)
	}
	return file, nil
}

// Validate checks at CreateContainer what would make a program container fail to start: the
// program, the user, the mounts, the seccomp profile, the network namespace.
func (l *Launcher) Validate(ts task.Spec) error {
	if !l.isProgram(ts) {
		return l.opts.Fallback.Validate(ts)
	}
	in, err := l.specInput(ts, bundle{dir: filepath.Join(l.bundles, ts.ContainerID)})
	if err != nil {
		return err
	}
	if _, err := GenerateSpec(in); err != nil {
		return err
	}
	l.own(ts)
	return nil
}

// own records a program container until ReleaseContainer.
func (l *Launcher) own(ts task.Spec) {
	l.mu.Lock()
	l.owned[ts.ContainerID] = ts.SandboxID
	l.mu.Unlock()
}

func (l *Launcher) specInput(ts task.Spec, b bundle) (SpecInput, error) {
	file, err := l.programFile(ts)
	if err != nil {
		return SpecInput{}, err
	}
	netns := ts.NetNS
	if ts.SandboxConfig.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE {
		netns = ""
	} else if !ts.RealNetNS {
		netns = "" // a placeholder file: withNamespaces refuses the container
	}
	res := ts.Resources
	if res == nil {
		res = ts.Config.GetLinux().GetResources()
	}
	return SpecInput{
		ContainerID: ts.ContainerID, SandboxID: ts.SandboxID, Config: ts.Config, Sandbox: ts.SandboxConfig,
		Image: ts.Image.Config, ProgramFile: file, NetNS: netns, CgroupsPath: l.cg.path(ts.ContainerID),
		Resources: res, ResolvConf: b.resolvConf(), Hostname: b.hostname(), MinOOMScoreAdj: l.minOOM, HeldCapabilities: l.held,
	}, nil
}

// Start writes the container's bundle and has runc create and start it. A container restored
// after a cri-fake restart starts again from the beginning, as a simulated one does: whatever
// is left of its earlier run (a runc container that outlived a killed cri-fake, its bundle) is
// deleted first.
func (l *Launcher) Start(ctx context.Context, ts task.Spec) (task.Task, error) {
	if !l.isProgram(ts) {
		return l.opts.Fallback.Start(ctx, ts)
	}
	// runc's steps are not cut off half way by the caller's deadline: a create killed while it
	// mounts would leave more behind than one that finishes and is then deleted.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	b := bundle{dir: filepath.Join(l.bundles, ts.ContainerID)}
	if ts.Restored {
		l.deleteLeftover(ctx, ts.ContainerID)
	}
	l.own(ts)
	t, err := l.start(ctx, ts, b)
	if err != nil {
		b.remove()
		return nil, err
	}
	return t, nil
}

func (l *Launcher) start(ctx context.Context, ts task.Spec, b bundle) (*programTask, error) {
	in, err := l.specInput(ts, b)
	if err != nil {
		return nil, err
	}
	spec, err := GenerateSpec(in)
	if err != nil {
		return nil, err
	}
	if err := b.writeRoot(ts.Image.Config.Program); err != nil {
		return nil, fmt.Errorf("write the bundle: %w", err)
	}
	if err := b.writeNetworkFiles(ts.SandboxConfig); err != nil {
		return nil, fmt.Errorf("write the bundle: %w", err)
	}
	if err := b.writeConfig(spec); err != nil {
		return nil, fmt.Errorf("write the bundle: %w", err)
	}
	t, err := newProgramTask(l, ts, b, spec)
	if err != nil {
		return nil, err
	}
	if err := t.create(ctx); err != nil {
		return nil, runcFailed("create", err)
	}
	if err := l.runc.Start(ctx, ts.ContainerID); err != nil {
		t.abandon(ctx)
		return nil, runcFailed("start", err)
	}
	l.mu.Lock()
	l.tasks[ts.ContainerID] = t
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t.wait()
		l.mu.Lock()
		delete(l.tasks, ts.ContainerID)
		l.mu.Unlock()
	}()
	return t, nil
}

// runcFailed words a failed create or start as containerd reports it from StartContainer (runc's
// own message begins "runc create failed: ").
func runcFailed(method string, err error) error {
	return fmt.Errorf("failed to create containerd task: failed to create shim task: OCI runtime %s failed: %w: unknown", method, err)
}

// deleteLeftover removes a runc container and bundle of this ID from an earlier run (runc is
// asked only when its state directory holds the container).
func (l *Launcher) deleteLeftover(ctx context.Context, id string) {
	if _, err := os.Stat(filepath.Join(l.runc.Root, id)); err != nil {
		bundle{dir: filepath.Join(l.bundles, id)}.remove()
		return
	}
	if _, err := l.runc.State(ctx, id); err == nil {
		if err := l.runc.Delete(ctx, id, true); err != nil {
			l.opts.Logf("delete the runc container %s left from before the restart: %v", id, err)
		}
	}
	bundle{dir: filepath.Join(l.bundles, id)}.remove()
}

// DialPort connects to a port in the sandbox's network namespace: the fallback's dial reaches
// the real namespace (--netns real), where program containers listen as simulated servers do.
// Without real namespaces a program container can only be in a host-network pod, whose ports are
// the node's.
func (l *Launcher) DialPort(ctx context.Context, sandboxID, netns string, realNetNS bool, port int32) (net.Conn, error) {
	l.mu.Lock()
	programs := false
	for _, sb := range l.owned {
		programs = programs || sb == sandboxID
	}
	l.mu.Unlock()
	conn, err := l.opts.Fallback.DialPort(ctx, sandboxID, netns, realNetNS, port)
	if err != nil && programs && !realNetNS && netns == "" {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	}
	return conn, err
}

// ReleaseContainer removes what a program container left: its runc container (force-deleted if
// still there) and its bundle.
func (l *Launcher) ReleaseContainer(id string) {
	l.opts.Fallback.ReleaseContainer(id)
	l.mu.Lock()
	_, owned := l.owned[id]
	delete(l.owned, id)
	l.mu.Unlock()
	if !owned {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l.deleteLeftover(ctx, id)
}

// ReleaseSandbox is the fallback's: program containers keep nothing per sandbox.
func (l *Launcher) ReleaseSandbox(id string) { l.opts.Fallback.ReleaseSandbox(id) }

// Close waits (up to 30 s) for the program containers' exit handlers, which delete their runc
// containers, then removes the parent cgroup if it is empty. The runtime kills every task before.
func (l *Launcher) Close() {
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		l.opts.Logf("program containers still ending after 30 s; cri-fake closes without them")
	}
	l.cg.removeParent()
	if c, ok := l.opts.Fallback.(interface{ Close() }); ok {
		c.Close()
	}
}
