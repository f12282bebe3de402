package kernel

import (
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// Capability is a Linux capability by its number (linux/capability.h), the
// bit it has in /proc/<pid>/status's masks.
type Capability uint8

// The capabilities the simulated system calls check (capabilities(7)).
const (
	CapChown          Capability = 0  // chown(2) to another owner, or to a group one is not in
	CapDACOverride    Capability = 1  // bypass file permission checks
	CapKill           Capability = 5  // signal another user's processes
	CapNetBindService Capability = 10 // bind(2) a port below net.ipv4.ip_unprivileged_port_start
	CapNetAdmin       Capability = 12 // network devices: ip link add, brctl addbr
	CapNetRaw         Capability = 13 // raw sockets: ping
	CapSysAdmin       Capability = 21 // sethostname(2) and much else
	CapMknod          Capability = 27 // mknod(2) of a block or character device
)

// String is the capability's name, as capabilities(7) spells it.
func (c Capability) String() string {
	if int(c) < len(capNames) {
		return capNames[c]
	}
	return "CAP_UNKNOWN"
}

// EffectiveUID is the uid the caller's permission checks use: the real uid,
// unless it exec'd a set-user-ID program (execve(2)), whose owner it then is.
func (id Identity) EffectiveUID() int {
	if id.setuid {
		return id.euid
	}
	return id.UID
}

// bounding is the capability bounding set as a mask: containerd's default
// set, or what the container's add/drop and privileged made of it.
func (id Identity) bounding() uint64 { return capMask(id.caps()) }

// effective is the effective (and permitted) set as a mask. The runtime gives
// the container's process its bounding set as permitted and effective set,
// inheritable and ambient empty (containerd pkg/oci WithCapabilities, runc);
// execve(2) keeps them only for an effective uid 0 (a non-root user gets none,
// capabilities(7) "Capabilities and execution of programs by root"), and a
// set-user-ID-root program gives them back (permitted = bounding).
func (id Identity) effective() uint64 {
	if id.EffectiveUID() != 0 {
		return 0
	}
	return id.bounding()
}

// capable reports whether c is in the caller's effective set (the kernel's
// capable(9)).
func (id Identity) capable(c Capability) bool {
	if id.EffectiveUID() != 0 {
		return false
	}
	return hasName(id.caps(), c)
}

func hasName(names []string, c Capability) bool {
	want := c.String()
	for _, n := range names {
		if n == want || normCap(n) == want {
			return true
		}
	}
	return false
}

// need is the capability check at the top of a simulated system call that
// asks for one: EPERM when c is not in the caller's effective set, as the
// kernel answers.
func (p *Proc) need(c Capability) error {
	if !p.t.id.capable(c) {
		return syscall.EPERM
	}
	return nil
}

// execIdentity is who a process runs as after it exec's exe (execve(2)): a
// set-user-ID program makes its owner the effective uid, unless no_new_privs
// is set (prctl(2) PR_SET_NO_NEW_PRIVS: "execve promises not to grant
// privileges ... the set-user-ID and set-group-ID mode bits ... are not
// honored"), which the runtime sets from CRI's no_new_privs
// (allowPrivilegeEscalation: false). A script's set-user-ID bit is ignored, as
// Linux ignores it; only the image's files carry the bit (vfs.Executable).
func (id Identity) execIdentity(exe vfs.Executable) Identity {
	if exe.Mode&fs.ModeSetuid == 0 || exe.Script != nil || id.NoNewPrivs || exe.Owner == id.EffectiveUID() {
		return id
	}
	id.euid, id.setuid = exe.Owner, true
	return id
}

// bindAllowed is bind(2)'s capability rule: a port below the namespace's
// net.ipv4.ip_unprivileged_port_start needs CAP_NET_BIND_SERVICE, else
// EACCES. A pod's namespace has the value its sysctls and the runtime's
// defaults give (/proc/sys in the container's view: 0, containerd 2's
// enable_unprivileged_ports); a host-network container binds in the node's,
// whose value is the node's own.
func (p *Proc) bindAllowed(port int) error {
	if port <= 0 || p.t.id.capable(CapNetBindService) {
		return nil
	}
	file := "/proc/sys/net/ipv4/ip_unprivileged_port_start"
	var data []byte
	var err error
	if p.KernelNetwork() && p.c.spec.NetNS == "" {
		data, err = os.ReadFile(file)
	} else {
		data, err = p.c.fs.ReadFile(file)
	}
	start := 1024 // the kernel's default
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			start = n
		}
	}
	if port < start {
		return syscall.EACCES
	}
	return nil
}
