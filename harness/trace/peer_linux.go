package trace

import (
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// peerPID is the pid of the process that connected to c (SO_PEERCRED: the credentials at
// connect(2), translated into this process's pid namespace).
func peerPID(c *net.UnixConn) (int, bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *unix.Ucred
	var credErr error
	if err := rc.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || credErr != nil || cred.Pid <= 0 {
		return 0, false
	}
	return int(cred.Pid), true
}

// processName is /proc/<pid>/comm: the basename of the file the process executed, at most 15
// bytes ("csi-provisioner" just fits), or "" when the process is gone or /proc is not ours.
func processName(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}
