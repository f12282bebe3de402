package runtime

import (
	"context"

	"path/filepath"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/network"
	"github.com/plugsim/plugsim/cri-fake/store"
)

// RunPodSandbox creates a READY sandbox: the name is reserved (a second RunPodSandbox with the
// same name, namespace, uid and attempt is refused, as containerd refuses it), the runtime handler
// must be known, and unless the pod uses the host network a network namespace is created and the
// CNI ADD chain runs; the result's addresses become the pod IPs. A failure undoes every step.
func (s *Service) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (_ *runtimeapi.RunPodSandboxResponse, retErr error) {
	cfg := req.GetConfig()
	if err := validateSandboxConfig(cfg); err != nil {
		return nil, err
	}
	if !s.handlers[req.GetRuntimeHandler()] {
		return nil, status.Errorf(codes.InvalidArgument, "failed to get sandbox runtime: no runtime for %q is configured (runtime handlers: %v)", req.GetRuntimeHandler(), s.opts.RuntimeHandlers)
	}
	id := newID()
	name := store.SandboxName(cfg.GetMetadata())
	if err := s.sandboxes.Reserve(name, id); err != nil {
		return nil, status.Errorf(codes.AlreadyExists, "failed to reserve sandbox name %q: %v", name, err)
	}
	defer func() {
		if retErr != nil {
			s.sandboxes.Release(name)
		}
	}()

	sb := &store.Sandbox{
		ID:             id,
		Name:           name,
		Config:         store.PackSandbox(cfg),
		RuntimeHandler: req.GetRuntimeHandler(),
		CreatedAt:      s.now().UnixNano(),
		LogDirectory:   cfg.GetLogDirectory(),
	}
	if sb.LogDirectory == "" {
		sb.LogDirectory = filepath.Join(s.opts.RootDir, "pods", id, "logs")
	}
	if !sb.IsHostNetwork() {
		if err := s.setupNetwork(ctx, sb, cfg); err != nil {
			return nil, err
		}
	}
	s.sandboxes.Add(sb)
	s.persistSandbox(sb)
	// containerd reports the sandbox's own "container" as created and started.
	s.emit(runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, sb, nil)
	s.emit(runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, sb, nil)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// setupNetwork gives a sandbox, whose config is cfg, its network namespace and runs the CNI ADD
// chain; the result's addresses become the pod IPs. When the ADD fails, the network is torn down and the namespace
// removed, as containerd does on a failed RunPodSandbox so IPAM leases are not leaked.
func (s *Service) setupNetwork(ctx context.Context, sb *store.Sandbox, cfg *runtimeapi.PodSandboxConfig) error {
	if err := s.network.Ready(); err != nil {
		return status.Errorf(codes.FailedPrecondition, "failed to setup network for sandbox %q: %v", sb.ID, err)
	}
	// The built-in network needs no namespace path; CNI plugins do, and so do program containers
	// (cri-fake/oci), which join the namespace: with --netns real every pod has one.
	ns := ""
	if _, builtin := s.network.(*network.Internal); !builtin || s.realNetNS() {
		var err error
		if ns, err = s.opts.NetNS.Create(sb.ID); err != nil {
			return status.Errorf(codes.Internal, "failed to create network namespace for sandbox %q: %v", sb.ID, err)
		}
	}
	pod := network.Pod{ID: sb.ID, NetNS: ns, Config: cfg}
	res, err := s.network.Setup(ctx, pod)
	if err != nil {
		if err := s.network.Teardown(context.WithoutCancel(ctx), pod); err != nil {
			s.opts.Logf("teardown network of failed sandbox %s: %v", sb.ID, err)
		}
		if err := s.opts.NetNS.Remove(ns); err != nil {
			s.opts.Logf("remove netns of failed sandbox %s: %v", sb.ID, err)
		}
		return status.Errorf(codes.Unknown, "failed to setup network for sandbox %q: %v", sb.ID, err)
	}
	sb.NetNS, sb.IPs, sb.CNIResult = ns, res.IPs, res.Raw
	return nil
}

func validateSandboxConfig(cfg *runtimeapi.PodSandboxConfig) error {
	if cfg == nil {
		return status.Error(codes.InvalidArgument, "config is missing: RunPodSandbox needs a PodSandboxConfig")
	}
	m := cfg.GetMetadata()
	if m == nil {
		return status.Error(codes.InvalidArgument, "sandbox config must include metadata (name, namespace, uid, attempt)")
	}
	for _, f := range []struct{ name, v string }{{"name", m.GetName()}, {"namespace", m.GetNamespace()}, {"uid", m.GetUid()}} {
		if f.v == "" {
			return status.Errorf(codes.InvalidArgument, "sandbox config metadata.%s is empty", f.name)
		}
	}
	for _, pm := range cfg.GetPortMappings() {
		if pm.GetContainerPort() <= 0 || pm.GetContainerPort() > 65535 || pm.GetHostPort() < 0 || pm.GetHostPort() > 65535 {
			return status.Errorf(codes.InvalidArgument, "port mapping %d->%d/%s: ports must be in 1..65535 (host port 0 means none)", pm.GetHostPort(), pm.GetContainerPort(), pm.GetProtocol())
		}
	}
	return nil
}
