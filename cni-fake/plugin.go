package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"

	"github.com/plugsim/plugsim/cni-fake/ipam"
	"github.com/plugsim/plugsim/cni-fake/link"
	"github.com/plugsim/plugsim/harness/trace/event"
)

// Plugin-specific error codes (the spec reserves 0-99 for itself and gives 100+ to plugins).
const (
	// errAttachmentExists: ADD for a (container ID, interface) that already has an attachment. The
	// spec says the plugin MUST fail; it defines no code for it.
	errAttachmentExists uint = 100
)

// plugin is one invocation: the verb's callbacks plus what the invocation log needs to know.
type plugin struct {
	cmd    string
	stdin  []byte
	start  time.Time
	stdout io.Writer
	getenv func(string) string

	// Filled in by the callbacks for the log.
	conf     *NetConf
	response []byte
	attrs    map[string]string
}

// setup parses what every verb needs. Errors are already CNI errors.
func (p *plugin) setup(args *skel.CmdArgs) (*NetConf, cniArgs, error) {
	// skel checks CNI_CONTAINERID and CNI_IFNAME with libcni's rules (utils.ValidateContainerID,
	// ValidateInterfaceName; code 4) for the verbs that need them. They go into lease records,
	// link names and aliases, so they are checked again here for any caller that bypasses skel.
	if args.ContainerID != "" {
		if err := utils.ValidateContainerID(args.ContainerID); err != nil {
			return nil, cniArgs{}, err
		}
	}
	if args.IfName != "" {
		if err := utils.ValidateInterfaceName(args.IfName); err != nil {
			return nil, cniArgs{}, err
		}
	}
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

func (p *plugin) attr(k, v string) {
	if p.attrs == nil {
		p.attrs = map[string]string{}
	}
	p.attrs[k] = v
}

// print writes a result to stdout in the requested version, and keeps it for the log.
func (p *plugin) print(r types.Result, cniVersion string) error {
	v, err := r.GetAsVersion(cniVersion)
	if err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("cannot express the result in cniVersion %s: %v", cniVersion, err), "")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return types.NewError(types.ErrInternal, "encoding the result: "+err.Error(), "")
	}
	p.response = b
	if _, err := p.stdout.Write(b); err != nil {
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
		return types.NewError(errAttachmentExists, err.Error(), "DEL the attachment before adding it again")
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

// hostIfName is the host-side veth name: the prefix plus a hash of the attachment, so DEL and GC
// find it again without state, and two attachments do not collide.
func hostIfName(prefix, network, containerID, ifName string) string {
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

// log appends the invocation to logFile, in the boundary-trace event format the harness merges
// with cri-fake's and csi-fake's events.
func (p *plugin) log(cniErr *types.Error) {
	var lc struct {
		LogFile string `json:"logFile"`
		Caller  string `json:"caller"`
		Name    string `json:"name"`
		Version string `json:"cniVersion"`
	}
	if c := p.conf; c != nil {
		lc.LogFile, lc.Caller, lc.Name, lc.Version = c.LogFile, c.Caller, c.Name, c.CNIVersion
	} else {
		_ = json.Unmarshal(p.stdin, &lc) // best effort: a malformed config still gets its error returned
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
	if ca, err := parseCNIArgs(p.getenv("CNI_ARGS")); err == nil && ca.Caller != "" {
		ev.Caller = ca.Caller
	}
	for k, env := range map[string]string{"containerID": "CNI_CONTAINERID", "netns": "CNI_NETNS", "ifName": "CNI_IFNAME"} {
		if v := p.getenv(env); v != "" {
			ev.Attrs[k] = v
		}
	}
	if lc.Name != "" {
		ev.Attrs["network"] = lc.Name
	}
	if lc.Version != "" {
		ev.Attrs["cniVersion"] = lc.Version
	}
	if args := p.getenv("CNI_ARGS"); args != "" {
		ev.Attrs["args"] = args
	}
	for k, v := range p.attrs {
		ev.Attrs[k] = v
	}
	if json.Valid(p.stdin) {
		ev.Request = json.RawMessage(p.stdin)
	} else {
		ev.Request, _ = json.Marshal(string(p.stdin))
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
		fmt.Fprintf(os.Stderr, "cni-fake: logFile %s: %v\n", lc.LogFile, err)
	}
}
