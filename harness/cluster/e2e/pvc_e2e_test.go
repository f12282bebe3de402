//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/plugsim/plugsim/harness/trace"
)

// The storage of the cluster (harness/cluster/up.go): csi.plugsim.dev is network-attached, every node
// of the one zone reaches it.
const (
	pvcDriver  = "csi.plugsim.dev"
	pvcZoneKey = "topology.plugsim.dev/zone"
	pvcZone    = "zone-a"
)

// pvcAcrossNodes is issue 14's check 4, with kubectl only, each step asserted where a user sees it: a PVC
// of the default class is Bound by the real external-provisioner (CreateVolume), its PV is csi.plugsim.dev's
// with a node affinity every node satisfies; a pod using it is scheduled onto node1, the attach/detach
// controller's VolumeAttachment is attached by the real external-attacher (ControllerPublishVolume), the
// kubelet stages and publishes it, the pod writes a file; that pod deleted (the volume detached from node1),
// a pod on node2 reads the file. With external-snapshotter running, a VolumeSnapshot of the PVC becomes
// readyToUse and a PVC restored from it holds the file. Deleting the pods and the PVCs runs
// NodeUnpublishVolume, NodeUnstageVolume (kubelet), ControllerUnpublishVolume (external-attacher) and
// DeleteVolume (external-provisioner), as csi-fake's traces record with their callers.
func (c *testCluster) pvcAcrossNodes(t *testing.T) {
	c.t = t
	if c.nodes < 2 {
		t.Fatalf("the check moves a pod to another node: it needs 2 nodes, the cluster has %d", c.nodes)
	}
	const claim = "shared-data"
	c.apply(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ` + claim + `, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: plugsim-fake
  resources: {requests: {storage: 1Gi}}
`)
	pv := c.waitBound(claim)
	handle := pv.Spec.CSI.VolumeHandle
	t.Logf("kubectl get pvc,pv:\n%s", c.mustKubectl("get", "pvc,pv"))

	// The PV is csi.plugsim.dev's, created by the external-provisioner's CreateVolume with the claim's
	// PV name, and bound to a zone every node is labelled with (by its kubelet, from NodeGetInfo).
	ctrlTrace := filepath.Join(c.dir, "csi", "controller.jsonl")
	c.waitTrace(ctrlTrace, "CreateVolume", "external-provisioner", map[string]string{"name": pv.Name})
	want := []corev1.NodeSelectorRequirement{{Key: pvcZoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{pvcZone}}}
	if na := pv.Spec.NodeAffinity; na == nil || na.Required == nil || len(na.Required.NodeSelectorTerms) != 1 ||
		!slices.EqualFunc(na.Required.NodeSelectorTerms[0].MatchExpressions, want, func(a, b corev1.NodeSelectorRequirement) bool {
			return a.Key == b.Key && a.Operator == b.Operator && slices.Equal(a.Values, b.Values)
		}) {
		t.Errorf("PV %s nodeAffinity %+v, want required %s In [%s] (network-attached: the zone, not one node)", pv.Name, pv.Spec.NodeAffinity, pvcZoneKey, pvcZone)
	}
	var nodes corev1.NodeList
	if err := c.getJSON(&nodes, "nodes", "-l", pvcZoneKey+"="+pvcZone); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != c.nodes {
		t.Errorf("%d of %d nodes are labelled %s=%s; the PV's affinity must hold on all", len(nodes.Items), c.nodes, pvcZoneKey, pvcZone)
	}

	// A pod on node1 (chosen by the scheduler from a nodeSelector, so it checks the PV's affinity) writes.
	c.apply(pvcPod("pvc-writer", "node1", claim, "echo written-on-node1 > /data/hello"))
	if p := c.waitPod("pvc-writer", 180*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) }); p.Spec.NodeName != "node1" {
		t.Fatalf("pvc-writer runs on %s, want node1", p.Spec.NodeName)
	}
	c.waitAttached(pv.Name, "node1")
	node1Trace := filepath.Join(c.dir, "nodes", "node1", "csi.jsonl")
	c.waitTrace(node1Trace, "NodeStageVolume", "kubelet", map[string]string{"volumeId": handle})
	c.waitTrace(node1Trace, "NodePublishVolume", "kubelet", map[string]string{"volumeId": handle})
	c.waitTrace(ctrlTrace, "ControllerPublishVolume", "external-attacher", map[string]string{"volumeId": handle, "nodeId": "node1"})
	c.waitFile("pvc-writer", "/data/hello", "written-on-node1")
	t.Logf("kubectl get pod -o wide, volumeattachment:\n%s\n%s", c.mustKubectl("get", "pod", "pvc-writer", "-o", "wide"), c.mustKubectl("get", "volumeattachment"))

	// Deleted, the pod's volume is unpublished and unstaged on node1 and detached from it.
	c.mustKubectl("delete", "pod", "pvc-writer", "--timeout", "180s")
	c.waitDetached(pv.Name, "node1")
	c.waitTrace(node1Trace, "NodeUnpublishVolume", "kubelet", map[string]string{"volumeId": handle})
	c.waitTrace(node1Trace, "NodeUnstageVolume", "kubelet", map[string]string{"volumeId": handle})
	c.waitTrace(ctrlTrace, "ControllerUnpublishVolume", "external-attacher", map[string]string{"volumeId": handle, "nodeId": "node1"})

	// The same claim on node2 holds what node1's pod wrote.
	c.apply(pvcPod("pvc-reader", "node2", claim, "cat /data/hello"))
	p := c.waitPod("pvc-reader", 180*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) })
	if p.Spec.NodeName != "node2" {
		t.Fatalf("pvc-reader runs on %s, want node2", p.Spec.NodeName)
	}
	c.waitAttached(pv.Name, "node2")
	c.waitFile("pvc-reader", "/data/hello", "written-on-node1")
	t.Logf("kubectl get pod -o wide, volumeattachment:\n%s\n%s", c.mustKubectl("get", "pod", "pvc-reader", "-o", "wide"), c.mustKubectl("get", "volumeattachment"))

	t.Run("snapshot-restore", func(t *testing.T) {
		c.t = t
		c.snapshotRestore(claim, ctrlTrace)
	})
	c.t = t

	// Pod and claim deleted: unpublish, unstage on node2, detach, and the provisioner deletes the volume.
	c.mustKubectl("delete", "pod", "pvc-reader", "--timeout", "180s")
	c.mustKubectl("delete", "pvc", claim, "--timeout", "180s")
	c.waitFor("PV "+pv.Name+" deleted (reclaimPolicy Delete)", 180*time.Second, func() (bool, string) {
		out, err := c.kubectl("get", "pv", pv.Name)
		return err != nil && strings.Contains(out, "NotFound"), out
	})
	node2Trace := filepath.Join(c.dir, "nodes", "node2", "csi.jsonl")
	c.waitTrace(node2Trace, "NodeUnpublishVolume", "kubelet", map[string]string{"volumeId": handle})
	c.waitTrace(node2Trace, "NodeUnstageVolume", "kubelet", map[string]string{"volumeId": handle})
	c.waitTrace(ctrlTrace, "ControllerUnpublishVolume", "external-attacher", map[string]string{"volumeId": handle, "nodeId": "node2"})
	c.waitTrace(ctrlTrace, "DeleteVolume", "external-provisioner", map[string]string{"volumeId": handle})
	if _, err := os.Lstat(filepath.Join(c.dir, "csi", "state", "volumes", handle)); !os.IsNotExist(err) {
		t.Errorf("volume %s's data is still in the shared data directory after DeleteVolume: %v", handle, err)
	}
}

// snapshotRestore: a VolumeSnapshot of claim (the default VolumeSnapshotClass) becomes readyToUse through
// snapshot-controller and csi-snapshotter (CreateSnapshot), a PVC restored from it is Bound (CreateVolume
// from the snapshot) and a pod reads the file from it; all of it is deleted again.
func (c *testCluster) snapshotRestore(claim, ctrlTrace string) {
	t := c.t
	for _, b := range []string{"snapshot-controller", "csi-snapshotter", "snapshot-crds"} {
		if _, err := os.Stat(filepath.Join(c.bin, b)); err != nil {
			t.Skipf("no %s in %s (make sidecars builds it): the cluster runs no snapshots", b, c.bin)
		}
	}
	c.apply(`apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: shared-data-snap, namespace: default}
spec:
  source: {persistentVolumeClaimName: ` + claim + `}
`)
	var snap struct {
		Spec struct {
			VolumeSnapshotClassName string `json:"volumeSnapshotClassName"`
		} `json:"spec"`
		Status struct {
			ReadyToUse                     *bool  `json:"readyToUse"`
			BoundVolumeSnapshotContentName string `json:"boundVolumeSnapshotContentName"`
			Error                          *struct {
				Message string `json:"message"`
			} `json:"error"`
		} `json:"status"`
	}
	c.waitFor("VolumeSnapshot shared-data-snap readyToUse", 180*time.Second, func() (bool, string) {
		if err := c.getJSON(&snap, "volumesnapshot", "shared-data-snap"); err != nil {
			return false, err.Error()
		}
		out, _ := json.Marshal(snap.Status)
		return snap.Status.ReadyToUse != nil && *snap.Status.ReadyToUse, string(out)
	})
	if snap.Spec.VolumeSnapshotClassName != "plugsim-snapshots" {
		t.Errorf("VolumeSnapshot class %q, want the default plugsim-snapshots", snap.Spec.VolumeSnapshotClassName)
	}
	c.waitTrace(ctrlTrace, "CreateSnapshot", "external-snapshotter", nil)
	t.Logf("kubectl get volumesnapshot:\n%s", c.mustKubectl("get", "volumesnapshot"))

	c.apply(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: restored-data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: plugsim-fake
  resources: {requests: {storage: 1Gi}}
  dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: shared-data-snap}
`)
	pv := c.waitBound("restored-data")
	c.apply(pvcPod("restored-reader", "node1", "restored-data", "cat /data/hello"))
	c.waitPod("restored-reader", 180*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) })
	c.waitFile("restored-reader", "/data/hello", "written-on-node1")
	c.mustKubectl("delete", "pod", "restored-reader", "--timeout", "180s")
	c.mustKubectl("delete", "pvc", "restored-data", "--timeout", "180s")
	c.mustKubectl("delete", "volumesnapshot", "shared-data-snap", "--timeout", "180s")
	c.waitTrace(ctrlTrace, "DeleteSnapshot", "external-snapshotter", nil)
	c.waitTrace(ctrlTrace, "DeleteVolume", "external-provisioner", map[string]string{"volumeId": pv.Spec.CSI.VolumeHandle})
}

// pvcPod is a pod on node (a nodeSelector, so the scheduler places it) mounting claim at /data, running
// script and then staying up.
func pvcPod(name, node, claim, script string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: %s}
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", "%s; while true; do sleep 10; done"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: %s}
`, name, node, script, claim)
}

// waitBound waits for claim to be Bound and returns its PV, checked to be a CSI volume of csi.plugsim.dev.
func (c *testCluster) waitBound(claim string) *corev1.PersistentVolume {
	c.t.Helper()
	var pvc corev1.PersistentVolumeClaim
	c.waitFor("PVC "+claim+" Bound", 180*time.Second, func() (bool, string) {
		if err := c.getJSON(&pvc, "pvc", claim); err != nil {
			return false, err.Error()
		}
		return pvc.Status.Phase == corev1.ClaimBound, fmt.Sprintf("%s; events: %s", pvc.Status.Phase, strings.Join(c.events("PersistentVolumeClaim", claim), " | "))
	})
	var pv corev1.PersistentVolume
	if err := c.getJSON(&pv, "pv", pvc.Spec.VolumeName); err != nil {
		c.t.Fatal(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != pvcDriver || pv.Spec.CSI.VolumeHandle == "" {
		c.t.Fatalf("PV %s of claim %s: csi %+v, want driver %s with a volume handle", pv.Name, claim, pv.Spec.CSI, pvcDriver)
	}
	return &pv
}

// attachments are the VolumeAttachments of PV pv.
func (c *testCluster) attachments(pv string) ([]storagev1.VolumeAttachment, error) {
	var list storagev1.VolumeAttachmentList
	if err := c.getJSON(&list, "volumeattachment"); err != nil {
		return nil, err
	}
	var out []storagev1.VolumeAttachment
	for _, va := range list.Items {
		if s := va.Spec.Source.PersistentVolumeName; s != nil && *s == pv {
			out = append(out, va)
		}
	}
	return out, nil
}

// waitAttached waits for the attach/detach controller's VolumeAttachment of pv to node, of csi.plugsim.dev,
// to be attached (by the external-attacher).
func (c *testCluster) waitAttached(pv, node string) {
	c.t.Helper()
	c.waitFor("VolumeAttachment of "+pv+" to "+node+" attached", 180*time.Second, func() (bool, string) {
		vas, err := c.attachments(pv)
		if err != nil {
			return false, err.Error()
		}
		var desc []string
		for _, va := range vas {
			if va.Spec.NodeName == node && va.Spec.Attacher == pvcDriver && va.Status.Attached {
				return true, ""
			}
			desc = append(desc, fmt.Sprintf("%s node %s attacher %s attached %v %+v", va.Name, va.Spec.NodeName, va.Spec.Attacher, va.Status.Attached, va.Status.AttachError))
		}
		return false, fmt.Sprint(desc)
	})
}

// waitDetached waits until pv has no VolumeAttachment to node.
func (c *testCluster) waitDetached(pv, node string) {
	c.t.Helper()
	c.waitFor("VolumeAttachment of "+pv+" to "+node+" gone", 180*time.Second, func() (bool, string) {
		vas, err := c.attachments(pv)
		if err != nil {
			return false, err.Error()
		}
		for _, va := range vas {
			if va.Spec.NodeName == node {
				return false, fmt.Sprintf("%s attached %v", va.Name, va.Status.Attached)
			}
		}
		return true, ""
	})
}

// waitFile waits until `kubectl exec pod -- cat path` prints want.
func (c *testCluster) waitFile(pod, path, want string) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("%s in pod %s to read %q", path, pod, want), 120*time.Second, func() (bool, string) {
		out, err := c.kubectl("exec", pod, "--", "cat", path)
		return err == nil && strings.TrimSpace(out) == want, fmt.Sprintf("%v: %q", err, out)
	})
}

// waitTrace waits until the csi-fake trace at path holds a successful call of method by caller whose
// request has every field of fields (string values, the trace's JSON names).
func (c *testCluster) waitTrace(path, method, caller string, fields map[string]string) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("%s by %s %v in %s", method, caller, fields, path), 120*time.Second, func() (bool, string) {
		evs, err := trace.ReadFile(path)
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs {
			if e.Method != method {
				continue
			}
			var req map[string]any
			json.Unmarshal(e.Request, &req)
			ok := e.Caller == caller && e.Code == "OK"
			for k, v := range fields {
				ok = ok && req[k] == v
			}
			if ok {
				return true, ""
			}
			seen = append(seen, fmt.Sprintf("%s %s %s", e.Caller, e.Code, e.Request))
		}
		return false, fmt.Sprintf("%d %s call(s): %s", len(seen), method, strings.Join(seen, "; "))
	})
}
