package kubeletsim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
)

// Storage plays the CSI callers of a pod with a PVC: the external-provisioner and the
// external-attacher against the controller plugin, the kubelet against the node plugin.
type Storage struct {
	Controller csi.ControllerClient
	// ControllerIdentity and NodeIdentity are the Identity services of the two plugin halves.
	ControllerIdentity csi.IdentityClient
	Node               csi.NodeClient
	NodeIdentity       csi.IdentityClient
	Observe            Observer
	// KubeletDir stands for /var/lib/kubelet: staging and target paths are made under it.
	KubeletDir string

	// Learned by Discover.
	DriverName      string
	NodeID          string
	publish         bool // controller PUBLISH_UNPUBLISH_VOLUME
	createDelete    bool // controller CREATE_DELETE_VOLUME
	stage           bool // node STAGE_UNSTAGE_VOLUME
	stats           bool // node GET_VOLUME_STATS
	controllerReady bool
}

// NewStorage returns a Storage on the controller and node connections (they may be the same
// connection when one csi-fake serves both halves; controller may be nil for an ephemeral-only
// driver, which has no controller plugin).
func NewStorage(controller, node grpc.ClientConnInterface, kubeletDir string) *Storage {
	s := &Storage{KubeletDir: kubeletDir, Node: csi.NewNodeClient(node), NodeIdentity: csi.NewIdentityClient(node)}
	if controller != nil {
		s.Controller = csi.NewControllerClient(controller)
		s.ControllerIdentity = csi.NewIdentityClient(controller)
	}
	return s
}

func (s *Storage) do(method string, f func() error) error {
	return (&Kubelet{Observe: s.Observe}).do(method, f)
}

// Discover makes the start-up calls: the sidecars' GetPluginInfo, GetPluginCapabilities and
// ControllerGetCapabilities (external-provisioner cmd/csi-provisioner/csi-provisioner.go, external-attacher cmd/csi-attacher/main.go), and the kubelet's registration-time
// NodeGetInfo plus NodeGetCapabilities before staging (§3.4, §3.5).
func (s *Storage) Discover(ctx context.Context) error {
	pctx, kctx := As(ctx, "external-provisioner"), As(ctx, "kubelet")
	if s.ControllerIdentity != nil {
		if err := s.do("GetPluginInfo", func() error {
			r, err := s.ControllerIdentity.GetPluginInfo(pctx, &csi.GetPluginInfoRequest{})
			if err == nil {
				s.DriverName = r.Name
			}
			return err
		}); err != nil {
			return err
		}
		var hasController bool
		if err := s.do("GetPluginCapabilities", func() error {
			r, err := s.ControllerIdentity.GetPluginCapabilities(pctx, &csi.GetPluginCapabilitiesRequest{})
			for _, c := range r.GetCapabilities() {
				if c.GetService().GetType() == csi.PluginCapability_Service_CONTROLLER_SERVICE {
					hasController = true
				}
			}
			return err
		}); err != nil {
			return err
		}
		if hasController {
			if err := s.do("ControllerGetCapabilities", func() error {
				r, err := s.Controller.ControllerGetCapabilities(pctx, &csi.ControllerGetCapabilitiesRequest{})
				for _, c := range r.GetCapabilities() {
					switch c.GetRpc().GetType() {
					case csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME:
						s.publish = true
					case csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME:
						s.createDelete = true
					}
				}
				return err
			}); err != nil {
				return err
			}
			s.controllerReady = true
		}
	}
	if s.DriverName == "" {
		if err := s.do("GetPluginInfo", func() error {
			r, err := s.NodeIdentity.GetPluginInfo(kctx, &csi.GetPluginInfoRequest{})
			if err == nil {
				s.DriverName = r.Name
			}
			return err
		}); err != nil {
			return err
		}
	}
	if err := s.do("NodeGetInfo", func() error {
		r, err := s.Node.NodeGetInfo(kctx, &csi.NodeGetInfoRequest{})
		if err == nil {
			s.NodeID = r.NodeId
		}
		return err
	}); err != nil {
		return err
	}
	return s.nodeCaps(kctx)
}

func (s *Storage) nodeCaps(ctx context.Context) error {
	ctx = As(ctx, "kubelet")
	return s.do("NodeGetCapabilities", func() error {
		r, err := s.Node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
		s.stage, s.stats = false, false
		for _, c := range r.GetCapabilities() {
			switch c.GetRpc().GetType() {
			case csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME:
				s.stage = true
			case csi.NodeServiceCapability_RPC_GET_VOLUME_STATS:
				s.stats = true
			}
		}
		return err
	})
}

// ErrNoProvisioning is returned by VolumeLifecycle for a driver that cannot create volumes (an
// ephemeral-only driver such as csi.tigera.io): no PV is ever made for it.
var ErrNoProvisioning = errors.New("the driver does not offer CREATE_DELETE_VOLUME: no PV can be provisioned for it")

// VolumeLifecycle is a PVC pod's volume from provisioning to deletion: CreateVolume →
// ControllerPublishVolume → NodeStageVolume → NodePublishVolume → NodeGetVolumeStats →
// NodeUnpublishVolume → NodeUnstageVolume → ControllerUnpublishVolume → DeleteVolume. Each call
// is made only when the capability it needs is advertised, as the sidecars and the kubelet decide
// (an attacher without PUBLISH_UNPUBLISH uses its trivial handler; NodeStage only with
// STAGE_UNSTAGE_VOLUME; NodeGetVolumeStats only with GET_VOLUME_STATS).
func (s *Storage) VolumeLifecycle(ctx context.Context, pvcUID, podUID string, sizeBytes int64) error {
	if !s.controllerReady || !s.createDelete {
		return ErrNoProvisioning
	}
	pctx, actx, kctx := As(ctx, "external-provisioner"), As(ctx, "external-attacher"), As(ctx, "kubelet")
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	pvName := "pvc-" + pvcUID
	var vol *csi.Volume
	if err := s.do("CreateVolume", func() error {
		r, err := s.Controller.CreateVolume(pctx, &csi.CreateVolumeRequest{
			Name:               pvName,
			CapacityRange:      &csi.CapacityRange{RequiredBytes: sizeBytes},
			VolumeCapabilities: []*csi.VolumeCapability{capability},
		})
		if err == nil {
			vol = r.Volume
		}
		return err
	}); err != nil {
		return err
	}
	var publishContext map[string]string
	if s.publish {
		if err := s.do("ControllerPublishVolume", func() error {
			r, err := s.Controller.ControllerPublishVolume(actx, &csi.ControllerPublishVolumeRequest{
				VolumeId: vol.VolumeId, NodeId: s.NodeID, VolumeCapability: capability, VolumeContext: vol.VolumeContext,
			})
			if err == nil {
				publishContext = r.PublishContext
			}
			return err
		}); err != nil {
			return err
		}
	}
	// The kubelet makes the staging directory itself and only the parent of the target path
	// (csi_attacher.go MountDevice, csi_mounter.go SetUp); the driver creates the target.
	sum := sha256.Sum256([]byte(vol.VolumeId))
	staging := filepath.Join(s.KubeletDir, "plugins/kubernetes.io/csi", s.DriverName, hex.EncodeToString(sum[:]), "globalmount")
	target := filepath.Join(s.KubeletDir, "pods", podUID, "volumes/kubernetes.io~csi", pvName, "mount")
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return err
	}
	if err := s.nodeCaps(ctx); err != nil {
		return err
	}
	if s.stage {
		if err := os.MkdirAll(staging, 0o750); err != nil {
			return err
		}
		if err := s.do("NodeStageVolume", func() error {
			_, err := s.Node.NodeStageVolume(kctx, &csi.NodeStageVolumeRequest{
				VolumeId: vol.VolumeId, PublishContext: publishContext, StagingTargetPath: staging,
				VolumeCapability: capability, VolumeContext: vol.VolumeContext,
			})
			return err
		}); err != nil {
			return err
		}
	}
	pub := &csi.NodePublishVolumeRequest{
		VolumeId: vol.VolumeId, PublishContext: publishContext, TargetPath: target,
		VolumeCapability: capability, VolumeContext: vol.VolumeContext,
	}
	if s.stage {
		pub.StagingTargetPath = staging
	}
	if err := s.do("NodePublishVolume", func() error { _, err := s.Node.NodePublishVolume(kctx, pub); return err }); err != nil {
		return err
	}
	if s.stats {
		if err := s.do("NodeGetVolumeStats", func() error {
			_, err := s.Node.NodeGetVolumeStats(kctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol.VolumeId, VolumePath: target})
			return err
		}); err != nil {
			return err
		}
	}
	if err := s.do("NodeUnpublishVolume", func() error {
		_, err := s.Node.NodeUnpublishVolume(kctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.VolumeId, TargetPath: target})
		return err
	}); err != nil {
		return err
	}
	os.RemoveAll(filepath.Join(s.KubeletDir, "pods", podUID)) // the kubelet removes the pod's dirs
	if err := s.nodeCaps(ctx); err != nil {
		return err
	}
	if s.stage {
		if err := s.do("NodeUnstageVolume", func() error {
			_, err := s.Node.NodeUnstageVolume(kctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.VolumeId, StagingTargetPath: staging})
			return err
		}); err != nil {
			return err
		}
		os.RemoveAll(filepath.Dir(staging))
	}
	if s.publish {
		if err := s.do("ControllerUnpublishVolume", func() error {
			_, err := s.Controller.ControllerUnpublishVolume(actx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol.VolumeId, NodeId: s.NodeID})
			return err
		}); err != nil {
			return err
		}
	}
	return s.do("DeleteVolume", func() error {
		_, err := s.Controller.DeleteVolume(pctx, &csi.DeleteVolumeRequest{VolumeId: vol.VolumeId})
		return err
	})
}

// String describes what Discover found.
func (s *Storage) String() string {
	return fmt.Sprintf("driver %s on node %s (publish=%v stage=%v stats=%v)", s.DriverName, s.NodeID, s.publish, s.stage, s.stats)
}
