// Package network gives cri-fake's sandboxes their network: either through CNI, driven by libcni
// exactly as containerd drives it (the conf directory is watched and its first file in name order
// wins; the ADD and DEL calls carry the same CNI_ARGS and capability args), or through a built-in
// address allocator when CNI is turned off (--cni-conf-dir="").
package network

import (
	"context"
	"encoding/json"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Pod is what a network plugin needs to know about a sandbox.
type Pod struct {
	ID     string // the sandbox ID (CNI_CONTAINERID, K8S_POD_INFRA_CONTAINER_ID)
	NetNS  string // the network namespace path (CNI_NETNS)
	Config *runtimeapi.PodSandboxConfig
}

// Result is what a network setup produced.
type Result struct {
	// IPs are the pod's addresses, the primary (IPv4 when there is one) first.
	IPs []string
	// Raw is the CNI result as JSON (nil for the built-in network).
	Raw json.RawMessage
}

// Plugin is a sandbox network provider.
type Plugin interface {
	// Ready returns nil when pods can be networked, else why not ("cni plugin not initialized").
	Ready() error
	// Setup attaches a pod (CNI ADD).
	Setup(ctx context.Context, pod Pod) (Result, error)
	// Teardown detaches a pod (CNI DEL); it must tolerate a pod that was never set up.
	Teardown(ctx context.Context, pod Pod) error
	// Info is what verbose Status shows (crictl info): the config and where it came from.
	Info() map[string]string
	// SetPodCIDR receives UpdateRuntimeConfig's pod CIDRs (comma-separated, as the kubelet sends
	// them); an unparsable one is ErrInvalidPodCIDR.
	SetPodCIDR(cidrs string) error
}
