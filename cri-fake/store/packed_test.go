package store

import (
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func fullConfig() *runtimeapi.ContainerConfig {
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: "app", Attempt: 2},
		Image:       &runtimeapi.ImageSpec{Image: "busybox", UserSpecifiedImage: "busybox:1.29"},
		Command:     []string{"sleep", "3600"},
		Args:        []string{"x"},
		WorkingDir:  "/w",
		Envs:        []*runtimeapi.KeyValue{{Key: "K", Value: []byte("V")}},
		Mounts:      []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/tmp/data", Readonly: true}},
		Labels:      map[string]string{"io.kubernetes.container.name": "app", PodUIDLabel: "uid-1"},
		Annotations: map[string]string{"io.kubernetes.container.hash": "3d1a5f7c"},
		LogPath:     "app/2.log",
		Stdin:       true,
		Tty:         true,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 1 << 20, CpuShares: 2},
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 1000}},
		},
		StopSignal: runtimeapi.Signal_SIGNAL_SIGQUIT,
	}
	// A field this version of the API does not know survives too.
	cfg.ProtoReflect().SetUnknown([]byte{0xf8, 0x7f, 0x01}) // field 2047, varint 1
	return cfg
}

// TestPackedConfigUnpacksToTheSame: what Unpack gives back is the config that was packed, every
// field and the unknown ones; the getters give its parts.
func TestPackedConfigUnpacksToTheSame(t *testing.T) {
	cfg := fullConfig()
	cfg.Image.Annotations = map[string]string{"a": "b"}
	want := proto.Clone(cfg)
	p := Pack(cfg)
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
		t.Fatal("Pack changed the config it packed")
	}
	if p.GetMetadata().GetAttempt() != 2 || p.GetImage().GetUserSpecifiedImage() != "busybox:1.29" ||
		p.GetLabels()[PodUIDLabel] != "uid-1" || p.GetAnnotations()["io.kubernetes.container.hash"] != "3d1a5f7c" ||
		p.Resources().GetMemoryLimitInBytes() != 1<<20 {
		t.Fatalf("getters: %v %v %v %v %v", p.GetMetadata(), p.GetImage(), p.GetLabels(), p.GetAnnotations(), p.Resources())
	}
	// The wire form does not hold the parts kept apart a second time.
	if whole, _ := proto.Marshal(cfg); len(p.rest) >= len(whole)-len("busybox:1.29")-len("uid-1") {
		t.Fatalf("rest is %d bytes of the whole %d: the parts kept apart are in it", len(p.rest), len(whole))
	}
}

// TestPackedConfigKeepsWhatDoesNotEncode: a config protobuf-go refuses to encode (a string that
// is not UTF-8, from a caller in the same process) is kept as it is, not lost.
func TestPackedConfigKeepsWhatDoesNotEncode(t *testing.T) {
	cfg := fullConfig()
	cfg.WorkingDir = "\xff"
	p := Pack(cfg)
	if got := p.Unpack(); got != cfg {
		t.Fatalf("Unpack = %v, want the config itself", got)
	}
	var nilPacked *PackedConfig
	if nilPacked.Unpack() != nil || nilPacked.GetLabels() != nil || Pack(nil).Unpack().GetMetadata() != nil {
		t.Fatal("a nil packed config is not an empty one")
	}
}

// TestStoreSharesEqualLabelMaps: containers with equal labels and annotations hold one map of
// each, counted: the last one deleted takes it out of the table.
func TestStoreSharesEqualLabelMaps(t *testing.T) {
	s := NewContainerStore()
	mk := func(id string) *Container {
		cfg := fullConfig()
		cfg.Metadata.Name = id
		c := NewContainer(ContainerSpec{ID: id, Name: id, SandboxID: "sb", Config: Pack(cfg)})
		s.Add(c)
		return c
	}
	a, b := mk("a1"), mk("b2")
	s.Add(a) // a second Add holds nothing more
	la, lb := a.Config.GetLabels(), b.Config.GetLabels()
	la["probe"] = "x" // the same map: b sees it
	if lb["probe"] != "x" {
		t.Fatal("equal labels are not one map")
	}
	delete(la, "probe")
	if a.Config.GetImage() != b.Config.GetImage() {
		t.Fatal("equal image specs are not one message")
	}
	if a.Config.GetMetadata() == b.Config.GetMetadata() || a.Config.Unpack().GetMetadata().GetName() != "a1" {
		t.Fatal("metadata of two names are one message")
	}
	// Replicas: the same name and attempt in two pods share one metadata message.
	replica := func(id string) *Container {
		cfg := fullConfig()
		cfg.Metadata.Name = "a1"
		c := NewContainer(ContainerSpec{ID: id, Name: id, SandboxID: "sb2", Config: Pack(cfg)})
		s.Add(c)
		return c
	}
	r1, r2 := replica("r1"), replica("r2")
	if r1.Config.GetMetadata() != a.Config.GetMetadata() || r2.Config.GetMetadata() != a.Config.GetMetadata() || len(s.maps.metas.byKey) != 2 {
		t.Fatalf("equal metadata are not one message (%d in the table, want 2)", len(s.maps.metas.byKey))
	}
	s.Delete(r1)
	s.Delete(r2)
	if n, m := len(s.maps.byHash), len(s.maps.images.byKey); n != 2 || m != 1 {
		t.Fatalf("table holds %d maps and %d images, want 2 (labels, annotations) and 1", n, m)
	}
	s.Delete(a)
	if n := len(s.maps.byHash); n != 2 {
		t.Fatalf("after one delete the table holds %d maps, want 2 still held by b", n)
	}
	s.Delete(b)
	s.Delete(b)
	if n, m, k := len(s.maps.byHash), len(s.maps.images.byKey), len(s.maps.metas.byKey); n != 0 || m != 0 || k != 0 {
		t.Fatalf("after the last delete the table holds %d maps, %d images and %d metadata, want none", n, m, k)
	}
	// An image spec with annotations is kept as it is, not shared.
	cfg := fullConfig()
	cfg.Image.Annotations = map[string]string{"a": "b"}
	s.Add(NewContainer(ContainerSpec{ID: "d4", Name: "d4", SandboxID: "sb", Config: Pack(cfg)}))
	if m := len(s.maps.images.byKey); m != 0 {
		t.Fatalf("an image spec with annotations is shared (%d)", m)
	}
	c := mk("c3")
	if got := c.Config.GetLabels()[PodUIDLabel]; got != "uid-1" {
		t.Fatalf("labels after the table emptied: %v", c.Config.GetLabels())
	}
}

func TestStoreSharesEqualUsers(t *testing.T) {
	s := NewContainerStore()
	user := func(uid, gid int64, groups ...int64) *runtimeapi.ContainerUser {
		return &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: uid, Gid: gid, SupplementalGroups: groups}}
	}
	mk := func(id string, u *runtimeapi.ContainerUser) *Container {
		cfg := fullConfig()
		cfg.Metadata.Name = id
		c := NewContainer(ContainerSpec{ID: id, Name: id, SandboxID: "sb", Config: Pack(cfg), User: u})
		s.Add(c)
		return c
	}
	a, b := mk("a1", user(0, 0, 0)), mk("b2", user(0, 0, 0))
	c, d := mk("c3", user(0, 0, 0, 1)), mk("d4", user(1000, 0, 0))
	if a.User != b.User {
		t.Fatal("equal users are not one message")
	}
	if c.User == a.User || d.User == a.User || c.User.GetLinux().GetSupplementalGroups()[1] != 1 || d.User.GetLinux().GetUid() != 1000 {
		t.Fatalf("users that differ are shared: %v %v %v", a.User, c.User, d.User)
	}
	if n := len(s.maps.users.byKey); n != 3 {
		t.Fatalf("table holds %d users, want 3", n)
	}
	for _, x := range []*Container{a, b, c, d} {
		s.Delete(x)
	}
	if n := len(s.maps.users.byKey); n != 0 {
		t.Fatalf("after the last delete the table holds %d users, want none", n)
	}
	// A restored container has no user yet (the runtime works it out): nothing is shared.
	mk("e5", nil)
	if n := len(s.maps.users.byKey); n != 0 {
		t.Fatalf("a container without a user is in the table (%d)", n)
	}
}
