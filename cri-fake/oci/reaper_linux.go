package oci

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// subreaper makes this process a child subreaper (prctl PR_SET_CHILD_SUBREAPER, as containerd's
// shim does in runc/v2's service): a container's init and its exec processes are children of
// runc, which exits once they have started; the kernel then gives them to the nearest subreaper
// ancestor, this process, which can wait for them and read their exit status. The setting is the
// process's, for the rest of its life: a process that also waits for children of its own by pid
// (os/exec) is unaffected, and nothing here waits for "any child".
var subreaper = sync.OnceValue(func() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
})

// waitExit waits for the process pid, a child of this process once runc has exited, and returns
// its exit code as a container runtime reports it: the status, or 128 + the signal that ended
// it. errNotChild means another process reaps it (this one is not its subreaper).
func waitExit(pid int) (int32, error) {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.ECHILD) {
			return 255, errNotChild
		}
		if err != nil {
			return 255, err
		}
		break
	}
	if ws.Signaled() {
		return 128 + int32(ws.Signal()), nil
	}
	return int32(ws.ExitStatus()), nil
}

var errNotChild = errors.New("the container's process is not a child of cri-fake: its exit status is lost")

// heldCapabilities is this process's effective capability set (CapEff of /proc/self/status),
// 0 when it cannot be read.
func heldCapabilities() uint64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err == nil {
				return caps
			}
		}
	}
	return 0
}

// minOOMScoreAdj is the lowest oom_score_adj this process's children can be given: -1000 with
// CAP_SYS_RESOURCE, else this process's own (the kernel refuses to lower it without the
// capability; some sandboxes run root without it).
func minOOMScoreAdj() int {
	if heldCapabilities()&(1<<unix.CAP_SYS_RESOURCE) != 0 {
		return -1000
	}
	own, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(own)))
	return n
}
