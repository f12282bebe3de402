// Package process simulates what runs inside cri-fake's containers: no real
// process is started; each container gets a simulated process with its own
// file system view, a busybox-like set of applets, a POSIX sh subset, web
// servers for the web images, signals and exit codes, and a CRI log writer.
// It is generic: nothing in it knows about a particular test.
//
// # Using it from the runtime
//
// CreateContainer: build the spec (the file system view is made here, so a
// bad mount or user fails the create like containerd):
//
//	spec, err := process.FromCRI(cfg, sandboxCfg, process.ImageConfig{
//		Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: img.Env,
//		WorkingDir: img.WorkingDir, User: img.User, Behavior: img.Behavior,
//	}, podIPs)
//	// optional: fail early on a missing binary (containerd itself fails at StartContainer)
//	err = process.Lookup(spec.FS, spec.Args, spec.Env, spec.WorkingDir)
//
// StartContainer: wire stdio and the network, then start:
//
//	logw, _ := process.NewLogWriter(logPath)          // CRI log format
//	cio := process.NewContainerIO(logw, cfg.Stdin, cfg.Tty) // log + attach fan-out
//	spec.Stdin, spec.Stdout, spec.Stderr = cio.Stdin(), cio.Stdout(), cio.Stderr()
//	spec.NetNS = netnsPath                            // real netns: servers listen inside it
//	spec.PIDNamespace = podPIDNS                      // PID mode POD (pause is pid 1) or NODE; nil: CONTAINER
//	// or spec.Listen = inMemoryListen                // no real netns
//	p, err := process.Start(ctx, spec)                // *ExecError: "executable file not found in $PATH"
//	go func() { <-p.Done(); cio.Close(); code, _ := p.ExitCode(); ... p.FinishedAt() ... }()
//
// StopContainer: p.Signal(stopSignal), then p.Signal(syscall.SIGKILL) after the
// timeout; exit codes are 128+signal for a signal's default action (143 TERM,
// 137 KILL) and the process's own code when it handles the signal (a trap,
// a server's clean shutdown: 0). Reason Completed/Error is the runtime's rule.
//
// ExecSync: p.ExecSync(ctx, cmd, timeout) returns stdout, stderr, exit code;
// ErrExecTimeout after killing a command that outlived timeout; ErrNotRunning
// once the main process ended; *ExecError for a missing executable.
//
// Streaming (k8s.io/cri-streaming's Runtime): Exec is p.ExecStream(ctx, cmd,
// in, out, err, tty) (or p.Exec + Wait + Resize); Attach is cio.Attach(ctx,
// in, out, err, cfg.StdinOnce) with containerd's stdinOnce rules; PortForward
// dials with DialInNetNS into the sandbox's namespace (or through the
// runtime's own Listen registry).
//
// ReopenContainerLog: logw.Reopen(). Stats: p.Stats(). Process table:
// p.Processes().
//
// # Model
//
// A container is a process table (its own PID namespace, or one shared per
// pod or node), a hostname and an FS shared by its main process and the
// commands executed in it. Every applet run (the main command, each exec,
// each command a shell runs) is a table entry with its own pid, argv and
// context, so pgrep, pidof, ps, kill and /proc/<pid> see it. Signals follow
// process-group rules for a shell's foreground command (or the kernel's init
// rule with Spec.InitSignalRule). The file system is an in-memory overlay
// over shared image content with synthetic /etc files and a virtual /proc and
// /dev; mounts go to the real host paths. What is not simulated (seccomp,
// AppArmor, SELinux, network/IPC/mount namespaces, cgroups, mounting) is
// never claimed to be enforced: see README.md.
package process
