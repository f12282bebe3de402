package main

import (
	"os"
	"strconv"
	"syscall"
)

// closeInheritedOnExec marks every file descriptor above stderr that the harness inherited from its
// caller close-on-exec. Go opens its own files so, but it neither closes nor marks what it inherits,
// and a fork/exec hands every such descriptor to the child: `flock LOCK harness cluster up` left the
// lock held by every kubelet, etcd and relay until `down`, and a `make -j` jobserver pipe would stay open
// in them too. Files the harness hands on on purpose (the view's listener to the harness it
// re-executes in a namespace, the relay's listeners) go through exec.Cmd.ExtraFiles, which makes the
// child's copies inheritable again.
func closeInheritedOnExec() {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
