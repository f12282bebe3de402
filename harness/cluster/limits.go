package cluster

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Each kubelet v1.37.2 holds 6 inotify instances (cAdvisor's watchers, its config and plugin
// directories) and the control plane 11 (counted in /proc/PID/fd of a 1-node cluster). The kernel
// caps a user's instances at fs.inotify.max_user_instances (128 by default), and a kubelet that
// gets none exits ("Failed to start cAdvisor" err="inotify_init: too many open files"): on an idle
// machine with the default that is about 19 nodes, fewer than memory allows (kind's known issues
// say the same of its nodes).
const (
	InotifyPerNode      = 6
	InotifyControlPlane = 11
)

// InotifyFree reports how many inotify instances root may still open, and the limit; limit is 0
// when /proc does not say.
func InotifyFree() (free, limit int) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
	if err != nil {
		return 0, 0
	}
	limit, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	return limit - inotifyInUse(), limit
}

// inotifyInUse counts the inotify instances open on the machine, from the processes' file
// descriptors. Every process of a cluster runs as root, whose count the limit is on; other users'
// processes are counted too, which can only make the estimate cautious.
func inotifyInUse() int {
	n := 0
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		dir := "/proc/" + p.Name() + "/fd/"
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if l, err := os.Readlink(dir + fd.Name()); err == nil && l == "anon_inode:inotify" {
				n++
			}
		}
	}
	return n
}

// checkInotify refuses a node count the free inotify instances cannot hold, before anything is
// started: otherwise the last kubelets exit minutes into `up`, with the reason only in their logs.
func checkInotify(nodes int) error { return checkInotifyNodes(nodes, InotifyControlPlane) }

// checkInotifyNodes is checkInotify with the instances the rest takes: a joining machine runs no
// control plane.
func checkInotifyNodes(nodes, rest int) error {
	free, limit := InotifyFree()
	if limit <= 0 {
		return nil
	}
	if need := nodes*InotifyPerNode + rest; need > free {
		return fmt.Errorf("--nodes %d needs about %d inotify instances (%d a kubelet, %d for the control plane) and %d of fs.inotify.max_user_instances=%d are free: raise the limit (sysctl -w fs.inotify.max_user_instances=1024) or start fewer nodes",
			nodes, need, InotifyPerNode, rest, free, limit)
	}
	return nil
}
