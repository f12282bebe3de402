package cluster

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	storagev1 "k8s.io/api/storage/v1"

	csiexample "github.com/plugsim/plugsim/examples/csi"
)

// csiNamespace is where examples/csi/controller.yaml and node.yaml put the driver's pods.
const csiNamespace = "plugsim-csi"

// csiDriver installs what a CSI driver's deployment ships besides its pods: the CSIDriver objects and
// StorageClasses of examples/csi, the sidecars' RBAC, the VolumeSnapshot CRDs and class.
type csiDriver struct{}

func (csiDriver) Name() string { return "install the CSI driver's objects" }

func (csiDriver) Execute(c *actionContext) error {
	// The CSIDriver objects and the StorageClasses of examples/csi, as a driver's deployment ships them:
	// without a CSIDriver the kubelet treats csi.plugsim.dev as attach-required without pod info and
	// refuses every inline volume, and without a default class a PVC naming none stays Pending. Then each
	// CSI sidecar's ClusterRole, bound to its pod's service account (examples/csi).
	for _, m := range []struct {
		name string
		b    []byte
	}{{"csidriver.yaml", csiexample.CSIDriver}, {"storageclass.yaml", csiexample.StorageClass}, {"sidecars-rbac.yaml", csiexample.SidecarsRBAC}} {
		if err := c.apply(m.name, m.b); err != nil {
			return err
		}
	}
	c.step("CSIDriver objects %s and %s, StorageClasses plugsim-fake (default) and example, the sidecars' ClusterRoles", driverName, ephemeralDriver)
	return snapshotCRDs(c)
}

// csiPods deploys the CSI drivers as pods, as a driver is deployed on any cluster
// (examples/csi/controller.yaml and node.yaml): csi-fake's controller plugin with the real sidecars in
// one Deployment, snapshot-controller in another, and the node plugins of both drivers as DaemonSets,
// each registering itself with its node's kubelet; all of them program images, run under the real runc.
// It waits until every DaemonSet has a Ready pod on every node, the Deployments are Available and every
// node's CSINode lists both drivers (with --empty-cni the pods wait for the nodes' pod network, and
// `up` does not wait for them).
type csiPods struct{}

func (csiPods) Name() string { return "deploy the CSI driver as pods" }

func (csiPods) Execute(c *actionContext) error {
	dir := []byte(c.o.Dir)
	for _, m := range []struct {
		name string
		b    []byte
	}{{"csi-controller.yaml", csiexample.Controller}, {"csi-node.yaml", csiexample.Node}} {
		if err := c.apply(m.name, bytes.ReplaceAll(m.b, []byte(csiexample.ClusterDirToken), dir)); err != nil {
			return err
		}
	}
	if c.o.EmptyCNI {
		c.step("CSI driver pods in namespace %s applied (%s): they start once the nodes are Ready", csiNamespace, c.path("manifests", "csi-*.yaml"))
		return nil
	}
	daemonSets := []string{"csi-fake-node", "csi-fake-ephemeral-node"}
	deployments := []string{"csi-fake-controller", "snapshot-controller"}
	err := c.wait(fmt.Sprintf("the CSI DaemonSets Ready on %d node(s) and its Deployments Available", c.o.Nodes), func() (bool, string) {
		var desc []string
		ok := true
		for _, name := range daemonSets {
			var ds appsv1.DaemonSet
			if _, err := c.get("/apis/apps/v1/namespaces/"+csiNamespace+"/daemonsets/"+name, &ds); err != nil {
				return false, err.Error()
			}
			s := ds.Status
			n := int32(c.o.Nodes)
			ok = ok && s.DesiredNumberScheduled == n && s.CurrentNumberScheduled == n && s.NumberReady == n && s.UpdatedNumberScheduled == n
			desc = append(desc, fmt.Sprintf("daemonset %s desired %d current %d ready %d", name, s.DesiredNumberScheduled, s.CurrentNumberScheduled, s.NumberReady))
		}
		for _, name := range deployments {
			var d appsv1.Deployment
			if _, err := c.get("/apis/apps/v1/namespaces/"+csiNamespace+"/deployments/"+name, &d); err != nil {
				return false, err.Error()
			}
			available := false
			for _, cd := range d.Status.Conditions {
				available = available || (cd.Type == appsv1.DeploymentAvailable && cd.Status == "True")
			}
			ok = ok && available
			desc = append(desc, fmt.Sprintf("deployment %s available %v", name, available))
		}
		var csiNodes storagev1.CSINodeList
		if _, err := c.get("/apis/storage.k8s.io/v1/csinodes", &csiNodes); err != nil {
			return false, err.Error()
		}
		registered := 0
		for _, n := range csiNodes.Items {
			drivers := map[string]bool{}
			for _, d := range n.Spec.Drivers {
				drivers[d.Name] = true
			}
			if drivers[driverName] && drivers[ephemeralDriver] {
				registered++
			}
		}
		ok = ok && registered == c.o.Nodes
		desc = append(desc, fmt.Sprintf("%d CSINode(s) list both drivers", registered))
		return ok, strings.Join(desc, "; ")
	})
	if err != nil {
		return err
	}
	c.step("CSI driver as pods in namespace %s: csi-fake-controller (csi-fake, csi-provisioner, csi-attacher, csi-resizer, csi-snapshotter) and snapshot-controller Available, node plugins of %s and %s Ready on %d node(s), registered with their kubelets",
		csiNamespace, driverName, ephemeralDriver, c.o.Nodes)
	return nil
}

// ephemeralDriverArgs are the arguments of the ephemeral-only csi-fake that `join` runs as a process of
// each of its nodes (name, node directory nd): the CSI DaemonSets stay on the first machine's nodes
// (examples/csi/node.yaml).
func ephemeralDriverArgs(name, nd string) []string {
	return []string{
		"--ephemeral-only", "--driver-name", ephemeralDriver,
		"--endpoint", "unix://" + filepath.Join(nd, "kubelet/plugins", ephemeralDriver, "csi.sock"), "--node-id", name,
		"--state-dir", filepath.Join(nd, "state/csi-ephemeral"),
		"--register", "--plugin-registry-dir", filepath.Join(nd, "kubelet/plugins_registry"),
		"--trace", filepath.Join(nd, "csi-ephemeral.jsonl"),
	}
}

// snapshotCRDs applies external-snapshotter's CRDs from BinDir/snapshot-crds (`make sidecars` copies
// them there), waits until the API server serves them, and applies examples/csi's VolumeSnapshotClass.
func snapshotCRDs(c *actionContext) error {
	dir := c.bin("snapshot-crds")
	if crds, _ := filepath.Glob(filepath.Join(dir, "*.yaml")); len(crds) == 0 {
		return fmt.Errorf("no VolumeSnapshot CRDs in %s: make sidecars copies them", dir)
	}
	// Server-side: a client-side apply would copy each CRD's whole schema into an annotation.
	if err := c.kubectl("apply", "--server-side", "-f", dir); err != nil {
		return err
	}
	if err := c.kubectl("wait", "--for", "condition=Established", "--timeout", "120s", "-f", dir); err != nil {
		return err
	}
	if err := c.apply("volumesnapshotclass.yaml", csiexample.VolumeSnapshotClass); err != nil {
		return err
	}
	c.step("VolumeSnapshot CRDs (external-snapshotter v8) and VolumeSnapshotClass plugsim-snapshots (default)")
	return nil
}
