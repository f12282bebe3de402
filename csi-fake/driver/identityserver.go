package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Version is the driver's vendor version, reported by GetPluginInfo.
const Version = "v0.1.0"

// GetPluginInfo names the driver. The external sidecars compare this name with the StorageClass
// provisioner and the CSIDriver object, so it must be what --driver-name says.
func (d *Driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{
		Name:          d.cfg.Name,
		VendorVersion: Version,
		Manifest:      map[string]string{"mode": string(d.cfg.Mode), "mount": string(d.cfg.Mount)},
	}, nil
}

// GetPluginCapabilities advertises the plugin's services.
func (d *Driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	svc := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	if d.cfg.EphemeralOnly {
		// Like csi.tigera.io: a node service for inline volumes and nothing else.
		return &csi.GetPluginCapabilitiesResponse{}, nil
	}
	// Every process of a deployment answers the same, as one real driver binary does: the
	// node DaemonSet's identity also claims CONTROLLER_SERVICE (csi-sanity reads the node
	// endpoint's capabilities to decide whether to run the controller-backed node tests).
	caps := []*csi.PluginCapability{
		svc(csi.PluginCapability_Service_CONTROLLER_SERVICE),
		svc(csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE),
		svc(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		svc(csi.PluginCapability_Service_SNAPSHOT_ACCESSIBILITY_CONSTRAINTS),
		// Expansion works while the volume is published (the data is a directory or a
		// sparse file that just grows).
		{Type: &csi.PluginCapability_VolumeExpansion_{
			VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE}}},
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// Probe reports ready: the driver has no backend that could be starting up. The sidecars and
// kubelet's liveness probes call it in a loop.
func (d *Driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
