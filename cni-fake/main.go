// cni-fake is a CNI plugin (spec 1.1.0) meant to be the first plugin of a chain, in front of the
// real portmap: what containerd or cri-fake exec for every pod sandbox.
//
// It is a real plugin for libcni, cnitool and portmap, and fake only in that, by default ("mode":
// "fake"), it changes nothing in the kernel: the result describes a host veth and a pod interface
// with MACs, addresses from its built-in IPAM (or a delegated IPAM plugin), routes and DNS, and
// any CNI_NETNS path is accepted. "mode": "veth" (root) makes the veth pair for real, as ptp does.
//
// Run it without CNI_COMMAND for a short description; see cni-fake/README.md for every config key.
// The plugin code is package plugin; this is skel over the process's environment and stdin.
//
// The binary is exec'd once per CNI call, so start-up is most of its cost: nothing it imports
// does heavy package initialisation (no gRPC, no YAML, no plugins/pkg/ipam, no libcni invoke).
package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plugsim/plugsim/cni-fake/plugin"
)

func main() { os.Exit(pluginMain()) }

// pluginMain is one CNI call over the process's environment, stdin and stdout (what skel reads),
// and returns the exit status. The package tests call it in-process, with the environment and
// stdio swapped around the call, as the CNI plugins' own tests drive cmdAdd (plugins
// pkg/testutils/cmd.go); main_test.go's run does that.
func pluginMain() int {
	cmd := os.Getenv("CNI_COMMAND")
	if cmd == "" || cmd == "VERSION" {
		// Nothing to log: VERSION's stdin carries no config (libcni sends only cniVersion), so
		// there is no logFile to write to.
		if cniErr := skel.PluginMainFuncsWithError(skel.CNIFuncs{}, plugin.Versions(), plugin.About); cniErr != nil {
			cniErr.Print()
			return 1
		}
		return 0
	}
	start := time.Now()
	stdin, err := io.ReadAll(os.Stdin)
	if err != nil {
		types.NewError(types.ErrIOFailure, "reading stdin: "+err.Error(), "").Print()
		return 1
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
	call := plugin.New(context.Background(), plugin.Invocation{
		Env: os.Environ(), Stdin: stdin, Stdout: os.Stdout, Stderr: os.Stderr, Start: start,
	})
	cniErr := skel.PluginMainFuncsWithError(call.Funcs(), plugin.Versions(), plugin.About)
	call.Log(cniErr)
	if cniErr != nil {
		cniErr.Print()
		return 1
	}
	return 0
}
