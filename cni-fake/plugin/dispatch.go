package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/ns"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/containernetworking/cni/pkg/version"
)

// About is what the binary prints when run without CNI_COMMAND.
const About = `cni-fake: a CNI plugin (spec 1.1.0) that hands out addresses and describes a pod
interface, chained before portmap; plugsim's fake of the network boundary.
  mode "fake" (default): no kernel changes, any CNI_NETNS accepted
  mode "veth" (root):    a real veth pair into CNI_NETNS, routed like ptp
It is run by a CNI runtime (containerd, cri-fake, cnitool), not by hand. Try:
  CNI_PATH=bin NETCONFPATH=examples/cni cnitool add plugsim /var/run/netns/NAME
Config keys, modes and error codes: cni-fake/README.md`

// Versions are the spec versions whose results cni-fake prints (its VERSION answer). 0.1.0 and
// 0.2.0 are left out: their results have no interfaces, which portmap and containerd need.
func Versions() version.PluginInfo {
	return version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
}

// envVar is one of the CNI_* variables skel reads, with the verbs that require it.
type envVar struct {
	name     string
	required []string
	validate func(string) *types.Error // applied when required and set
}

// skelVars are skel's variables in skel's order (which decides which error a call with several
// problems gets).
var skelVars = []envVar{
	{"CNI_COMMAND", []string{"ADD", "CHECK", "DEL", "GC", "STATUS"}, nil},
	{"CNI_CONTAINERID", []string{"ADD", "CHECK", "DEL"}, utils.ValidateContainerID},
	{"CNI_NETNS", []string{"ADD", "CHECK"}, nil},
	{"CNI_IFNAME", []string{"ADD", "CHECK", "DEL"}, utils.ValidateInterfaceName},
	{"CNI_ARGS", nil, nil},
	{"CNI_PATH", []string{"ADD", "CHECK", "DEL", "GC", "STATUS"}, nil},
	{"CNI_NETNS_OVERRIDE", nil, nil},
}

// dispatch is skel.PluginMainFuncs over the Call's environment and stdin instead of the
// process's: skel reads os.Getenv and os.Stdin and offers no way round them, and an in-process
// call must not touch either (the runtime's own environment, concurrent calls). It checks what
// skel checks, in skel's order and with skel's codes and messages (skel v1.3.1, pkg/skel/skel.go
// pluginMain): the required variables per verb, the container ID and interface name, the
// network name, the configuration's cniVersion against Versions (CHECK from 0.4.0, GC and
// STATUS from 1.1.0), and after ADD and DEL that CNI_NETNS is not the plugin's own namespace.
// TestInProcessMatchesTheBinary runs a table of calls through both and compares what comes out.
func (p *Call) dispatch(funcs skel.CNIFuncs) *types.Error {
	cmd := p.env.get("CNI_COMMAND")
	vals := map[string]string{}
	var missing []string
	for _, v := range skelVars {
		val := p.env.get(v.name)
		vals[v.name] = val
		req := contains(v.required, cmd)
		switch {
		case val == "" && (req || v.name == "CNI_COMMAND"):
			missing = append(missing, v.name)
		case val != "" && req && v.validate != nil:
			if err := v.validate(val); err != nil {
				return err
			}
		}
	}
	if len(missing) > 0 {
		if cmd == "" { // run by hand: say what this is, as skel does
			fmt.Fprintln(p.inv.Stderr, About)
			fmt.Fprintf(p.inv.Stderr, "CNI protocol versions supported: %s\n", strings.Join(Versions().SupportedVersions(), ", "))
			return nil
		}
		return types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("required env variables [%s] missing", strings.Join(missing, ",")), "")
	}
	stdin := p.inv.Stdin
	if cmd == "VERSION" {
		stdin = nil
	} else if err := validateNetworkName(stdin); err != nil {
		return err
	}
	args := &skel.CmdArgs{
		ContainerID:   vals["CNI_CONTAINERID"],
		Netns:         vals["CNI_NETNS"],
		IfName:        vals["CNI_IFNAME"],
		Args:          vals["CNI_ARGS"],
		Path:          vals["CNI_PATH"],
		NetnsOverride: vals["CNI_NETNS_OVERRIDE"],
		StdinData:     stdin,
	}
	switch cmd {
	case "ADD", "DEL":
		f := funcs.Add
		if cmd == "DEL" {
			f = funcs.Del
		}
		if err := checkVersionAndCall(args, f); err != nil {
			return err
		}
		if o := args.NetnsOverride; strings.ToUpper(o) != "TRUE" && o != "1" {
			own, err := ns.CheckNetNS(args.Netns)
			if err != nil {
				return err
			}
			if own {
				return types.NewError(types.ErrInvalidNetNS, "plugin's netns and netns from CNI_NETNS should not be the same", "")
			}
		}
		return nil
	case "CHECK":
		return callFromVersion(args, "0.4.0", "CHECK", funcs.Check)
	case "GC":
		return callFromVersion(args, "1.1.0", "GC", funcs.GC)
	case "STATUS":
		return callFromVersion(args, "1.1.0", "STATUS", funcs.Status)
	case "VERSION":
		if err := Versions().Encode(p.inv.Stdout); err != nil {
			return types.NewError(types.ErrIOFailure, err.Error(), "")
		}
		return nil
	}
	return types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("unknown CNI_COMMAND: %v", cmd), "")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// validateNetworkName is skel's check of stdin before any verb.
func validateNetworkName(stdin []byte) *types.Error {
	var conf struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("error unmarshall network config: %v", err), "")
	}
	if conf.Name == "" {
		return types.NewError(types.ErrInvalidNetworkConfig, "missing network name", "")
	}
	return utils.ValidateNetworkName(conf.Name)
}

// checkVersionAndCall refuses a configuration whose cniVersion the plugin does not speak, then
// runs the verb.
func checkVersionAndCall(args *skel.CmdArgs, f func(*skel.CmdArgs) error) *types.Error {
	confVersion, err := (&version.ConfigDecoder{}).Decode(args.StdinData)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	if verErr := (&version.Reconciler{}).Check(confVersion, Versions()); verErr != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, "incompatible CNI versions", verErr.Details())
	}
	if f == nil {
		return nil
	}
	if err := f(args); err != nil {
		var e *types.Error
		if errors.As(err, &e) {
			return e
		}
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	return nil
}

// callFromVersion runs a verb the spec added in version since, refusing older configurations
// as skel does.
func callFromVersion(args *skel.CmdArgs, since, verb string, f func(*skel.CmdArgs) error) *types.Error {
	confVersion, err := (&version.ConfigDecoder{}).Decode(args.StdinData)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	if ok, err := version.GreaterThanOrEqualTo(confVersion, since); err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	} else if !ok {
		return types.NewError(types.ErrIncompatibleCNIVersion, "config version does not allow "+verb, "")
	}
	for _, pv := range Versions().SupportedVersions() {
		ok, err := version.GreaterThanOrEqualTo(pv, confVersion)
		if err != nil {
			return types.NewError(types.ErrDecodingFailure, err.Error(), "")
		}
		if ok {
			return checkVersionAndCall(args, f)
		}
	}
	return types.NewError(types.ErrIncompatibleCNIVersion, "plugin version does not allow "+verb, "")
}
