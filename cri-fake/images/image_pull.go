package images

import (
	"context"

	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PullImage "downloads" an image from the catalog: the reference is normalised
// (nginx -> docker.io/library/nginx:latest), the image's pull latency is waited out under the
// caller's deadline, and the image is stored under the pulled tag and repo@digest. The response's
// image_ref is the image ID, the identifier CRI 1.36 requires to match Image.id.
func (s *Service) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	name := req.GetImage().GetImage()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "image.image is empty: give the image reference to pull")
	}
	s.recordAuth(name, req.GetAuth())
	ref, err := ParseReference(name)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "failed to pull image %q: %v", name, err)
	}
	cfg, ok := s.catalog.Lookup(ref)
	// Talking to the registry takes time whether or not the image exists.
	latency := time.Duration(0)
	if ok {
		latency = cfg.PullDuration()
	} else {
		latency = DefaultPullLatency
	}
	if err := wait(ctx, latency); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	if !ok {
		// containerd's message for a registry miss (errdefs.ErrNotFound -> NotFound).
		return nil, status.Errorf(codes.NotFound,
			"failed to pull and unpack image %q: failed to resolve reference %q: %s: not found (the image is not in cri-fake's catalog; add it with --image-catalog)",
			ref.String(), ref.String(), ref.String())
	}
	if ref.Digest != "" && ref.Tag != "" {
		// repo:tag@digest pulls by digest; containerd records only the digest then.
		ref.Tag = ""
	}
	img := s.store.Add(cfg, ref)
	s.onChange()
	return &runtimeapi.PullImageResponse{ImageRef: img.ID}, nil
}

func (s *Service) recordAuth(image string, a *runtimeapi.AuthConfig) {
	rec := PullRecord{Time: s.now(), Image: image}
	if a != nil {
		rec.Username, rec.ServerAddress = a.GetUsername(), a.GetServerAddress()
		rec.Auth = a.GetUsername() != "" || a.GetPassword() != "" || a.GetAuth() != "" ||
			a.GetIdentityToken() != "" || a.GetRegistryToken() != ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pulls) >= 1024 {
		s.pulls = s.pulls[1:]
	}
	s.pulls = append(s.pulls, rec)
}

func wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
