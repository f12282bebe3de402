package images

// programImages are the built-in program images (images.Program): each runs the program plugsim
// builds from its pinned module (harness/tools, `make build`, `make control-plane`, `make sidecars`,
// `make programs`) under the real runc, in pods whose runtime handler runs programs (cri-fake/oci).
// Names, tags, entrypoints and users are the upstream images'; the sizes are what their registries
// report (informational only).
func programImages() []CatalogImage {
	const (
		path    = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
		storage = "registry.k8s.io/sig-storage/"
	)
	prog := func(binary, at string) *Program { return &Program{Binary: binary, Path: at} }
	sidecar := func(name, tag string, size uint64) CatalogImage {
		return CatalogImage{Repositories: []string{storage + name}, Tags: []string{tag}, Size: size,
			Entrypoint: []string{"/" + name}, Env: []string{path}, Program: prog(name, "/"+name)}
	}
	return []CatalogImage{
		// csi-fake itself, so its controller and node plugins can run as pods.
		{Repositories: []string{"plugsim.dev/csi-fake"}, Tags: []string{"v0.1.0", "latest"}, Size: 12 << 20,
			Entrypoint: []string{"/csi-fake"}, Env: []string{path}, Program: &Program{Binary: "csi-fake", Path: "/csi-fake", Dirs: []string{"/csi"}}},
		// The CSI sidecars of harness/tools/sidecars.
		sidecar("csi-provisioner", "v6.4.0", 33013916),
		sidecar("csi-attacher", "v4.13.0", 30271826),
		sidecar("csi-resizer", "v2.3.0", 30113447),
		sidecar("csi-snapshotter", "v8.7.0", 28806402),
		sidecar("snapshot-controller", "v8.7.0", 30520108),
		// CoreDNS runs as distroless's nonroot with cap_net_bind_service on its binary, so it binds :53.
		{Repositories: []string{"registry.k8s.io/coredns/coredns"}, Tags: []string{"v1.15.0"}, Size: 23140052, User: "65532:65532",
			Entrypoint: []string{"/coredns"}, Env: []string{path},
			Program: &Program{Binary: "coredns", Path: "/coredns", FileCapabilities: []string{"CAP_NET_BIND_SERVICE"}}},
		{Repositories: []string{"registry.k8s.io/metrics-server/metrics-server"}, Tags: []string{"v0.8.0"}, Size: 19970140, User: "65534",
			Entrypoint: []string{"/metrics-server"}, Env: []string{path}, Program: prog("metrics-server", "/metrics-server")},
		// The aggregated-API conformance spec's pod: sample-apiserver (k8s.io/sample-apiserver v0.37.2 under
		// the tag e2e v1.37.2's manifest names) beside etcd (plugsim's etcd v3.6.16 build under the tag
		// it names; the spec runs /usr/local/bin/etcd as its command).
		{Repositories: []string{"registry.k8s.io/e2e-test-images/sample-apiserver"}, Tags: []string{"1.29.2"}, Size: 26519442,
			Entrypoint: []string{"/sample-apiserver"}, Env: []string{path}, Program: prog("sample-apiserver", "/sample-apiserver")},
		{Repositories: []string{"registry.k8s.io/etcd"}, Tags: []string{"3.7.0-0"}, Size: 23735562, Env: []string{path},
			Program: &Program{Binary: "etcd", Path: "/usr/local/bin/etcd", Dirs: []string{"/var/lib/etcd"}}},
	}
}
