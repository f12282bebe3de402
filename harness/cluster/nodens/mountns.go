package nodens

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plugsim/plugsim/internal/mountinfo"
)

// Each node has a mount namespace of its own, shared by its kubelet, cri-fake and csi-fakes (and by runc,
// when cri-fake runs real containers: it runs inside it). Why: the kubelet keeps some files at fixed paths
// whatever its --root-dir says, the device manager's registration socket
// /var/lib/kubelet/device-plugins/kubelet.sock first among them (k8s.io/kubelet
// pkg/apis/deviceplugin/v1beta1: DevicePluginPath, KubeletSocket), so every node of every cluster on the
// machine shared one socket, which stayed after `down` (issue 24). In the node's namespace
// /var/lib/kubelet is a bind mount of the node's own DIR/nodes/NODE/kubelet, and it is the kubelet's
// --root-dir: every path the kubelet gives (CRI mounts, CSI target and staging paths, the plugin
// registration directory) is a node's usual one, and a DaemonSet's hostPath /var/lib/kubelet/pods (a CSI
// node plugin's) names on each node that node's own.
//
// The namespace is a copy of the host's made private (nothing it mounts reaches the host, nothing the host
// mounts later reaches it), so everything the node mounts stays in it: the kubelet's bind mount of its
// root dir, the tmpfs of secret and projected volumes, csi-fake's publishes, cri-fake's pod network
// namespaces. The node's processes must share it: csi-fake's publishes and the kubelet's tmpfs are what
// cri-fake's containers see. It is pinned by a bind mount of its namespace file at DIR/nodes/NODE/ns/mnt
// (in a private mount of DIR/nodes/NODE/ns: a namespace file cannot be bound where its own namespace would
// see the bind propagate), so it outlives `up`; unshare(1) makes it, the processes enter it with
// nsenter --mount. `down` stops them, kills whatever else still runs in it, detaches its mounts from inside
// and unmounts the file, and the kernel frees the namespace with its last reference.
//
// On the host this leaves only an empty /var/lib/kubelet, made if there was none, as the mount point.

// KubeletFixedDir is where the kubelet keeps the files it does not put under --root-dir.
const KubeletFixedDir = "/var/lib/kubelet"

func nodeNSDir(nd string) string    { return filepath.Join(nd, "ns") }
func MountNS(nd string) string      { return filepath.Join(nd, "ns", "mnt") }
func CgroupNS(nd string) string     { return filepath.Join(nd, "ns", "cgroup") }
func KubeletFixed(nd string) string { return filepath.Join(nd, "kubelet") }

// MakeMountNS makes node nd's mount namespace and pins it at MountNS(nd). With a cgroup (the
// node's root, cgroups.go) it also makes the node's cgroup namespace, rooted there and pinned at
// CgroupNS(nd), and mounts the cgroup hierarchies in the mount namespace from inside it.
func MakeMountNS(nd, cgroup string) error {
	if err := os.MkdirAll(KubeletFixedDir, 0o755); err != nil {
		return err
	}
	own := KubeletFixed(nd)
	if err := os.MkdirAll(own, 0o700); err != nil {
		return err
	}
	nsDir := nodeNSDir(nd)
	if err := os.MkdirAll(nsDir, 0o700); err != nil {
		return err
	}
	if err := unix.Mount(nsDir, nsDir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s onto itself: %w", nsDir, err)
	}
	if err := unix.Mount("", nsDir, "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make %s private: %w", nsDir, err)
	}
	pins := []string{MountNS(nd)}
	if cgroup != "" {
		pins = append(pins, CgroupNS(nd))
	}
	for _, file := range pins {
		f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_RDONLY|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return err
		}
		f.Close()
	}
	// unshare(1) makes the namespace (a copy of the host's, every mount in it made private) and pins it at
	// file from the host's side; the bind of /var/lib/kubelet is made inside it. A process of its own, not
	// a thread of this one: Go may run any goroutine on the main thread, and a main thread moved into
	// another mount namespace would take the whole process's /proc/self view with it.
	argv := []string{"unshare", "--mount=" + MountNS(nd), "--propagation", "private", "--", "mount", "--bind", own, KubeletFixedDir}
	if cgroup != "" {
		// A new cgroup namespace's root is the cgroup its maker is in: the shell moves itself into the
		// node's root first, then unshare makes both namespaces and the hierarchies are mounted inside.
		mounts, err := cgroupMountScript()
		if err != nil {
			return err
		}
		argv = []string{"unshare", "--mount=" + MountNS(nd), "--cgroup=" + CgroupNS(nd), "--propagation", "private",
			"--", "sh", "-c", `mount --bind "$1" "$2" && ` + mounts, "sh", own, KubeletFixedDir}
		if argv, err = InCgroup(cgroup, argv); err != nil {
			return err
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make the node's mount namespace (%s): %v: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// InCgroup returns argv run by a shell that first moves itself into cgroup (a path from the root of
// every hierarchy) and then execs it: what it execs, and its children, start there. The pid stays the
// shell's, which becomes the program's.
func InCgroup(cgroup string, argv []string) ([]string, error) {
	files, err := procsFiles(cgroup)
	if err != nil {
		return nil, err
	}
	const script = `while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"`
	out := append([]string{"sh", "-c", script, "sh"}, files...)
	out = append(out, "--")
	return append(out, argv...), nil
}

// nodeMounts lists the mounts of the namespace pinned at file, read from inside it.
func nodeMounts(file string) ([]mountinfo.Mount, error) {
	out, err := exec.Command("nsenter", "--mount="+file, "--", "cat", "/proc/self/mountinfo").Output()
	if err != nil {
		return nil, fmt.Errorf("read the mounts of %s: %w", file, err)
	}
	return mountinfo.Parse(out), nil
}

// NSInode is the inode that names the namespace pinned at path (what /proc/PID/ns/mnt reads as
// "mnt:[INODE]"), or 0 when nothing is pinned there.
func NSInode(path string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil || st.Ino == 0 {
		return 0
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil || fs.Type != unix.NSFS_MAGIC {
		return 0
	}
	return st.Ino
}

// InNamespace lists the processes whose mount namespace has inode ino.
func InNamespace(ino uint64) []int {
	want := "mnt:[" + strconv.FormatUint(ino, 10) + "]"
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/mnt"); err == nil && l == want {
			out = append(out, pid)
		}
	}
	return out
}

// killWait bounds how long ClearMountNS waits for the processes it killed to leave the namespace (what
// `down` gives a process between TERM and KILL).
const killWait = 10 * time.Second

// ClearMountNS takes away node nd's mount namespace, once its processes were stopped: whatever still
// runs in it (only what `up` started there, and their children, ever enters it) is killed, and its mounts
// are detached from inside, deepest first; it returns how many. The pinning mount itself goes with the
// other mounts under the cluster's directory, and with it the namespace.
func ClearMountNS(nd string) (int, error) {
	file := MountNS(nd)
	ino := NSInode(file)
	if ino == 0 {
		return 0, nil
	}
	left := InNamespace(ino)
	for _, pid := range left {
		unix.Kill(pid, unix.SIGKILL)
	}
	for deadline := time.Now().Add(killWait); len(left) > 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		left = InNamespace(ino)
	}
	if len(left) > 0 {
		return 0, fmt.Errorf("processes %v still run in %s's mount namespace after SIGKILL", left, filepath.Base(nd))
	}
	mounts, err := nodeMounts(file)
	if err != nil {
		return 0, err
	}
	dir := filepath.Dir(filepath.Dir(nd))
	var points []string
	for _, m := range mounts {
		if under(m.MountPoint, dir) || under(m.MountPoint, KubeletFixedDir) {
			points = append(points, m.MountPoint)
		}
	}
	if len(points) == 0 {
		return 0, nil
	}
	sort.Slice(points, func(a, b int) bool { return len(points[a]) > len(points[b]) })
	// Detached from inside (umount -l: MNT_DETACH), deepest first, in one process.
	args := append([]string{"--mount=" + file, "--", "umount", "-l"}, points...)
	if out, err := exec.Command("nsenter", args...).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("unmount %s's mounts: %v: %s", filepath.Base(nd), err, strings.TrimSpace(string(out)))
	}
	return len(points), nil
}

// under reports whether p is dir or below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// MountsUnder lists the mount points at or below dir in this mount namespace (the host's: what each node
// mounts is in its own, see clearNodeMountNS).
func MountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, m := range mountinfo.Parse(b) {
		if m.MountPoint == dir || strings.HasPrefix(m.MountPoint, dir+"/") {
			out = append(out, m.MountPoint)
		}
	}
	return out
}
