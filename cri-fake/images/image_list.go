package images

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListImages lists the pulled images; a filter image narrows the list to that one image (by ID,
// tag or digest), as containerd does.
func (s *Service) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	return &runtimeapi.ListImagesResponse{Images: s.list(req.GetFilter())}, nil
}

// StreamImages sends the ListImages result as one message (KEP-5825: the same data as the List
// twin; clients fall back to ListImages on Unimplemented, so answering is optional but cheap).
func (s *Service) StreamImages(req *runtimeapi.StreamImagesRequest, stream runtimeapi.ImageService_StreamImagesServer) error {
	return stream.Send(&runtimeapi.StreamImagesResponse{Images: s.list(req.GetFilter())})
}

func (s *Service) list(f *runtimeapi.ImageFilter) []*runtimeapi.Image {
	if name := f.GetImage().GetImage(); name != "" {
		img, ok := s.store.Get(name)
		if !ok {
			return nil
		}
		return []*runtimeapi.Image{toCRI(img)}
	}
	all := s.store.List()
	out := make([]*runtimeapi.Image, len(all))
	for i, img := range all {
		out[i] = toCRI(img)
	}
	return out
}
