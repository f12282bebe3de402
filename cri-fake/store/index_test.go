package store

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestPodUIDIndex(t *testing.T) {
	cs := NewContainerStore()
	mk := func(id, sb, uid string) *Container {
		return NewContainer(ContainerSpec{ID: id, SandboxID: sb, Config: Pack(&runtimeapi.ContainerConfig{Labels: map[string]string{PodUIDLabel: uid}})})
	}
	a, b, c := mk("a", "s1", "u1"), mk("b", "s1", "u1"), mk("c", "s2", "u2")
	for _, x := range []*Container{c, b, a} {
		cs.Add(x)
	}
	if got := cs.InPod("u1"); len(got) != 2 || got[0] != b || got[1] != a {
		t.Fatalf("InPod(u1) = %v, want [b a] in insertion order", got)
	}
	if got := cs.InSandbox("s1"); len(got) != 2 || got[0] != b {
		t.Fatalf("InSandbox(s1) = %v", got)
	}
	cs.Delete(b)
	if got := cs.InPod("u1"); len(got) != 1 || got[0] != a {
		t.Fatalf("after delete: %v", got)
	}
	if got := cs.InSandbox("s1"); len(got) != 1 || got[0] != a {
		t.Fatalf("after delete: %v", got)
	}
	cs.Delete(a)
	if len(cs.InPod("u1")) != 0 || len(cs.InSandbox("s1")) != 0 || len(cs.idx.byPod) != 2 {
		t.Fatalf("index not emptied: %v", cs.idx.byPod)
	}
	ss := NewSandboxStore()
	sb := &Sandbox{ID: "s", Config: PackSandbox(&runtimeapi.PodSandboxConfig{Labels: map[string]string{PodUIDLabel: "u9"}})}
	ss.Add(sb)
	if got := ss.InPod("u9"); len(got) != 1 || got[0] != sb {
		t.Fatalf("sandbox InPod: %v", got)
	}
	ss.Delete(sb)
	if len(ss.InPod("u9")) != 0 {
		t.Fatal("sandbox index not emptied")
	}
}
