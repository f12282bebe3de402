package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

// delegate runs the IPAM plugin named in ipam.type with verb, the way libcni's invoke.Delegate*
// (and so plugins/pkg/ipam.ExecAdd) do: found in CNI_PATH, given this plugin's own stdin and
// environment (the Invocation's) with CNI_COMMAND replaced. It is written out here because pkg/invoke links an
// OpenTelemetry propagator and net/http, whose initialisation would slow down every exec of
// cni-fake, delegated or not.
//
// A failing delegate's CNI error (code and message) is passed through unchanged, as invoke does.
func delegate(ctx context.Context, verb, pluginType string, stdin []byte, env environ) ([]byte, error) {
	path, err := findInPath(pluginType, env.get("CNI_PATH"))
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = []string{"CNI_COMMAND=" + verb}
	for _, kv := range env {
		if !strings.HasPrefix(kv, "CNI_COMMAND=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Run(); err != nil {
		var ce types.Error
		if json.Unmarshal(stdout.Bytes(), &ce) == nil && ce.Msg != "" {
			ce.Msg = fmt.Sprintf("delegated IPAM %s (%s): %s", pluginType, verb, ce.Msg)
			return nil, &ce
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, types.NewError(types.ErrInternal, fmt.Sprintf("delegated IPAM %s (%s) failed: %s", pluginType, verb, msg), "")
	}
	return stdout.Bytes(), nil
}

func findInPath(plugin, cniPath string) (string, error) {
	if strings.ContainsRune(plugin, os.PathSeparator) {
		return "", types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("ipam.type: %q must be a plugin name, not a path", plugin), "")
	}
	for _, dir := range filepath.SplitList(cniPath) {
		p := filepath.Join(dir, plugin)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("ipam.type: plugin %q not found in CNI_PATH %q", plugin, cniPath), "")
}

// delegateAdd runs the IPAM ADD and converts its (abbreviated: no interfaces) result to 1.1.0.
func delegateAdd(ctx context.Context, conf *NetConf, stdin []byte, env environ) (*current.Result, error) {
	out, err := delegate(ctx, "ADD", conf.IPAM.Type, stdin, env)
	if err != nil {
		return nil, err
	}
	r, err := version.NewResult(conf.CNIVersion, out)
	if err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("delegated IPAM %s returned an unreadable result: %v", conf.IPAM.Type, err), "")
	}
	res, err := current.NewResultFromResult(r)
	if err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("delegated IPAM %s result: %v", conf.IPAM.Type, err), "")
	}
	if len(res.IPs) == 0 {
		return nil, errors.New("delegated IPAM " + conf.IPAM.Type + " returned no IP address")
	}
	return res, nil
}
