package process

import (
	"errors"
	"fmt"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/process/seccomp"
)

// The seccomp profile of a container, chosen as containerd chooses it
// (internal/cri/server/container_create_linux.go and internal/cri/sputil): none for a privileged
// container; the security context's seccomp, or else the deprecated seccomp_profile_path
// ("runtime/default", "docker/default", "unconfined", "localhost/<path>"); Unconfined and no
// profile install no filter; RuntimeDefault is seccomp.RuntimeDefaultProfile; Localhost reads
// the JSON file at localhost_ref on the host, at CreateContainer.

// profileNamePrefix is containerd's prefix of a localhost profile path ("localhost/").
const profileNamePrefix = "localhost/"

// SeccompReadsFile reports whether choosing the container's seccomp profile reads a file or
// can fail, so the runtime must choose it at CreateContainer (where containerd reports those
// errors) rather than when the process starts. It is a nil check when no profile is set.
func SeccompReadsFile(sc *runtimeapi.LinuxContainerSecurityContext) bool {
	if sp := sc.GetSeccomp(); sp != nil {
		return sp.GetProfileType() == runtimeapi.SecurityProfile_Localhost || sp.GetLocalhostRef() != "" ||
			sp.GetProfileType() > runtimeapi.SecurityProfile_Localhost
	}
	p := sc.GetSeccompProfilePath() // deprecated in CRI, still honoured by containerd
	return p != "" && p != "runtime/default" && p != "docker/default" && p != "unconfined"
}

// seccompFilter is the container's filter, or nil for none. Its errors are containerd's at
// CreateContainer, except a *seccomp.CompileError: a profile that parsed but that runc refuses
// to load, which fails StartContainer.
func seccompFilter(sc *runtimeapi.LinuxContainerSecurityContext, capabilities []string) (*seccomp.Filter, error) {
	if sc.GetPrivileged() {
		return nil, nil // containerd: "Do not set seccomp profile when container is privileged"
	}
	sp := sc.GetSeccomp()
	if sp == nil {
		var err error
		if sp, err = profileFromPath(sc.GetSeccompProfilePath()); err != nil {
			return nil, fmt.Errorf("failed to generate seccomp spec opts: %w", err)
		}
		if sp == nil {
			return nil, nil
		}
	}
	if sp.GetProfileType() != runtimeapi.SecurityProfile_Localhost && sp.GetLocalhostRef() != "" {
		return nil, errors.New("failed to generate seccomp spec opts: seccomp config invalid LocalhostRef must only be set if ProfileType is Localhost")
	}
	switch sp.GetProfileType() {
	case runtimeapi.SecurityProfile_Unconfined:
		return nil, nil
	case runtimeapi.SecurityProfile_RuntimeDefault:
		sysAdmin := false
		for _, c := range capabilities {
			sysAdmin = sysAdmin || c == "CAP_SYS_ADMIN"
		}
		return seccomp.RuntimeDefault(sysAdmin), nil
	case runtimeapi.SecurityProfile_Localhost:
		p, err := seccomp.Load(strings.TrimPrefix(sp.GetLocalhostRef(), profileNamePrefix))
		if err != nil {
			return nil, err
		}
		return seccomp.Compile(p)
	}
	return nil, errors.New("failed to generate seccomp spec opts: seccomp unknown ProfileType")
}

// profileFromPath is containerd's reading of the deprecated seccomp_profile_path
// (sputil.generateSecurityProfile); "" is no profile.
func profileFromPath(path string) (*runtimeapi.SecurityProfile, error) {
	switch path {
	case "":
		return nil, nil
	case "runtime/default", "docker/default":
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case "unconfined":
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	if !strings.HasPrefix(path, profileNamePrefix) {
		return nil, fmt.Errorf("invalid profile %q", path)
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: strings.TrimPrefix(path, profileNamePrefix)}, nil
}
