// Package plugin is cni-fake's plugin code: the verbs (ADD, DEL, CHECK, STATUS, GC), its
// configuration, its fault rules and its invocation log. The cni-fake binary runs it through
// skel.PluginMainFuncs over its own environment and stdin; package inprocess runs it inside a
// runtime's process through libcni's exec interface, with the environment and stdin libcni would
// have passed, so a unit test needs no binary. Nothing here reads process-wide state (os.Getenv,
// os.Stdin): everything comes in through the Invocation.
package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/ns"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plugsim/plugsim/cni-fake/ipam"
	"github.com/plugsim/plugsim/cni-fake/link"
	"github.com/plugsim/plugsim/harness/trace/event"
)

// Plugin-specific error codes (the spec reserves 0-99 for itself and gives 100+ to plugins).
const (
	// ErrAttachmentExists: ADD for a (container ID, interface) that already has an attachment. The
	// spec says the plugin MUST fail; it defines no code for it.
	ErrAttachmentExists uint = 100
)

// Invocation is one CNI call as the plugin receives it: the environment (CNI_COMMAND,
// CNI_CONTAINERID ... and whatever else the runtime passes on, which delegated IPAM plugins
// inherit), the network configuration on stdin, and where the result goes.
type Invocation struct {
	// Env holds KEY=VALUE pairs; for a key given twice the last wins.
	Env   []string
	Stdin []byte
	// Stdout receives the result (not the error: Run returns it, and the binary prints it).
	Stdout io.Writer
	// Stderr receives diagnostics nobody acts on (libcni ignores a plugin's stderr); nil
	// discards them.
	Stderr io.Writer
	// Start is when the call began, for the trace's duration; zero means now.
	Start time.Time
}

// Call is one invocation in progress: the verbs' callbacks plus what the invocation log needs.
// A Call holds everything the plugin code reads, so calls may run concurrently in one process.
type Call struct {
	ctx   context.Context
	inv   Invocation
	env   environ
	cmd   string
	start time.Time

	// Filled in by the callbacks for the log.
	conf     *NetConf
	response []byte
	attrs    map[string]string
}

// New prepares an invocation. ctx bounds what the plugin waits for (a fault's delay, a
// delegated IPAM plugin): the exec'd binary passes context.Background(), since the runtime kills
// the process when it gives up.
func New(ctx context.Context, inv Invocation) *Call {
	if inv.Start.IsZero() {
		inv.Start = time.Now()
	}
	if inv.Stdout == nil {
		inv.Stdout = io.Discard
	}
	if inv.Stderr == nil {
		inv.Stderr = io.Discard
	}
	env := environ(inv.Env)
	return &Call{ctx: ctx, inv: inv, env: env, cmd: env.get("CNI_COMMAND"), start: inv.Start}
}

// Funcs are the verbs' callbacks, for skel.PluginMainFuncs (the binary) or Run (in-process).
// Each parses the configuration once, applies the fault rules it names, then does its verb.
func (p *Call) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{
		Add:    p.verb("ADD", p.cmdAdd),
		Del:    p.verb("DEL", p.cmdDel),
		Check:  p.verb("CHECK", p.cmdCheck),
		GC:     p.verb("GC", p.cmdGC),
		Status: p.verb("STATUS", p.cmdStatus),
	}
}

// Run is the whole invocation in-process, as the binary does it: skel's checks of the
// environment and the configuration's version (see dispatch), the verb, and the invocation log.
// The error is what the binary would print on stdout before exiting 1.
func Run(ctx context.Context, inv Invocation) *types.Error {
	p := New(ctx, inv)
	err := p.dispatch(p.Funcs())
	if p.cmd != "" && p.cmd != "VERSION" {
		p.Log(err)
	}
	return err
}

func (p *Call) verb(name string, f func(*skel.CmdArgs, *NetConf, cniArgs) error) func(*skel.CmdArgs) error {
	return func(args *skel.CmdArgs) error {
		conf, ca, err := p.setup(args)
		if err != nil {
			return cniError(err)
		}
		if name == "ADD" {
			// skel refuses the plugin's own namespace only after ADD returned, by when the result
			// is printed and the lease taken (the runtime then reads a result followed by an
			// error, which libcni cannot decode). Refusing it first gives the runtime skel's
			// error alone.
			if o := args.NetnsOverride; strings.ToUpper(o) != "TRUE" && o != "1" {
				if own, err := ns.CheckNetNS(args.Netns); err != nil {
					return err
				} else if own {
					return types.NewError(types.ErrInvalidNetNS, "plugin's netns and netns from CNI_NETNS should not be the same", "")
				}
			}
		}
		if err := p.injectFault(name, args, conf); err != nil {
			return cniError(err)
		}
		return cniError(f(args, conf, ca))
	}
}

// environ is an invocation's environment.
type environ []string

// get returns the value of key, the last one when it is given twice (as a process's environment
// reads, and as libcni builds a plugin's).
func (e environ) get(key string) string {
	for i := len(e) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(e[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// setup parses what every verb needs. Errors are already CNI errors.
func (p *Call) setup(args *skel.CmdArgs) (*NetConf, cniArgs, error) {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return nil, cniArgs{}, err
	}
	p.conf = conf
	ca, err := parseCNIArgs(args.Args)
	if err != nil {
		return nil, cniArgs{}, err
	}
	p.attr("mode", conf.Mode)
	if ca.PodName != "" {
		p.attr("pod", ca.PodNamespace+"/"+ca.PodName)
	}
	return conf, ca, nil
}

func (p *Call) attr(k, v string) {
	if p.attrs == nil {
		p.attrs = map[string]string{}
	}
	p.attrs[k] = v
}

// print writes a result to stdout in the requested version, and keeps it for the log.
func (p *Call) print(r types.Result, cniVersion string) error {
	v, err := r.GetAsVersion(cniVersion)
	if err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("cannot express the result in cniVersion %s: %v", cniVersion, err), "")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return types.NewError(types.ErrInternal, "encoding the result: "+err.Error(), "")
	}
	p.response = b
	if _, err := p.inv.Stdout.Write(b); err != nil {
		return types.NewError(types.ErrIOFailure, "writing the result: "+err.Error(), "")
	}
	return nil
}

// cniError turns the typed errors of the packages underneath into CNI errors with the code a
// runtime can act on. It is the one place where codes are chosen.
func cniError(err error) error {
	if err == nil {
		return nil
	}
	var ce *types.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, ipam.ErrDuplicate), errors.Is(err, link.ErrExists):
		return types.NewError(ErrAttachmentExists, err.Error(), "DEL the attachment before adding it again")
	case errors.Is(err, ipam.ErrExhausted), errors.Is(err, ipam.ErrUnavailable):
		// Addresses come back when pods are deleted: the runtime should retry (kubelet does).
		return types.NewError(types.ErrTryAgainLater, err.Error(), "")
	case errors.Is(err, ipam.ErrStore):
		return types.NewError(types.ErrIOFailure, err.Error(), "")
	case errors.Is(err, link.ErrNetNS):
		return types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_NETNS: "+err.Error(), "")
	case errors.Is(err, link.ErrMissing):
		return types.NewError(types.ErrUnknownContainer, err.Error(), "")
	}
	return types.NewError(types.ErrInternal, err.Error(), "")
}

// HostIfName is the host-side veth name: the prefix plus a hash of the attachment, so DEL and GC
// find it again without state, and two attachments do not collide.
func HostIfName(prefix, network, containerID, ifName string) string {
	h := fnv.New32a()
	io.WriteString(h, network+"\x00"+containerID+"\x00"+ifName)
	return fmt.Sprintf("%s%08x", prefix, h.Sum32())
}

// hostAlias marks a host veth as this plugin's, for GC (see link.Config.Alias).
func hostAlias(network, containerID, ifName string) string {
	return aliasPrefix(network) + containerID + "/" + ifName
}

// aliasPrefix starts the alias of every host veth of network.
func aliasPrefix(network string) string { return "cni-fake/" + network + "/" }

// Log appends the invocation to the configuration's logFile, in the boundary-trace event format
// the harness merges with cri-fake's and csi-fake's events; cniErr is how the call ended.
func (p *Call) Log(cniErr *types.Error) {
	var lc struct {
		LogFile string `json:"logFile"`
		Caller  string `json:"caller"`
		Name    string `json:"name"`
		Version string `json:"cniVersion"`
	}
	if c := p.conf; c != nil {
		lc.LogFile, lc.Caller, lc.Name, lc.Version = c.LogFile, c.Caller, c.Name, c.CNIVersion
	} else {
		_ = json.Unmarshal(p.inv.Stdin, &lc) // best effort: a malformed config still gets its error returned
	}
	if lc.LogFile == "" {
		return
	}
	if !filepath.IsAbs(lc.LogFile) {
		// A config that failed to parse may still name a logFile; parseConfig refuses relative
		// ones, and so does this best-effort path.
		fmt.Fprintf(os.Stderr, "cni-fake: logFile %q is not an absolute path; not logging\n", lc.LogFile)
		return
	}
	ev := event.Event{
		Time:       p.start,
		Interface:  event.CNI,
		Caller:     defaultCaller,
		Callee:     "cni-fake",
		Service:    "cni-fake",
		Method:     p.cmd,
		Code:       "OK",
		DurationNS: int64(time.Since(p.start)),
		Attrs:      map[string]string{},
	}
	if lc.Caller != "" {
		ev.Caller = lc.Caller
	}
	if ca, err := parseCNIArgs(p.env.get("CNI_ARGS")); err == nil && ca.Caller != "" {
		ev.Caller = ca.Caller
	}
	for env, k := range tracedEnv {
		if v := p.env.get(env); v != "" {
			ev.Attrs[k] = v
		}
	}
	if lc.Name != "" {
		ev.Attrs["network"] = lc.Name
	}
	if lc.Version != "" {
		ev.Attrs["cniVersion"] = lc.Version
	}
	for k, v := range p.attrs {
		ev.Attrs[k] = v
	}
	if json.Valid(p.inv.Stdin) {
		ev.Request = json.RawMessage(p.inv.Stdin)
	} else {
		ev.Request, _ = json.Marshal(string(p.inv.Stdin))
	}
	if cniErr != nil {
		ev.Code = strconv.FormatUint(uint64(cniErr.Code), 10)
		ev.Error = cniErr.Msg
		ev.Response, _ = json.Marshal(cniErr)
	} else if len(p.response) > 0 {
		ev.Response = p.response
	}
	// Logging must never fail the CNI call. A missing directory is created once (a fresh node has
	// no /var/log/plugsim yet); other failures are only reported on stderr, which libcni ignores.
	err := event.AppendFile(lc.LogFile, ev)
	if errors.Is(err, fs.ErrNotExist) && os.MkdirAll(filepath.Dir(lc.LogFile), 0o755) == nil {
		err = event.AppendFile(lc.LogFile, ev)
	}
	if err != nil {
		fmt.Fprintf(p.inv.Stderr, "cni-fake: logFile %s: %v\n", lc.LogFile, err)
	}
}
