package images

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageFsInfo reports the image file system as the sum of the pulled images' sizes. The kubelet
// calls it when it connects and for image garbage collection; it dereferences used_bytes, so the
// field is always set, and fs_id points at cri-fake's root directory, a real host path.
func (s *Service) ImageFsInfo(ctx context.Context, req *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	var used, inodes uint64
	for _, img := range s.store.List() {
		used += img.Config.Size
		// Roughly one inode per 16 KiB of image content, with a floor for tiny images.
		inodes += img.Config.Size/16384 + 16
	}
	fs := &runtimeapi.FilesystemUsage{
		Timestamp:  s.now().UnixNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: s.fsPath},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: inodes},
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{fs}}, nil
}
