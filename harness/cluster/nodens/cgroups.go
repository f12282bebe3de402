package nodens

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/plugsim/plugsim/internal/mountinfo"
)

// Each kubelet runs with its pod cgroups on (cgroupsPerQOS), under a cgroup root of its own: the
// kubelet's in-place resize reads and writes the pod's cgroup (kuberuntime_manager.go
// doPodResizeAction; without pod cgroups it dereferences their missing configuration and panics),
// so a node that resizes pods has them. They are real, empty cgroups: no process is ever in them
// (cri-fake's containers are simulated), the kubelet makes and removes them, and their limits
// limit nothing. `up` makes each node's root, `down` removes it with everything below.

// NodeCgroup is the cgroup root of a node of the cluster with the given namespace prefix: one per
// node, named like its network namespace, at the top of every hierarchy.
func NodeCgroup(prefix, node string) string { return "/" + prefix + "-" + node }

// Hierarchies are the mount points of the machine's cgroup hierarchies: each cgroup v1
// hierarchy the kubelet may look in (its controllers', and name=systemd's), or the one cgroup v2
// hierarchy.
func Hierarchies() ([]mountinfo.Mount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []mountinfo.Mount
	seen := map[string]bool{}
	for _, m := range mountinfo.Parse(b) {
		if (m.FSType == "cgroup" || m.FSType == "cgroup2") && !seen[m.MountPoint] {
			seen[m.MountPoint] = true
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup file system is mounted")
	}
	return out, nil
}

// Each node's processes run in a cgroup namespace of their own whose root is the node's cgroup, and
// the node's mount namespace (mountns.go) mounts every hierarchy afresh from inside it, so that the
// node's /sys/fs/cgroup shows the node's cgroup as the root, as a kind node's does (it runs with
// cgroupns=private). Why: the kubelet's cAdvisor watches (inotify) and tracks every cgroup below the
// root of each hierarchy it sees (cadvisor container/raw/watcher.go), so with the machine's whole tree
// in view every kubelet followed every other node's pods: watches and housekeeping grew with the
// square of the nodes (65 watches a node and 5 a pod in every kubelet; 100 nodes needed 650,000
// watches and stalled on kernfs). In its own view a kubelet sees its node only, its cgroupRoot is
// "/" as on any machine, and the node's usage in the summary API and `kubectl top node` is the
// node's own, not the machine's.
//
// The node's processes are where a kubeadm node's are: each in /system.slice/NAME.service of the
// node (the kubelet finds its own cgroup there for its system-container stats, cri-fake's runc
// places program containers below cri-fake's).

// nodeServices are the cgroups below a node's root its processes run in, by program.
var nodeServices = []string{"kubelet", "cri-fake", "csi-fake-ephemeral", "kube-proxy"}

// ServiceCgroup is the cgroup, below the node's root, that a node's program runs in.
func ServiceCgroup(program string) string { return "system.slice/" + program + ".service" }

// MakeNodeCgroup makes the cgroup root of a node in every hierarchy (the kubelet refuses a
// cgroupRoot missing from one), and below it the cgroups its programs run in.
func MakeNodeCgroup(name string) error {
	hs, err := Hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		if err := makeCgroup(h, name); err != nil {
			return err
		}
		for _, s := range nodeServices {
			if err := makeCgroup(h, name+"/"+ServiceCgroup(s)); err != nil {
				return err
			}
		}
	}
	return nil
}

// makeCgroup makes cgroup rel (and its missing parents) in hierarchy h. On cgroup v1 a new cpuset
// has no CPUs and no memory nodes until they are written, and no process can join it: they are
// copied from the parent, as libcontainer does for the cgroups it makes. On cgroup v2 the new
// cgroup has the controllers its parent hands down; the kubelet checks it has the ones it needs.
func makeCgroup(h mountinfo.Mount, rel string) error {
	cpuset := h.FSType == "cgroup" && slices.Contains(strings.Split(h.SuperOpts, ","), "cpuset")
	parent := h.MountPoint
	for _, part := range strings.Split(strings.Trim(rel, "/"), "/") {
		dir := filepath.Join(parent, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		if cpuset {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if cur, _ := os.ReadFile(filepath.Join(dir, f)); len(strings.TrimSpace(string(cur))) > 0 {
					continue
				}
				v, err := os.ReadFile(filepath.Join(parent, f))
				if err != nil {
					return fmt.Errorf("cgroup %s: %w", dir, err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", dir, err)
				}
			}
		}
		parent = dir
	}
	return nil
}

// procsFiles are the cgroup.procs files of cgroup rel in every hierarchy: a process that writes its
// pid to each is in rel everywhere.
func procsFiles(rel string) ([]string, error) {
	hs, err := Hierarchies()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, h := range hs {
		out = append(out, filepath.Join(h.MountPoint, rel, "cgroup.procs"))
	}
	return out, nil
}

// cgroupMountScript is the shell commands that, run in a new mount namespace by a process in a new
// cgroup namespace, mount every hierarchy afresh over its mount point: the new mount's root is the
// namespace's root cgroup. The hierarchy's own mount is taken away first (the kernel refuses the same
// superblock twice on one mount point); on cgroup v1 the options name the hierarchy's controllers
// (its superblock options).
func cgroupMountScript() (string, error) {
	hs, err := Hierarchies()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, h := range hs {
		if strings.ContainsAny(h.MountPoint+h.SuperOpts, "'\\\n") {
			return "", fmt.Errorf("cgroup mount %q (%s): a name the shell cannot take", h.MountPoint, h.SuperOpts)
		}
		fmt.Fprintf(&b, " && umount -l '%s' && mount -t %s -o '%s' %s '%s'", h.MountPoint, h.FSType, h.SuperOpts, h.FSType, h.MountPoint)
	}
	return strings.TrimPrefix(b.String(), " && "), nil
}

// Cgroups lists the cgroups of the cluster with the given prefix: every node's root, in
// every hierarchy (found by name, so also after a crash).
func Cgroups(prefix string) []string {
	hs, _ := Hierarchies()
	var out []string
	for _, h := range hs {
		entries, _ := os.ReadDir(h.MountPoint)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix+"-") {
				out = append(out, filepath.Join(h.MountPoint, e.Name()))
			}
		}
	}
	return out
}
