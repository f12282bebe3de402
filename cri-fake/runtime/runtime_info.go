package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/network"
)

// Version answers what the kubelet checks at start: version "0.1.0" (anything else makes it
// exit with ErrVersionNotSupported), and all four fields non-empty (cri-client validates them).
func (s *Service) Version(ctx context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       "cri-fake",
		RuntimeVersion:    s.version,
		RuntimeApiVersion: "v1",
	}, nil
}

// Status reports RuntimeReady (always) and NetworkReady (false, with containerd's reason and
// message, until a valid CNI config is loaded), the runtime handlers and their features, and in
// verbose mode the CNI config and the flags cri-fake runs with (what `crictl info` prints).
func (s *Service) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	netCond := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true}
	if err := s.network.Ready(); err != nil {
		netCond.Status = false
		netCond.Reason = "NetworkPluginNotReady"
		netCond.Message = fmt.Sprintf("Network plugin returns error: %v", err)
	}
	resp := &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			netCond,
		}},
		Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: false},
	}
	// containerd lists the default handler under the empty name first.
	names := append([]string{""}, s.opts.RuntimeHandlers...)
	for _, n := range names {
		// No user namespaces and no recursive read-only mounts: critest's specs for them then
		// skip instead of failing on what a fake cannot do.
		resp.RuntimeHandlers = append(resp.RuntimeHandlers, &runtimeapi.RuntimeHandler{Name: n, Features: &runtimeapi.RuntimeHandlerFeatures{}})
	}
	if req.GetVerbose() {
		resp.Info = map[string]string{}
		for k, v := range s.network.Info() {
			resp.Info[k] = v
		}
		cfg := map[string]any{
			"rootDir":         s.opts.RootDir,
			"runtimeHandlers": s.opts.RuntimeHandlers,
			"cgroupDriver":    s.opts.CgroupDriver,
			"netnsMode":       s.opts.NetNS.Mode,
		}
		for k, v := range s.opts.Info {
			cfg[k] = v
		}
		b, _ := json.Marshal(cfg)
		resp.Info["config"] = string(b)
		resp.Info["golang"] = fmt.Sprintf("%q", runtime.Version())
	}
	return resp, nil
}

// RuntimeConfig reports the cgroup driver; the kubelet (KubeletCgroupDriverFromCRI) adopts it.
func (s *Service) RuntimeConfig(ctx context.Context, req *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	d := runtimeapi.CgroupDriver_CGROUPFS
	if s.opts.CgroupDriver == "systemd" {
		d = runtimeapi.CgroupDriver_SYSTEMD
	}
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: d}}, nil
}

// UpdateRuntimeConfig takes the node's pod CIDRs (the kubelet sends node.spec.podCIDRs in
// API-server mode, again whenever they change). The built-in network allocates from the first;
// CNI renders --cni-conf-template with them while no config is loaded, as containerd's
// conf_template. A CIDR that does not parse is InvalidArgument (containerd: "get routes: ...");
// a template that cannot be rendered is Unknown, containerd's code for its plain error, and the
// kubelet retries at its next node status sync.
func (s *Service) UpdateRuntimeConfig(ctx context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	cidrs := req.GetRuntimeConfig().GetNetworkConfig().GetPodCidr()
	if cidrs == "" {
		return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
	}
	if err := s.network.SetPodCIDR(cidrs); err != nil {
		if errors.Is(err, network.ErrInvalidPodCIDR) {
			return nil, status.Errorf(codes.InvalidArgument, "get routes: %v", err)
		}
		return nil, status.Error(codes.Unknown, err.Error())
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}
