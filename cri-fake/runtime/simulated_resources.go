package runtime

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/process"
)

// The container's memory limit reaches its simulated process here: the files the container
// writes outside its mounts live in cri-fake's memory and are bounded by it (process.FSConfig
// MemoryLimit; with no limit, process.DefaultMemoryLimit).

// memoryLimit is the container's memory limit as last set (0: none).
func memoryLimit(ps ProcessSpec) int64 {
	if ps.Resources != nil {
		return ps.Resources.GetMemoryLimitInBytes()
	}
	return ps.Config.GetLinux().GetResources().GetMemoryLimitInBytes()
}

// applyMemoryLimit bounds the file system of the process being started by the limit known now;
// an UpdateResources from then on changes it in place.
func (s *simProcess) applyMemoryLimit(fs *process.FS) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fs = fs
	if fs != nil {
		fs.SetMemoryLimit(s.memLimit)
	}
}

// UpdateResources applies UpdateContainerResources: a new memory limit bounds the container's
// in-memory files from the next write on (what they hold already stays).
func (s *simProcess) UpdateResources(r *runtimeapi.LinuxContainerResources) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.memLimit = r.GetMemoryLimitInBytes()
	if s.fs != nil {
		s.fs.SetMemoryLimit(s.memLimit)
	}
}
