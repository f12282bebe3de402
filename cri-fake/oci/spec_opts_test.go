package oci

import (
	"os"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
)

func testInput(mod func(*SpecInput)) SpecInput {
	in := SpecInput{
		ContainerID: "c1", SandboxID: "s1",
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{}}},
		Sandbox: &runtimeapi.PodSandboxConfig{Hostname: "pod1", Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod1", Namespace: "ns", Uid: "u"}},
		Image: &images.CatalogImage{User: "65532:65532", Entrypoint: []string{"/coredns"}, Cmd: []string{"-conf", "/etc/coredns/Corefile"},
			Program: &images.Program{Binary: "coredns", Path: "/coredns"}},
		ProgramFile: "/bin/true", NetNS: "/run/netns/pod1", CgroupsPath: "parent/c1", MinOOMScoreAdj: -1000,
	}
	if mod != nil {
		mod(&in)
	}
	return in
}

func mount(s *specs.Spec, dest string) (specs.Mount, bool) {
	for _, m := range s.Mounts {
		if m.Destination == dest {
			return m, true
		}
	}
	return specs.Mount{}, false
}

// TestGenerateSpec checks the CRI → OCI mapping field by field, as containerd's CRI plugin makes it.
func TestGenerateSpec(t *testing.T) {
	s, err := GenerateSpec(testInput(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Process.Args; !slices.Equal(got, []string{"/coredns", "-conf", "/etc/coredns/Corefile"}) {
		t.Errorf("args %v: want the image's entrypoint and cmd", got)
	}
	if s.Process.User.UID != 65532 || s.Process.User.GID != 65532 {
		t.Errorf("user %+v: want the image's 65532:65532", s.Process.User)
	}
	if s.Hostname != "pod1" || s.Linux.CgroupsPath != "parent/c1" || s.Root.Readonly {
		t.Errorf("hostname %q cgroups %q readonly %v", s.Hostname, s.Linux.CgroupsPath, s.Root.Readonly)
	}
	var types []specs.LinuxNamespaceType
	for _, ns := range s.Linux.Namespaces {
		types = append(types, ns.Type)
		if ns.Type == specs.NetworkNamespace && ns.Path != "/run/netns/pod1" {
			t.Errorf("network namespace %q: want the pod's", ns.Path)
		}
	}
	for _, want := range []specs.LinuxNamespaceType{specs.MountNamespace, specs.NetworkNamespace, specs.UTSNamespace, specs.PIDNamespace, specs.IPCNamespace} {
		if !slices.Contains(types, want) {
			t.Errorf("namespaces %v: no %s", types, want)
		}
	}
	if m, ok := mount(s, "/coredns"); !ok || m.Source != "/bin/true" || !slices.Contains(m.Options, "ro") {
		t.Errorf("the program's mount: %+v", m)
	}
	if len(s.Process.Capabilities.Bounding) != 14 || s.Linux.Seccomp != nil || len(s.Linux.MaskedPaths) == 0 {
		t.Errorf("defaults: %d capabilities, seccomp %v, masked %v", len(s.Process.Capabilities.Bounding), s.Linux.Seccomp, s.Linux.MaskedPaths)
	}

	// The config's command and args replace the image's; its env comes after the image's.
	s, err = GenerateSpec(testInput(func(in *SpecInput) {
		in.Config.Command = []string{"/coredns"}
		in.Config.Args = []string{"-version"}
		in.Config.Envs = []*runtimeapi.KeyValue{{Key: "A", Value: []byte("1")}}
		in.Image.Env = []string{"A=0", "B=2"}
		in.Config.Linux.Resources = &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20, CpuQuota: 50000, CpuPeriod: 100000, CpuShares: 512}
		in.Resources = in.Config.Linux.Resources
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Process.Args, []string{"/coredns", "-version"}) || !slices.Contains(s.Process.Env, "A=1") || !slices.Contains(s.Process.Env, "B=2") {
		t.Errorf("args %v env %v", s.Process.Args, s.Process.Env)
	}
	if r := s.Linux.Resources; *r.Memory.Limit != 64<<20 || *r.CPU.Quota != 50000 || *r.CPU.Period != 100000 || *r.CPU.Shares != 512 {
		t.Errorf("resources %+v %+v", r.Memory, r.CPU)
	}

	// Host network and PID: the node's namespaces; a privileged container: every capability, no
	// masked paths, no seccomp, every device, /sys writable.
	s, err = GenerateSpec(testInput(func(in *SpecInput) {
		in.NetNS = ""
		in.Sandbox.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}}
		sc := in.Config.Linux.SecurityContext
		sc.NamespaceOptions = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_NODE}
		sc.Privileged = true
		sc.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Type == specs.NetworkNamespace || ns.Type == specs.PIDNamespace || ns.Type == specs.UTSNamespace {
			t.Errorf("host network and PID: a %s namespace of its own", ns.Type)
		}
	}
	if len(s.Process.Capabilities.Bounding) < 40 || s.Linux.MaskedPaths != nil || s.Linux.Seccomp != nil || !s.Linux.Resources.Devices[0].Allow {
		t.Errorf("privileged: %d capabilities, masked %v, seccomp %v, devices %+v", len(s.Process.Capabilities.Bounding), s.Linux.MaskedPaths, s.Linux.Seccomp != nil, s.Linux.Resources.Devices)
	}
	if m, _ := mount(s, "/sys"); slices.Contains(m.Options, "ro") {
		t.Errorf("privileged: /sys %v", m.Options)
	}

	// "All" is what cri-fake holds, as containerd's cap.Current(): held without CAP_SYS_RESOURCE (24),
	// a privileged container and one adding ALL get every capability but it; a capability asked by
	// name is passed on (runc then refuses it, as with containerd).
	held := (uint64(1)<<41 - 1) &^ (1 << 24)
	for _, mod := range []func(*runtimeapi.LinuxContainerSecurityContext){
		func(sc *runtimeapi.LinuxContainerSecurityContext) { sc.Privileged = true },
		func(sc *runtimeapi.LinuxContainerSecurityContext) {
			sc.Capabilities = &runtimeapi.Capability{AddCapabilities: []string{"ALL"}}
		},
	} {
		s, err = GenerateSpec(testInput(func(in *SpecInput) { in.HeldCapabilities = held; mod(in.Config.Linux.SecurityContext) }))
		if err != nil {
			t.Fatal(err)
		}
		c := s.Process.Capabilities
		if len(c.Bounding) != 40 || slices.Contains(c.Bounding, "CAP_SYS_RESOURCE") || slices.Contains(c.Effective, "CAP_SYS_RESOURCE") || !slices.Contains(c.Bounding, "CAP_SYS_ADMIN") {
			t.Errorf("held without CAP_SYS_RESOURCE: bounding %v", c.Bounding)
		}
	}
	s, err = GenerateSpec(testInput(func(in *SpecInput) {
		in.HeldCapabilities = held
		in.Config.Linux.SecurityContext.Capabilities = &runtimeapi.Capability{AddCapabilities: []string{"SYS_RESOURCE"}}
	}))
	if err != nil || !slices.Contains(s.Process.Capabilities.Bounding, "CAP_SYS_RESOURCE") {
		t.Errorf("CAP_SYS_RESOURCE asked by name: bounding %v, %v", s.Process.Capabilities.Bounding, err)
	}

	// The image's file capability is ambient while the container's set holds it, and not once dropped.
	s, err = GenerateSpec(testInput(func(in *SpecInput) { in.Image.Program.FileCapabilities = []string{"CAP_NET_BIND_SERVICE"} }))
	if err != nil || !slices.Equal(s.Process.Capabilities.Ambient, []string{"CAP_NET_BIND_SERVICE"}) {
		t.Errorf("file capability: ambient %v, %v", s.Process.Capabilities.Ambient, err)
	}
	s, err = GenerateSpec(testInput(func(in *SpecInput) {
		in.Image.Program.FileCapabilities = []string{"CAP_NET_BIND_SERVICE"}
		in.Config.Linux.SecurityContext.Capabilities = &runtimeapi.Capability{DropCapabilities: []string{"ALL"}}
	}))
	if err != nil || len(s.Process.Capabilities.Ambient) != 0 {
		t.Errorf("file capability dropped: ambient %v, %v", s.Process.Capabilities.Ambient, err)
	}

	// RuntimeDefault seccomp is moby's profile; no_new_privs and a read-only root as asked.
	s, err = GenerateSpec(testInput(func(in *SpecInput) {
		sc := in.Config.Linux.SecurityContext
		sc.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
		sc.NoNewPrivs, sc.ReadonlyRootfs = true, true
	}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction != specs.ActErrno || len(s.Linux.Seccomp.Syscalls) < 10 || !s.Process.NoNewPrivileges || !s.Root.Readonly {
		t.Errorf("seccomp %v nnp %v readonly %v", s.Linux.Seccomp != nil, s.Process.NoNewPrivileges, s.Root.Readonly)
	}
}

// TestGenerateSpecMounts: each CRI mount is a bind mount with its propagation and mode, and
// replaces a default at its destination; a propagating mount makes the root propagate too.
func TestGenerateSpecMounts(t *testing.T) {
	dir := sharedDir(t)
	s, err := GenerateSpec(testInput(func(in *SpecInput) {
		in.Config.Mounts = []*runtimeapi.Mount{
			{ContainerPath: "/etc/coredns", HostPath: dir, Readonly: true},
			{ContainerPath: "/var/lib/kubelet", HostPath: dir, Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
			{ContainerPath: "/plugins", HostPath: dir, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
			{ContainerPath: "/dev/shm", HostPath: dir},
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	for dest, want := range map[string][]string{
		"/etc/coredns": {"rbind", "rprivate", "ro"}, "/var/lib/kubelet": {"rbind", "rshared", "rw"},
		"/plugins": {"rbind", "rslave", "rw"}, "/dev/shm": {"rbind", "rprivate", "rw"},
	} {
		m, ok := mount(s, dest)
		if !ok || m.Type != "bind" || m.Source != dir || !slices.Equal(m.Options, want) {
			t.Errorf("%s: %+v, want a bind of %s with %v", dest, m, dir, want)
		}
	}
	n := 0
	for _, m := range s.Mounts {
		if m.Destination == "/dev/shm" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("/dev/shm mounted %d times", n)
	}
	if s.Linux.RootfsPropagation != "rshared" {
		t.Errorf("rootfsPropagation %q with a Bidirectional mount, want rshared", s.Linux.RootfsPropagation)
	}
}

// TestGenerateSpecPropagation: a Bidirectional mount needs a shared host mount and a HostToContainer
// one a shared or slave one, with containerd's words otherwise; the root propagates as the most
// propagating mount asks (rshared, else rslave), and a pod without either keeps runc's default.
func TestGenerateSpecPropagation(t *testing.T) {
	shared, private := sharedDir(t), t.TempDir()
	gen := func(mounts ...*runtimeapi.Mount) (*specs.Spec, error) {
		return GenerateSpec(testInput(func(in *SpecInput) { in.Config.Mounts = mounts }))
	}
	bidi, h2c := runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	if _, err := gen(&runtimeapi.Mount{ContainerPath: "/pods", HostPath: private, Propagation: bidi}); err == nil || !strings.Contains(err.Error(), "but it is not a shared mount") {
		t.Errorf("Bidirectional from a private mount: %v, want containerd's \"is not a shared mount\"", err)
	}
	if _, err := gen(&runtimeapi.Mount{ContainerPath: "/pods", HostPath: private, Propagation: h2c}); err == nil || !strings.Contains(err.Error(), "but it is not a shared or slave mount") {
		t.Errorf("HostToContainer from a private mount: %v, want containerd's \"is not a shared or slave mount\"", err)
	}
	for _, tc := range []struct {
		mounts []*runtimeapi.Mount
		want   string
	}{
		{[]*runtimeapi.Mount{{ContainerPath: "/data", HostPath: private}}, ""},
		{[]*runtimeapi.Mount{{ContainerPath: "/pods", HostPath: shared, Propagation: h2c}}, "rslave"},
		{[]*runtimeapi.Mount{{ContainerPath: "/pods", HostPath: shared, Propagation: bidi}, {ContainerPath: "/p", HostPath: shared, Propagation: h2c}}, "rshared"},
		{[]*runtimeapi.Mount{{ContainerPath: "/p", HostPath: shared, Propagation: h2c}, {ContainerPath: "/pods", HostPath: shared, Propagation: bidi}}, "rshared"},
	} {
		s, err := gen(tc.mounts...)
		if err != nil {
			t.Fatal(err)
		}
		if s.Linux.RootfsPropagation != tc.want {
			t.Errorf("%v: rootfsPropagation %q, want %q", tc.mounts, s.Linux.RootfsPropagation, tc.want)
		}
	}
}

// sharedDir is a new directory that is a shared mount of its own (bound onto itself, made shared,
// unmounted at the end), as the kubelet makes its root directory; the test skips when not root.
func sharedDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a shared mount needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestResolveUser is containerd's resolution against the program root's files.
func TestResolveUser(t *testing.T) {
	i := func(v int64) *runtimeapi.Int64Value { return &runtimeapi.Int64Value{Value: v} }
	for _, tc := range []struct {
		name      string
		sc        *runtimeapi.LinuxContainerSecurityContext
		image     string
		uid, gid  uint32
		groups    []uint32
		wantError string
	}{
		{name: "image default root", uid: 0, gid: 0},
		{name: "image nonroot by name", image: "nonroot", uid: 65532, gid: 65532},
		{name: "image uid:gid", image: "1000:2000", uid: 1000, gid: 2000},
		{name: "run_as_user listed", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUser: i(65534)}, image: "nonroot", uid: 65534, gid: 65534},
		{name: "run_as_user unlisted gets gid 0", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUser: i(1000)}, uid: 1000, gid: 0},
		{name: "run_as_group and groups", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUser: i(1000), RunAsGroup: i(3000), SupplementalGroups: []int64{4, 5}}, uid: 1000, gid: 3000, groups: []uint32{4, 5}},
		{name: "run_as_username", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "nobody"}, uid: 65534, gid: 65534},
		{name: "unknown username", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "www-data"}, wantError: "no users found"},
		{name: "unknown image user", image: "www-data", wantError: "no users found"},
	} {
		u, err := resolveUser(tc.sc, tc.image)
		if tc.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.wantError)
			}
			continue
		}
		if err != nil || u.UID != tc.uid || u.GID != tc.gid || !slices.Equal(u.AdditionalGids, tc.groups) {
			t.Errorf("%s: %+v %v, want %d:%d %v", tc.name, u, err, tc.uid, tc.gid, tc.groups)
		}
	}
}
