package network

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"

	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
)

// ErrCNINotInitialized is go-cni's error when no network config has been loaded; containerd's
// Status reports it as "Network plugin returns error: cni plugin not initialized".
var ErrCNINotInitialized = errors.New("cni plugin not initialized")

// DefaultIfName is the pod interface containerd asks CNI for.
const DefaultIfName = "eth0"

// CNIOptions configure the CNI network.
type CNIOptions struct {
	ConfDir  string
	BinDirs  []string
	CacheDir string
	// Exec runs the plugins; nil means libcni's default, which execs each plugin's binary from
	// BinDirs as containerd does. cni-fake/inprocess runs cni-fake in this process instead (for
	// unit tests: no binary to build) and execs the others.
	Exec invoke.Exec
	// ConfTemplate, when set, is a text/template file (containerd's conf_template) rendered into
	// ConfTemplateFileName in ConfDir when UpdateRuntimeConfig brings the node's pod CIDR and no
	// valid config is loaded yet (see SetPodCIDR).
	ConfTemplate string
	// Logf reports what SetPodCIDR did (containerd logs the same decisions at info level).
	Logf func(format string, args ...any)
	// Observe, when set, is called after every ADD and DEL (the trace of the CNI boundary as the
	// runtime sees it).
	Observe func(verb string, pod Pod, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf, res types.Result, err error, took time.Duration)
}

// CNI runs the CNI plugins of the first config in the conf directory through libcni.
type CNI struct {
	opts CNIOptions
	cni  *libcni.CNIConfig

	mu      sync.Mutex
	sig     string // what the conf directory looked like when last loaded
	list    *libcni.NetworkConfigList
	source  string
	loadErr error
	checked time.Time
	podCIDR string

	// tmplMu makes SetPodCIDR's check-then-render one step: two updates racing must not both
	// find the network unready and both write the file.
	tmplMu sync.Mutex
}

// NewCNI returns a CNI network over a conf directory and plugin directories. The directory need
// not exist yet; until a valid config appears the network is not ready.
func NewCNI(opts CNIOptions) *CNI {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	c := &CNI{opts: opts, cni: libcni.NewCNIConfigWithCacheDir(opts.BinDirs, opts.CacheDir, opts.Exec)}
	c.reload()
	return c
}

// confFiles lists the config files libcni would consider, in name order.
func (c *CNI) confFiles() ([]string, string) {
	files, err := libcni.ConfFiles(c.opts.ConfDir, []string{".conf", ".conflist", ".json"})
	if err != nil {
		return nil, "error:" + err.Error()
	}
	sort.Strings(files)
	var sig strings.Builder
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			fmt.Fprintf(&sig, "%s|%d|%d;", f, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return files, sig.String()
}

// reload re-reads the conf directory when it changed since the last load. containerd watches the
// directory with inotify; polling on each Status, RunPodSandbox and StopPodSandbox (the only
// moments the config matters) gives the same observable behaviour without a watcher goroutine.
func (c *CNI) reload() {
	c.mu.Lock()
	defer c.mu.Unlock()
	files, sig := c.confFiles()
	if sig == c.sig && c.sig != "" {
		return
	}
	c.sig = sig
	c.list, c.source, c.loadErr = nil, "", nil
	if len(files) == 0 {
		c.loadErr = fmt.Errorf("no network config found in %s: %w", c.opts.ConfDir, ErrCNINotInitialized)
		return
	}
	// go-cni loads the first file in name order (containerd's max_conf_num = 1); an invalid first
	// file leaves the plugin uninitialised rather than falling through to the next one.
	f := files[0]
	var list *libcni.NetworkConfigList
	var err error
	if strings.HasSuffix(f, ".conflist") {
		list, err = libcni.ConfListFromFile(f)
	} else {
		var conf *libcni.PluginConfig
		conf, err = libcni.ConfFromFile(f)
		if err == nil && conf.Network.Type == "" {
			err = fmt.Errorf("network type not found in %s", f)
		}
		if err == nil {
			list, err = libcni.ConfListFromConf(conf)
		}
	}
	if err == nil && len(list.Plugins) == 0 {
		err = fmt.Errorf("CNI config list in config file %s has no networks", f)
	}
	if err != nil {
		c.loadErr = fmt.Errorf("failed to load cni config %s: %v: %w", f, err, ErrCNINotInitialized)
		return
	}
	c.list, c.source = list, f
}

func (c *CNI) current() (*libcni.NetworkConfigList, error) {
	c.reload()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.list == nil {
		return nil, c.loadErr
	}
	return c.list, nil
}

// Ready reports ErrCNINotInitialized until a valid config is in the conf directory.
func (c *CNI) Ready() error {
	_, err := c.current()
	if err != nil {
		return ErrCNINotInitialized
	}
	return nil
}

// LoadError is the detailed reason the config did not load (nil when it did).
func (c *CNI) LoadError() error {
	_, err := c.current()
	return err
}

func (c *CNI) runtimeConf(pod Pod) (*libcni.RuntimeConf, error) {
	caps, err := CapabilityArgs(pod.Config)
	if err != nil {
		return nil, err
	}
	return &libcni.RuntimeConf{
		ContainerID:    pod.ID,
		NetNS:          pod.NetNS,
		IfName:         DefaultIfName,
		Args:           Args(pod),
		CapabilityArgs: caps,
	}, nil
}

// Setup runs the ADD chain and picks the pod IPs from the result's eth0 addresses.
func (c *CNI) Setup(ctx context.Context, pod Pod) (Result, error) {
	list, err := c.current()
	if err != nil {
		return Result{}, err
	}
	rt, err := c.runtimeConf(pod)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	res, err := c.cni.AddNetworkList(ctx, list, rt)
	if c.opts.Observe != nil {
		c.opts.Observe("ADD", pod, list, rt, res, err, time.Since(start))
	}
	if err != nil {
		return Result{}, fmt.Errorf("network %q: %w", list.Name, err)
	}
	r100, err := types100.NewResultFromResult(res)
	if err != nil {
		return Result{}, fmt.Errorf("CNI result of network %q: %w", list.Name, err)
	}
	raw, _ := json.Marshal(r100)
	return Result{IPs: podIPs(r100), Raw: raw}, nil
}

// Teardown runs the DEL chain with the same arguments as the ADD.
func (c *CNI) Teardown(ctx context.Context, pod Pod) error {
	list, err := c.current()
	if err != nil {
		return err
	}
	rt, err := c.runtimeConf(pod)
	if err != nil {
		return err
	}
	start := time.Now()
	err = c.cni.DelNetworkList(ctx, list, rt)
	if c.opts.Observe != nil {
		c.opts.Observe("DEL", pod, list, rt, nil, err, time.Since(start))
	}
	if err != nil {
		return fmt.Errorf("network %q: %w", list.Name, err)
	}
	return nil
}

// podIPs selects the addresses of the pod interface, IPv4 first (containerd's selectPodIPs).
func podIPs(r *types100.Result) []string {
	var v4, v6 []string
	for _, ipc := range r.IPs {
		if ipc.Interface != nil && *ipc.Interface >= 0 && *ipc.Interface < len(r.Interfaces) {
			iface := r.Interfaces[*ipc.Interface]
			if iface.Name != DefaultIfName || iface.Sandbox == "" {
				continue
			}
		}
		switch ip := ipc.Address.IP; {
		case len(ip) != net.IPv4len && len(ip) != net.IPv6len:
			// No address (or a malformed one) is no pod IP: its String is "<nil>" or "?…".
			continue
		case ip.To4() != nil:
			v4 = append(v4, ip.String())
		default:
			v6 = append(v6, ip.String())
		}
	}
	return append(v4, v6...)
}

// SetPodCIDR takes UpdateRuntimeConfig's pod CIDRs the way containerd's UpdateRuntimeConfig does:
// every CIDR must parse (else ErrInvalidPodCIDR, whatever else is configured); without a
// ConfTemplate nothing is written ("wait for other system components to drop the config"); with
// one, the template is rendered into ConfTemplateFileName only while no valid config loads (a
// config already there, or one dropped in meanwhile, wins and is left alone). The conf-dir reload
// then picks the rendered file up and the network turns ready. The CIDRs are shown in Info.
func (c *CNI) SetPodCIDR(cidrs string) error {
	data, err := ParsePodCIDRs(cidrs)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.podCIDR = strings.Join(data.PodCIDRRanges, ",")
	c.mu.Unlock()
	if c.opts.ConfTemplate == "" {
		c.opts.Logf("No cni config template is specified, wait for other system components to drop the config.")
		return nil
	}
	c.tmplMu.Lock()
	defer c.tmplMu.Unlock()
	if _, err := c.current(); err == nil {
		c.opts.Logf("CNI config is successfully loaded, skip generating cni config from template %q", c.opts.ConfTemplate)
		return nil
	}
	c.opts.Logf("Generating cni config from template %q", c.opts.ConfTemplate)
	return renderConfTemplate(c.opts.ConfDir, c.opts.ConfTemplate, data)
}

// Info renders the loaded config the way containerd's verbose Status does: "cniconfig" in go-cni's
// GetConfig shape, and "lastCNILoadStatus".
func (c *CNI) Info() map[string]string {
	list, err := c.current()
	c.mu.Lock()
	defer c.mu.Unlock()
	type netConf struct {
		Network json.RawMessage
		Source  string
	}
	type confList struct {
		Name       string
		CNIVersion string
		Plugins    []netConf
		Source     string
	}
	type confNetwork struct {
		Config *confList
		IFName string
	}
	cfg := struct {
		PluginDirs       []string
		PluginConfDir    string
		PluginMaxConfNum int
		Prefix           string
		Networks         []confNetwork
		PodCIDR          string `json:",omitempty"`
	}{PluginDirs: c.opts.BinDirs, PluginConfDir: c.opts.ConfDir, PluginMaxConfNum: 1, Prefix: "eth", PodCIDR: c.podCIDR}
	if list != nil {
		cl := &confList{Name: list.Name, CNIVersion: list.CNIVersion, Source: string(list.Bytes)}
		for _, p := range list.Plugins {
			cl.Plugins = append(cl.Plugins, netConf{Network: json.RawMessage(p.Bytes), Source: string(p.Bytes)})
		}
		cfg.Networks = append(cfg.Networks, confNetwork{Config: cl, IFName: DefaultIfName})
	}
	b, _ := json.Marshal(cfg)
	status := "OK"
	if err != nil {
		status = err.Error()
	}
	return map[string]string{"cniconfig": string(b), "lastCNILoadStatus": status, "cniConfigFile": c.source}
}

// Internal is the network used when CNI is off: always ready, each pod gets the next free address
// of the pod CIDR (10.88.0.0/16 until UpdateRuntimeConfig sets one), so pods have distinct IPs.
type Internal struct {
	mu    sync.Mutex
	cidr  *net.IPNet
	next  uint32
	inUse map[string]string // sandbox ID -> IP
	taken map[string]bool
}

// NewInternal returns the built-in network.
func NewInternal() *Internal {
	_, n, _ := net.ParseCIDR("10.88.0.0/16")
	return &Internal{cidr: n, inUse: map[string]string{}, taken: map[string]bool{}}
}

// Ready always succeeds.
func (n *Internal) Ready() error { return nil }

// Setup allocates an address.
func (n *Internal) Setup(ctx context.Context, pod Pod) (Result, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ip, ok := n.inUse[pod.ID]; ok {
		return Result{IPs: []string{ip}}, nil
	}
	ones, bits := n.cidr.Mask.Size()
	size := uint32(1) << uint(bits-ones)
	base := ipToUint(n.cidr.IP)
	for i := uint32(0); i < size; i++ {
		n.next++
		off := n.next % size
		if off == 0 || off == size-1 || off == 1 { // network, broadcast, gateway
			continue
		}
		ip := uintToIP(base + off).String()
		if !n.taken[ip] {
			n.taken[ip] = true
			n.inUse[pod.ID] = ip
			return Result{IPs: []string{ip}}, nil
		}
	}
	return Result{}, fmt.Errorf("no free address left in pod CIDR %s", n.cidr)
}

// Teardown frees the pod's address.
func (n *Internal) Teardown(ctx context.Context, pod Pod) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ip, ok := n.inUse[pod.ID]; ok {
		delete(n.taken, ip)
		delete(n.inUse, pod.ID)
	}
	return nil
}

// Reserve marks an address as used by a restored sandbox.
func (n *Internal) Reserve(id, ip string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.inUse[id], n.taken[ip] = ip, true
}

// SetPodCIDR switches the allocator to the first pod CIDR for pods set up from now on, when that
// is IPv4 with room for a pod (/30 or larger); others are validated, then kept out of use.
func (n *Internal) SetPodCIDR(cidrs string) error {
	data, err := ParsePodCIDRs(cidrs)
	if err != nil {
		return err
	}
	_, c, _ := net.ParseCIDR(data.PodCIDR)
	if c.IP.To4() == nil {
		return nil
	}
	if ones, _ := c.Mask.Size(); ones > 30 {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cidr, n.next = c, 0
	return nil
}

// Info describes the built-in network.
func (n *Internal) Info() map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"mode": "internal", "podCIDR": n.cidr.String(), "allocated": len(n.inUse)})
	return map[string]string{"network": string(b), "lastCNILoadStatus": "OK (CNI disabled: built-in address allocator)"}
}

func ipToUint(ip net.IP) uint32 {
	v4 := ip.To4()
	return uint32(v4[0])<<24 | uint32(v4[1])<<16 | uint32(v4[2])<<8 | uint32(v4[3])
}

func uintToIP(v uint32) net.IP { return net.IPv4(byte(v>>24), byte(v>>16), byte(v>>8), byte(v)) }
