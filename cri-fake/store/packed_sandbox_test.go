package store

import (
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func fullSandboxConfig() *runtimeapi.PodSandboxConfig {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1", Attempt: 3},
		Hostname:     "web",
		LogDirectory: "/var/log/pods/default_web_uid-1",
		DnsConfig:    &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"default.svc.cluster.local"}, Options: []string{"ndots:5"}},
		PortMappings: []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_UDP, ContainerPort: 53, HostPort: 5353, HostIp: "127.0.0.1"}},
		Labels:       map[string]string{"io.kubernetes.pod.name": "web", PodUIDLabel: "uid-1"},
		Annotations:  map[string]string{"kubernetes.io/config.source": "api"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: "/kubepods/burstable/poduid-1",
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
				RunAsUser:        &runtimeapi.Int64Value{Value: 1000},
			},
			Sysctls:   map[string]string{"net.ipv4.ip_unprivileged_port_start": "0"},
			Overhead:  &runtimeapi.LinuxContainerResources{CpuShares: 10},
			Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 1 << 30},
		},
	}
	// A field this version of the API does not know survives too.
	cfg.ProtoReflect().SetUnknown([]byte{0xf8, 0x7f, 0x01}) // field 2047, varint 1
	return cfg
}

// TestPackedSandboxConfigUnpacksToTheSame: what Unpack gives back is the config that was packed,
// every field and the unknown ones; the getters give its parts.
func TestPackedSandboxConfigUnpacksToTheSame(t *testing.T) {
	cfg := fullSandboxConfig()
	want := proto.Clone(cfg)
	p := PackSandbox(cfg)
	if p.rest == nil || p.tree != nil {
		t.Fatalf("packed as a tree (%v), want the wire form", p.tree != nil)
	}
	for range 2 {
		got := p.Unpack()
		if !proto.Equal(want, got) || string(got.ProtoReflect().GetUnknown()) != string(want.ProtoReflect().GetUnknown()) {
			t.Fatalf("Unpack gives\n%s\nwant\n%s", prototext.Format(got), prototext.Format(want))
		}
	}
	if !proto.Equal(cfg, want) {
		t.Fatal("PackSandbox changed the config it packed")
	}
	if p.GetMetadata().GetAttempt() != 3 || p.GetLabels()[PodUIDLabel] != "uid-1" || p.GetAnnotations()["kubernetes.io/config.source"] != "api" ||
		p.GetLogDirectory() != cfg.LogDirectory || p.NamespaceOptions().GetIpc() != runtimeapi.NamespaceMode_POD {
		t.Fatalf("getters: %v %v %v %q %v", p.GetMetadata(), p.GetLabels(), p.GetAnnotations(), p.GetLogDirectory(), p.NamespaceOptions())
	}
	// The wire form does not hold the parts kept apart a second time.
	if whole, _ := proto.Marshal(cfg); len(p.rest) >= len(whole)-len(cfg.LogDirectory)-len("uid-1") {
		t.Fatalf("rest is %d bytes of the whole %d: the parts kept apart are in it", len(p.rest), len(whole))
	}
	// A config of only the parts kept apart keeps no wire form at all.
	if q := PackSandbox(&runtimeapi.PodSandboxConfig{Metadata: cfg.Metadata, Labels: cfg.Labels}); q.rest != nil || q.Unpack().GetMetadata().GetUid() != "uid-1" {
		t.Fatalf("rest %q, unpacked %v", q.rest, q.Unpack())
	}
}

// TestPackedSandboxConfigKeepsWhatDoesNotEncode: a config protobuf-go refuses to encode (a string
// that is not UTF-8, from a caller in the same process) is kept as it is, not lost.
func TestPackedSandboxConfigKeepsWhatDoesNotEncode(t *testing.T) {
	cfg := fullSandboxConfig()
	cfg.Hostname = "\xff"
	p := PackSandbox(cfg)
	if got := p.Unpack(); got != cfg || p.NamespaceOptions() == nil || p.GetLabels()[PodUIDLabel] != "uid-1" {
		t.Fatalf("Unpack = %v, want the config itself", got)
	}
	var nilPacked *PackedSandboxConfig
	if nilPacked.Unpack() != nil || nilPacked.GetLabels() != nil || nilPacked.NamespaceOptions() != nil || nilPacked.GetLogDirectory() != "" ||
		PackSandbox(nil).Unpack().GetMetadata() != nil {
		t.Fatal("a nil packed config is not an empty one")
	}
}

// TestSandboxStoreSharesEqualMaps: sandboxes with equal annotations and namespace options hold one
// of each, counted: the last one deleted takes it out of the table; labels that differ are not
// shared; a host-network sandbox's namespace options are not another's.
func TestSandboxStoreSharesEqualMaps(t *testing.T) {
	s := NewSandboxStore()
	mk := func(id string, uid string, mode runtimeapi.NamespaceMode) *Sandbox {
		cfg := fullSandboxConfig()
		cfg.Metadata.Uid, cfg.Labels[PodUIDLabel] = uid, uid
		cfg.Linux.SecurityContext.NamespaceOptions.Network = mode
		sb := &Sandbox{ID: id, Name: id, Config: PackSandbox(cfg)}
		s.Add(sb)
		return sb
	}
	a, b := mk("a", "u1", runtimeapi.NamespaceMode_POD), mk("b", "u2", runtimeapi.NamespaceMode_POD)
	h := mk("h", "u3", runtimeapi.NamespaceMode_NODE)
	s.Add(a) // a second Add holds nothing more
	an, bn := a.Config.GetAnnotations(), b.Config.GetAnnotations()
	an["probe"] = "x" // the same map: b sees it
	if bn["probe"] != "x" {
		t.Fatal("equal annotations are not one map")
	}
	delete(an, "probe")
	if a.Config.NamespaceOptions() != b.Config.NamespaceOptions() || h.Config.NamespaceOptions() == a.Config.NamespaceOptions() {
		t.Fatal("namespace options: equal ones are not one message, or unequal ones are")
	}
	if !h.IsHostNetwork() || a.IsHostNetwork() || a.Config.GetLabels()[PodUIDLabel] != "u1" || b.Config.GetLabels()[PodUIDLabel] != "u2" {
		t.Fatalf("host network %v %v, labels %v %v", h.IsHostNetwork(), a.IsHostNetwork(), a.Config.GetLabels(), b.Config.GetLabels())
	}
	if got := s.InPod("u2"); len(got) != 1 || got[0] != b {
		t.Fatalf("InPod(u2) = %v", got)
	}
	if n, m := len(s.maps.byHash), len(s.maps.namespaces.byKey); n != 4 || m != 2 {
		t.Fatalf("table holds %d maps and %d namespace options, want 4 (3 label sets, the annotations) and 2", n, m)
	}
	s.Delete(a)
	s.Delete(h)
	if n, m := len(s.maps.byHash), len(s.maps.namespaces.byKey); n != 2 || m != 1 {
		t.Fatalf("after two deletes the table holds %d maps and %d namespace options, want 2 and 1 still held by b", n, m)
	}
	s.Delete(b)
	s.Delete(b)
	if n, m := len(s.maps.byHash), len(s.maps.namespaces.byKey); n != 0 || m != 0 {
		t.Fatalf("after the last delete the table holds %d maps and %d namespace options, want none", n, m)
	}
	// Namespace options with a user namespace are kept as they are, not shared.
	cfg := fullSandboxConfig()
	cfg.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD}
	s.Add(&Sandbox{ID: "u", Name: "u", Config: PackSandbox(cfg)})
	if m := len(s.maps.namespaces.byKey); m != 0 {
		t.Fatalf("namespace options with a user namespace are shared (%d)", m)
	}
}
