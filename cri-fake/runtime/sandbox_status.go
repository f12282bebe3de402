package runtime

import (
	"context"
	"encoding/json"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/store"
)

// PodSandboxStatus echoes what the kubelet relies on: metadata, labels, annotations, the
// namespace options (a NODE network mode for host-network pods, or the kubelet recreates the
// sandbox on every sync), the pod IPs, the runtime handler and created_at.
//
// Like containerd's, the response carries no containers_statuses and no timestamp: those are
// for the kubelet's alpha evented PLEG, which, seeing timestamp 0, lists and inspects the
// containers itself (kuberuntime GetPodStatus); GetContainerEvents carries the statuses.
func (s *Service) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	sb, err := s.sandboxes.Get(req.GetPodSandboxId())
	if err != nil {
		return nil, storeError(err, "an error occurred when try to find sandbox: sandbox "+req.GetPodSandboxId())
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: s.sandboxStatus(sb)}
	if req.GetVerbose() {
		info := map[string]any{
			"runtimeHandler": sb.RuntimeHandler,
			"netNamespace":   sb.NetNS,
			"logDirectory":   sb.LogDirectory,
			"config":         sb.Config.Unpack(),
			"pid":            0,
		}
		if len(sb.CNIResult) > 0 {
			info["cniResult"] = json.RawMessage(sb.CNIResult)
		}
		if r := sb.Status().Resources; r != nil {
			info["resources"] = r
		}
		b, _ := json.Marshal(info)
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}

func (s *Service) sandboxStatus(sb *store.Sandbox) *runtimeapi.PodSandboxStatus {
	st := sb.Status()
	out := &runtimeapi.PodSandboxStatus{
		Id:             sb.ID,
		Metadata:       sb.Config.GetMetadata(),
		State:          st.State,
		CreatedAt:      sb.CreatedAt,
		Labels:         sb.Config.GetLabels(),
		Annotations:    sb.Config.GetAnnotations(),
		RuntimeHandler: sb.RuntimeHandler,
		Network:        &runtimeapi.PodSandboxNetworkStatus{},
		Linux: &runtimeapi.LinuxPodSandboxStatus{
			Namespaces: &runtimeapi.Namespace{Options: namespaceOptions(sb.Config)},
		},
	}
	// containerd reports no IP once the sandbox is stopped and its network is gone.
	if len(sb.IPs) > 0 && st.State == runtimeapi.PodSandboxState_SANDBOX_READY {
		out.Network.Ip = sb.IPs[0]
		for _, ip := range sb.IPs[1:] {
			out.Network.AdditionalIps = append(out.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
		}
	}
	return out
}

func namespaceOptions(cfg *store.PackedSandboxConfig) *runtimeapi.NamespaceOption {
	if o := cfg.NamespaceOptions(); o != nil {
		return o
	}
	return &runtimeapi.NamespaceOption{}
}
