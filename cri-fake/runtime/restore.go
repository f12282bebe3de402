package runtime

import (
	"context"
	"fmt"
	"runtime/debug"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/network"
	"github.com/plugsim/plugsim/cri-fake/store"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// Restore puts back the sandboxes and containers of a previous run (--state-dir). Containers that
// were RUNNING get their process again, the way containerd reconnects to a task whose shim
// outlived the daemon; if that fails they are recorded as exited with reason "Unknown".
func (s *Service) Restore(ctx context.Context, l store.Loaded) {
	for _, sb := range l.Sandboxes {
		if err := s.sandboxes.Reserve(sb.Name, sb.ID); err != nil {
			s.opts.Logf("restore sandbox %s: %v", sb.ID, err)
			continue
		}
		s.sandboxes.Add(sb)
		if in, ok := s.network.(*network.Internal); ok && len(sb.IPs) > 0 && !sb.Status().NetworkDown {
			in.Reserve(sb.ID, sb.IPs[0])
		}
	}
	for _, c := range l.Containers {
		sb, err := s.sandboxes.Get(c.SandboxID)
		if err != nil {
			s.opts.Logf("restore container %s: its sandbox %s is gone; dropping it", c.ID, c.SandboxID)
			s.unpersistContainer(c.ID)
			continue
		}
		if err := s.containers.Reserve(c.Name, c.ID); err != nil {
			s.opts.Logf("restore container %s: %v", c.ID, err)
			continue
		}
		s.containers.Add(c)
		if c.Status().State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		img, _ := s.images.Store().Get(c.ImageID)
		spec := s.taskSpec(sb, c.ContainerSpec, img)
		spec.Restored, spec.Resources = true, c.Status().Resources
		t, err := s.restart(ctx, spec)
		if err != nil {
			c.SetExited(s.now().UnixNano(), 255, "Unknown", "process lost across a cri-fake restart: "+err.Error())
			s.persistContainer(c)
			continue
		}
		c.SetRunning(c.Status().StartedAt, t)
		s.watch(sb, c, t)
	}
}

// restart starts a restored container's process again. A panic in the launcher (a defect met with
// this container's saved config) fails this container only: cri-fake must come up with its
// state, whatever one container does, or every restart would die the same way.
func (s *Service) restart(ctx context.Context, spec task.Spec) (t task.Task, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.opts.Logf("restore container %s: starting its process crashed: %v\n%s", spec.ContainerID, r, debug.Stack())
			t, err = nil, fmt.Errorf("starting the process crashed: %v", r)
		}
	}()
	return s.launcher.Start(ctx, spec)
}
