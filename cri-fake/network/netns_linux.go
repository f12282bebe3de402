package network

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// createRealNetNS makes a new network namespace and bind-mounts it at p, the way
// containernetworking/plugins' testutils and containerd's netns package do: a locked OS thread
// unshares, the thread's namespace is bind-mounted, and the thread goes back to its original one.
func createRealNetNS(p string) (retErr error) {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return err
	}
	f.Close()
	defer func() {
		if retErr != nil {
			os.Remove(p)
		}
	}()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is not unlocked on purpose: if restoring the original namespace fails, the
		// thread dies with the goroutine instead of serving other goroutines in the wrong netns.
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		// Bring the loopback up, as containerd's loopback CNI network does for every pod: servers
		// in the pod listen on 0.0.0.0, and port-forward (which connects from inside the pod's
		// namespace to localhost) needs lo.
		if lo, err := netlink.LinkByName("lo"); err == nil {
			_ = netlink.LinkSetUp(lo)
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		mountErr := unix.Mount(src, p, "none", unix.MS_BIND, "")
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("return to the original netns: %w", err)
			return
		}
		runtime.UnlockOSThread()
		if mountErr != nil {
			errc <- fmt.Errorf("bind mount: %w", mountErr)
			return
		}
		errc <- nil
	}()
	return <-errc
}

func removeRealNetNS(p string) error {
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", p, err)
	}
	return nil
}
