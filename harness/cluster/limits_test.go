package cluster

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The estimate holds the counts it comes from: 3 idle nodes' kubelets held 228 watches each (684 in
// all); 48 nodes held Ready under the default fs.inotify.max_user_watches=192546 and 100 did not
// (a kubelet's cAdvisor could not add its watches).
func TestWatchesNeeded(t *testing.T) {
	if got := WatchesNeeded(3); got != 3*228 {
		t.Errorf("WatchesNeeded(3) = %d, want %d (228 a kubelet, counted)", got, 3*228)
	}
	const defaultLimit = 192546
	if got := WatchesNeeded(48); got > defaultLimit {
		t.Errorf("WatchesNeeded(48) = %d, over the default limit %d that 48 nodes held under", got, defaultLimit)
	}
	if got := WatchesNeeded(100); got <= defaultLimit {
		t.Errorf("WatchesNeeded(100) = %d, under the default limit %d that 100 nodes ran out of", got, defaultLimit)
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
		{"watches", 100, 0, 11, 1000, 1024, 190000, 192546, "sysctl -w fs.inotify.max_user_watches=1048576"},
		{"watches, much more", 300, 0, 11, 5000, 8192, 190000, 192546, "fs.inotify.max_user_watches=16777216"},
		{"hollow nodes take no watches", 40, 200, 11, 5000, 8192, 120000, 192546, ""},
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
