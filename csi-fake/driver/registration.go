package driver

import (
	"context"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Registration serves the kubelet's plugin registration API (pluginregistration.v1) on
// <plugin-registry-dir>/<driver>-reg.sock, the job node-driver-registrar does for other drivers.
// Kubelet's plugin watcher finds the socket, calls GetInfo (1 s timeout), then calls NodeGetInfo on
// the endpoint GetInfo returned, updates the CSINode object, and reports the outcome with
// NotifyRegistrationStatus (pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go).
//
// node-driver-registrar exits when registration fails so that its restart recreates the socket;
// csi-fake keeps serving and records the status, because a standalone kubelet (no API server)
// always reports failure (it cannot write the CSINode object) and the exchange is still worth
// showing.
type Registration struct {
	registerapi.UnimplementedRegistrationServer
	d *Driver
}

// RegistrationStatus is what the kubelet last reported.
type RegistrationStatus struct {
	// Notified counts the NotifyRegistrationStatus calls received.
	Notified   int
	Registered bool
	Error      string
}

type registrationStatus struct {
	mu sync.Mutex
	st RegistrationStatus
}

// SupportedVersions are the CSI versions offered to the kubelet (it needs a 1.x).
var SupportedVersions = []string{"1.0.0"}

// Registration returns the registration service of the driver.
func (d *Driver) Registration() *Registration { return &Registration{d: d} }

// RegistrationStatus returns what the kubelet last reported.
func (d *Driver) RegistrationStatus() RegistrationStatus {
	d.reg.mu.Lock()
	defer d.reg.mu.Unlock()
	return d.reg.st
}

// SetKubeletEndpoint sets the CSI socket path GetInfo returns when --kubelet-registration-path
// was not given (the server knows it only once it listens).
func (d *Driver) SetKubeletEndpoint(p string) {
	d.reg.mu.Lock()
	defer d.reg.mu.Unlock()
	if d.cfg.KubeletEndpoint == "" {
		d.cfg.KubeletEndpoint = p
	}
}

// GetInfo tells the kubelet what plugin this is and where its CSI socket is.
func (r *Registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	r.d.reg.mu.Lock()
	ep := r.d.cfg.KubeletEndpoint
	r.d.reg.mu.Unlock()
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.d.cfg.Name,
		Endpoint:          ep,
		SupportedVersions: SupportedVersions,
	}, nil
}

// NotifyRegistrationStatus records and logs the kubelet's verdict, and keeps serving.
func (r *Registration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.d.reg.mu.Lock()
	r.d.reg.st.Notified++
	r.d.reg.st.Registered = st.GetPluginRegistered()
	r.d.reg.st.Error = st.GetError()
	r.d.reg.mu.Unlock()
	if st.GetPluginRegistered() {
		r.d.log.Info("kubelet registered the plugin", "driver", r.d.cfg.Name)
	} else {
		r.d.log.Warn("kubelet reports plugin registration failed; csi-fake keeps serving (a standalone kubelet without an API server always fails here)",
			"driver", r.d.cfg.Name, "error", st.GetError())
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// The SnapshotMetadata service (spec v1.10, alpha) streams the allocated and changed blocks of
// block-volume snapshots for backup tools. csi-fake does not serve it: Kubernetes reaches it only
// through the external-snapshot-metadata sidecar over TLS with a SnapshotMetadataService object,
// and a fake's sparse files carry no changed-block history worth reporting. The driver therefore
// does not advertise SNAPSHOT_METADATA_SERVICE, and both RPCs say why they are unimplemented.

const snapshotMetadataWhy = "csi-fake does not serve the SnapshotMetadata service (alpha): it keeps no changed-block history; see csi-fake/README.md"

// GetMetadataAllocated is deliberately Unimplemented (see above).
func (d *Driver) GetMetadataAllocated(*csi.GetMetadataAllocatedRequest, csi.SnapshotMetadata_GetMetadataAllocatedServer) error {
	return status.Error(codes.Unimplemented, snapshotMetadataWhy)
}

// GetMetadataDelta is deliberately Unimplemented (see above).
func (d *Driver) GetMetadataDelta(*csi.GetMetadataDeltaRequest, csi.SnapshotMetadata_GetMetadataDeltaServer) error {
	return status.Error(codes.Unimplemented, snapshotMetadataWhy)
}
