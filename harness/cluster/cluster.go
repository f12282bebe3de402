// Package cluster starts a whole Kubernetes cluster on plugsim's fakes, on one machine, with no container
// runtime: etcd v3.6.16 and kube-apiserver, kube-controller-manager, kube-scheduler v1.37.2 as local
// processes in a control-plane network namespace, and N nodes, each a network namespace of its own that
// holds a real kubelet v1.37.2, cri-fake (real pod network namespaces, the cni-fake → portmap chain) and
// csi-fake's node plugin. `harness cluster up` and `harness cluster down` drive it; see harness/README.md.
//
// The network, all of it in benchmarking addresses (RFC 2544, 198.18.0.0/15), which nothing routes:
//
//	control-plane netns: bridge plugsim0 198.18.0.1/24, etcd on 127.0.0.1:2379, API server on :6443
//	node i netns:        eth0 198.18.0.(10+i)/24, its veth peer on the bridge; pods from its podCIDR
//	pod CIDRs:           198.19.0.0/16, a /24 per node (controller-manager --allocate-node-cidrs)
//	services:            198.18.128.0/17 (198.18.128.1 is the kubernetes Service)
//	joining machine M:   198.18.M.0/24 (M from 1 to 127), as node i's 198.18.M.(10+i)
//
// No namespace has a link to the host's: nothing can leave the machine. kubectl in the host's namespace
// reaches the API server through a relay (a harness process listening on the host's 127.0.0.1 that dials
// each connection from inside the control-plane namespace), so nothing is added to the host's interfaces
// or routes.
package cluster

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
)

// The cluster's addresses (see the package comment).
const (
	bridgeName  = "plugsim0"
	nodeSubnet  = "198.18.0.0/24"
	cpAddr      = "198.18.0.1"
	clusterCIDR = "198.19.0.0/16"
	nodeMask    = 24
	serviceCIDR = "198.18.128.0/17"
	serviceIP   = "198.18.128.1" // the first address of serviceCIDR: the API server's Service
	apiPort     = 6443
	etcdURL     = "http://127.0.0.1:2379"
	// The CSI drivers of examples/csi/csidriver.yaml: csi-fake with a controller, and csi-fake
	// --ephemeral-only on every node.
	driverName      = "csi.plugsim.dev"
	ephemeralDriver = "csi.ephemeral.plugsim.dev"
	// zoneKey and zone are the topology every node's csi-fake reports (--node-topology=false): the
	// cluster's storage is network-attached, reached by every node of the one zone.
	zoneKey = "topology.plugsim.dev/zone"
	zone    = "zone-a"
	// extraRuntimeHandler is the runtime handler every node's cri-fake serves besides runc.
	extraRuntimeHandler = "plugsim-gvisor"
	// MaxNodes keeps node addresses inside nodeSubnet (198.18.0.11 to .250) and pod CIDRs inside
	// clusterCIDR (256 /24s).
	MaxNodes = 240
)

func zoneLabel() string { return zoneKey + "=" + zone }

// nodeIP is node i's address (i from 1).
func nodeIP(i int) string {
	a := netip.MustParseAddr("198.18.0.10").As4()
	a[3] += byte(i)
	return netip.AddrFrom4(a).String()
}

// nodeName is node i's name, its Node object's and its kubelet's --hostname-override.
func nodeName(i int) string { return fmt.Sprintf("node%d", i) }

// PrefixFor names the network namespaces of the cluster in dir: plugsim-<hash of dir>, so two clusters in
// two directories never share one, and `down` finds them from the directory alone.
func PrefixFor(dir string) string {
	h := sha256.Sum256([]byte(dir))
	return "plugsim-" + hex.EncodeToString(h[:3])
}

func nsPath(name string) string { return filepath.Join("/var/run/netns", name) }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func ips(s ...string) []net.IP {
	var out []net.IP
	for _, a := range s {
		out = append(out, net.ParseIP(a))
	}
	return out
}
