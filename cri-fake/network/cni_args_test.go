package network

import (
	"math"
	"reflect"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestArgs(t *testing.T) {
	got := Args(Pod{ID: "abc", Config: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "prod", Uid: "u-1"}}})
	want := [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "prod"}, {"K8S_POD_NAME", "web"}, {"K8S_POD_INFRA_CONTAINER_ID", "abc"}, {"K8S_POD_UID", "u-1"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
}

func TestCapabilityArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     *runtimeapi.PodSandboxConfig
		want    map[string]any
		wantErr bool
	}{
		{"minimal", &runtimeapi.PodSandboxConfig{}, map[string]any{capPodAnnotations: map[string]string{}}, false},
		{"ports with and without host port", &runtimeapi.PodSandboxConfig{PortMappings: []*runtimeapi.PortMapping{
			{ContainerPort: 80, HostPort: 8080, Protocol: runtimeapi.Protocol_TCP, HostIp: "127.0.0.1"},
			{ContainerPort: 53, HostPort: 5353, Protocol: runtimeapi.Protocol_UDP},
			{ContainerPort: 9090}, // no host port: not for CNI
		}}, map[string]any{
			capPodAnnotations: map[string]string{},
			capPortMappings: []PortMapping{
				{HostPort: 8080, ContainerPort: 80, Protocol: "tcp", HostIP: "127.0.0.1"},
				{HostPort: 5353, ContainerPort: 53, Protocol: "udp"},
			},
		}, false},
		{"dns and cgroup", &runtimeapi.PodSandboxConfig{
			DnsConfig: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"svc.cluster.local"}, Options: []string{"ndots:5"}},
			Linux:     &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/kubepods/pod1"},
		}, map[string]any{
			capPodAnnotations: map[string]string{},
			capDNS:            DNS{Servers: []string{"10.96.0.10"}, Searches: []string{"svc.cluster.local"}, Options: []string{"ndots:5"}},
			capCgroupPath:     "/kubepods/pod1",
		}, false},
		{"bandwidth", &runtimeapi.PodSandboxConfig{Annotations: map[string]string{"kubernetes.io/ingress-bandwidth": "10M", "kubernetes.io/egress-bandwidth": "1M"}},
			map[string]any{
				capPodAnnotations: map[string]string{"kubernetes.io/ingress-bandwidth": "10M", "kubernetes.io/egress-bandwidth": "1M"},
				capBandwidth:      Bandwidth{IngressRate: 10_000_000, IngressBurst: math.MaxUint32, EgressRate: 1_000_000, EgressBurst: math.MaxUint32},
			}, false},
		{"bad bandwidth", &runtimeapi.PodSandboxConfig{Annotations: map[string]string{"kubernetes.io/ingress-bandwidth": "lots"}}, nil, true},
		{"bandwidth too small", &runtimeapi.PodSandboxConfig{Annotations: map[string]string{"kubernetes.io/egress-bandwidth": "10"}}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CapabilityArgs(tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v", err)
			}
			if err == nil && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %#v\nwant %#v", got, tc.want)
			}
		})
	}
}
