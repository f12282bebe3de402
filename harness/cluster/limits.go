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
//
// The second cap is on watches, fs.inotify.max_user_watches (192546 here). A kubelet's cAdvisor watches
// every directory of the cgroup hierarchies it reads, from each hierarchy's root (cadvisor
// container/raw/watcher.go). Each node's kubelet sees its own node's cgroups only (its cgroup
// namespace, package nodens), so the watches grow with the nodes and their pods. Counted from the fdinfo
// of the kubelets' inotify instances on 2- and 3-node clusters (2026-12-04): 89 to 124 a kubelet with
// its node's DaemonSet and CoreDNS pods, and 5 more for each pod of its node (its pod cgroup in the 5 hierarchies
// cAdvisor reads; 600 at 100 pods a node). Before the nodes had cgroup namespaces every kubelet
// watched every node's cgroups, 65 a node and 5 a pod of the whole machine, and a 100-node `up` at the
// default failed ("Failed to start cAdvisor" err="inotify_add_watch ...: no space left on device").
// A kubelet that cannot watch at start exits; one that cannot watch a new pod's cgroup later logs it and
// goes on.
const (
	InotifyPerNode      = 6
	InotifyControlPlane = 11

	// WatchesPerNode is what a node's kubelet watches of its node's cgroups, with its DaemonSet pods;
	// WatchesPerPod what each further pod of its node adds.
	WatchesPerNode = 125
	WatchesPerPod  = 5
)

// WatchesNeeded estimates the inotify watches n more plugsim nodes take before their pods: each kubelet
// watches its own node's cgroups. Each pod adds WatchesPerPod.
func WatchesNeeded(n int) int { return n * WatchesPerNode }

func readSysctl(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return v
}

// inotifyInUse counts the inotify instances open on the machine, from the processes' file
// descriptors, and the watches they hold (a line each in the descriptor's fdinfo). Every process of
// a cluster runs as root, whose count the limits are on; other users' processes are counted too,
// which can only make the estimate cautious.
func inotifyInUse() (instances, watches int) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		dir := "/proc/" + p.Name() + "/fd/"
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if l, err := os.Readlink(dir + fd.Name()); err != nil || l != "anon_inode:inotify" {
				continue
			}
			instances++
			if b, err := os.ReadFile("/proc/" + p.Name() + "/fdinfo/" + fd.Name()); err == nil {
				for l := range strings.SplitSeq(string(b), "\n") {
					if strings.HasPrefix(l, "inotify wd:") {
						watches++
					}
				}
			}
		}
	}
	return instances, watches
}

// CheckInotify refuses a node count the free inotify instances or watches cannot hold, before
// anything is started: otherwise the last kubelets exit minutes into `up`, with the reason only in
// their logs. Hollow nodes (kubemark's fake cAdvisor) take instances, not watches.
func CheckInotify(nodes, hollow int) error {
	return checkInotifyNodes(nodes, hollow, InotifyControlPlane)
}

// checkInotifyNodes is CheckInotify with the instances the rest takes: a joining machine runs no
// control plane.
func checkInotifyNodes(nodes, hollow, rest int) error {
	instLimit := readSysctl("/proc/sys/fs/inotify/max_user_instances")
	watchLimit := readSysctl("/proc/sys/fs/inotify/max_user_watches")
	instances, watches := inotifyInUse()
	return inotifyShortage(nodes, hollow, rest, instLimit-instances, instLimit, watchLimit-watches, watchLimit)
}

// inotifyShortage says what the free instances and watches cannot hold (a limit of 0: unknown).
func inotifyShortage(nodes, hollow, rest, instFree, instLimit, watchFree, watchLimit int) error {
	if need := (nodes+hollow)*InotifyPerNode + rest; instLimit > 0 && need > instFree {
		return fmt.Errorf("--nodes %d needs about %d inotify instances (%d a kubelet, %d for the control plane) and %d of fs.inotify.max_user_instances=%d are free: raise the limit (sysctl -w fs.inotify.max_user_instances=1024) or start fewer nodes",
			nodes+hollow, need, InotifyPerNode, rest, instFree, instLimit)
	}
	if need := WatchesNeeded(nodes); watchLimit > 0 && need > watchFree {
		return fmt.Errorf("--nodes %d needs about %d inotify watches (each kubelet's cAdvisor watches its node's cgroups: about %d a node, and %d more for each pod) and %d of fs.inotify.max_user_watches=%d are free: raise the limit (sysctl -w fs.inotify.max_user_watches=%d) or start fewer nodes",
			nodes, need, WatchesPerNode, WatchesPerPod, watchFree, watchLimit, suggestWatches(need+watchLimit-watchFree))
	}
	return nil
}

// suggestWatches is a limit that holds need: the next power of two at least 1.5 times it.
func suggestWatches(need int) int {
	v := 1 << 20
	for v < need+need/2 {
		v <<= 1
	}
	return v
}
