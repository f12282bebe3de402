package plugin

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"

	"github.com/plugsim/plugsim/cni-fake/ipam"
)

// Modes (the "mode" key).
const (
	ModeFake = "fake" // no kernel state; the result describes interfaces that do not exist
	ModeVeth = "veth" // a real veth pair into CNI_NETNS, as the ptp plugin makes (needs root)
)

// Defaults for the keys a minimal config leaves out.
const (
	defaultDataDir = "/run/cni-fake"
	defaultCaller  = "cri-fake"
	defaultMTU     = 1500
	// maxNetworkName bounds the network name, a directory name: Linux file names stop at 255
	// bytes (NAME_MAX).
	maxNetworkName = 255
)

// builtinIPAM names the built-in allocator in "ipam.type". Any other non-empty type is a delegated
// IPAM plugin found in CNI_PATH (host-local, static, calico-ipam ...), the way Calico delegates.
const builtinIPAM = "cni-fake"

// NetConf is the plugin entry as cni-fake receives it on stdin: the spec's keys (types.PluginConf:
// cniVersion, name, type, capabilities, ipam, dns, prevResult, cni.dev/valid-attachments) plus ours.
// Unknown keys are ignored, as the spec asks ("must be passed through unchanged").
type NetConf struct {
	types.PluginConf
	// Mode is "fake" (default) or "veth".
	Mode string `json:"mode,omitempty"`
	// DataDir holds the built-in IPAM's leases, one directory per network.
	DataDir string `json:"dataDir,omitempty"`
	// LogFile, when set, receives one trace event (JSON line) per invocation.
	LogFile string `json:"logFile,omitempty"`
	// Caller is who the trace shows as calling the plugin; CNI_ARGS PLUGSIM_CALLER wins over it.
	Caller string `json:"caller,omitempty"`
	// MTU of the pod interface (both modes report it; veth mode sets it).
	MTU int `json:"mtu,omitempty"`
	// HostIfPrefix starts the host-side veth name (default "veth", as ptp's names do).
	HostIfPrefix string `json:"hostIfPrefix,omitempty"`
	// Faults are fault rules (see faults.go), a JSON list; decoded only when a verb runs.
	Faults json.RawMessage `json:"faults,omitempty"`
	// FaultsFile names a JSON file of more fault rules ({"seed": N, "rules": [...]}).
	FaultsFile string `json:"faultsFile,omitempty"`

	// RuntimeConfig carries the capability args the runtime filled in for the capabilities this
	// entry declares (libcni injects only declared ones).
	RuntimeConfig RuntimeConfig `json:"runtimeConfig,omitempty"`
	// Args is the spec's "args" (args.cni.ips requests addresses, as for host-local).
	Args *struct {
		CNI struct {
			IPs []string `json:"ips,omitempty"`
		} `json:"cni"`
	} `json:"args,omitempty"`

	// RawIPAM is the "ipam" object unparsed, for the built-in allocator's own keys. It shadows
	// PluginConf.IPAM (whose Type parseConfig fills in), so stdin is decoded once: every decode
	// is a measurable part of an invocation.
	RawIPAM json.RawMessage `json:"ipam,omitempty"`
}

// RuntimeConfig is the subset of the well-known capability args (CNI CONVENTIONS.md) cni-fake uses.
// containerd's go-cni sends capitalised keys ("HostPort", "Servers"); encoding/json matches keys
// without regard to case, so both spellings are read.
type RuntimeConfig struct {
	PortMappings []PortMapping `json:"portMappings,omitempty"`
	DNS          *RuntimeDNS   `json:"dns,omitempty"`
	Bandwidth    *Bandwidth    `json:"bandwidth,omitempty"`
	IPs          []string      `json:"ips,omitempty"`
}

// PortMapping is one hostPort mapping; cni-fake only records it (portmap does the work).
type PortMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
	HostIP        string `json:"hostIP,omitempty"`
}

// RuntimeDNS is the "dns" capability: the pod's DNS config from the CRI.
type RuntimeDNS struct {
	Servers  []string `json:"servers,omitempty"`
	Searches []string `json:"searches,omitempty"`
	Options  []string `json:"options,omitempty"`
}

// Bandwidth is the "bandwidth" capability (bits per second, bursts in bits).
type Bandwidth struct {
	IngressRate  uint64 `json:"ingressRate,omitempty"`
	IngressBurst uint64 `json:"ingressBurst,omitempty"`
	EgressRate   uint64 `json:"egressRate,omitempty"`
	EgressBurst  uint64 `json:"egressBurst,omitempty"`
}

// configError is an invalid network configuration (CNI code 7) naming the key at fault.
func configError(format string, a ...any) error {
	return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(format, a...), "")
}

// parseConfig decodes and validates stdin. Defaults are filled in so the rest reads simply.
func parseConfig(stdin []byte) (*NetConf, error) {
	conf := &NetConf{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("cannot decode the network configuration: %v", err), "")
	}
	if len(conf.RawIPAM) > 0 {
		if err := json.Unmarshal(conf.RawIPAM, &conf.IPAM); err != nil {
			return nil, configError("ipam: %v", err)
		}
	}
	switch conf.Mode {
	case "":
		conf.Mode = ModeFake
	case ModeFake, ModeVeth:
	default:
		return nil, configError("mode: %q is not a mode; use %q (default, no kernel changes) or %q (a real veth pair, needs root)", conf.Mode, ModeFake, ModeVeth)
	}
	// The network name is a directory name under dataDir. skel checks it with libcni's rule
	// (utils.ValidateNetworkName: alphanumerics, then '_', '.', '-') before any verb; checked
	// again here for callers that do not come through skel, and bounded, which the rule is not.
	if err := utils.ValidateNetworkName(conf.Name); err != nil {
		return nil, err
	}
	if len(conf.Name) > maxNetworkName {
		return nil, configError("name: %d bytes; the network name is a directory name under dataDir, at most %d bytes", len(conf.Name), maxNetworkName)
	}
	if conf.DataDir == "" {
		conf.DataDir = defaultDataDir
	}
	// cni-fake creates and writes these; relative, they would resolve against whatever working
	// directory the runtime exec'd the plugin in.
	if !filepath.IsAbs(conf.DataDir) {
		return nil, configError("dataDir: %q is not an absolute path", conf.DataDir)
	}
	if conf.LogFile != "" && !filepath.IsAbs(conf.LogFile) {
		return nil, configError("logFile: %q is not an absolute path", conf.LogFile)
	}
	if conf.MTU == 0 {
		conf.MTU = defaultMTU
	}
	if conf.MTU < 68 || conf.MTU > 65535 {
		return nil, configError("mtu: %d is outside 68..65535", conf.MTU)
	}
	if conf.HostIfPrefix == "" {
		conf.HostIfPrefix = "veth"
	}
	if len(conf.HostIfPrefix) > 7 {
		return nil, configError("hostIfPrefix: %q is longer than 7 characters (8 hex digits follow it, and Linux names stop at 15)", conf.HostIfPrefix)
	}
	for i, pm := range conf.RuntimeConfig.PortMappings {
		if pm.HostPort <= 0 || pm.HostPort > 65535 || pm.ContainerPort <= 0 || pm.ContainerPort > 65535 {
			return nil, configError("runtimeConfig.portMappings[%d]: hostPort %d / containerPort %d must be in 1..65535", i, pm.HostPort, pm.ContainerPort)
		}
	}
	return conf, nil
}

// delegated reports whether addresses come from another IPAM plugin.
func (c *NetConf) delegated() bool {
	return c.IPAM.Type != "" && c.IPAM.Type != builtinIPAM
}

// cniArgs are the CNI_ARGS cni-fake reads. Unknown keys are accepted whether or not
// IgnoreUnknown=1 is given: containerd and CRI-O send K8S_POD_* labels to every plugin.
type cniArgs struct {
	Caller       string
	IP           []netip.Addr
	PodNamespace string
	PodName      string
	PodUID       string
	InfraID      string
}

func parseCNIArgs(s string) (cniArgs, error) {
	var a cniArgs
	if s == "" {
		return a, nil
	}
	for _, kv := range strings.Split(s, ";") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return a, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_ARGS: %q is not KEY=VALUE", kv), "")
		}
		switch k {
		case "PLUGSIM_CALLER":
			a.Caller = v
		case "IP":
			// host-local's CNI_ARGS form: IP=10.0.0.5 or IP=10.0.0.5,fd00::5
			for _, s := range strings.Split(v, ",") {
				ip, err := netip.ParseAddr(strings.TrimSpace(s))
				if err != nil {
					return a, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_ARGS: IP=%s is not an IP address", s), "")
				}
				a.IP = append(a.IP, ip)
			}
		case "K8S_POD_NAMESPACE":
			a.PodNamespace = v
		case "K8S_POD_NAME":
			a.PodName = v
		case "K8S_POD_UID":
			a.PodUID = v
		case "K8S_POD_INFRA_CONTAINER_ID":
			a.InfraID = v
		}
	}
	return a, nil
}

// requestedIPs gathers the addresses the runtime asked for: CNI_ARGS IP=, args.cni.ips and the
// "ips" capability (host-local honours the same three). "10.0.0.5/24" and "10.0.0.5" both work.
func (c *NetConf) requestedIPs(args cniArgs) ([]netip.Addr, error) {
	out := append([]netip.Addr(nil), args.IP...)
	var more []string
	if c.Args != nil {
		more = append(more, c.Args.CNI.IPs...)
	}
	more = append(more, c.RuntimeConfig.IPs...)
	for _, s := range more {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Addr())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, configError("requested IP %q is not an IP address", s)
		}
		out = append(out, a)
	}
	return out, nil
}

// pool parses the built-in IPAM config.
func (c *NetConf) pool() (ipam.Pool, error) {
	p, err := ipam.ParseConfig(c.RawIPAM)
	if err != nil {
		return p, configError("%v", err)
	}
	return p, nil
}
