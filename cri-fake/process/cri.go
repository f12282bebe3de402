package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/applets"
	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageConfig is what the image catalog knows about an image that matters to
// the process: the OCI image config fields and the catalog's behaviour JSON.
type ImageConfig struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	// User is the image config user: "1002", "www-data", "1003:1003", "www-data:www-data".
	User string
	// Behavior is the catalog's "behavior" object (see ImageBehaviour); may be empty.
	Behavior json.RawMessage
	// Layer is the image content. nil builds it with ImageLayer on every
	// call; a runtime with many containers builds it once per image and
	// keeps it here, so all containers of the image share it.
	Layer *vfs.Layer
	// Volumes is the content (ImageLayer) of the images the container's image
	// volumes name (CRI Mount.image), by the reference in the mount
	// (ImageSpec.image). An image volume whose image is not here fails FromCRI.
	Volumes map[string]*vfs.Layer
}

// ImageLayer builds an image's content: the base layer the behaviour names
// (or GuessBase of the image's entrypoint and cmd) plus the behaviour's files.
// The result is immutable once handed to NewFS and can be shared.
func ImageLayer(img ImageConfig) (*vfs.Layer, error) {
	ib, err := ParseImageBehaviour(img.Behavior)
	if err != nil {
		return nil, err
	}
	base := ib.Base
	if base == "" {
		base = GuessBase(append(append([]string(nil), img.Entrypoint...), img.Cmd...))
	}
	layer := BaseLayer(base)
	for p, content := range ib.Files {
		layer.AddFile(p, []byte(content), 0o644)
	}
	for p, applet := range ib.Executables {
		if _, ok := applets.Table().Lookup(applet); !ok {
			return nil, fmt.Errorf("image behavior executables: %s: unknown applet %q", p, applet)
		}
		layer.AddApplet(p, applet)
	}
	for _, p := range ib.Setuid {
		if !layer.SetUID(p) {
			return nil, fmt.Errorf("image behavior setuid: %s is not a file of the image", p)
		}
	}
	// An image contains the program its config runs. When the base does not
	// have it, it becomes a generic program: it runs, prints nothing and ends
	// on a signal (default actions: TERM 143), plus what the behaviour says.
	prog := img.Entrypoint
	if len(prog) == 0 {
		prog = img.Cmd
	}
	if len(prog) > 0 && prog[0] != "" {
		p := prog[0]
		if !strings.HasPrefix(p, "/") {
			p = "/usr/local/bin/" + p
		}
		if !layer.Has(prog[0]) {
			layer.AddApplet(p, "program")
		}
	}
	return layer, nil
}

// ImageBehaviour is the JSON the image catalog may carry per image under
// "behavior". Every field is optional.
//
//	{"base": "nginx", "exitCode": 3, "exitAfter": "5s", "crashOnStart": false,
//	 "linesPerSecond": 10, "failReadiness": false, "memoryBytes": 67108864,
//	 "users": [{"name": "app", "uid": 1000, "gid": 1000}],
//	 "groups": [{"name": "grp", "gid": 50000, "members": ["app"]}],
//	 "files": {"/etc/motd": "hello\n"}}
type ImageBehaviour struct {
	// Base is the base content (BaseLayer); empty means guessed from the command.
	Base           string `json:"base,omitempty"`
	ExitCode       *int   `json:"exitCode,omitempty"`
	ExitAfter      string `json:"exitAfter,omitempty"`
	CrashOnStart   bool   `json:"crashOnStart,omitempty"`
	LinesPerSecond int    `json:"linesPerSecond,omitempty"`
	FailReadiness  bool   `json:"failReadiness,omitempty"`
	MemoryBytes    uint64 `json:"memoryBytes,omitempty"`
	Users          []struct {
		Name string `json:"name"`
		UID  int    `json:"uid"`
		GID  int    `json:"gid"`
		Home string `json:"home,omitempty"`
	} `json:"users,omitempty"`
	Groups []struct {
		Name    string   `json:"name"`
		GID     int      `json:"gid"`
		Members []string `json:"members,omitempty"`
	} `json:"groups,omitempty"`
	Files map[string]string `json:"files,omitempty"`
	// Executables maps paths in the image to the applet they behave like
	// ({"/usr/bin/myserver": "agnhost"}).
	Executables map[string]string `json:"executables,omitempty"`
	// Setuid lists image files (executables above, or the base's) that have
	// the set-user-ID bit and are owned by root, as `chmod +s` leaves them.
	Setuid []string `json:"setuid,omitempty"`
}

// ParseImageBehaviour decodes the catalog's behaviour JSON (empty is fine).
func ParseImageBehaviour(raw json.RawMessage) (ImageBehaviour, error) {
	var b ImageBehaviour
	if len(raw) == 0 || string(raw) == "null" {
		return b, nil
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return b, fmt.Errorf("image behavior: %w", err)
	}
	return b, nil
}

// Behaviour converts the catalog form into Spec.Behaviour.
func (b ImageBehaviour) Behaviour() (kernel.Behaviour, error) {
	out := kernel.Behaviour{CrashOnStart: b.CrashOnStart, LinesPerSecond: b.LinesPerSecond, FailReadiness: b.FailReadiness, MemoryBytes: b.MemoryBytes}
	if b.ExitCode != nil || b.ExitAfter != "" {
		e := &kernel.ExitBehaviour{}
		if b.ExitCode != nil {
			e.Code = *b.ExitCode
		}
		if b.ExitAfter != "" {
			d, err := time.ParseDuration(b.ExitAfter)
			if err != nil {
				return out, fmt.Errorf("image behavior exitAfter %q: %w", b.ExitAfter, err)
			}
			e.After = d
		}
		out.Exit = e // with CrashOnStart only the code is used
	}
	return out, nil
}

// Command is the argv a runtime runs, by the rule containerd and Docker share:
// a container command replaces the image entrypoint and then only the
// container args follow; otherwise the image entrypoint is followed by the
// container args, or by the image cmd when there are none.
func Command(imageEntrypoint, imageCmd, command, args []string) []string {
	var out []string
	if len(command) > 0 {
		out = append(out, command...)
		return append(out, args...)
	}
	out = append(out, imageEntrypoint...)
	if len(args) > 0 {
		return append(out, args...)
	}
	return append(out, imageCmd...)
}

// Executable is the first word of what Command returns (false when that is empty), without
// building the argv.
func Executable(imageEntrypoint, imageCmd, command, args []string) (string, bool) {
	for _, words := range [][]string{command, imageEntrypoint, args, imageCmd} {
		if len(words) > 0 {
			return words[0], true
		}
	}
	return "", false
}

// GuessBase picks the base content for a command when the catalog does not
// say: the program that the image runs decides (nginx, httpd, agnhost,
// pause), anything else is busybox.
func GuessBase(argv []string) string {
	for _, a := range argv {
		switch path.Base(a) {
		case "nginx":
			return "nginx"
		case "httpd", "httpd-foreground":
			return "httpd"
		case "agnhost":
			return "agnhost"
		case "pause":
			if strings.HasPrefix(a, "/") {
				return "pause"
			}
		}
	}
	return "busybox"
}

// ErrGroupWithoutUser is returned when run_as_group is set without a user,
// which containerd rejects at CreateContainer.
var ErrGroupWithoutUser = errors.New("user group is specified without user")

// UserError is a run_as_username or image user that /etc/passwd does not
// know (containerd fails CreateContainer with it).
type UserError struct{ User string }

func (e *UserError) Error() string {
	return fmt.Sprintf("unable to find user %s: no matching entries in passwd file", e.User)
}

type passwdEntry struct {
	name     string
	uid, gid int
}

func readPasswd(fsys *vfs.FS) []passwdEntry {
	data, _ := fsys.ReadFile("/etc/passwd")
	var out []passwdEntry
	rest := string(data)
	for rest != "" {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		name, r, _ := strings.Cut(line, ":")
		_, r, _ = strings.Cut(r, ":") // password
		uidS, r, _ := strings.Cut(r, ":")
		gidS, _, _ := strings.Cut(r, ":")
		uid, err1 := strconv.Atoi(uidS)
		gid, err2 := strconv.Atoi(gidS)
		if err1 == nil && err2 == nil {
			out = append(out, passwdEntry{name, uid, gid})
		}
	}
	return out
}

func lookupGroup(fsys *vfs.FS, name string) (int, bool) {
	data, _ := fsys.ReadFile("/etc/group")
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 3 && f[0] == name {
			gid, err := strconv.Atoi(f[2])
			return gid, err == nil
		}
	}
	return 0, false
}

// memberGroups are the /etc/group entries listing user as a member
// (containerd's supplemental groups from the image, policy Merge).
func memberGroups(fsys *vfs.FS, user string) []int {
	if user == "" {
		return nil
	}
	data, _ := fsys.ReadFile("/etc/group")
	var out []int
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 4 {
			continue
		}
		for _, m := range strings.Split(f[3], ",") {
			if m == user {
				if gid, err := strconv.Atoi(f[2]); err == nil {
					out = append(out, gid)
				}
			}
		}
	}
	return out
}

// ResolveIdentity computes the process identity the way containerd does from
// the image user and the container's security context: run_as_user or
// run_as_username win over the image user; the primary group comes from
// run_as_group, the user spec ("uid:gid"), or the user's /etc/passwd entry;
// supplemental groups are the /etc/group memberships of the user plus the
// requested ones. Capabilities follow EffectiveCapabilities.
func ResolveIdentity(fsys *vfs.FS, imageUser string, sc *runtimeapi.LinuxContainerSecurityContext) (kernel.Identity, error) {
	var id kernel.Identity
	userSpec := imageUser
	if sc.GetRunAsUser() != nil {
		userSpec = strconv.FormatInt(sc.GetRunAsUser().GetValue(), 10)
	} else if sc.GetRunAsUsername() != "" {
		userSpec = sc.GetRunAsUsername()
	}
	if sc.GetRunAsGroup() != nil && sc.GetRunAsUser() == nil && sc.GetRunAsUsername() == "" {
		return id, fmt.Errorf("%w: run_as_group %d", ErrGroupWithoutUser, sc.GetRunAsGroup().GetValue())
	}
	users := readPasswd(fsys)
	user, group, hasGroup := strings.Cut(userSpec, ":")
	if user == "" {
		user = "0" // no user anywhere: root, with root's groups from the image
	}
	if n, err := strconv.Atoi(user); err == nil {
		id.UID = n
		for _, u := range users {
			if u.uid == n {
				id.GID, id.Username = u.gid, u.name
				break
			}
		}
	} else {
		found := false
		for _, u := range users {
			if u.name == user {
				id.UID, id.GID, id.Username, found = u.uid, u.gid, u.name, true
				break
			}
		}
		if !found {
			return id, &UserError{User: user}
		}
	}
	if hasGroup && group != "" {
		if n, err := strconv.Atoi(group); err == nil {
			id.GID = n
		} else if gid, ok := lookupGroup(fsys, group); ok {
			id.GID = gid
		} else {
			return id, fmt.Errorf("unable to find group %s: no matching entries in group file", group)
		}
	}
	if sc.GetRunAsGroup() != nil {
		id.GID = int(sc.GetRunAsGroup().GetValue())
	}
	seen := map[int]bool{id.GID: true}
	add := func(g int) {
		if !seen[g] {
			seen[g] = true
			id.AdditionalGIDs = append(id.AdditionalGIDs, g)
		}
	}
	if sc.GetSupplementalGroupsPolicy() != runtimeapi.SupplementalGroupsPolicy_Strict {
		for _, g := range memberGroups(fsys, id.Username) {
			add(g)
		}
	}
	for _, g := range sc.GetSupplementalGroups() {
		add(int(g))
	}
	id.Privileged = sc.GetPrivileged()
	id.NoNewPrivs = sc.GetNoNewPrivs()
	id.Capabilities = kernel.EffectiveCapabilities(sc.GetCapabilities().GetAddCapabilities(), sc.GetCapabilities().GetDropCapabilities(), sc.GetPrivileged())
	return id, nil
}

// FromCRI builds the Spec of a container's main process from its CRI config,
// its sandbox's config and the image: command, environment, working
// directory, identity, hostname, and the file system view (mounts onto the
// real host paths, DNS, sysctls, read-only rootfs, masked and read-only
// paths). The runtime then sets Stdin/Stdout/Stderr (log writer, attach) and
// NetNS or Listen, and calls Start. Errors are what containerd reports at
// CreateContainer (unknown user, run_as_group without a user, a missing
// host path, a seccomp profile that cannot be read or parsed); a profile runc would refuse is
// Spec.Refused, which StartContainer reports.
func FromCRI(cfg *runtimeapi.ContainerConfig, sandbox *runtimeapi.PodSandboxConfig, img ImageConfig, podIPs []string) (kernel.Spec, error) {
	var spec kernel.Spec
	ib, err := ParseImageBehaviour(img.Behavior)
	if err != nil {
		return spec, err
	}
	spec.Behaviour, err = ib.Behaviour()
	if err != nil {
		return spec, err
	}
	spec.Args = Command(img.Entrypoint, img.Cmd, cfg.GetCommand(), cfg.GetArgs())
	if len(spec.Args) == 0 {
		return spec, errors.New("no command specified")
	}
	layer := img.Layer
	if layer == nil {
		if layer, err = ImageLayer(img); err != nil {
			return spec, err
		}
	}

	hostNetwork := sandbox.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
	hostname := sandbox.GetHostname()
	if hostNetwork {
		// A host-network container sees the node's name.
		if h, err := os.Hostname(); err == nil {
			hostname = h
		}
	}
	if hostname == "" {
		hostname = sandbox.GetMetadata().GetName()
	}
	sc := cfg.GetLinux().GetSecurityContext()
	fcfg := vfs.FSConfig{
		Image:          layer,
		Hostname:       hostname,
		IPs:            podIPs,
		Sysctls:        sandbox.GetLinux().GetSysctls(),
		ReadonlyRootfs: sc.GetReadonlyRootfs(),
		// The container's own files live in cri-fake's memory: they count
		// against its memory limit (0: none set, DefaultMemoryLimit).
		MemoryLimit: cfg.GetLinux().GetResources().GetMemoryLimitInBytes(),
	}
	if d := sandbox.GetDnsConfig(); d != nil && !hostNetwork {
		fcfg.DNS = &vfs.DNSConfig{Servers: d.GetServers(), Searches: d.GetSearches(), Options: d.GetOptions()}
	}
	if !sc.GetPrivileged() {
		// containerd ignores masked and read-only paths for privileged containers.
		fcfg.MaskedPaths = sc.GetMaskedPaths()
		fcfg.ReadonlyPaths = sc.GetReadonlyPaths()
	}
	for _, u := range ib.Users {
		fcfg.Users = append(fcfg.Users, vfs.User{Name: u.Name, UID: u.UID, GID: u.GID, Home: u.Home})
	}
	for _, g := range ib.Groups {
		fcfg.Groups = append(fcfg.Groups, vfs.Group{Name: g.Name, GID: g.GID, Members: g.Members})
	}
	for _, m := range cfg.GetMounts() {
		if ref := m.GetImage().GetImage(); m.GetImage() != nil {
			// An image volume (KEP-4639): the image's content, read-only, shared with every
			// container of that image.
			ly := img.Volumes[ref]
			if ly == nil {
				return spec, fmt.Errorf("image volume %q: image %q is not pulled", m.GetContainerPath(), ref)
			}
			fcfg.ImageVolumes = append(fcfg.ImageVolumes, vfs.ImageVolume{ContainerPath: m.GetContainerPath(), Image: ly, SubPath: m.GetImageSubPath()})
			continue
		}
		fcfg.Mounts = append(fcfg.Mounts, vfs.Mount{ContainerPath: m.GetContainerPath(), HostPath: m.GetHostPath(), Readonly: m.GetReadonly(), RecursiveReadOnly: m.GetRecursiveReadOnly(), Propagation: propagation(m.GetPropagation())})
	}
	spec.FS, err = NewFS(fcfg)
	if err != nil {
		return spec, err
	}
	spec.Identity, err = ResolveIdentity(spec.FS, img.User, sc)
	if err != nil {
		return spec, err
	}
	if spec.Seccomp, err = seccompFilter(sc, spec.Identity.Capabilities); err != nil && !errors.As(err, &spec.Refused) {
		return spec, err
	}
	spec.Env = mergeEnv(img.Env, cfg.GetEnvs())
	spec.WorkingDir = cfg.GetWorkingDir()
	if spec.WorkingDir == "" {
		spec.WorkingDir = img.WorkingDir
	}
	if spec.WorkingDir != "" {
		// runc creates a missing working directory.
		_ = spec.FS.MkdirAll(spec.WorkingDir, 0o755)
	}
	spec.Hostname = hostname
	spec.TTY = cfg.GetTty()
	spec.PidsLimit = kernel.PidsLimit(cfg.GetLinux().GetResources())
	spec.MemoryLimit = cfg.GetLinux().GetResources().GetMemoryLimitInBytes()
	spec.CPUQuota, spec.CPUPeriod = kernel.CPULimit(cfg.GetLinux().GetResources())
	spec.CPUShares = cfg.GetLinux().GetResources().GetCpuShares()
	spec.OOMScoreAdj = cfg.GetLinux().GetResources().GetOomScoreAdj()
	return spec, nil
}

// mergeEnv is the image environment overridden by the container's.
func mergeEnv(image []string, envs []*runtimeapi.KeyValue) []string {
	out := append([]string(nil), image...)
	for _, kv := range envs {
		k := kv.GetKey()
		out = kernel.UnsetEnv(out, k)
		out = append(out, k+"="+string(kv.GetValue()))
	}
	return out
}

// propagation is the vfs form of a CRI mount's propagation; a value the CRI
// does not define is rprivate, as containerd takes it (with a warning).
func propagation(p runtimeapi.MountPropagation) vfs.Propagation {
	switch p {
	case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
		return vfs.PropagationHostToContainer
	case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
		return vfs.PropagationBidirectional
	}
	return vfs.PropagationPrivate
}
