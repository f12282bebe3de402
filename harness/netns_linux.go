package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/vishvananda/netlink"
)

// netnsEnv marks the re-executed harness that already runs in a network namespace of its own.
const netnsEnv = "PLUGSIM_HARNESS_NETNS"

// inOwnNetns re-executes the harness in a new network namespace, once, when it is root, and
// reports whether this process is the one in the private namespace.
//
// Why: portmap, chained after cni-fake, writes iptables rules (DNAT for hostPorts, SNAT) in the
// network namespace of the runtime that runs it, and cri-fake runs in the harness's process. In a
// fresh namespace those rules, and everything else the chain does, stay away from the machine's
// own network, and vanish when the harness exits. The namespace has only a loopback interface,
// so nothing in it can reach beyond the machine. Unix sockets live in the file system, so clients
// in the host namespace (crictl, a kubelet) still reach the fakes.
//
// It returns (false, nil) when not root: the caller then leaves portmap out of the chain. The
// re-executed harness inherits the files in inherit (as fds 3, 4, …) and the variables in env.
func inOwnNetns(inherit []*os.File, env []string) (bool, error) {
	if os.Getenv(netnsEnv) == "1" {
		if lo, err := netlink.LinkByName("lo"); err == nil {
			netlink.LinkSetUp(lo)
		}
		return true, nil
	}
	if os.Geteuid() != 0 {
		return false, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return false, err
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(append(os.Environ(), netnsEnv+"=1"), env...)
	cmd.ExtraFiles = inherit
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("re-execute in a new network namespace: %w", err)
	}
	// Pass interrupts on, so `harness up` stops cleanly on Ctrl-C and `harness down`.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		for s := range sig {
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	signal.Stop(sig)
	if ee, ok := err.(*exec.ExitError); ok {
		return false, exitError(ee.ExitCode())
	}
	if err != nil {
		return false, err
	}
	return false, exitError(0)
}
