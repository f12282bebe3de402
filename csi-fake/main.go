// csi-fake is a complete CSI driver (spec v1.13.0) without real storage: volumes are directories
// (or sparse files for block volumes) under a state directory, it passes csi-sanity, registers
// itself with a kubelet, records every call in the plugsim trace format and injects faults on
// demand. See csi-fake/README.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/plugsim/plugsim/csi-fake/driver"
	"github.com/plugsim/plugsim/csi-fake/server"
	"github.com/plugsim/plugsim/internal/fakeserver"
)

const usage = `csi-fake: a fake CSI driver (CSI spec v1.13.0) for testing kubelet, the CSI sidecars and CSI clients.

Volumes are directories under --state-dir (block volumes: sparse files); nothing needs a disk.
It passes csi-sanity v5.6.0, registers itself with a kubelet (--register), writes every call to
--trace and fails calls on demand (--faults, or the admin socket).

Examples:
  # everything on one socket, state in memory, as csi-sanity tests it:
  csi-fake --endpoint unix:///tmp/csi.sock --node-id node-1
  csi-sanity --csi.endpoint /tmp/csi.sock

  # the node half of a deployment, registering with the local kubelet:
  csi-fake --mode node --endpoint unix:///var/lib/kubelet/plugins/csi.plugsim.dev/csi.sock \
           --node-id "$(hostname)" --state-dir /var/lib/csi-fake --register

  # start with volumes and snapshots already there (see examples/fixtures/node.yaml):
  csi-fake --endpoint unix:///tmp/csi.sock --node-id plugsim-node --fixtures examples/fixtures/node.yaml

  # only inline ephemeral volumes (like Calico's csi.tigera.io):
  csi-fake --ephemeral-only --endpoint unix:///tmp/csi.sock --node-id node-1

Flags:
`

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "csi-fake:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("csi-fake", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	defEndpoint := os.Getenv("CSI_ENDPOINT") // the spec's variable for the plugin's socket
	if defEndpoint == "" {
		defEndpoint = "unix:///run/csi-fake/csi.sock"
	}
	var (
		opts        server.Options
		serving     fakeserver.Flags
		mode        = fs.String("mode", "all", "services to serve: all, controller (the controller Deployment) or node (the node DaemonSet)")
		capacity    = fs.String("capacity", "1Ti", "storage capacity shared by all volumes (GetCapacity goes down as volumes are created)")
		topology    = fs.String("topology", "", "extra topology of this node as key=value,... (topology.plugsim.dev/node=<node-id> is reported too, unless --node-topology=false)")
		nodeTopo    = fs.Bool("node-topology", true, "report topology.plugsim.dev/node=<node-id> in the node's topology; false reports only --topology's keys: network-attached storage every node with them reaches (give the nodes one --data-dir)")
		mount       = fs.String("mount", "fake", "what NodePublishVolume does: fake (create the target, record it) or bind (bind-mount the volume's data; root)")
		knownNodes  = fs.String("known-nodes", "", "node IDs (shell patterns, comma-separated) ControllerPublishVolume accepts; default only --node-id; '*' accepts all")
		attach      = fs.Bool("attach-required", true, "advertise PUBLISH_UNPUBLISH_VOLUME (CSIDriver attachRequired); false makes ControllerPublishVolume Unimplemented")
		verbose     = fs.Bool("v", false, "log every call (secrets stripped)")
		showVersion = fs.Bool("version", false, "print the version and exit")
	)
	fs.StringVar(&opts.Endpoint, "endpoint", defEndpoint, "CSI socket to serve (unix:///path.sock); default $CSI_ENDPOINT")
	fs.StringVar(&opts.ControllerEndpoint, "controller-endpoint", "", "also serve Identity and the controller on this socket (csi-sanity --csi.controllerendpoint)")
	fs.StringVar(&opts.NodeID, "node-id", "", "this node's ID, reported by NodeGetInfo (default: the host name)")
	fs.StringVar(&opts.DriverName, "driver-name", driver.DefaultDriverName, "the driver's name (CSIDriver and StorageClass provisioner)")
	fs.StringVar(&opts.StateDir, "state-dir", "", "directory for state.json and the volumes' data; empty keeps state in memory (lost on exit)")
	fs.StringVar(&opts.DataDir, "data-dir", "", "directory for the volumes' and snapshots' data (volumes/, snapshots/); default --state-dir. Processes may share one: node plugins given the controller's see its volumes' data, as nodes see network-attached storage")
	fs.Int64Var(&opts.MaxVolumesPerNode, "max-volumes-per-node", 0, "attach limit per node (NodeGetInfo; ControllerPublishVolume beyond it is ResourceExhausted); 0 means no limit")
	fs.BoolVar(&opts.EphemeralOnly, "ephemeral-only", false, "serve only the node service and only inline ephemeral volumes")
	fs.BoolVar(&opts.Register, "register", false, "serve the kubelet plugin registration API on <plugin-registry-dir>/<driver-name>-reg.sock")
	fs.StringVar(&opts.PluginRegistryDir, "plugin-registry-dir", server.DefaultPluginRegistryDir, "the kubelet's plugin registry directory (with --register)")
	fs.StringVar(&opts.KubeletRegistrationPath, "kubelet-registration-path", "", "the CSI socket path as the kubelet sees it (with --register; default the --endpoint path)")
	fs.StringVar(&opts.TraceFile, "trace", "", "append every call as a JSON line to this file (the plugsim trace format)")
	fs.StringVar(&opts.FaultsFile, "faults", "", "fault rules (YAML or JSON) to apply from the start")
	fs.StringVar(&opts.FixturesFile, "fixtures", "", "YAML fixture file whose csi section (volumes with their attachments, staging and publications; snapshots) csi-fake holds when it starts, checked as the RPCs check them; with --state-dir, applied only when it has no state file yet (format: csi-fake/README.md, example: examples/fixtures/node.yaml)")
	fs.StringVar(&opts.AdminSocket, "admin-socket", "", "serve the admin API (GET /trace, GET|POST|DELETE /faults) on this unix socket")
	serving.Register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	if *showVersion {
		fmt.Println("csi-fake", driver.Version)
		return nil
	}
	opts.FaultSeed, opts.SocketMode, opts.AdminSocketMode, opts.SocketGroup = serving.FaultSeed, serving.SocketMode, serving.AdminSocketMode, serving.SocketGroup
	opts.Mode = driver.Mode(*mode)
	opts.Mount = driver.MountMode(*mount)
	opts.NoAttach = !*attach
	opts.NoNodeTopology = !*nodeTopo
	q, err := resource.ParseQuantity(*capacity)
	if err != nil {
		return fmt.Errorf("--capacity %q: %w (use a quantity such as 100Gi or 1Ti)", *capacity, err)
	}
	opts.Capacity = q.Value()
	if opts.Topology, err = parseTopology(*topology); err != nil {
		return err
	}
	if *knownNodes != "" {
		opts.KnownNodes = strings.Split(*knownNodes, ",")
	}
	opts.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts.LogCalls = *verbose

	srv, err := server.Start(opts)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	s := <-sig
	opts.Log.Info("stopping", "signal", s.String())
	return srv.Close()
}

func parseTopology(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("--topology: %q is not key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}
