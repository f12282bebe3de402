package images

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RemoveImage removes an image and every tag and digest it has, whichever name it is given by.
// Removing an absent image succeeds (CRI: "This call is idempotent, and must not return an error
// if the image has already been removed").
func (s *Service) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	name := req.GetImage().GetImage()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "image.image is empty: give an image ID, tag or digest")
	}
	if img, ok := s.store.Get(name); ok && s.store.Remove(img.ID) {
		s.onChange()
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}
