package process

import (
	"github.com/plugsim/plugsim/cri-fake/process/containerio"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

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

// The container's file system view (package vfs).
type (
	FS        = vfs.FS
	FSConfig  = vfs.FSConfig
	Mount     = vfs.Mount
	User      = vfs.User
	Group     = vfs.Group
	DNSConfig = vfs.DNSConfig
	Owner     = vfs.Owner
	Layer     = vfs.Layer
)

// DefaultMemoryLimit bounds a container's own files when its config sets none.
const DefaultMemoryLimit = vfs.DefaultMemoryLimit

// NewLayer returns an empty image layer (vfs.NewLayer).
func NewLayer() *Layer { return vfs.NewLayer() }

// NewFS builds a container's file system view (vfs.NewFS) over cfg.Image, or
// over the busybox base image when cfg.Image is nil.
func NewFS(cfg FSConfig) (*FS, error) {
	if cfg.Image == nil {
		cfg.Image = BaseLayer("busybox")
	}
	return vfs.NewFS(cfg)
}
