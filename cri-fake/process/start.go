package process

import (
	"context"

	"github.com/plugsim/plugsim/cri-fake/process/applets"
	"github.com/plugsim/plugsim/cri-fake/process/kernel"
)

// Applets lists the applet names an image's executables may run.
func Applets() []string { return applets.Table().Names() }

// Start runs spec's command as a container's main process (pid 1). It fails
// with an *ExecError when the executable cannot be found or run, which
// containerd reports from StartContainer. ctx bounds only the start itself: the
// process lives until it exits or is signalled.
func Start(ctx context.Context, spec kernel.Spec) (*kernel.Process, error) {
	if spec.FS == nil && ctx.Err() == nil {
		f, err := NewFS(FSConfig{Hostname: spec.Hostname})
		if err != nil {
			return nil, err
		}
		spec.FS = f
	}
	return kernel.StartWith(ctx, spec, applets.Table())
}
