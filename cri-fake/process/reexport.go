package process

import "github.com/plugsim/plugsim/cri-fake/process/containerio"

// The runtime imports only this package: what it wires around a process
// (the CRI log file, attach) lives in containerio and is named here too.
type (
	// LogWriter writes a container's CRI log file (containerio.LogWriter).
	LogWriter = containerio.LogWriter
	// ContainerIO is a container's stdio: log plus attach fan-out (containerio.ContainerIO).
	ContainerIO = containerio.ContainerIO
)

// The CRI log's stream names.
const (
	Stdout = containerio.Stdout
	Stderr = containerio.Stderr
)

// NewLogWriter creates the log file and its directory (containerio.NewLogWriter).
func NewLogWriter(path string) (*LogWriter, error) { return containerio.NewLogWriter(path) }

// OpenLogWriter creates the log file in a directory that exists (containerio.OpenLogWriter).
func OpenLogWriter(path string) (*LogWriter, error) { return containerio.OpenLogWriter(path) }

// NewContainerIO wires a process's stdio to log and attach sessions (containerio.NewContainerIO).
func NewContainerIO(log *LogWriter, stdin, tty bool) *ContainerIO {
	return containerio.NewContainerIO(log, stdin, tty)
}
