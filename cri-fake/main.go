// Command cri-fake is a CRI v1 runtime and image service that runs no containers: it keeps exact
// CRI bookkeeping (sandboxes, containers, images, states, error codes), wires pod networking
// through real CNI plugins, records every call, and can be told to fail or slow down on purpose.
// See cri-fake/README.md.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/plugsim/plugsim/cri-fake/server"
	"github.com/plugsim/plugsim/internal/fakeserver"
)

const usage = `cri-fake: a fake CRI runtime (runtime.v1 RuntimeService + ImageService) for testing kubelets and CRI clients.

It keeps every sandbox, container and image a real runtime would, with containerd's semantics and
error codes, but runs no real processes: each container runs a simulated process (busybox-like
applets, a sh subset, nginx/httpd/agnhost servers) that writes the CRI log, answers exec, attach and
port-forward through a streaming server on --streaming-addr, and exits with its own code. Images
come from an offline catalog (built in, extensible with --image-catalog). Pod networking runs the
real CNI plugins of --cni-conf-dir through libcni, or a built-in address allocator when
--cni-conf-dir is empty.

Usage:
  cri-fake [flags]

Examples:
  # Serve on the default socket with CNI from /etc/cni/net.d, recording a trace:
  cri-fake --endpoint unix:///run/plugsim/cri.sock --trace /tmp/cri-trace.jsonl

  # No CNI, state kept across restarts, admin socket for fault injection:
  cri-fake --cni-conf-dir "" --state-dir /var/lib/plugsim/cri --admin-socket unix:///run/plugsim/cri-admin.sock

  # Start with pods, containers and images already there (see examples/fixtures/node.yaml):
  cri-fake --cni-conf-dir "" --fixtures examples/fixtures/node.yaml

  # Then, from another shell:
  crictl --runtime-endpoint unix:///run/plugsim/cri.sock info
  curl --unix-socket /run/plugsim/cri-admin.sock -d '{"method":"PullImage","code":"Unavailable","times":1}' http://x/faults

Flags:
`

func main() {
	var (
		opts        server.Options
		serving     fakeserver.Flags
		binDirs     string
		handlers    string
		progHandles string
		runc        string
		showVersion bool
	)
	fs := flag.NewFlagSet("cri-fake", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&opts.Endpoint, "endpoint", "unix:///run/plugsim/cri.sock", "unix socket to serve the CRI on; a stale socket file is replaced, a live one is an error")
	fs.StringVar(&opts.ImageEndpoint, "image-endpoint", "", "serve the ImageService on this separate socket (default: the --endpoint socket)")
	fs.StringVar(&opts.AdminSocket, "admin-socket", "", "serve the admin API here (GET /trace, GET|POST|DELETE /faults); off when empty")
	fs.StringVar(&opts.StateDir, "state-dir", "", "persist sandboxes, containers and pulled images here and reload them at start; memory only when empty")
	fs.StringVar(&opts.FixturesFile, "fixtures", "", "YAML fixture file whose cri section (images, pods, containers) cri-fake holds when it starts, checked as the RPCs check them; with --state-dir, applied only to a state dir that holds no state yet (format: cri-fake/README.md, example: examples/fixtures/node.yaml)")
	fs.StringVar(&opts.RootDir, "root-dir", "/var/lib/plugsim/cri-fake", "where network namespace files, the CNI cache and the logs of sandboxes without a log directory go")
	fs.StringVar(&opts.CNIConfDir, "cni-conf-dir", "/etc/cni/net.d", "CNI config directory; the first .conf/.conflist/.json file in name order is used and re-read when the directory changes; empty turns CNI off (pods get 10.88.x.y addresses from a built-in allocator)")
	fs.StringVar(&opts.CNIConfTemplate, "cni-conf-template", "", "CNI config template (Go text/template; containerd's conf_template, fields .PodCIDR, .PodCIDRRanges, .Routes): rendered into <cni-conf-dir>/10-containerd-net.conflist when the kubelet sends the node's pod CIDR (UpdateRuntimeConfig) and no config is loaded; empty writes nothing")
	fs.StringVar(&binDirs, "cni-bin-dir", "/opt/cni/bin", "comma-separated directories searched for CNI plugin binaries")
	fs.StringVar(&opts.NetNS, "netns", "placeholder", `network namespaces: "placeholder" (an empty file per pod; for CNI plugins that fake the network, like cni-fake) or "real" (root only: a real namespace per pod)`)
	fs.StringVar(&handlers, "runtime-handlers", "runc", "comma-separated runtime handlers RunPodSandbox accepts (RuntimeClass handlers); the default handler \"\" is always accepted")
	fs.StringVar(&runc, "runc", "auto", `runc binary that runs the containers of program images (catalog entries with a program) for real; "auto": the runc beside this executable when it exists and cri-fake runs as root, else none; "none": every container is simulated`)
	fs.StringVar(&opts.ProgramDir, "program-dir", "", "directory of the programs the image catalog names (default: programs/ beside the --runc binary; make programs builds bin/programs)")
	fs.StringVar(&progHandles, "program-handlers", ",runc", `comma-separated runtime handlers whose pods run program images under runc ("" in the list is the default handler); pods of other handlers (plugsim-gvisor) run every image in the simulation`)
	fs.StringVar(&opts.CgroupParent, "cgroup-parent", "", "cgroup that program containers' cgroups are made in (default plugsim-cri-fake-<hash of --root-dir>; relative to cri-fake's own cgroup on cgroup v1)")
	fs.StringVar(&opts.CgroupDriver, "cgroup-driver", "cgroupfs", `cgroup driver reported by RuntimeConfig ("cgroupfs" or "systemd"); a kubelet adopts it, so match the host's`)
	fs.StringVar(&opts.ImageCatalog, "image-catalog", "", "YAML image catalog merged over the built-in images (format: cri-fake/README.md, example: examples/cri/image-catalog.yaml)")
	fs.StringVar(&opts.TraceFile, "trace", "", "append every CRI (and CNI) call as a JSON line to this file")
	fs.IntVar(&opts.TraceCapacity, "trace-capacity", 4096, "how many recent calls the in-memory trace keeps (read them through the admin socket)")
	fs.StringVar(&opts.FaultsFile, "faults", "", "YAML or JSON fault rules to apply from the start (format: cri-fake/README.md)")
	fs.StringVar(&opts.StreamingAddr, "streaming-addr", "127.0.0.1:0", `host:port of the HTTP streaming server for exec, attach and port-forward sessions (crictl exec/attach/port-forward, kubectl through a kubelet); port 0 picks a free port; "none" serves none (those calls answer Unimplemented)`)
	fs.StringVar(&opts.Caller, "caller", "kubelet", "name of the client side in trace events for calls from this process or an unidentifiable peer; calls from another process are named after it (/proc/<pid>/comm of the socket's peer: kubelet, crictl)")
	serving.Register(fs)
	fs.BoolVar(&showVersion, "version", false, "print the version and exit")
	fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "cri-fake: unexpected arguments %q (all settings are flags; see --help)\n", fs.Args())
		os.Exit(2)
	}
	if showVersion {
		fmt.Println("cri-fake 0.1.0 (CRI runtime.v1, k8s.io/cri-api v0.37.2)")
		return
	}
	opts.CNIBinDirs = splitList(binDirs)
	opts.RuntimeHandlers = splitList(handlers)
	opts.ProgramHandlers = strings.Split(progHandles, ",")
	for i := range opts.ProgramHandlers {
		opts.ProgramHandlers[i] = strings.TrimSpace(opts.ProgramHandlers[i])
	}
	auto := runc == "auto"
	switch runc {
	case "auto":
		runc = ""
		if exe, err := os.Executable(); err == nil && os.Geteuid() == 0 {
			if p := filepath.Join(filepath.Dir(exe), "runc"); fileExists(p) {
				runc = p
			}
		}
	case "none":
		runc = ""
	}
	opts.Runc = runc
	opts.FaultSeed, opts.SocketMode, opts.AdminSocketMode, opts.SocketGroup = serving.FaultSeed, serving.SocketMode, serving.AdminSocketMode, serving.SocketGroup
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts.Log = log

	srv, err := server.Start(opts)
	if err != nil && auto && opts.Runc != "" {
		log.Warn("program containers off: runc found but not usable", "runc", opts.Runc, "error", err)
		opts.Runc = ""
		srv, err = server.Start(opts)
	}
	if err != nil {
		log.Error("cannot start", "error", err)
		os.Exit(1)
	}
	cni := opts.CNIConfDir
	if cni == "" {
		cni = "off (built-in allocator)"
	}
	log.Info("cri-fake serving", "endpoint", srv.Endpoint(), "imageEndpoint", srv.ImageEndpoint(), "cniConfDir", cni, "netns", opts.NetNS,
		"streaming", srv.StreamingURL(), "admin", srv.AdminEndpoint(), "faultSeed", srv.FaultSeed(), "runc", cmpOr(opts.Runc, "none"))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	s := <-sig
	log.Info("shutting down", "signal", s.String())
	if err := srv.Close(); err != nil {
		log.Error("close", "error", err)
		os.Exit(1)
	}
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
