package store

import (
	"errors"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func newCtr(id string) *Container {
	return NewContainer(ContainerSpec{ID: id, Name: "n-" + id, SandboxID: "sb", Config: Pack(&runtimeapi.ContainerConfig{})})
}

// The container state machine: which transitions each state allows.
func TestContainerTransitions(t *testing.T) {
	type step func(c *Container) error
	start := func(c *Container) error { return c.SetStarting() }
	running := func(c *Container) error { c.SetRunning(1, nil); return nil }
	exit := func(c *Container) error {
		if !c.SetExited(2, 0, "Completed", "") {
			return ErrInvalidState
		}
		return nil
	}
	remove := func(c *Container) error { return c.SetRemoving() }
	update := func(c *Container) error { return c.UpdateResources(&runtimeapi.LinuxContainerResources{}) }
	for _, tc := range []struct {
		name  string
		setup []step
		try   step
		ok    bool
	}{
		{"created can start", nil, start, true},
		{"created can be removed", nil, remove, true},
		{"created can be updated", nil, update, true},
		{"created cannot exit", nil, exit, false},
		{"starting cannot start again", []step{start}, start, false},
		{"starting cannot be removed", []step{start}, remove, false},
		{"running cannot start", []step{start, running}, start, false},
		{"running cannot be removed", []step{start, running}, remove, false},
		{"running can be updated", []step{start, running}, update, true},
		{"running can exit", []step{start, running}, exit, true},
		{"exited cannot exit again", []step{start, running, exit}, exit, false},
		{"exited cannot start", []step{start, running, exit}, start, false},
		{"exited cannot be updated", []step{start, running, exit}, update, false},
		{"exited can be removed", []step{start, running, exit}, remove, true},
		{"removing cannot start", []step{remove}, start, false},
		{"removing cannot be removed twice", []step{remove}, remove, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCtr("c1")
			for i, s := range tc.setup {
				if err := s(c); err != nil {
					t.Fatalf("setup step %d: %v", i, err)
				}
			}
			err := tc.try(c)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrInvalidState) {
				t.Fatalf("allowed (err %v)", err)
			}
		})
	}
}

func TestStartFailedAndExitedChannel(t *testing.T) {
	c := newCtr("c1")
	if err := c.SetStarting(); err != nil {
		t.Fatal(err)
	}
	c.SetStartFailed(5, "boom")
	st := c.Status()
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 128 || st.Reason != "StartError" || st.Message != "boom" || st.Starting {
		t.Fatalf("status %+v", st)
	}
	select {
	case <-c.Exited():
	default:
		t.Fatal("Exited not closed after a failed start")
	}
}

func TestContainerStoreIndex(t *testing.T) {
	s := NewContainerStore()
	a := NewContainer(ContainerSpec{ID: "abc111", Name: "a", SandboxID: "s1", Config: Pack(&runtimeapi.ContainerConfig{})})
	b := NewContainer(ContainerSpec{ID: "abc222", Name: "b", SandboxID: "s2", Config: Pack(&runtimeapi.ContainerConfig{})})
	for _, c := range []*Container{a, b} {
		if err := s.Reserve(c.Name, c.ID); err != nil {
			t.Fatal(err)
		}
		s.Add(c)
	}
	if err := s.Reserve("a", "other"); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("name reserved twice: %v", err)
	}
	for _, tc := range []struct {
		q    string
		want string
		err  error
	}{
		{"abc111", "abc111", nil}, {"abc2", "abc222", nil}, {"abc", "", ErrAmbiguous}, {"zzz", "", ErrNotFound}, {"", "", ErrNotFound},
	} {
		c, err := s.Get(tc.q)
		if !errors.Is(err, tc.err) || (err == nil && c.ID != tc.want) {
			t.Errorf("Get(%q) = %v, %v", tc.q, c, err)
		}
	}
	if got := s.InSandbox("s1"); len(got) != 1 || got[0] != a {
		t.Fatalf("InSandbox: %v", got)
	}
	s.Delete(a)
	if _, err := s.Get("abc111"); !errors.Is(err, ErrNotFound) {
		t.Fatal("deleted container still found")
	}
	if err := s.Reserve("a", "new"); err != nil {
		t.Fatalf("name not released by Delete: %v", err)
	}
	if l := s.List(); len(l) != 1 || l[0] != b || s.Len() != 1 || len(s.InSandbox("s1")) != 0 {
		t.Fatalf("after delete: %v", l)
	}
}

func TestSandboxStore(t *testing.T) {
	s := NewSandboxStore()
	md := &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u", Attempt: 2}
	if got := SandboxName(md); got != "p_ns_u_2" {
		t.Fatalf("SandboxName = %q", got)
	}
	if got := ContainerName(&runtimeapi.ContainerMetadata{Name: "c", Attempt: 1}, md); got != "c_p_ns_u_1" {
		t.Fatalf("ContainerName = %q", got)
	}
	sb := &Sandbox{ID: "s1", Name: "p_ns_u_2", Config: PackSandbox(&runtimeapi.PodSandboxConfig{Metadata: md})}
	s.Reserve(sb.Name, sb.ID)
	s.Add(sb)
	if sb.Status().State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatal("new sandbox not READY")
	}
	sb.SetNotReady()
	sb.SetNotReady()
	if sb.Status().State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatal("not NOTREADY")
	}
	s.Delete(sb)
	if s.Len() != 0 {
		t.Fatal("not deleted")
	}
	if err := s.Reserve(sb.Name, "s2"); err != nil {
		t.Fatal(err)
	}
}

// TestForgottenContainerIsNotSavedAgain: once a removal has deleted a container's record, an
// exit recorded at the same moment must not write it back (the record would outlive the
// container and bring it back after a restart).
func TestForgottenContainerIsNotSavedAgain(t *testing.T) {
	c := NewContainer(ContainerSpec{ID: "c1"})
	var saved, deleted int
	save := func(*Container) error { saved++; return nil }
	if err := c.Save(save); err != nil || saved != 1 {
		t.Fatalf("save before removal: %v, %d saves", err, saved)
	}
	if err := c.Forget(func(id string) error {
		if id != "c1" {
			t.Errorf("deleted %q", id)
		}
		deleted++
		return nil
	}); err != nil || deleted != 1 {
		t.Fatalf("forget: %v, %d deletes", err, deleted)
	}
	if err := c.Save(save); err != nil || saved != 1 {
		t.Fatalf("save after removal: %v, %d saves, want the record left deleted", err, saved)
	}
}
