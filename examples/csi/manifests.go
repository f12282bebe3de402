// Package csi holds the CSI example manifests; the ones a cluster needs are embedded here so that
// `harness cluster up` applies the very files the examples document (not a copy that could drift).
package csi

import _ "embed"

// CSIDriver is csidriver.yaml: the CSIDriver objects of csi.plugsim.dev and the ephemeral-only
// csi.ephemeral.plugsim.dev.
//
//go:embed csidriver.yaml
var CSIDriver []byte

// StorageClass is storageclass.yaml: the default StorageClass, the one whose provisioner matches no
// driver, and the VolumeAttributesClass.
//
//go:embed storageclass.yaml
var StorageClass []byte

// SidecarsRBAC is sidecars-rbac.yaml: a ClusterRole for each CSI sidecar and snapshot-controller,
// bound to the service account of the pod it runs in (controller.yaml).
//
//go:embed sidecars-rbac.yaml
var SidecarsRBAC []byte

// VolumeSnapshotClass is volumesnapshotclass.yaml: the default VolumeSnapshotClass of
// csi.plugsim.dev (it needs external-snapshotter's CRDs).
//
//go:embed volumesnapshotclass.yaml
var VolumeSnapshotClass []byte

// ClusterDirToken stands for the cluster's directory in Controller and Node: `harness cluster up`
// replaces it before it applies them.
const ClusterDirToken = "PLUGSIM_CLUSTER_DIR"

// Controller is controller.yaml: the namespace plugsim-csi, csi-fake's controller plugin with the real
// sidecars in one Deployment, and snapshot-controller.
//
//go:embed controller.yaml
var Controller []byte

// Node is node.yaml: the node plugins of both drivers as DaemonSets.
//
//go:embed node.yaml
var Node []byte
