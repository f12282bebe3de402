package images

import (
	"fmt"
	"path"
	"strings"
)

// Program is what a container of a program image runs for real: one binary that plugsim builds
// (statically, CGO_ENABLED=0, so the root needs no libc) into cri-fake's program directory, put
// at Path in a root file system that holds nothing else but the few files every such root has
// (/etc/passwd, /etc/group, /etc/nsswitch.conf, the CA bundle; see cri-fake/oci). The image's
// entrypoint names Path, as the upstream image's does.
type Program struct {
	// Binary is the file name in the program directory ("coredns"): a name, never a path, so a
	// catalog cannot point cri-fake at any other host file.
	Binary string `json:"binary"`
	// Path is where the binary is in the container's root ("/coredns", "/usr/local/bin/etcd").
	Path string `json:"path"`
	// Dirs are directories the root has besides /etc, /tmp and the mount points ("/var/lib/etcd"),
	// owned by root, mode 0755, or 01777 for a name ending in "tmp".
	Dirs []string `json:"dirs,omitempty"`
	// FileCapabilities are the capabilities the upstream image sets on its binary (setcap +ep:
	// CoreDNS's cap_net_bind_service, so it binds :53 as a non-root user). The program's file in
	// the program directory has none; the spec gives them as ambient capabilities instead, when
	// they are in the container's capability set, which is what +ep gives a non-root process.
	FileCapabilities []string `json:"fileCapabilities,omitempty"`
}

func (p *Program) validate() error {
	if p.Binary == "" || strings.ContainsAny(p.Binary, "/\x00") || p.Binary == "." || p.Binary == ".." {
		return fmt.Errorf("binary %q: want a file name in the program directory (no '/')", p.Binary)
	}
	for _, q := range append([]string{p.Path}, p.Dirs...) {
		if !path.IsAbs(q) || path.Clean(q) != q || q == "/" || strings.IndexByte(q, 0) >= 0 {
			return fmt.Errorf("path %q: want a clean absolute path below /", q)
		}
	}
	return nil
}
