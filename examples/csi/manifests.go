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

// SidecarsRBAC is sidecars-rbac.yaml: a ClusterRole and binding for each CSI sidecar and
// snapshot-controller run out of cluster with a client certificate (user plugsim:<binary>).
//
//go:embed sidecars-rbac.yaml
var SidecarsRBAC []byte

// VolumeSnapshotClass is volumesnapshotclass.yaml: the default VolumeSnapshotClass of
// csi.plugsim.dev (it needs external-snapshotter's CRDs).
//
//go:embed volumesnapshotclass.yaml
var VolumeSnapshotClass []byte
