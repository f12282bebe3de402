package oci

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/plugsim/plugsim/internal/mountinfo"
)

// cgroups is where program containers' cgroups are: one parent per cri-fake, named by
// Options.CgroupParent, with a cgroup per container below it.
//
// On cgroup v1 (this project's machines) the parent is relative: runc places it below its own
// cgroup in each hierarchy, which is cri-fake's (runc is its child), so containers stay inside
// whatever cgroup the node was started in and are accounted to it. On cgroup v2 a relative
// cgroup below a cgroup that holds processes could not enable controllers (the "no internal
// processes" rule), so the parent is absolute there, below the root.
//
// On a node of `harness cluster` cri-fake runs in the node's cgroup namespace, in the node's
// /system.slice/cri-fake.service, so the parent is below it, in the node's cgroup, which
// `harness cluster down` clears and removes.
type cgroups struct {
	v2     bool
	parent string // what cgroupsPath starts with
	// dirs are the parent's directories by controller ("" for v2's single hierarchy).
	dirs map[string]string
}

// cgroupRoot is where the kernel's cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

func newCgroups(parent string) (*cgroups, error) {
	if parent == "" || strings.Contains(parent, "..") || path.Clean("/"+parent) != "/"+strings.Trim(parent, "/") {
		return nil, fmt.Errorf("cgroup parent %q: want a clean name or path without '..'", parent)
	}
	parent = strings.Trim(parent, "/")
	cg := &cgroups{dirs: map[string]string{}}
	mounts, err := mountinfo.Read()
	if err != nil {
		return nil, err
	}
	if m, ok := mountinfo.Lookup(mounts, cgroupRoot); ok && m.MountPoint == cgroupRoot && m.FSType == "cgroup2" {
		cg.v2, cg.parent = true, "/"+parent
		cg.dirs[""] = filepath.Join(cgroupRoot, parent)
		return cg, nil
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	cg.parent = parent
	for _, m := range mounts {
		if m.FSType == "cgroup2" && own[""] != "" {
			// The hybrid layout's unified hierarchy (/sys/fs/cgroup/unified), where runc makes
			// the container's cgroup too.
			if rel, err := filepath.Rel(m.Root, own[""]); err == nil && !strings.HasPrefix(rel, "..") {
				cg.dirs["unified"] = filepath.Join(m.MountPoint, rel, parent)
			}
			continue
		}
		if m.FSType != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(m.SuperOpts, ",") {
			if base, ok := own[opt]; ok {
				// The mount's root is the part of the hierarchy it shows (a container's view
				// shows its own subtree): the process's path is relative to the hierarchy's root.
				rel, err := filepath.Rel(m.Root, base)
				if err != nil || strings.HasPrefix(rel, "..") {
					continue
				}
				cg.dirs[opt] = filepath.Join(m.MountPoint, rel, parent)
			}
		}
	}
	if cg.dirs["memory"] == "" || cg.dirs["cpuacct"] == "" {
		return nil, errors.New("cgroup v1 without a memory or cpuacct hierarchy mounted: program containers need both")
	}
	return cg, nil
}

// ownCgroups is this process's cgroup in each v1 controller (/proc/self/cgroup).
func ownCgroups() (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			own[""] = f[2] // the unified hierarchy
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			own[c] = f[2]
		}
	}
	return own, nil
}

// path is the cgroupsPath of a container's spec.
func (c *cgroups) path(id string) string { return c.parent + "/" + id }

// dir is a container's cgroup directory in one controller's hierarchy.
func (c *cgroups) dir(controller, id string) string {
	if c.v2 {
		controller = ""
	}
	return filepath.Join(c.dirs[controller], id)
}

// Dirs are the parent's directories, one per hierarchy (for `down` and for the removal at Close).
func (c *cgroups) Dirs() []string {
	out := make([]string, 0, len(c.dirs))
	for _, d := range c.dirs {
		out = append(out, d)
	}
	return out
}

// removeParent removes the parent's directories that are empty (rmdir fails on one that still
// holds a cgroup).
func (c *cgroups) removeParent() {
	for _, d := range c.dirs {
		os.Remove(d)
	}
}

// oomKills is how many processes the kernel's OOM killer has killed in the container's memory
// cgroup: oom_kill in memory.oom_control (v1) or memory.events (v2).
func (c *cgroups) oomKills(id string) uint64 {
	file := "memory.oom_control"
	if c.v2 {
		file = "memory.events"
	}
	return statField(filepath.Join(c.dir("memory", id), file), "oom_kill")
}

// usage is the container's cgroup figures, the ones containerd's CRI plugin reports.
type usage struct {
	cpuNanos                        uint64
	usageBytes, workingSet, rss     uint64
	pageFaults, majorFaults, limitB uint64
}

func (c *cgroups) usage(id string) (usage, error) {
	var u usage
	mem := c.dir("memory", id)
	if c.v2 {
		cur, err := readUint(filepath.Join(mem, "memory.current"))
		if err != nil {
			return u, err
		}
		u.usageBytes = cur
		st := filepath.Join(mem, "memory.stat")
		u.workingSet = cur - min(cur, statField(st, "inactive_file"))
		u.rss, u.pageFaults, u.majorFaults = statField(st, "anon"), statField(st, "pgfault"), statField(st, "pgmajfault")
		u.cpuNanos = statField(filepath.Join(mem, "cpu.stat"), "usage_usec") * 1000
		u.limitB, _ = readUint(filepath.Join(mem, "memory.max"))
		return u, nil
	}
	cur, err := readUint(filepath.Join(mem, "memory.usage_in_bytes"))
	if err != nil {
		return u, err
	}
	u.usageBytes = cur
	st := filepath.Join(mem, "memory.stat")
	u.workingSet = cur - min(cur, statField(st, "total_inactive_file"))
	u.rss, u.pageFaults, u.majorFaults = statField(st, "total_rss"), statField(st, "total_pgfault"), statField(st, "total_pgmajfault")
	u.limitB, _ = readUint(filepath.Join(mem, "memory.limit_in_bytes"))
	u.cpuNanos, err = readUint(filepath.Join(c.dir("cpuacct", id), "cpuacct.usage"))
	return u, err
}

func readUint(file string) (uint64, error) {
	data, err := readBounded(file, 64)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, nil
	}
	return strconv.ParseUint(s, 10, 64)
}

// statField is the value of a "key value" line of a cgroup file (0 when absent).
func statField(file, key string) uint64 {
	data, err := readBounded(file, 64<<10)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
