package images

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func newTestService(t testing.TB, latency time.Duration) *Service {
	t.Helper()
	cat, err := NewCatalog(latency, Builtin()...)
	if err != nil {
		t.Fatal(err)
	}
	return NewService(Options{Catalog: cat, FSPath: t.TempDir()})
}

func pull(t testing.TB, s *Service, ref string) string {
	t.Helper()
	resp, err := s.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return resp.ImageRef
}

func status_(t testing.TB, s *Service, ref string) *runtimeapi.Image {
	t.Helper()
	resp, err := s.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Image
}

func TestPullImage(t *testing.T) {
	s := newTestService(t, 0)
	for _, tc := range []struct {
		name, ref string
		want      codes.Code
	}{
		{"short name", "busybox", codes.OK},
		{"tag", "registry.k8s.io/pause:3.9", codes.OK},
		{"digest", "gcr.io/k8s-staging-cri-tools/test-image-digest@sha256:9700f9a2f5bf2c45f2f605a0bd3bce7cf37420ec9d3ed50ac2758413308766bf", codes.OK},
		{"unknown image", "example.com/nothing:here", codes.NotFound},
		{"unknown tag", "busybox:0.0.0", codes.NotFound},
		// The images the conformance specs pull to see a pull fail (the kubelet reports
		// ErrImagePull for NotFound, then ImagePullBackOff): apps/daemon_set.go and
		// apps/deployment.go.
		{"conformance: foo:non-existent", "foo:non-existent", codes.NotFound},
		{"conformance: webserver:404", "webserver:404", codes.NotFound},
		{"conformance: gb-redisslave:nonexistent", "gcr.io/google_samples/gb-redisslave:nonexistent", codes.NotFound},
		{"conformance: agnhost:2.66.1", "registry.k8s.io/e2e-test-images/agnhost:2.66.1", codes.OK},
		{"invalid", "UPPER", codes.InvalidArgument},
		{"empty", "", codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: tc.ref}})
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code %v (%v), want %v", got, err, tc.want)
			}
			if err == nil && !IsID(resp.ImageRef) {
				t.Fatalf("image_ref %q is not an image ID", resp.ImageRef)
			}
		})
	}
}

func TestPullImageHonoursDeadline(t *testing.T) {
	s := newTestService(t, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	if time.Since(start) > 500*time.Millisecond {
		t.Fatal("the pull did not stop at the deadline")
	}
	if status_(t, s, "busybox") != nil {
		t.Fatal("a timed-out pull left the image behind")
	}
}

func TestImageStatusAllReferences(t *testing.T) {
	s := newTestService(t, 0)
	id := pull(t, s, "busybox")
	img := status_(t, s, "busybox")
	if img.Id != id || img.Size == 0 || len(img.RepoTags) != 1 || img.RepoTags[0] != "docker.io/library/busybox:latest" || len(img.RepoDigests) != 1 {
		t.Fatalf("status %v", img)
	}
	for _, ref := range []string{id, id[len("sha256:"):], id[:19], "docker.io/library/busybox:latest", "docker.io/library/busybox", img.RepoDigests[0]} {
		if got := status_(t, s, ref); !proto.Equal(got, img) {
			t.Errorf("ImageStatus(%s) = %v, want %v", ref, got, img)
		}
	}
	if status_(t, s, "nginx") != nil {
		t.Error("an image never pulled has a status")
	}
	resp, err := s.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: id}, Verbose: true})
	if err != nil || resp.Info["info"] == "" {
		t.Fatalf("verbose: %v %v", resp, err)
	}
}

func TestSameImageTwoRegistries(t *testing.T) {
	s := newTestService(t, 0)
	a := pull(t, s, "registry.k8s.io/pause:3.9")
	b := pull(t, s, "k8s.gcr.io/pause:3.9")
	if a != b {
		t.Fatalf("two IDs for one image: %s %s", a, b)
	}
	img := status_(t, s, a)
	if len(img.RepoTags) != 2 || len(img.RepoDigests) != 2 {
		t.Fatalf("tags %v digests %v", img.RepoTags, img.RepoDigests)
	}
	if _, err := s.RemoveImage(context.Background(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "k8s.gcr.io/pause:3.9"}}); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"registry.k8s.io/pause:3.9", "k8s.gcr.io/pause:3.9", a} {
		if status_(t, s, ref) != nil {
			t.Errorf("%s still there after removing the image by another name", ref)
		}
	}
}

func TestPullByDigestRecordsNoTag(t *testing.T) {
	s := newTestService(t, 0)
	const ref = "gcr.io/k8s-staging-cri-tools/test-image-digest@sha256:9700f9a2f5bf2c45f2f605a0bd3bce7cf37420ec9d3ed50ac2758413308766bf"
	pull(t, s, ref)
	img := status_(t, s, ref)
	if len(img.RepoTags) != 0 || len(img.RepoDigests) != 1 || img.RepoDigests[0] != ref {
		t.Fatalf("tags %v digests %v", img.RepoTags, img.RepoDigests)
	}
}

func TestListImages(t *testing.T) {
	s := newTestService(t, 0)
	for _, r := range []string{"gcr.io/k8s-staging-cri-tools/test-image-tags:1", "gcr.io/k8s-staging-cri-tools/test-image-tags:2", "busybox"} {
		pull(t, s, r)
	}
	all, _ := s.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	if len(all.Images) != 2 {
		t.Fatalf("%d images, want 2 (two tags of one image + busybox)", len(all.Images))
	}
	one, _ := s.ListImages(context.Background(), &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: "busybox"}}})
	if len(one.Images) != 1 || one.Images[0].RepoTags[0] != "docker.io/library/busybox:latest" {
		t.Fatalf("filtered: %v", one.Images)
	}
	none, _ := s.ListImages(context.Background(), &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: "nginx"}}})
	if len(none.Images) != 0 {
		t.Fatalf("filter on an absent image: %v", none.Images)
	}
}

func TestRemoveImageIdempotentAndConcurrent(t *testing.T) {
	s := newTestService(t, 0)
	id := pull(t, s, "busybox")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.RemoveImage(context.Background(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: id}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if status_(t, s, id) != nil {
		t.Fatal("image survived removal")
	}
	_, err := s.RemoveImage(context.Background(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty image: %v", err)
	}
}

func TestImageFsInfo(t *testing.T) {
	s := newTestService(t, 0)
	empty, _ := s.ImageFsInfo(context.Background(), &runtimeapi.ImageFsInfoRequest{})
	pull(t, s, "busybox")
	full, _ := s.ImageFsInfo(context.Background(), &runtimeapi.ImageFsInfoRequest{})
	e, f := empty.ImageFilesystems[0], full.ImageFilesystems[0]
	if e.UsedBytes == nil || f.UsedBytes.Value <= e.UsedBytes.Value || f.Timestamp == 0 || f.FsId.Mountpoint == "" || f.InodesUsed.Value == 0 {
		t.Fatalf("fs info %v -> %v", e, f)
	}
}

func TestPullRecordsAuthWithoutSecrets(t *testing.T) {
	s := newTestService(t, 0)
	_, err := s.PullImage(context.Background(), &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: "busybox"},
		Auth:  &runtimeapi.AuthConfig{Username: "alice", Password: "s3cret", ServerAddress: "docker.io"},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := s.Pulls()
	if len(p) != 1 || p[0].Username != "alice" || !p[0].Auth || p[0].ServerAddress != "docker.io" {
		t.Fatalf("pull record %+v", p)
	}
}
