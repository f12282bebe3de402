package runtime

import (
	"context"
	"encoding/json"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
	"github.com/plugsim/plugsim/cri-fake/store"
)

// ContainerStatus reports a container with everything the kubelet and cri-client check: id,
// metadata, created_at, image and image_ref (cri-client rejects a status without them), the
// state with its timestamps, exit code and reason, labels and annotations verbatim (the kubelet
// keeps its container hash there), the mounts, the absolute log path, resources and image_id.
func (s *Service) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	c, err := s.containers.Get(req.GetContainerId())
	if err != nil {
		return nil, storeError(err, "an error occurred when try to find container "+req.GetContainerId()+": container")
	}
	resp := &runtimeapi.ContainerStatusResponse{Status: s.containerStatus(c)}
	if req.GetVerbose() {
		info := map[string]any{
			"sandboxID": c.SandboxID,
			"pid":       0,
			"config":    c.Config.Unpack(),
			"logPath":   c.LogPath,
			"imageID":   c.ImageID,
			"name":      c.Name,
		}
		b, _ := json.Marshal(info)
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}

func (s *Service) containerStatus(c *store.Container) *runtimeapi.ContainerStatus {
	st := c.Status()
	img := &runtimeapi.ImageSpec{
		Image:              c.ImageName,
		Annotations:        c.Config.GetImage().GetAnnotations(),
		UserSpecifiedImage: c.Config.GetImage().GetUserSpecifiedImage(),
		RuntimeHandler:     c.Config.GetImage().GetRuntimeHandler(),
	}
	out := &runtimeapi.ContainerStatus{
		Id:          c.ID,
		Metadata:    c.Config.GetMetadata(),
		State:       st.State,
		CreatedAt:   c.CreatedAt,
		StartedAt:   st.StartedAt,
		FinishedAt:  st.FinishedAt,
		ExitCode:    st.ExitCode,
		Image:       img,
		ImageRef:    c.ImageRef,
		ImageId:     c.ImageID,
		Reason:      st.Reason,
		Message:     st.Message,
		Labels:      c.Config.GetLabels(),
		Annotations: c.Config.GetAnnotations(),
		Mounts:      s.statusMounts(c.Config.Unpack()),
		LogPath:     c.LogPath,
		StopSignal:  c.StopSignal,
		User:        s.containerUser(c),
	}
	if st.Resources != nil {
		out.Resources = &runtimeapi.ContainerResources{Linux: st.Resources}
	}
	return out
}

// containerUser is the identity the process runs as: the security context's run_as_user/group,
// else the image's numeric user, else root. It is worked out at CreateContainer; a container
// restored from a state directory has it worked out again here.
func (s *Service) containerUser(c *store.Container) *runtimeapi.ContainerUser {
	if c.User != nil {
		return c.User
	}
	var ic *images.CatalogImage
	if img, ok := s.images.Store().Get(c.ImageID); ok {
		ic = img.Config
	}
	return containerUser(c.Config.Unpack(), ic)
}

func containerUser(cfg *runtimeapi.ContainerConfig, ic *images.CatalogImage) *runtimeapi.ContainerUser {
	sc := cfg.GetLinux().GetSecurityContext()
	var uid, gid int64
	if ic != nil {
		if u, ok := ic.UID(); ok {
			uid = u
		}
	}
	if sc.GetRunAsUser() != nil {
		uid = sc.GetRunAsUser().GetValue()
	}
	if sc.GetRunAsGroup() != nil {
		gid = sc.GetRunAsGroup().GetValue()
	}
	return &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{
		Uid: uid, Gid: gid, SupplementalGroups: append([]int64{gid}, sc.GetSupplementalGroups()...),
	}}
}
