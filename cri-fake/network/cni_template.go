package network

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/plugsim/plugsim/internal/atomicfile"
)

// ConfTemplateFileName is the file a rendered CNI config template is written to in the conf
// directory: containerd's cniConfigFileName (internal/cri/server/update_runtime_config.go).
const ConfTemplateFileName = "10-containerd-net.conflist"

// ErrInvalidPodCIDR marks a pod CIDR from UpdateRuntimeConfig that does not parse.
var ErrInvalidPodCIDR = errors.New("invalid pod CIDR")

// ConfTemplateData is what a CNI config template is executed with: the fields of containerd's
// cniConfigTemplate, so a template written for containerd's conf_template works unchanged.
type ConfTemplateData struct {
	// PodCIDR is the first of the node's pod CIDRs.
	PodCIDR string
	// PodCIDRRanges are all of them, in the kubelet's order (one per IP family when dual-stack).
	PodCIDRRanges []string
	// Routes are the default routes of the families present: "0.0.0.0/0", then "::/0".
	Routes []string
}

// ParsePodCIDRs splits the kubelet's comma-separated pod CIDRs (node.spec.podCIDRs joined with ",")
// and derives the routes, as containerd's UpdateRuntimeConfig and getRoutes do: every entry must
// parse as a CIDR, else the whole update is refused.
func ParsePodCIDRs(s string) (ConfTemplateData, error) {
	var d ConfTemplateData
	var hasV4, hasV6 bool
	for _, c := range strings.Split(s, ",") {
		c = strings.TrimSpace(c)
		_, n, err := net.ParseCIDR(c)
		if err != nil {
			return ConfTemplateData{}, fmt.Errorf("%w %q: %v", ErrInvalidPodCIDR, c, err)
		}
		if n.IP.To4() != nil {
			hasV4 = true
		} else {
			hasV6 = true
		}
		d.PodCIDRRanges = append(d.PodCIDRRanges, c)
	}
	d.PodCIDR = d.PodCIDRRanges[0]
	if hasV4 {
		d.Routes = append(d.Routes, "0.0.0.0/0")
	}
	if hasV6 {
		d.Routes = append(d.Routes, "::/0")
	}
	return d, nil
}

// parseConfTemplate reads and parses a template file (text/template, as containerd).
func parseConfTemplate(path string) (*template.Template, error) {
	t, err := template.ParseFiles(path)
	if err != nil {
		return nil, fmt.Errorf("failed to parse cni config template %q: %w", path, err)
	}
	return t, nil
}

// CheckConfTemplate parses a template file, so a flag naming a missing or broken template fails
// at start. containerd only reads it at the first UpdateRuntimeConfig; the kubelet then logs the
// error on every node status sync, which is a later and quieter place to learn about a typo.
func CheckConfTemplate(path string) error {
	_, err := parseConfTemplate(path)
	return err
}

// renderConfTemplate executes the template into ConfTemplateFileName in confDir, replacing the
// file atomically (package atomicfile: a temporary file renamed over it), so the conf-dir reload
// never reads half a config. The temporary file's name ends in random digits, not
// .conf/.conflist/.json: libcni's file listing never picks it up.
func renderConfTemplate(confDir, tmplPath string, data ConfTemplateData) error {
	t, err := parseConfTemplate(tmplPath)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return fmt.Errorf("failed to create cni config directory: %q: %w", confDir, err)
	}
	target := filepath.Join(confDir, ConfTemplateFileName)
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return fmt.Errorf("failed to generate cni config file %q: %w", target, err)
	}
	if err := atomicfile.Write(target, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("failed to generate cni config file %q: %w", target, err)
	}
	return nil
}
