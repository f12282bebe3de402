package runtime

import (
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
)

// Image volumes (KEP-4639): a CRI mount naming an image (Mount.image) instead of a host path. The
// kubelet pulls the image first and names it by the reference PullImage gave; the container sees
// the image's content, read-only, at the mount's container path (its image_sub_path directory only
// when set). Nothing is unpacked: the simulated view reads the image's layer (cri-fake/process/vfs
// ImageVolume), the one every container of that image shares.

// checkImageVolumes refuses at CreateContainer what containerd refuses: an image volume that is not
// read-only (an image's snapshot is mounted read-only; critest "should reject Image Volume with
// Readonly set to false"), or whose image was not pulled.
func (s *Service) checkImageVolumes(cfg *runtimeapi.ContainerConfig) error {
	for _, m := range cfg.GetMounts() {
		if m.GetImage() == nil {
			continue
		}
		if !m.GetReadonly() {
			return status.Errorf(codes.InvalidArgument, "image volume mount at %q must be read-only", m.GetContainerPath())
		}
		if _, ok := s.images.Store().Get(m.GetImage().GetImage()); !ok {
			return status.Errorf(codes.NotFound, "failed to resolve image volume %q at %q: image not found (pull it first)", m.GetImage().GetImage(), m.GetContainerPath())
		}
	}
	return nil
}

// imageVolumes are the images a container's image volumes name, by the reference in the mount; a
// reference no longer in the store (removed since) is left out, and the launcher then fails the
// start for it.
func (s *Service) imageVolumes(cfg *runtimeapi.ContainerConfig) map[string]images.Image {
	var out map[string]images.Image
	for _, m := range cfg.GetMounts() {
		if m.GetImage() == nil {
			continue
		}
		ref := m.GetImage().GetImage()
		if img, ok := s.images.Store().Get(ref); ok {
			if out == nil {
				out = map[string]images.Image{}
			}
			out[ref] = img
		}
	}
	return out
}

// statusMounts are the container's mounts as ContainerStatus reports them: an image volume's image
// carries the image's reference (ImageSpec.image_ref, KEP-5365), the ID PullImage answered.
func (s *Service) statusMounts(cfg *runtimeapi.ContainerConfig) []*runtimeapi.Mount {
	mounts := cfg.GetMounts()
	var out []*runtimeapi.Mount // a copy: the config is shared
	for i, m := range mounts {
		if m.GetImage() == nil {
			continue
		}
		img, ok := s.images.Store().Get(m.GetImage().GetImage())
		if !ok {
			continue
		}
		if out == nil {
			out = slices.Clone(mounts)
		}
		c := proto.Clone(m).(*runtimeapi.Mount)
		c.Image.ImageRef = img.ID
		out[i] = c
	}
	if out == nil {
		return mounts
	}
	return out
}
