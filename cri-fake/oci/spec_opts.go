package oci

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
	"github.com/plugsim/plugsim/cri-fake/process"
	"github.com/plugsim/plugsim/internal/mountinfo"
)

// SpecOpt changes an OCI spec, one CRI concern each, in the shape of containerd's
// internal/cri/opts option functions: GenerateSpec applies them in order, so each reads what
// the ones before it set (seccomp's default profile reads the capabilities).
type SpecOpt func(*specs.Spec) error

// SpecInput is what a program container's OCI spec is made of: the CRI configs as the kubelet
// sent them, the image, and what the launcher decided (where the program is, the network
// namespace, the cgroup, the files of the bundle).
type SpecInput struct {
	ContainerID string
	SandboxID   string
	Config      *runtimeapi.ContainerConfig
	Sandbox     *runtimeapi.PodSandboxConfig
	Image       *images.CatalogImage
	// ProgramFile is the program's host path (in the program directory); it is bind-mounted
	// read-only at Image.Program.Path.
	ProgramFile string
	// NetNS is the pod's network namespace file; "" for a host-network pod (the node's).
	NetNS string
	// CgroupsPath is the container's cgroup, as runc takes it.
	CgroupsPath string
	// Resources are the container's resources (CreateContainer's, or the last update).
	Resources *runtimeapi.LinuxContainerResources
	// ResolvConf and Hostname are the bundle's files for /etc/resolv.conf and /etc/hostname.
	ResolvConf, Hostname string
	// MinOOMScoreAdj is the lowest OOM score adjustment runc can set: cri-fake's own when it lacks
	// CAP_SYS_RESOURCE (which lowering it needs), else -1000.
	MinOOMScoreAdj int
	// HeldCapabilities is cri-fake's own effective set (bit n: capability n; 0: not known, every
	// capability): a privileged container, or one adding "ALL", gets those of its capabilities this
	// process holds, as containerd gives them (WithAllCurrentCapabilities, cap.Current()). Asking
	// runc for one the process lacks fails every start ("unable to apply caps: operation not
	// permitted"), as in sandboxes that run root without CAP_SYS_RESOURCE.
	HeldCapabilities uint64
}

// GenerateSpec is the container's OCI spec: the defaults containerd's CRI plugin starts from,
// then every CRI field, each in one option below.
func GenerateSpec(in SpecInput) (*specs.Spec, error) {
	s := &specs.Spec{Version: specs.Version}
	sc := in.Config.GetLinux().GetSecurityContext()
	opts := []SpecOpt{
		withDefaults(),
		withProcessArgs(in.Config, in.Image),
		withEnv(in.Config, in.Image, in.Sandbox.GetHostname()),
		withCwd(in.Config, in.Image),
		withTerminal(in.Config),
		withUser(in.Config, in.Image),
		withNamespaces(in.Sandbox, in.Config, in.NetNS),
		withHostname(in.Sandbox),
		withProgram(in.Image.Program, in.ProgramFile),
		withBundleFiles(in.Sandbox, in.ResolvConf, in.Hostname),
		withMounts(in.Config.GetMounts(), sc.GetPrivileged()),
		withCapabilities(sc, in.HeldCapabilities),
		withFileCapabilities(in.Image.Program),
		withPrivileged(sc.GetPrivileged()),
		withNoNewPrivileges(sc.GetNoNewPrivs()),
		withReadonlyRootfs(sc.GetReadonlyRootfs()),
		withMaskedPaths(sc),
		withResources(in.Resources, in.MinOOMScoreAdj),
		withCgroupsPath(in.CgroupsPath),
		withSysctls(in.Sandbox.GetLinux().GetSysctls()),
		withSeccomp(sc),
		withAnnotations(in),
	}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// withDefaults is containerd's default Linux spec (pkg/oci populateDefaultUnixSpec) as its CRI
// plugin uses it: the standard mounts with /sys/fs/cgroup added and /run left out, no device but
// the ones runc creates in every container, a root named rootfs in the bundle.
func withDefaults() SpecOpt {
	return func(s *specs.Spec) error {
		s.Root = &specs.Root{Path: "rootfs"}
		s.Process = &specs.Process{Cwd: "/"}
		s.Mounts = []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
		}
		s.Linux = &specs.Linux{
			Resources: &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}},
		}
		return nil
	}
}

// withProcessArgs is containerd's rule for the command: the config's command, else the image's
// entrypoint; the config's args, else (when the config gives no command) the image's cmd.
func withProcessArgs(cfg *runtimeapi.ContainerConfig, img *images.CatalogImage) SpecOpt {
	return func(s *specs.Spec) error {
		command, args := cfg.GetCommand(), cfg.GetArgs()
		if len(command) == 0 {
			command = img.Entrypoint
			if len(args) == 0 {
				args = img.Cmd
			}
		}
		argv := append(slices.Clone(command), args...)
		if len(argv) == 0 {
			return errors.New("no command specified")
		}
		s.Process.Args = argv
		return nil
	}
}

// withEnv is the image's environment, then the config's (a later value of a name replaces an
// earlier one), and HOSTNAME, as containerd's CRI plugin sets it.
func withEnv(cfg *runtimeapi.ContainerConfig, img *images.CatalogImage, hostname string) SpecOpt {
	return func(s *specs.Spec) error {
		env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
		set := func(kv string) {
			k, _, _ := strings.Cut(kv, "=")
			for i, e := range env {
				if ek, _, _ := strings.Cut(e, "="); ek == k {
					env[i] = kv
					return
				}
			}
			env = append(env, kv)
		}
		if hostname != "" {
			set("HOSTNAME=" + hostname)
		}
		for _, e := range img.Env {
			set(e)
		}
		for _, kv := range cfg.GetEnvs() {
			set(kv.GetKey() + "=" + string(kv.GetValue()))
		}
		s.Process.Env = env
		return nil
	}
}

func withCwd(cfg *runtimeapi.ContainerConfig, img *images.CatalogImage) SpecOpt {
	return func(s *specs.Spec) error {
		switch {
		case cfg.GetWorkingDir() != "":
			s.Process.Cwd = cfg.GetWorkingDir()
		case img.WorkingDir != "":
			s.Process.Cwd = img.WorkingDir
		}
		if !path.IsAbs(s.Process.Cwd) {
			return fmt.Errorf("working directory %q is not absolute", s.Process.Cwd)
		}
		return nil
	}
}

func withTerminal(cfg *runtimeapi.ContainerConfig) SpecOpt {
	return func(s *specs.Spec) error {
		s.Process.Terminal = cfg.GetTty()
		return nil
	}
}

// withUser resolves the container's user as containerd does, against the program root's own
// /etc/passwd and /etc/group (rootUsers): run_as_user or run_as_username, else the image's user;
// the group from run_as_group, else the user's primary group (0 for a uid the root does not
// list); the groups the user is a member of, then the supplemental groups.
func withUser(cfg *runtimeapi.ContainerConfig, img *images.CatalogImage) SpecOpt {
	return func(s *specs.Spec) error {
		sc := cfg.GetLinux().GetSecurityContext()
		u, err := resolveUser(sc, img.User)
		if err != nil {
			return err
		}
		s.Process.User = u
		return nil
	}
}

// withNamespaces gives the container the pod's network namespace (the node's for a host-network
// pod), and namespaces of its own for PID, IPC, UTS and mounts, or the node's where the pod asks
// for them. A pod's containers share their PID and IPC namespaces through the sandbox's pause
// process in containerd; cri-fake runs no real pause, so a program container's are its own
// (NamespaceMode POD is treated as CONTAINER for them), which cri-fake/README.md lists.
func withNamespaces(sb *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig, netns string) SpecOpt {
	return func(s *specs.Spec) error {
		opts := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
		podOpts := sb.GetLinux().GetSecurityContext().GetNamespaceOptions()
		ns := []specs.LinuxNamespace{{Type: specs.MountNamespace}}
		if podOpts.GetNetwork() != runtimeapi.NamespaceMode_NODE {
			if netns == "" {
				return errors.New("the pod has no network namespace of its own: a program container needs cri-fake's --netns real (or a host-network pod)")
			}
			ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: netns})
			ns = append(ns, specs.LinuxNamespace{Type: specs.UTSNamespace})
		}
		if opts.GetPid() != runtimeapi.NamespaceMode_NODE {
			ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace})
		}
		if opts.GetIpc() != runtimeapi.NamespaceMode_NODE && podOpts.GetIpc() != runtimeapi.NamespaceMode_NODE {
			ns = append(ns, specs.LinuxNamespace{Type: specs.IPCNamespace})
		}
		s.Linux.Namespaces = ns
		return nil
	}
}

// withHostname is the pod's hostname in its own UTS namespace; a host-network pod keeps the
// node's (containerd: no UTS namespace for it).
func withHostname(sb *runtimeapi.PodSandboxConfig) SpecOpt {
	return func(s *specs.Spec) error {
		if sb.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE {
			s.Hostname = sb.GetHostname()
		}
		return nil
	}
}

// withProgram bind-mounts the program, read-only, where the image has it: the only executable
// the root holds, and a file of the program directory whatever the catalog says (images.Program
// takes a file name, never a path).
func withProgram(p *images.Program, file string) SpecOpt {
	return func(s *specs.Spec) error {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: p.Path, Type: "bind", Source: file, Options: []string{"rbind", "ro", "nodev"}})
		return nil
	}
}

// withBundleFiles mounts the container's /etc/resolv.conf (the pod's DNS config, or the node's
// for a pod without one) and /etc/hostname, as containerd mounts the sandbox's; a CRI mount at
// either path (the kubelet's /etc/hosts is one) replaces them in withMounts.
func withBundleFiles(sb *runtimeapi.PodSandboxConfig, resolvConf, hostname string) SpecOpt {
	return func(s *specs.Spec) error {
		if resolvConf != "" {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/etc/resolv.conf", Type: "bind", Source: resolvConf, Options: []string{"rbind", "rprivate", "rw"}})
		}
		if hostname != "" {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/etc/hostname", Type: "bind", Source: hostname, Options: []string{"rbind", "rprivate", "rw"}})
		}
		return nil
	}
}

// MountError is a CRI mount refused before runc is called.
type MountError struct {
	ContainerPath, HostPath, Why string
}

func (e *MountError) Error() string {
	return fmt.Sprintf("mount %q (host path %q): %s", e.ContainerPath, e.HostPath, e.Why)
}

// withMounts turns every CRI mount into an OCI bind mount, as containerd's WithMounts does:
// "rbind", the propagation (rprivate, rslave, rshared), "ro" or "rw" ("rro" for a recursive
// read-only mount). A CRI mount replaces a default one at the same destination (a /dev/shm
// volume, the kubelet's /etc/hosts).
//
// What the kubelet sends is trusted as far as containerd trusts it (a host path's symlinks are
// followed, as runc follows a mount's source), and no further: a container path or host path
// that is not absolute or has a ".." element, a host path that does not exist, and a device node
// for a container that is not privileged are refused, so no mount reaches a host file the
// kubelet did not name.
func withMounts(mounts []*runtimeapi.Mount, privileged bool) SpecOpt {
	return func(s *specs.Spec) error {
		for _, m := range mounts {
			cp, hp := m.GetContainerPath(), m.GetHostPath()
			refuse := func(why string) error { return &MountError{ContainerPath: cp, HostPath: hp, Why: why} }
			if m.GetImage() != nil {
				return refuse("image volumes are not supported")
			}
			for _, p := range []string{cp, hp} {
				if !path.IsAbs(p) || strings.IndexByte(p, 0) >= 0 {
					return refuse("paths must be absolute")
				}
				if slices.Contains(strings.Split(p, "/"), "..") {
					return refuse(`a path with a ".." element is refused`)
				}
			}
			resolved, err := filepath.EvalSymlinks(hp)
			if err != nil {
				return refuse(fmt.Sprintf("the host path cannot be resolved: %v", err))
			}
			st, err := os.Stat(resolved)
			if err != nil {
				return refuse(err.Error())
			}
			if st.Mode()&os.ModeDevice != 0 && !privileged {
				return refuse("a device node is mounted only into a privileged container")
			}
			opts := []string{"rbind"}
			switch m.GetPropagation() {
			case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
				if err := mountPropagates(resolved, false); err != nil {
					return refuse(err.Error())
				}
				opts = append(opts, "rslave")
				if s.Linux.RootfsPropagation != "rshared" {
					s.Linux.RootfsPropagation = "rslave"
				}
			case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
				// A mount the container makes under it reaches the host (the kubelet's pods directory,
				// where a CSI node plugin publishes volumes) only when the host's mount is shared and
				// the container's root is rshared too: runc makes the root rslave otherwise, and a
				// bind mount of a slave is no peer of the host's (containerd's WithMounts).
				if err := mountPropagates(resolved, true); err != nil {
					return refuse(err.Error())
				}
				opts = append(opts, "rshared")
				s.Linux.RootfsPropagation = "rshared"
			default:
				opts = append(opts, "rprivate")
			}
			switch {
			case m.GetRecursiveReadOnly():
				opts = append(opts, "rro")
			case m.GetReadonly():
				opts = append(opts, "ro")
			default:
				opts = append(opts, "rw")
			}
			dest := path.Clean(cp)
			s.Mounts = slices.DeleteFunc(s.Mounts, func(d specs.Mount) bool { return d.Destination == dest })
			s.Mounts = append(s.Mounts, specs.Mount{Destination: dest, Type: "bind", Source: resolved, Options: opts})
		}
		return nil
	}
}

// mountPropagates checks, as containerd's ensureShared and ensureSharedOrSlave do, that the mount
// holding p (in cri-fake's mount namespace, which runc's is made from) is shared, or for
// HostToContainer shared or a slave: otherwise nothing would propagate, and the kubelet would wait
// for a mount that never shows.
func mountPropagates(p string, bidirectional bool) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var holder *mountinfo.Mount
	for _, m := range mountinfo.Parse(b) {
		if p == m.MountPoint || m.MountPoint == "/" || strings.HasPrefix(p, m.MountPoint+"/") {
			if holder == nil || len(m.MountPoint) >= len(holder.MountPoint) {
				holder = &m
			}
		}
	}
	if holder == nil {
		return fmt.Errorf("no mount holds %s", p)
	}
	if holder.Tag("shared") != 0 || (!bidirectional && holder.Tag("master") != 0) {
		return nil
	}
	if bidirectional {
		return fmt.Errorf("path %q is mounted on %q but it is not a shared mount", p, holder.MountPoint)
	}
	return fmt.Errorf("path %q is mounted on %q but it is not a shared or slave mount", p, holder.MountPoint)
}

// withCapabilities is the CRI's capability set, by the rule the simulation uses too
// (process.EffectiveCapabilities: containerd's default set, drops, adds, "ALL"), in the
// bounding, effective and permitted sets as containerd sets them. "All" is the capabilities held
// (SpecInput.HeldCapabilities), as containerd's is the ones its process holds.
func withCapabilities(sc *runtimeapi.LinuxContainerSecurityContext, held uint64) SpecOpt {
	return func(s *specs.Spec) error {
		add := sc.GetCapabilities().GetAddCapabilities()
		caps := process.EffectiveCapabilities(add, sc.GetCapabilities().GetDropCapabilities(), sc.GetPrivileged())
		if held != 0 && (sc.GetPrivileged() || slices.ContainsFunc(add, func(c string) bool { return strings.EqualFold(c, "ALL") })) {
			names := process.CapabilityNames()
			caps = slices.DeleteFunc(caps, func(c string) bool {
				n := slices.Index(names, c)
				return n >= 0 && held&(1<<n) == 0
			})
		}
		s.Process.Capabilities = &specs.LinuxCapabilities{Bounding: caps, Effective: slices.Clone(caps), Permitted: slices.Clone(caps)}
		return nil
	}
}

// withPrivileged lets a privileged container use every device and write /sys and its cgroups,
// as containerd's WithPrivileged does (containerd also adds every host device node; cri-fake
// adds none, which cri-fake/README.md lists).
// withFileCapabilities gives the program's file capabilities (images.Program.FileCapabilities)
// that are in the container's bounding set as ambient ones: a non-root process keeps them across
// exec as setcap +ep would keep them, and a set without them (drop ALL) gives none.
func withFileCapabilities(p *images.Program) SpecOpt {
	return func(s *specs.Spec) error {
		c := s.Process.Capabilities
		for _, fc := range p.FileCapabilities {
			if slices.Contains(c.Bounding, fc) && !slices.Contains(c.Ambient, fc) {
				c.Ambient = append(c.Ambient, fc)
				c.Inheritable = append(c.Inheritable, fc)
			}
		}
		return nil
	}
}

func withPrivileged(privileged bool) SpecOpt {
	return func(s *specs.Spec) error {
		if !privileged {
			return nil
		}
		s.Linux.Resources.Devices = []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
		for i, m := range s.Mounts {
			if m.Destination == "/sys" || m.Destination == "/sys/fs/cgroup" {
				s.Mounts[i].Options = slices.DeleteFunc(slices.Clone(m.Options), func(o string) bool { return o == "ro" })
			}
		}
		return nil
	}
}

func withNoNewPrivileges(on bool) SpecOpt {
	return func(s *specs.Spec) error {
		s.Process.NoNewPrivileges = on
		return nil
	}
}

func withReadonlyRootfs(on bool) SpecOpt {
	return func(s *specs.Spec) error {
		s.Root.Readonly = on
		return nil
	}
}

// defaultMaskedPaths and defaultReadonlyPaths are containerd's (pkg/oci), which the kubelet also
// sends for the Default proc mount type.
var (
	defaultMaskedPaths = []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/sys/devices/virtual/powercap", "/proc/scsi"}
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// withMaskedPaths is the CRI's masked and read-only /proc and /sys paths, containerd's defaults
// when it sends none, and none for a privileged container.
func withMaskedPaths(sc *runtimeapi.LinuxContainerSecurityContext) SpecOpt {
	return func(s *specs.Spec) error {
		if sc.GetPrivileged() {
			return nil
		}
		s.Linux.MaskedPaths, s.Linux.ReadonlyPaths = defaultMaskedPaths, defaultReadonlyPaths
		if sc.GetMaskedPaths() != nil || sc.GetReadonlyPaths() != nil {
			s.Linux.MaskedPaths, s.Linux.ReadonlyPaths = sc.GetMaskedPaths(), sc.GetReadonlyPaths()
		}
		return nil
	}
}

// withResources is the CRI's CPU and memory resources as cgroup settings (containerd's
// WithResources): memory limit, CPU shares, quota and period, cpuset, and the OOM score, raised to
// min when lower (the kubelet asks -997 for a Guaranteed pod; without CAP_SYS_RESOURCE runc's
// write of it fails the create, as containerd's would on such a host).
func withResources(r *runtimeapi.LinuxContainerResources, min int) SpecOpt {
	return func(s *specs.Spec) error {
		if r == nil {
			return nil
		}
		s.Linux.Resources.CPU, s.Linux.Resources.Memory = resources(r)
		if adj := max(int(r.GetOomScoreAdj()), min); adj != 0 {
			s.Process.OOMScoreAdj = &adj
		}
		return nil
	}
}

// resources is the cgroup part of withResources, also what `runc update` is given.
func resources(r *runtimeapi.LinuxContainerResources) (*specs.LinuxCPU, *specs.LinuxMemory) {
	cpu := &specs.LinuxCPU{Cpus: r.GetCpusetCpus(), Mems: r.GetCpusetMems()}
	if v := uint64(r.GetCpuShares()); v != 0 {
		cpu.Shares = &v
	}
	if v := r.GetCpuQuota(); v != 0 {
		cpu.Quota = &v
	}
	if v := uint64(r.GetCpuPeriod()); v != 0 {
		cpu.Period = &v
	}
	mem := &specs.LinuxMemory{}
	if v := r.GetMemoryLimitInBytes(); v > 0 {
		mem.Limit = &v
		if sw := r.GetMemorySwapLimitInBytes(); sw > 0 {
			mem.Swap = &sw
		}
	}
	return cpu, mem
}

func withCgroupsPath(p string) SpecOpt {
	return func(s *specs.Spec) error {
		s.Linux.CgroupsPath = p
		return nil
	}
}

// withSysctls applies the pod's sysctls in the container's namespaces, as containerd applies
// them in the sandbox's (runc refuses one whose namespace the container does not have).
func withSysctls(sysctls map[string]string) SpecOpt {
	return func(s *specs.Spec) error {
		if len(sysctls) > 0 {
			s.Linux.Sysctl = sysctls
		}
		return nil
	}
}

// withSeccomp is the CRI's seccomp profile: RuntimeDefault is moby's default profile fitted to
// the container's capabilities (what Docker uses; containerd's contrib/seccomp is the same list),
// Localhost a profile file on the node in that format, Unconfined and a privileged container
// none. The filter is applied by runc, built with libseccomp.
func withSeccomp(sc *runtimeapi.LinuxContainerSecurityContext) SpecOpt {
	return func(s *specs.Spec) error {
		if sc.GetPrivileged() {
			return nil
		}
		kind, localhost := runtimeapi.SecurityProfile_Unconfined, ""
		if p := sc.GetSeccomp(); p != nil {
			kind, localhost = p.GetProfileType(), p.GetLocalhostRef()
		} else {
			switch v := sc.GetSeccompProfilePath(); {
			case v == "runtime/default" || v == "docker/default":
				kind = runtimeapi.SecurityProfile_RuntimeDefault
			case strings.HasPrefix(v, "localhost/"):
				kind, localhost = runtimeapi.SecurityProfile_Localhost, strings.TrimPrefix(v, "localhost/")
			}
		}
		var err error
		switch kind {
		case runtimeapi.SecurityProfile_RuntimeDefault:
			s.Linux.Seccomp, err = mobyseccomp.GetDefaultProfile(s)
		case runtimeapi.SecurityProfile_Localhost:
			var body []byte
			if body, err = os.ReadFile(localhost); err != nil {
				return fmt.Errorf("failed to load seccomp profile %q: %w", localhost, err)
			}
			s.Linux.Seccomp, err = mobyseccomp.LoadProfile(string(body), s)
		}
		if err != nil {
			return fmt.Errorf("seccomp profile: %w", err)
		}
		return nil
	}
}

// withAnnotations are containerd's CRI annotations (internal/cri/annotations), which tools that
// read a bundle's config.json look for.
func withAnnotations(in SpecInput) SpecOpt {
	return func(s *specs.Spec) error {
		md := in.Sandbox.GetMetadata()
		s.Annotations = map[string]string{
			"io.kubernetes.cri.container-type":    "container",
			"io.kubernetes.cri.container-name":    in.Config.GetMetadata().GetName(),
			"io.kubernetes.cri.sandbox-id":        in.SandboxID,
			"io.kubernetes.cri.sandbox-name":      md.GetName(),
			"io.kubernetes.cri.sandbox-namespace": md.GetNamespace(),
			"io.kubernetes.cri.sandbox-uid":       md.GetUid(),
			"io.kubernetes.cri.image-name":        in.Config.GetImage().GetImage(),
		}
		return nil
	}
}
