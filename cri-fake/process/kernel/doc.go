// Package kernel is the simulation's kernel: the process table (Process, a
// task per running program, PID namespaces, the pids limit), signals and exit
// codes with the process-group and init rules, identities and capabilities,
// the memory cgroup and its OOM killer (memory.go), System V IPC namespaces
// (ipc.go), /proc/<pid>, and the calls through which a program asks for what a real
// kernel decides (syscalls.go: writes to the file system as the caller, bind
// and connect in the container's network namespace, sethostname, kill, fork,
// execve); those but fork and execve first run the container's seccomp filter
// (seccomp.go). Proc is what a program runs with.
//
// It stops at the userland: the programs themselves (the shell, the applets,
// the servers) live in package process and reach the kernel only through
// Proc; the table of which program an executable runs (AppletSet) is handed
// in by StartWith. The file system view is package vfs.
package kernel
