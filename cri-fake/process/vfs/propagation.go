package vfs

import (
	"fmt"
	"path/filepath"

	"github.com/plugsim/plugsim/internal/mountinfo"
)

// Propagation is a mount's propagation type in the container (the CRI's
// MountPropagation): what crosses between the host's mount and the
// container's copy of it after the container starts.
type Propagation int

const (
	// PropagationPrivate (rprivate, the CRI default): nothing crosses. The
	// container keeps the mounts the host path had when its view was built.
	PropagationPrivate Propagation = iota
	// PropagationHostToContainer (rslave): mounts the host makes below the
	// host path appear in the container; the container's own stay inside.
	PropagationHostToContainer
	// PropagationBidirectional (rshared): both ways; what a privileged
	// container mounts below the path appears on the host as well.
	PropagationBidirectional
)

func (p Propagation) String() string {
	switch p {
	case PropagationHostToContainer:
		return "rslave"
	case PropagationBidirectional:
		return "rshared"
	}
	return "rprivate"
}

// CheckPropagation is containerd's check at CreateContainer
// (internal/cri/opts/spec_linux_opts.go, ensureShared and
// ensureSharedOrSlave): a bidirectional mount needs its host path on a
// shared mount, a host-to-container one on a shared or slave mount. The
// messages are containerd's.
func CheckPropagation(mounts []mountinfo.Mount, hostPath string, p Propagation) error {
	if p == PropagationPrivate {
		return nil
	}
	src, err := filepath.EvalSymlinks(hostPath)
	if err != nil {
		return err
	}
	m, ok := mountinfo.Lookup(mounts, src)
	if !ok {
		return fmt.Errorf("failed to find the mount point of %q", src)
	}
	if m.Tag("shared") != 0 {
		return nil
	}
	if p == PropagationBidirectional {
		return fmt.Errorf("path %q is mounted on %q but it is not a shared mount", src, m.MountPoint)
	}
	if m.Tag("master") != 0 {
		return nil
	}
	return fmt.Errorf("path %q is mounted on %q but it is not a shared or slave mount", src, m.MountPoint)
}
