// Package containerio is a container's standard I/O as the CRI runtime wires
// it (containerd keeps the same in internal/cri/io): the CRI log file format
// (LogWriter: "<RFC3339Nano> stdout|stderr F|P <line>", Reopen), the fan-out
// of a process's output to the log and to attach sessions with containerd's
// stdinOnce rules (ContainerIO), and the line discipline of a TTY (TTY,
// CRLFWriter) since there is no real pty.
//
// It stops at the process boundary: it knows nothing of the simulated
// process (package process), only io.Reader and io.Writer.
package containerio
