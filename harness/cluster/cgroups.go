package cluster

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

// nodeCgroup is the cgroup root of a node of the cluster with the given namespace prefix: one per
// node, named like its network namespace, at the top of every hierarchy.
func nodeCgroup(prefix, node string) string { return "/" + prefix + "-" + node }

// cgroupHierarchies are the mount points of the machine's cgroup hierarchies: each cgroup v1
// hierarchy the kubelet may look in (its controllers', and name=systemd's), or the one cgroup v2
// hierarchy.
func cgroupHierarchies() ([]mountinfo.Mount, error) {
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

// makeNodeCgroup makes the cgroup root of a node in every hierarchy (the kubelet refuses a
// cgroupRoot missing from one). On cgroup v1 a new cpuset has no CPUs and no memory nodes until
// they are written: they are copied from the hierarchy's root, as libcontainer does for the
// cgroups it makes. On cgroup v2 the new cgroup has the controllers its parent hands down; the
// kubelet checks it has the ones it needs.
func makeNodeCgroup(name string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := filepath.Join(h.MountPoint, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		if h.FSType == "cgroup" && slices.Contains(strings.Split(h.SuperOpts, ","), "cpuset") {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h.MountPoint, f))
				if err != nil {
					return fmt.Errorf("cgroup %s: %w", dir, err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", dir, err)
				}
			}
		}
	}
	return nil
}

// clusterCgroups lists the cgroups of the cluster with the given prefix: every node's root, in
// every hierarchy (found by name, so also after a crash).
func clusterCgroups(prefix string) []string {
	hs, _ := cgroupHierarchies()
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

// ClusterCgroups lists the cgroups the cluster in dir left on the machine (none once `down` ran).
func ClusterCgroups(dir string) []string { return clusterCgroups(PrefixFor(dir)) }

// removeCgroupTree removes a cgroup and every cgroup below it, deepest first: a cgroup directory
// is removed with rmdir (its files are the kernel's), and only once it has no children and no
// processes.
func removeCgroupTree(dir string) error {
	var dirs []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
