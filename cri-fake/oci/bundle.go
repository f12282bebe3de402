package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
)

// hostCABundle is the node's CA bundle (Debian's ca-certificates), copied into every program
// root at the path Go's crypto/x509 reads first on Linux.
const (
	hostCABundle = "/etc/ssl/certs/ca-certificates.crt"
	maxCABundle  = 4 << 20
)

// bundle is a container's OCI bundle directory, <bundles>/<container ID>: config.json, the
// root (rootfs/), and the files the spec mounts (resolv.conf, hostname). It is owner-only
// (0700): the root inside is 0755, as an image's is, but nobody but root reaches it.
type bundle struct{ dir string }

func (b bundle) config() string     { return filepath.Join(b.dir, "config.json") }
func (b bundle) rootfs() string     { return filepath.Join(b.dir, "rootfs") }
func (b bundle) resolvConf() string { return filepath.Join(b.dir, "resolv.conf") }
func (b bundle) hostname() string   { return filepath.Join(b.dir, "hostname") }

// writeRoot makes the bundle directory and the program root: /etc with passwd, group,
// nsswitch.conf, hosts and the CA bundle; /tmp; the users' homes; the image's directories. The
// program itself is not copied: the spec bind-mounts it read-only (withProgram).
func (b bundle) writeRoot(p *images.Program) error {
	if err := os.Mkdir(b.dir, 0o700); err != nil {
		return err
	}
	root := b.rootfs()
	dirs := []struct {
		p    string
		mode os.FileMode
	}{{"", 0o755}, {"etc", 0o755}, {"etc/ssl", 0o755}, {"etc/ssl/certs", 0o755}, {"tmp", 0o1777}, {"root", 0o700}, {"home", 0o755}, {"home/nonroot", 0o700}}
	for _, d := range p.Dirs {
		rel := strings.TrimPrefix(path.Clean(d), "/")
		for _, parent := range parents(rel) {
			mode := os.FileMode(0o755)
			if strings.HasSuffix(parent, "tmp") {
				mode = 0o1777
			}
			dirs = append(dirs, struct {
				p    string
				mode os.FileMode
			}{parent, mode})
		}
	}
	for _, d := range dirs {
		full := filepath.Join(root, d.p)
		if err := os.Mkdir(full, d.mode); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if err := os.Chmod(full, d.mode); err != nil { // past the umask
			return err
		}
	}
	if err := os.Chown(filepath.Join(root, "home/nonroot"), 65532, 65532); err != nil {
		return err
	}
	files := map[string]string{
		"etc/passwd":        passwdFile(),
		"etc/group":         groupFile(),
		"etc/nsswitch.conf": "hosts: files dns\n",
		"etc/hosts":         "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	}
	if ca, err := readBounded(hostCABundle, maxCABundle); err == nil {
		files["etc/ssl/certs/ca-certificates.crt"] = string(ca)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// parents lists "a", "a/b", "a/b/c" for "a/b/c".
func parents(rel string) []string {
	var out []string
	for i, c := range rel {
		if c == '/' {
			out = append(out, rel[:i])
		}
	}
	return append(out, rel)
}

// writeNetworkFiles writes the container's resolv.conf (the pod's DNS config; the node's
// /etc/resolv.conf for a pod that gives none, as containerd copies it) and hostname.
func (b bundle) writeNetworkFiles(sb *runtimeapi.PodSandboxConfig) error {
	var resolv []byte
	if dns := sb.GetDnsConfig(); dns != nil && (len(dns.GetServers()) > 0 || len(dns.GetSearches()) > 0 || len(dns.GetOptions()) > 0) {
		var s strings.Builder
		if len(dns.GetSearches()) > 0 {
			s.WriteString("search " + strings.Join(dns.GetSearches(), " ") + "\n")
		}
		for _, n := range dns.GetServers() {
			s.WriteString("nameserver " + n + "\n")
		}
		if len(dns.GetOptions()) > 0 {
			s.WriteString("options " + strings.Join(dns.GetOptions(), " ") + "\n")
		}
		resolv = []byte(s.String())
	} else if host, err := readBounded("/etc/resolv.conf", 64<<10); err == nil {
		resolv = host
	}
	if err := os.WriteFile(b.resolvConf(), resolv, 0o644); err != nil {
		return err
	}
	hostname := sb.GetHostname()
	if sb.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE || hostname == "" {
		hostname, _ = os.Hostname()
	}
	return os.WriteFile(b.hostname(), []byte(hostname+"\n"), 0o644)
}

// writeConfig writes config.json, owner-only: it names every host path the container mounts.
func (b bundle) writeConfig(s *specs.Spec) error {
	data, err := json.MarshalIndent(s, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(b.config(), data, 0o600)
}

// remove deletes the bundle. Nothing is mounted in it on the host (runc mounts in the
// container's mount namespace), so a plain removal takes everything.
func (b bundle) remove() error {
	if b.dir == "" {
		return nil
	}
	return os.RemoveAll(b.dir)
}

func readBounded(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is over %d bytes", p, limit)
	}
	return data, nil
}
