package trace

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkRenderProto is what the trace file costs per call: rendering a kubelet's
// CreateContainerRequest (its container config and the whole pod config) as compact JSON.
func BenchmarkRenderProto(b *testing.B) {
	pod := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web-7d4b9c6f5-x2k8q", Namespace: "default", Uid: "0f8e5a4c-3b2d-4e1f-9a8b-7c6d5e4f3a2b"},
		Hostname: "web-7d4b9c6f5-x2k8q", LogDirectory: "/var/log/pods/default_web-7d4b9c6f5-x2k8q_0f8e5a4c-3b2d-4e1f-9a8b-7c6d5e4f3a2b",
		Labels:      map[string]string{"app": "web", "pod-template-hash": "7d4b9c6f5", "io.kubernetes.pod.name": "web-7d4b9c6f5-x2k8q", "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": "0f8e5a4c-3b2d-4e1f-9a8b-7c6d5e4f3a2b"},
		Annotations: map[string]string{"kubernetes.io/config.seen": "2026-12-04T09:00:00.000000000Z", "kubernetes.io/config.source": "api"},
		Linux:       &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/kubepods/besteffort/pod0f8e5a4c", SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}}},
	}
	req := &runtimeapi.CreateContainerRequest{PodSandboxId: "4f2a", SandboxConfig: pod, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "web"}, Image: &runtimeapi.ImageSpec{Image: "sha256:0123456789abcdef", UserSpecifiedImage: "nginx:1.27"},
		Envs:    []*runtimeapi.KeyValue{{Key: "KUBERNETES_SERVICE_HOST", Value: []byte("198.19.0.1")}, {Key: "KUBERNETES_SERVICE_PORT", Value: []byte("443")}},
		Mounts:  []*runtimeapi.Mount{{ContainerPath: "/var/run/secrets/kubernetes.io/serviceaccount", HostPath: "/var/lib/kubelet/pods/0f8e/volumes/kubernetes.io~projected/kube-api-access-x2k8q", Readonly: true}},
		Labels:  map[string]string{"io.kubernetes.container.name": "web", "io.kubernetes.pod.name": "web-7d4b9c6f5-x2k8q"},
		LogPath: "web/0.log",
	}}
	b.ReportAllocs()
	for b.Loop() {
		RenderProto(req)
	}
}
