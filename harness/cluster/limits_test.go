package cluster

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The estimate holds the counts it comes from: the kubelets of a 2-node cluster held 124 and 100
// watches, of a 3-node one 113, 100 and 89, with their nodes' DaemonSet and CoreDNS pods, and it grows with the node count only (each kubelet sees its
// own node's cgroups), so 100 nodes fit the default fs.inotify.max_user_watches=192546 with room for
// their pods, which the square of the node count (65 × 100² before cgroup namespaces) did not.
func TestWatchesNeeded(t *testing.T) {
	if got := WatchesNeeded(2); got < 124+100 {
		t.Errorf("WatchesNeeded(2) = %d, under the 224 two kubelets held (counted)", got)
	}
	if got := WatchesNeeded(3); got < 113+100+89 {
		t.Errorf("WatchesNeeded(3) = %d, under the 302 three kubelets held (counted)", got)
	}
	if WatchesNeeded(200) != 2*WatchesNeeded(100) {
		t.Errorf("WatchesNeeded(200) = %d, want twice WatchesNeeded(100) = %d: a kubelet watches its own node only", WatchesNeeded(200), WatchesNeeded(100))
	}
	const defaultLimit = 192546
	if got := WatchesNeeded(100) + 100*30*WatchesPerPod; got > defaultLimit {
		t.Errorf("100 nodes of 30 pods need %d watches, over the default limit %d", got, defaultLimit)
	}
}

func TestInotifyShortage(t *testing.T) {
	for _, c := range []struct {
		name                                                string
		nodes, hollow, rest, instFree, instLim, wFree, wLim int
		want                                                string // "" for none
	}{
		{"fits", 3, 0, 11, 100, 128, 190000, 192546, ""},
		{"instances", 20, 0, 11, 100, 128, 190000, 192546, "max_user_instances=128"},
		{"hollow nodes take instances", 10, 10, 11, 100, 128, 190000, 192546, "--nodes 20 needs about 131 inotify instances"},
		{"100 nodes fit the default watches", 100, 0, 11, 1000, 1024, 190000, 192546, ""},
		{"watches", 100, 0, 11, 1000, 1024, 9000, 192546, "sysctl -w fs.inotify.max_user_watches=1048576"},
		{"watches, much more", 3000, 0, 11, 50000, 65536, 190000, 192546, "fs.inotify.max_user_watches=1048576"},
		{"hollow nodes take no watches", 40, 200, 11, 5000, 8192, 5100, 192546, ""},
		{"limits unknown", 1000, 0, 11, 0, 0, 0, 0, ""},
	} {
		err := inotifyShortage(c.nodes, c.hollow, c.rest, c.instFree, c.instLim, c.wFree, c.wLim)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// What the machine holds is counted from /proc: this test's own inotify instance and its watch.
func TestInotifyInUseCountsWatches(t *testing.T) {
	i0, w0 := inotifyInUse()
	fd, err := inotifyWithWatch(t.TempDir())
	if err != nil {
		t.Skipf("no inotify here: %v", err)
	}
	defer closeFD(fd)
	i1, w1 := inotifyInUse()
	if i1 < i0+1 || w1 < w0+1 {
		t.Errorf("instances %d → %d, watches %d → %d: want each up by at least one", i0, i1, w0, w1)
	}
}

func inotifyWithWatch(dir string) (int, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return -1, err
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func closeFD(fd int) { unix.Close(fd) }
