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
