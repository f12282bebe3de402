package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plugsim/plugsim/harness/trace"
)

// CNIEnv is where `interface: cni` steps find their network configuration and plugins: the
// harness calls them through libcni exactly as a container runtime does.
type CNIEnv struct {
	ConfDir  string
	BinDirs  []string
	CacheDir string
	// Exec runs the plugins (nil: libcni's default, which execs each from BinDirs); the node
	// the harness starts for a Go test runs cni-fake in-process (cni-fake/inprocess).
	Exec invoke.Exec
}

type cniRequest struct {
	ContainerID      string            `yaml:"containerID"`
	NetNS            string            `yaml:"netns"`
	IfName           string            `yaml:"ifName"`
	Args             map[string]string `yaml:"args"`
	CapabilityArgs   map[string]any    `yaml:"capabilityArgs"`
	Network          string            `yaml:"network"`
	ValidAttachments []struct {
		ContainerID string `yaml:"containerID"`
		IfName      string `yaml:"ifName"`
	} `yaml:"validAttachments"`
}

// loadNetwork picks the conflist: the named file, or the first in name order, which is the one
// a runtime uses (libcni.ConfFiles sorts; containerd and cri-fake take the first).
func (e *CNIEnv) loadNetwork(name string) (*libcni.NetworkConfigList, error) {
	if name != "" {
		if !filepath.IsAbs(name) {
			name = filepath.Join(e.ConfDir, name)
		}
		return libcni.NetworkConfFromFile(name)
	}
	files, err := libcni.ConfFiles(e.ConfDir, []string{".conf", ".conflist", ".json"})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("no network config found in %s", e.ConfDir)
	}
	return libcni.NetworkConfFromFile(files[0])
}

func (r *runner) cniCall(ctx context.Context, st *Step) outcome {
	env := r.env.CNI
	if env == nil {
		return outcome{err: errors.New("no CNI configuration (the harness sets one up when it starts the fakes)")}
	}
	var req cniRequest
	if st.Request != nil {
		n, err := r.substNode(st.Request)
		if err != nil {
			return outcome{err: err}
		}
		if err := n.Decode(&req); err != nil {
			return outcome{err: err}
		}
	}
	if req.ContainerID == "" {
		req.ContainerID = "harness-" + r.vars["run"]
	}
	if req.IfName == "" {
		req.IfName = "eth0"
	}
	if req.NetNS == "" {
		req.NetNS = "/var/run/netns/harness-" + r.vars["run"]
	}
	list, err := env.loadNetwork(req.Network)
	if err != nil {
		return outcome{code: "OK", err: err}
	}
	cfg := libcni.NewCNIConfigWithCacheDir(env.BinDirs, env.CacheDir, env.Exec)
	rt := &libcni.RuntimeConf{
		ContainerID:    req.ContainerID,
		NetNS:          req.NetNS,
		IfName:         req.IfName,
		CapabilityArgs: req.CapabilityArgs,
	}
	var argNames []string
	for k := range req.Args {
		argNames = append(argNames, k)
	}
	sort.Strings(argNames)
	for _, k := range argNames {
		rt.Args = append(rt.Args, [2]string{k, req.Args[k]})
	}
	start := time.Now()
	var doc any
	switch st.Call {
	case "ADD":
		var res types.Result
		res, err = cfg.AddNetworkList(ctx, list, rt)
		if err == nil {
			b, _ := json.Marshal(res)
			json.Unmarshal(b, &doc)
		}
	case "DEL":
		err = cfg.DelNetworkList(ctx, list, rt)
	case "CHECK":
		err = cfg.CheckNetworkList(ctx, list, rt)
	case "STATUS":
		err = cfg.GetStatusNetworkList(ctx, list)
	case "GC":
		args := &libcni.GCArgs{}
		for _, a := range req.ValidAttachments {
			args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: a.ContainerID, IfName: a.IfName})
		}
		err = cfg.GCNetworkList(ctx, list, args)
	}
	o := outcome{code: "OK", doc: doc}
	if err != nil {
		o.msg = err.Error()
		var te *types.Error
		if errors.As(err, &te) {
			o.code = strconv.Itoa(int(te.Code))
		} else {
			o.code = "error"
		}
	}
	o.client = []trace.Event{{
		Time: start, Interface: trace.CNI, Caller: "harness", Callee: list.Name, Service: pluginTypes(list), Method: st.Call,
		Code: o.code, Error: o.msg, DurationNS: int64(time.Since(start)),
		Attrs: map[string]string{},
	}}
	if st.Call != "STATUS" && st.Call != "GC" { // network-wide verbs name no container
		o.client[0].Attrs["containerID"] = req.ContainerID
		o.client[0].Attrs["netns"] = req.NetNS
		o.client[0].Attrs["ifName"] = req.IfName
	}
	// The same request shape cri-fake records for the chains it runs, so trace expectations
	// read alike whoever ran the chain.
	o.client[0].Request, _ = json.Marshal(map[string]any{"config": json.RawMessage(list.Bytes), "args": req.Args, "capabilityArgs": req.CapabilityArgs})
	if doc != nil {
		o.client[0].Response, _ = json.Marshal(doc)
	}
	return o
}

// pluginTypes lists the chain's plugin types, the way the runtime records a chain call.
func pluginTypes(list *libcni.NetworkConfigList) string {
	var types []string
	for _, p := range list.Plugins {
		types = append(types, p.Network.Type)
	}
	return strings.Join(types, ",")
}
