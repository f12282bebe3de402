// Package process simulates what runs inside cri-fake's containers: no real
// process is started; each container gets a simulated process with its own
// file system view (package vfs), a busybox-like set of applets (package
// applets), a POSIX sh subset (package shell) over a small kernel (package
// kernel: the process table, signals and exit codes, the system calls the
// programs make) and web servers for the web images; its stdio goes through a
// CRI log writer and attach fan-out (package containerio). It is generic:
// nothing in it knows about a particular test.
//
// The runtime builds a Spec with FromCRI at CreateContainer, starts it with
// Start, and answers StopContainer, ExecSync, Exec, Attach and Stats from the
// Process; cri-fake/runtime/simulated.go is that wiring, and README.md has
// the table of calls, where each part's code lives, and what is simulated.
//
// # Model
//
// A container is a process table (its own PID namespace, or one shared per
// pod or node), a hostname and an FS shared by its main process and the
// commands executed in it. Every applet run (the main command, each exec,
// each command a shell runs) is a table entry with its own pid, argv and
// context, so pgrep, pidof, ps, kill and /proc/<pid> see it. Signals follow
// process-group rules for a shell's foreground command (or the kernel's init
// rule with Spec.InitSignalRule). Every applet is a row of one table
// (applets/applettable.go). A container's seccomp profile (package seccomp)
// filters the simulated system calls. What is not simulated (AppArmor, SELinux,
// network/IPC/mount namespaces, cgroups, mounting) is never claimed to be
// enforced: see README.md.
package process
