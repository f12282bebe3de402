package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	csiexample "github.com/plugsim/plugsim/examples/csi"
)

// csiDriver installs the CSI driver as a driver's deployment ships it: the CSIDriver objects and
// StorageClasses of examples/csi, the sidecars' RBAC, the VolumeSnapshot CRDs and class; then csi-fake's
// controller plugin with the real sidecars (and snapshot-controller) in the control-plane namespace, and
// on every node csi-fake's node plugin and the ephemeral-only driver, each registering itself with the
// node's kubelet.
type csiDriver struct{}

func (csiDriver) Name() string { return "install the CSI driver" }

func (csiDriver) Execute(c *actionContext) error {
	// The CSIDriver objects and the StorageClasses of examples/csi, as a driver's deployment ships them:
	// without a CSIDriver the kubelet treats csi.plugsim.dev as attach-required without pod info and
	// refuses every inline volume, and without a default class a PVC naming none stays Pending. Then each
	// CSI sidecar's ClusterRole (examples/csi).
	for _, m := range []struct {
		name string
		b    []byte
	}{{"csidriver.yaml", csiexample.CSIDriver}, {"storageclass.yaml", csiexample.StorageClass}, {"sidecars-rbac.yaml", csiexample.SidecarsRBAC}} {
		if err := c.apply(m.name, m.b); err != nil {
			return err
		}
	}
	c.step("CSIDriver objects %s and %s, StorageClasses plugsim-fake (default) and example", driverName, ephemeralDriver)
	snapshots, err := snapshotCRDs(c)
	if err != nil {
		return err
	}
	c.snapshotCRDs = snapshots

	// The CSI controller plugin and, where built, the real sidecars against its socket.
	ctrlSock := c.path("csi", "controller", "csi.sock")
	if _, err := c.startProc("csi-fake-controller", c.cpNS, c.bin("csi-fake"), []string{
		"--mode", "controller", "--endpoint", "unix://" + ctrlSock, "--node-id", "controller",
		"--known-nodes", "*", "--state-dir", c.path("csi", "state"), "--trace", c.path("csi", "controller.jsonl"),
		"--admin-socket", "unix://" + controllerAdmin(c.o.Dir),
		// The zone every node reports (see node): CreateVolume serves its requisite, refuses another's.
		"--topology", zoneLabel(),
	}); err != nil {
		return err
	}
	var run []string
	for _, s := range sidecars {
		if _, err := os.Stat(c.bin(s)); err != nil {
			continue
		}
		args := []string{"--kubeconfig", c.path("kubeconfigs", s+".kubeconfig"), "--csi-address", ctrlSock, "--v", "2"}
		if _, err := c.startProc(s, c.cpNS, c.bin(s), args); err != nil {
			return err
		}
		run = append(run, s)
	}
	if _, err := os.Stat(c.bin(snapshotController)); err == nil && c.snapshotCRDs {
		if _, err := c.startProc(snapshotController, c.cpNS, c.bin(snapshotController), []string{
			"--kubeconfig", c.path("kubeconfigs", snapshotController+".kubeconfig"), "--v", "2",
		}); err != nil {
			return err
		}
		run = append(run, snapshotController)
	}
	if len(run) == 0 {
		c.step("csi-fake controller on %s (no CSI sidecars in %s: none run)", ctrlSock, c.o.BinDir)
	} else {
		c.step("csi-fake controller on %s, with %s", ctrlSock, strings.Join(run, ", "))
	}
	for i := 1; i <= c.o.Nodes; i++ {
		if err := csiNodePlugins(c, i); err != nil {
			return err
		}
	}
	c.step("csi-fake node plugins of %s and %s on %d node(s), registering with their kubelets", driverName, ephemeralDriver, c.o.Nodes)
	return nil
}

// csiNodePlugins starts node i's csi-fake node plugin and the ephemeral-only driver in its namespaces
// (its publishes must be in the mount namespace its kubelet and cri-fake see).
func csiNodePlugins(c *actionContext, i int) error {
	name := nodeName(i)
	netns := fmt.Sprintf("%s-%s", c.st.Prefix, name)
	nd := c.path("nodes", name)
	csiSock := filepath.Join(nd, "kubelet/plugins", driverName, "csi.sock")
	if _, err := c.startNodeProc(name+"-csi-fake", netns, nd, c.bin("csi-fake"), []string{
		"--endpoint", "unix://" + csiSock, "--mode", "node", "--node-id", name,
		"--state-dir", filepath.Join(nd, "state/csi"),
		// Network-attached storage, as a SAN or a zone's cloud disks are: every node reports the one
		// zone and no node key, so a PV's node affinity (topology.plugsim.dev/zone in [zone-a]) holds
		// on every node; the volumes' data is the controller's, so a volume moved to another node
		// keeps what a pod wrote; and bind publishes put that data at the pod's mount.
		"--node-topology=false", "--topology", zoneLabel(), "--data-dir", c.path("csi", "state"), "--mount", "bind",
		"--register", "--plugin-registry-dir", filepath.Join(nd, "kubelet/plugins_registry"),
		"--trace", filepath.Join(nd, "csi.jsonl"), "--admin-socket", "unix://" + nodeCSIAdmin(nd),
	}); err != nil {
		return err
	}
	// The ephemeral-only driver (like Calico's csi.tigera.io): a node plugin with no controller and no
	// sidecar, registering itself so the kubelet adds it to the node's CSINode and publishes inline volumes.
	if _, err := c.startNodeProc(name+"-csi-fake-ephemeral", netns, nd, c.bin("csi-fake"), []string{
		"--ephemeral-only", "--driver-name", ephemeralDriver,
		"--endpoint", "unix://" + filepath.Join(nd, "kubelet/plugins", ephemeralDriver, "csi.sock"), "--node-id", name,
		"--state-dir", filepath.Join(nd, "state/csi-ephemeral"),
		"--register", "--plugin-registry-dir", filepath.Join(nd, "kubelet/plugins_registry"),
		"--trace", filepath.Join(nd, "csi-ephemeral.jsonl"),
	}); err != nil {
		return err
	}
	return nil
}

// snapshotCRDs applies external-snapshotter's CRDs from BinDir/snapshot-crds (`make sidecars` copies
// them there), waits until the API server serves them, and applies examples/csi's VolumeSnapshotClass.
// Without the directory there are none (and no snapshot-controller runs); it reports which.
func snapshotCRDs(c *actionContext) (bool, error) {
	dir := c.bin("snapshot-crds")
	if crds, _ := filepath.Glob(filepath.Join(dir, "*.yaml")); len(crds) == 0 {
		c.step("no VolumeSnapshot CRDs in %s (make sidecars copies them): no snapshot-controller", dir)
		return false, nil
	}
	// Server-side: a client-side apply would copy each CRD's whole schema into an annotation.
	if err := c.kubectl("apply", "--server-side", "-f", dir); err != nil {
		return false, err
	}
	if err := c.kubectl("wait", "--for", "condition=Established", "--timeout", "120s", "-f", dir); err != nil {
		return false, err
	}
	if err := c.apply("volumesnapshotclass.yaml", csiexample.VolumeSnapshotClass); err != nil {
		return false, err
	}
	c.step("VolumeSnapshot CRDs (external-snapshotter v8) and VolumeSnapshotClass plugsim-snapshots (default)")
	return true, nil
}
