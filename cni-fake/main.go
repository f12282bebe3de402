// cni-fake is a CNI plugin (spec 1.1.0) meant to be the first plugin of a chain, in front of the
// real portmap: what containerd or cri-fake exec for every pod sandbox.
//
// It is a real plugin for libcni, cnitool and portmap, and fake only in that, by default ("mode":
// "fake"), it changes nothing in the kernel: the result describes a host veth and a pod interface
// with MACs, addresses from its built-in IPAM (or a delegated IPAM plugin), routes and DNS, and
// any CNI_NETNS path is accepted. "mode": "veth" (root) makes the veth pair for real, as ptp does.
//
// Run it without CNI_COMMAND for a short description; see cni-fake/README.md for every config key.
//
// The binary is exec'd once per CNI call, so start-up is most of its cost: main imports nothing
// that does heavy package initialisation (no gRPC, no plugins/pkg/ipam, no libcni invoke).
package main

import (
	"io"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// about is printed by skel when the binary runs without CNI_COMMAND.
const about = `cni-fake: a CNI plugin (spec 1.1.0) that hands out addresses and describes a pod
interface, chained before portmap; plugsim's fake of the network boundary.
  mode "fake" (default): no kernel changes, any CNI_NETNS accepted
  mode "veth" (root):    a real veth pair into CNI_NETNS, routed like ptp
It is run by a CNI runtime (containerd, cri-fake, cnitool), not by hand. Try:
  CNI_PATH=bin NETCONFPATH=examples/cni cnitool add plugsim /var/run/netns/NAME
Config keys, modes and error codes: cni-fake/README.md`

// supportedVersions are the spec versions whose results cni-fake prints. 0.1.0 and 0.2.0 are left
// out: their results have no interfaces, which portmap and containerd need.
var supportedVersions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

func main() {
	cmd := os.Getenv("CNI_COMMAND")
	if cmd == "" || cmd == "VERSION" {
		// Nothing to log: VERSION's stdin carries no config (libcni sends only cniVersion), so
		// there is no logFile to write to.
		skel.PluginMainFuncs(skel.CNIFuncs{}, supportedVersions, about)
		return
	}
	start := time.Now()
	stdin, err := io.ReadAll(os.Stdin)
	if err != nil {
		e := types.NewError(types.ErrIOFailure, "reading stdin: "+err.Error(), "")
		e.Print()
		os.Exit(1)
	}
	// skel reads the config from os.Stdin itself; hand it the bytes we already read, so that the
	// invocation log can also record what skel rejects before any callback runs (missing
	// CNI_CONTAINERID, an unsupported cniVersion ...).
	if r, w, err := os.Pipe(); err == nil {
		// A config fits the pipe buffer (64 KiB on Linux) unless a huge prevResult comes along;
		// writing it inline avoids starting a goroutine, which costs a thread wake-up per exec.
		if len(stdin) < 60000 {
			w.Write(stdin)
			w.Close()
		} else {
			go func() { w.Write(stdin); w.Close() }()
		}
		os.Stdin = r
	}
	p := &plugin{cmd: cmd, stdin: stdin, start: start, stdout: os.Stdout, getenv: os.Getenv}
	cniErr := skel.PluginMainFuncsWithError(skel.CNIFuncs{
		Add:    p.cmdAdd,
		Del:    p.cmdDel,
		Check:  p.cmdCheck,
		GC:     p.cmdGC,
		Status: p.cmdStatus,
	}, supportedVersions, about)
	p.log(cniErr)
	if cniErr != nil {
		cniErr.Print()
		os.Exit(1)
	}
}
