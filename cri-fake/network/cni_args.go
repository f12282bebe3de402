package network

import (
	"fmt"
	"math"

	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CNI capability keys, as go-cni (containerd) names them in runtimeConfig.
const (
	capPortMappings   = "portMappings"
	capDNS            = "dns"
	capBandwidth      = "bandwidth"
	capCgroupPath     = "cgroupPath"
	capPodAnnotations = "io.kubernetes.cri.pod-annotations"
)

// PortMapping is the portMappings capability entry (go-cni PortMapping; the portmap plugin's input).
type PortMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// DNS is the dns capability (go-cni DNS).
type DNS struct {
	Servers  []string `json:"servers,omitempty"`
	Searches []string `json:"searches,omitempty"`
	Options  []string `json:"options,omitempty"`
}

// Bandwidth is the bandwidth capability (go-cni BandWidth; the bandwidth plugin's input).
type Bandwidth struct {
	IngressRate  uint64 `json:"ingressRate"`
	IngressBurst uint64 `json:"ingressBurst"`
	EgressRate   uint64 `json:"egressRate"`
	EgressBurst  uint64 `json:"egressBurst"`
}

// Args returns the CNI_ARGS containerd passes (toCNILabels in containerd's sandbox_run.go), in a
// fixed order so traces compare.
func Args(pod Pod) [][2]string {
	m := pod.Config.GetMetadata()
	return [][2]string{
		{"IgnoreUnknown", "1"},
		{"K8S_POD_NAMESPACE", m.GetNamespace()},
		{"K8S_POD_NAME", m.GetName()},
		{"K8S_POD_INFRA_CONTAINER_ID", pod.ID},
		{"K8S_POD_UID", m.GetUid()},
	}
}

// CapabilityArgs returns the runtimeConfig capability args containerd passes (cniNamespaceOpts):
// pod annotations always; port mappings with a host port; DNS when configured; bandwidth from the
// kubernetes.io/{ingress,egress}-bandwidth annotations; the cgroup parent when set.
func CapabilityArgs(cfg *runtimeapi.PodSandboxConfig) (map[string]any, error) {
	caps := map[string]any{}
	ann := cfg.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	caps[capPodAnnotations] = ann
	var pms []PortMapping
	for _, pm := range cfg.GetPortMappings() {
		// containerd's toCNIPortMappings: only mappings with a host port go to CNI.
		if pm.GetHostPort() <= 0 {
			continue
		}
		pms = append(pms, PortMapping{
			HostPort:      pm.GetHostPort(),
			ContainerPort: pm.GetContainerPort(),
			Protocol:      strings.ToLower(pm.GetProtocol().String()),
			HostIP:        pm.GetHostIp(),
		})
	}
	if len(pms) > 0 {
		caps[capPortMappings] = pms
	}
	bw, err := bandwidth(ann)
	if err != nil {
		return nil, err
	}
	if bw != nil {
		caps[capBandwidth] = *bw
	}
	if d := cfg.GetDnsConfig(); d != nil {
		caps[capDNS] = DNS{Servers: d.GetServers(), Searches: d.GetSearches(), Options: d.GetOptions()}
	}
	if cg := cfg.GetLinux().GetCgroupParent(); cg != "" {
		caps[capCgroupPath] = cg
	}
	return caps, nil
}

// bandwidth reads the traffic-shaping annotations like the kubelet's bandwidth package
// (ExtractPodBandwidthResources) and containerd's toCNIBandWidth: rates in bits per second, bursts
// unlimited (math.MaxUint32).
func bandwidth(ann map[string]string) (*Bandwidth, error) {
	var bw Bandwidth
	found := false
	for _, k := range []struct {
		key   string
		rate  *uint64
		burst *uint64
	}{{"kubernetes.io/ingress-bandwidth", &bw.IngressRate, &bw.IngressBurst}, {"kubernetes.io/egress-bandwidth", &bw.EgressRate, &bw.EgressBurst}} {
		v, ok := ann[k.key]
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("annotation %s=%q: %w", k.key, v, err)
		}
		// The kubelet's limits: 1 kbit/s .. 1 Pbit/s.
		if q.Value() < 1000 || q.Value() > 1e15 {
			return nil, fmt.Errorf("annotation %s=%q: rate must be between 1k and 1P", k.key, v)
		}
		*k.rate, *k.burst = uint64(q.Value()), math.MaxUint32
		found = true
	}
	if !found {
		return nil, nil
	}
	return &bw, nil
}
