package kernel

import (
	"context"
	"errors"
	"fmt"
	"log"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/vfs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// task is one entry of a container's process table: the main process, an exec,
// or a command a shell runs. Applets run as Go functions; a task's context is
// cancelled, with an exitStatus cause, when the task is terminated by a signal.
type task struct {
	c       *container
	pid     int
	ppid    int
	argv    []string
	name    string // comm: what pgrep and pidof match (argv may be rewritten, as nginx does)
	id      Identity
	started time.Time
	ctx     context.Context
	cancel  context.CancelCauseFunc
	mem     uint64
	image   int64 // its argv and environment, charged to the container (chargeImage; under mu)

	mu sync.Mutex
	// handler, when set, gets signals first (shell traps, servers); it returns
	// false for a signal it does not handle.
	handler func(sig syscall.Signal) bool
	// fg is the foreground child of a shell, also signalled as part of the
	// process group when the shell is.
	fg     map[*task]bool
	exited bool
}

// exitStatus is the cancellation cause of a terminated task.
type exitStatus struct{ code int }

func (e exitStatus) Error() string { return "exit status " + strconv.Itoa(e.code) }

func ExitCause(ctx context.Context) (int, bool) {
	var es exitStatus
	if errors.As(context.Cause(ctx), &es) {
		return es.code, true
	}
	return 0, false
}

// PIDNamespace is a process table: pids, and what ps, pgrep, pidof, kill and
// /proc see. Each container has its own unless the runtime shares one
// (Spec.PIDNamespace): all containers of a pod for PID namespace mode POD
// (the sandbox's pause is pid 1 there), or one for the node for mode NODE
// (hostPID), as CRI NamespaceOption.pid asks.
type PIDNamespace struct {
	mu      sync.Mutex
	tasks   map[int]*task
	nextPid int
}

// NewPIDNamespace returns an empty process table; the first process is pid 1.
func NewPIDNamespace() *PIDNamespace {
	return &PIDNamespace{tasks: map[int]*task{}, nextPid: 1}
}

// DefaultPidsLimit is how many processes a container may have at once when its resources name no
// pids.max: a fork past it fails with EAGAIN, as the kernel's pids cgroup controller makes it
// fail. The kubelet's podPidsLimit never reaches a runtime (the kubelet writes it to the pod's
// cgroup itself; CRI's LinuxContainerResources has no pids field), so a simulated container
// without this default could fork until cri-fake's memory ran out. 1024 processes of the
// simulation hold about 12 MB (TestPidsLimitBoundsMemory).
const DefaultPidsLimit = 1024

// MaxPidsLimit is the most processes cri-fake lets one container have, whatever its resources
// ask ("max" included): 4096 simulated processes hold about 50 MB of cri-fake.
const MaxPidsLimit = 4096

// PidsLimit is the pids limit of a container's resources: the cgroup v2 "pids.max" of
// LinuxContainerResources.unified ("max" or a count), at most MaxPidsLimit; 0 (none given, or
// not a number) means DefaultPidsLimit.
func PidsLimit(r *runtimeapi.LinuxContainerResources) int {
	v, ok := r.GetUnified()["pids.max"]
	if !ok {
		return 0
	}
	if v = strings.TrimSpace(v); v == "max" {
		return MaxPidsLimit
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0
	}
	return min(n, MaxPidsLimit)
}

// crashExitCode is how a simulated process ends when the simulation itself failed in it (a
// panic: a defect of cri-fake, not of the container): 139, the code of a process killed by
// SIGSEGV, which is what such a defect would be for a real program.
const CrashExitCode = 128 + int(syscall.SIGSEGV)

// recoverCrash is deferred first in every goroutine that runs a simulated process's code (its
// main goroutine, a spawned child, a background job, a server's accept loop). A panic there ends
// that process with crashExitCode and is logged with its stack instead of taking cri-fake and
// every other container down with it.
func (t *task) recoverCrash() {
	if r := recover(); r != nil {
		t.crashed(r)
	}
}

// crashed logs a recovered panic of t's code and ends t with crashExitCode.
func (t *task) crashed(r any) {
	t.c.logf("process: pid %d %q crashed on a defect of the simulation and ends with exit code %d: %v\n%s",
		t.pid, t.argvCopy(), CrashExitCode, r, debug.Stack())
	t.terminate(CrashExitCode)
}

func (t *task) argvCopy() []string {
	t.c.pidns.mu.Lock()
	defer t.c.pidns.mu.Unlock()
	return append([]string(nil), t.argv...)
}

// logf reports a defect of the simulation (Spec.Logf, else the standard logger).
func (c *container) logf(format string, args ...any) {
	if c.spec.Logf != nil {
		c.spec.Logf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// pidsLimit is the most processes the container may have at once.
func (c *container) pidsLimit() int {
	if c.spec.PidsLimit > 0 {
		return c.spec.PidsLimit
	}
	return DefaultPidsLimit
}

// fork takes one of the container's process slots for a process that has no table entry of its
// own (a pipeline element: ash forks a subshell for each); it fails with EAGAIN at the limit.
// release gives the slot back.
func (c *container) fork() error {
	ns := c.pidns
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if c.procs >= c.pidsLimit() {
		return syscall.EAGAIN
	}
	c.procs++
	return nil
}

func (c *container) release() {
	ns := c.pidns
	ns.mu.Lock()
	c.procs--
	ns.mu.Unlock()
}

// newTask adds a process to the table; it fails with EAGAIN when the container is at its pids
// limit (pids.max), as fork(2) does in a cgroup at its limit.
func (c *container) newTask(parent *task, argv []string, id Identity) (*task, error) {
	return c.newTaskIn(parent, argv, id, false)
}

// newTaskIn is newTask; with held the caller hands over a slot it took with fork, which the
// new task then holds (a pipeline subshell whose command takes its place).
func (c *container) newTaskIn(parent *task, argv []string, id Identity, held bool) (*task, error) {
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	if dead && parent == nil {
		return nil, ErrNotRunning
	}
	base := context.Background()
	ppid := 0
	if parent != nil {
		base = parent.ctx
		ppid = parent.pid
	}
	ns := c.pidns
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if !held {
		if c.procs >= c.pidsLimit() {
			return nil, syscall.EAGAIN
		}
		c.procs++
	}
	ctx, cancel := context.WithCancelCause(base)
	t := &task{c: c, pid: ns.nextPid, ppid: ppid, argv: append([]string(nil), argv...), name: comm(argv), id: id, started: time.Now(), ctx: ctx, cancel: cancel}
	t.mem = appletMemory(argv)
	ns.nextPid++
	ns.tasks[t.pid] = t
	return t, nil
}

// appletMemory is a plausible resident size for a process, so stats move when
// processes come and go.
func appletMemory(argv []string) uint64 {
	if len(argv) == 0 {
		return 0
	}
	switch base(argv[0]) {
	case "nginx", "httpd", "httpd-foreground":
		return 4 << 20
	case "agnhost":
		return 12 << 20
	case "pause":
		return 256 << 10
	}
	return 640 << 10
}

func (t *task) memory() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mem
}

func (t *task) exit(code int) {
	t.cancel(exitStatus{code})
	t.mu.Lock()
	already := t.exited
	t.exited = true
	t.mu.Unlock()
	if already {
		return
	}
	t.unchargeImage()
	ns := t.c.pidns
	ns.mu.Lock()
	delete(ns.tasks, t.pid)
	t.c.procs--
	ns.mu.Unlock()
}

func (t *task) terminate(code int) {
	t.cancel(exitStatus{code})
}

// ignoredByDefault are signals whose default action is to do nothing.
func ignoredByDefault(sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGCHLD, syscall.SIGWINCH, syscall.SIGURG, syscall.SIGCONT, 0:
		return true
	}
	return false
}

// signal delivers sig to t (and, as a process group, to a shell's foreground
// children). Stopping signals are not simulated and are ignored.
func (t *task) signal(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		t.terminate(128 + int(sig))
		return
	}
	if sig == syscall.SIGSTOP || sig == syscall.SIGTSTP || sig == syscall.SIGTTIN || sig == syscall.SIGTTOU {
		return
	}
	t.mu.Lock()
	h := t.handler
	var fg []*task
	for c := range t.fg {
		fg = append(fg, c)
	}
	t.mu.Unlock()
	isInit := t.pid == 1 && t.c.spec.InitSignalRule
	if !isInit {
		// Delivered as to a process group: a shell's foreground command gets
		// it too, so `sleep` is interrupted before a trap runs.
		for _, c := range fg {
			c.signal(sig)
		}
	}
	if h != nil && h(sig) {
		return
	}
	if ignoredByDefault(sig) || isInit {
		// The kernel drops signals a pid namespace's init has no handler for.
		return
	}
	t.terminate(128 + int(sig))
}

// signalFromInside delivers sig sent by a process of t's own pid namespace (kill from an exec
// or a shell's child). The namespace's init (pid 1) gets only the signals it has a handler for,
// and never KILL or STOP, which it cannot handle: pid_namespaces(7), "the only signals that can
// be sent to the namespace init process are those for which the init process has established a
// signal handler ... true even for privileged processes", and SIGKILL and SIGSTOP from inside
// are dropped too. So `kill -9 1` in a container does nothing to it. From outside (StopContainer,
// Process.Signal) signal applies, where KILL always ends it.
func (t *task) signalFromInside(sig syscall.Signal) {
	if t.pid != 1 {
		t.signal(sig)
		return
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGSTOP {
		return
	}
	t.mu.Lock()
	h := t.handler
	t.mu.Unlock()
	if h != nil && !ignoredByDefault(sig) {
		h(sig)
	}
}

func (t *task) setHandler(h func(sig syscall.Signal) bool) {
	t.mu.Lock()
	t.handler = h
	t.mu.Unlock()
}

func (t *task) addFg(c *task) {
	t.mu.Lock()
	if t.fg == nil {
		t.fg = map[*task]bool{}
	}
	t.fg[c] = true
	t.mu.Unlock()
}

func (t *task) removeFg(c *task) {
	t.mu.Lock()
	delete(t.fg, c)
	t.mu.Unlock()
}

// setArgv rewrites the command line shown in the process table (nginx and
// other daemons overwrite their argv); the comm name stays.
func (t *task) setArgv(argv []string) {
	t.c.pidns.mu.Lock()
	t.argv = argv
	t.c.pidns.mu.Unlock()
}

// execAs is exec(2): the task now runs argv, so its comm name changes too,
// as id (a set-user-ID program's owner: execIdentity).
func (t *task) execAs(argv []string, id Identity) {
	t.c.pidns.mu.Lock()
	t.argv = append([]string(nil), argv...)
	t.name = comm(argv)
	if id.setuid != t.id.setuid || id.euid != t.id.euid {
		t.id = id // written only when it changes; other tasks read it under pidns.mu (identity)
	}
	t.c.pidns.mu.Unlock()
	t.mu.Lock()
	t.mem = appletMemory(argv)
	t.mu.Unlock()
}

// setName sets the comm name (a daemon's worker processes keep the daemon's name).
func (t *task) setName(name string) {
	t.c.pidns.mu.Lock()
	t.name = name
	t.c.pidns.mu.Unlock()
}

// comm returns the comm name.
func (t *task) comm() string {
	t.c.pidns.mu.Lock()
	defer t.c.pidns.mu.Unlock()
	return t.name
}

func (c *container) task(pid int) *task {
	c.pidns.mu.Lock()
	defer c.pidns.mu.Unlock()
	return c.pidns.tasks[pid]
}

// nsTasks are all tasks of the container's PID namespace.
func (c *container) nsTasks() []*task {
	c.pidns.mu.Lock()
	defer c.pidns.mu.Unlock()
	out := make([]*task, 0, len(c.pidns.tasks))
	for _, t := range c.pidns.tasks {
		out = append(out, t)
	}
	return out
}

// ownTasks are the tasks of this container only.
func (c *container) ownTasks() []*task {
	var out []*task
	for _, t := range c.nsTasks() {
		if t.c == c {
			out = append(out, t)
		}
	}
	return out
}

// capNames are the Linux capabilities by number.
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
	"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
	"CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// CapabilityNames are the Linux capabilities by number (CapabilityNames()[n] is capability n).
func CapabilityNames() []string { return append([]string(nil), capNames...) }

// DefaultCapabilities is the set containerd grants a non-privileged container
// (containerd pkg/oci/spec.go defaultUnixCaps).
func DefaultCapabilities() []string { return append([]string(nil), defaultCaps...) }

var defaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

func normCap(s string) string {
	s = strings.ToUpper(s)
	if !strings.HasPrefix(s, "CAP_") {
		s = "CAP_" + s
	}
	return s
}

// EffectiveCapabilities computes a container's capability set the way
// containerd does from a CRI Capability (add, drop; "ALL" in either) and
// privileged (all capabilities).
func EffectiveCapabilities(add, drop []string, privileged bool) []string {
	if privileged {
		return append([]string(nil), capNames...)
	}
	set := map[string]bool{}
	for _, c := range defaultCaps {
		set[c] = true
	}
	for _, d := range drop {
		if strings.EqualFold(d, "ALL") {
			set = map[string]bool{}
		}
	}
	for _, a := range add {
		if strings.EqualFold(a, "ALL") {
			for _, c := range capNames {
				set[c] = true
			}
		} else {
			set[normCap(a)] = true
		}
	}
	for _, d := range drop {
		if !strings.EqualFold(d, "ALL") {
			delete(set, normCap(d))
		}
	}
	out := []string{} // never nil: nil means "the default set" in Identity
	for _, c := range capNames {
		if set[c] {
			out = append(out, c)
		}
	}
	return out
}

func (id Identity) caps() []string {
	if id.Privileged {
		return capNames
	}
	if id.Capabilities == nil {
		return defaultCaps
	}
	return id.Capabilities
}

// identity is t's identity as another task reads it (kill, /proc/<pid>/status):
// exec may change it (execAs).
func (t *task) identity() Identity {
	t.c.pidns.mu.Lock()
	defer t.c.pidns.mu.Unlock()
	return t.id
}

func capMask(caps []string) uint64 {
	var m uint64
	for _, c := range caps {
		for i, n := range capNames {
			if n == normCap(c) {
				m |= 1 << uint(i)
			}
		}
	}
	return m
}

func (id Identity) cred() vfs.Cred {
	gids := append([]int{id.GID}, id.AdditionalGIDs...)
	return vfs.Cred{UID: id.EffectiveUID(), GIDs: gids, DACOverride: id.capable(CapDACOverride)}
}

// procPids lists the pid directories of /proc.
func (c *container) procPids() []string {
	var out []string
	for _, t := range c.nsTasks() {
		out = append(out, strconv.Itoa(t.pid))
	}
	return out
}

// procFile synthesises /proc files (rel is below /proc; a trailing "/" asks
// whether rel is a directory).
func (c *container) procFile(rel string) ([]byte, bool) {
	if dir, ok := strings.CutSuffix(rel, "/"); ok {
		if pid, err := strconv.Atoi(dir); err == nil {
			return nil, c.task(pid) != nil
		}
		return nil, false
	}
	switch rel {
	case "uptime":
		up := time.Since(c.cpuAt).Seconds()
		return []byte(fmt.Sprintf("%.2f %.2f\n", up, up*2)), true
	case "loadavg":
		return []byte("0.08 0.03 0.01 1/120 42\n"), true
	case "meminfo":
		return []byte("MemTotal:        4030464 kB\nMemFree:         2015232 kB\nMemAvailable:    3022848 kB\n"), true
	case "cpuinfo":
		var b strings.Builder
		for i := 0; i < c.spec.CPUs; i++ {
			fmt.Fprintf(&b, "processor\t: %d\nmodel name\t: plugsim simulated CPU\n\n", i)
		}
		return []byte(b.String()), true
	case "self/mountinfo":
		return c.fs.MountInfo(), true
	case "mounts", "self/mounts":
		var b strings.Builder
		ro := "rw"
		if c.fs.Config().ReadonlyRootfs {
			ro = "ro"
		}
		fmt.Fprintf(&b, "overlay / overlay %s,relatime 0 0\nproc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n%s", ro, sysMounts)
		for _, m := range c.fs.Config().Mounts {
			opt := "rw"
			if m.Readonly {
				opt = "ro"
			}
			fmt.Fprintf(&b, "/dev/root %s ext4 %s,relatime 0 0\n", m.ContainerPath, opt)
		}
		return []byte(b.String()), true
	}
	pidStr, file, ok := strings.Cut(rel, "/")
	if !ok {
		return nil, false
	}
	pid, err := strconv.Atoi(pidStr)
	if err != nil {
		return nil, false
	}
	t := c.task(pid)
	if t == nil {
		return nil, false
	}
	switch file {
	case "cmdline":
		c.pidns.mu.Lock()
		argv := t.argv
		c.pidns.mu.Unlock()
		return []byte(strings.Join(argv, "\x00") + "\x00"), true
	case "comm":
		return []byte(t.comm() + "\n"), true
	case "environ":
		return []byte(strings.Join(t.c.spec.Env, "\x00") + "\x00"), true
	case "status":
		return t.status(), true
	case "mounts":
		return c.procFile("mounts")
	case "mountinfo":
		return c.fs.MountInfo(), true
	case "oom_score_adj":
		return c.oomScoreAdj(), true
	case "cgroup":
		return []byte("0::/\n"), true // cgroup v2, a private cgroup namespace: its own cgroup is the root
	}
	return nil, false
}

func comm(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	n := base(argv[0])
	if len(n) > 15 {
		n = n[:15]
	}
	return n
}

func (t *task) status() []byte {
	id := t.identity()
	bnd, eff := id.bounding(), id.effective()
	euid := id.EffectiveUID()
	groups := make([]string, 0, len(id.AdditionalGIDs))
	for _, g := range id.AdditionalGIDs {
		groups = append(groups, strconv.Itoa(g))
	}
	nnp := 0
	if id.NoNewPrivs {
		nnp = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Name:\t%s\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%d\nPid:\t%d\nPPid:\t%d\n", t.comm(), t.pid, t.pid, t.ppid)
	// real, effective, saved set and file system uid: exec of a set-user-ID program sets the last three
	fmt.Fprintf(&b, "Uid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\nGroups:\t%s\n", id.UID, euid, euid, euid, id.GID, id.GID, id.GID, id.GID, strings.Join(groups, " "))
	fmt.Fprintf(&b, "VmRSS:\t%d kB\nThreads:\t1\n", t.memory()/1024)
	fmt.Fprintf(&b, "CapInh:\t%016x\nCapPrm:\t%016x\nCapEff:\t%016x\nCapBnd:\t%016x\nCapAmb:\t%016x\n", 0, eff, eff, bnd, 0)
	fmt.Fprintf(&b, "NoNewPrivs:\t%d\n%s", nnp, t.c.seccompStatus())
	return []byte(b.String())
}
