package images

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageStatus looks an image up by ID, tag or digest. An absent image is not an error: the
// response carries no image, which is how the kubelet learns it must pull (CRI contract).
func (s *Service) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	name := req.GetImage().GetImage()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "image.image is empty: give an image ID, tag or digest")
	}
	img, ok := s.store.Get(name)
	if !ok {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	resp := &runtimeapi.ImageStatusResponse{Image: toCRI(img)}
	if req.GetVerbose() {
		// containerd puts the image config under "info"; crictl inspecti prints it.
		info := map[string]any{
			"imageSpec": map[string]any{
				"config": map[string]any{
					"User": img.Config.User, "Entrypoint": img.Config.Entrypoint, "Cmd": img.Config.Cmd,
					"Env": img.Config.Env, "WorkingDir": img.Config.WorkingDir, "StopSignal": img.Config.StopSignal,
				},
			},
			"digest":      img.Config.Digest,
			"pullLatency": img.Config.PullDuration().String(),
		}
		b, _ := json.Marshal(info)
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}
