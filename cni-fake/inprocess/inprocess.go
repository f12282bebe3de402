// Package inprocess runs cni-fake inside the runtime's own process: an implementation of
// libcni's exec interface (invoke.Exec) that, for the plugin type "cni-fake", calls the plugin
// code (package plugin) with the environment and stdin libcni would have given the binary, and
// execs every other plugin (portmap, a delegated host-local) from the plugin directories as
// libcni's default does. A unit test then needs no cni-fake binary and no `go build`:
//
//	cni := libcni.NewCNIConfigWithCacheDir(binDirs, cacheDir, inprocess.New())
//
// The calls are what the binary does, step for step (skel's checks, the fault rules, the
// invocation log line in logFile), so traces read the same. What differs: no process is started,
// so a call cannot be killed halfway (a context that ends cuts a fault's delay or a delegated
// IPAM plugin short instead), and veth mode would change the network namespaces of this process's
// threads, as the binary changes its own: run such tests in a namespace of their own.
package inprocess

import (
	"bytes"
	"context"
	"io"
	"os"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/plugsim/plugsim/cni-fake/plugin"
)

// Plugin is the plugin type (the conflist's "type") that runs in-process.
const Plugin = "cni-fake"

// path is what FindInPath answers for the in-process plugin, so ExecPlugin can tell it apart
// from a binary: it is not a file, and an error message that shows it says where the plugin ran.
const path = "(in-process) " + Plugin

// Exec is an invoke.Exec running cni-fake in-process. The zero value is ready to use.
type Exec struct {
	// Other runs every plugin but cni-fake; nil means libcni's default, which execs the binary
	// found in the plugin directories.
	Other invoke.Exec
	// Stderr receives the in-process plugin's diagnostics (libcni ignores a plugin's stderr);
	// nil means os.Stderr, where libcni's default copies an exec'd plugin's.
	Stderr io.Writer
}

// New returns an Exec for libcni.NewCNIConfigWithCacheDir.
func New() *Exec { return &Exec{} }

var _ invoke.Exec = (*Exec)(nil)

func (e *Exec) other() invoke.Exec {
	if e.Other != nil {
		return e.Other
	}
	return &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}
}

// FindInPath finds cni-fake without looking (it needs no binary) and every other plugin in paths.
func (e *Exec) FindInPath(name string, paths []string) (string, error) {
	if name == Plugin {
		return path, nil
	}
	return e.other().FindInPath(name, paths)
}

// ExecPlugin runs one call. For cni-fake a failure is the plugin's *types.Error, exactly what
// libcni decodes from a failed binary's stdout.
func (e *Exec) ExecPlugin(ctx context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	if pluginPath != path {
		return e.other().ExecPlugin(ctx, pluginPath, stdin, environ)
	}
	stderr := e.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	var out bytes.Buffer
	if err := plugin.Run(ctx, plugin.Invocation{Env: environ, Stdin: stdin, Stdout: &out, Stderr: stderr}); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Decode reads a VERSION answer, as libcni's default does.
func (e *Exec) Decode(b []byte) (version.PluginInfo, error) {
	var d version.PluginDecoder
	return d.Decode(b)
}
