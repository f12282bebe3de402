package cluster

import (
	"os"
	"path/filepath"
	"sort"

	"github.com/plugsim/plugsim/cni-fake/plugin"
)

// Where `up` puts each fake's control endpoints: the admin socket (trace and fault rules) of each
// node's cri-fake and csi-fake and of the controller's csi-fake, and the faults file each node's
// conflist names for cni-fake.
func nodeCRIAdmin(nd string) string     { return filepath.Join(nd, "cri-admin.sock") }
func nodeCSIAdmin(nd string) string     { return filepath.Join(nd, "csi-admin.sock") }
func controllerAdmin(dir string) string { return filepath.Join(dir, "csi", "controller", "admin.sock") }
func nodeCNIFaults(nd string) plugin.FaultFile {
	return plugin.FaultFile{Path: filepath.Join(nd, "cni", "faults.json"), DataDir: filepath.Join(nd, "cni", "data"), Network: "plugsim"}
}

// FaultEndpoint is a fake of a cluster that takes fault rules, named as the boundary trace names
// its lane (cri-fake@node1, csi-fake@node1, cni-fake@node1, csi-fake (controller)): through its
// admin socket, or for cni-fake through the faults file its conflist names.
type FaultEndpoint struct {
	Name        string
	AdminSocket string
	CNIFaults   plugin.FaultFile
}

// FaultEndpoints lists the fault endpoints of the cluster in dir that exist on disk (a cluster
// started before `up` made them has none).
func FaultEndpoints(dir string) []FaultEndpoint {
	var out []FaultEndpoint
	if s := controllerAdmin(dir); exists(s) {
		out = append(out, FaultEndpoint{Name: "csi-fake (controller)", AdminSocket: s})
	}
	nodes, _ := filepath.Glob(filepath.Join(dir, "nodes", "*"))
	sort.Strings(nodes)
	for _, nd := range nodes {
		name := filepath.Base(nd)
		if s := nodeCRIAdmin(nd); exists(s) {
			out = append(out, FaultEndpoint{Name: "cri-fake@" + name, AdminSocket: s})
		}
		if s := nodeCSIAdmin(nd); exists(s) {
			out = append(out, FaultEndpoint{Name: "csi-fake@" + name, AdminSocket: s})
		}
		if f := nodeCNIFaults(nd); exists(f.Path) {
			out = append(out, FaultEndpoint{Name: "cni-fake@" + name, CNIFaults: f})
		}
	}
	return out
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
