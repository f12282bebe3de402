// Package images is cri-fake's ImageService: an offline catalog stands in for the registries
// (PullImage resolves references against it and takes the image's pull latency), and a store
// keeps the pulled images with every name they were pulled under.
package images

import (
	"slices"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Options configure the image service.
type Options struct {
	// Catalog is what PullImage can fetch; nil means the built-in catalog.
	Catalog *Catalog
	// FSPath is the mount point reported by ImageFsInfo (cri-fake's root directory).
	FSPath string
	// OnChange is called after every change to the pulled images (state persistence).
	OnChange func()
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Service implements runtime.v1 ImageService.
type Service struct {
	runtimeapi.UnimplementedImageServiceServer

	catalog  *Catalog
	store    *Store
	fsPath   string
	onChange func()
	now      func() time.Time

	mu    sync.Mutex
	pulls []PullRecord
}

// PullRecord is what a pull carried: the reference and who authenticated, never the secret.
type PullRecord struct {
	Time          time.Time
	Image         string
	Username      string
	ServerAddress string
	// Auth is true when the pull carried credentials of any kind.
	Auth bool
}

// NewService returns an image service with no images pulled.
func NewService(opts Options) *Service {
	s := &Service{catalog: opts.Catalog, store: NewStore(), fsPath: opts.FSPath, onChange: opts.OnChange, now: opts.Now}
	if s.catalog == nil {
		s.catalog = DefaultCatalog()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.onChange == nil {
		s.onChange = func() {}
	}
	return s
}

// Store gives the runtime service access to the pulled images (CreateContainer resolves its
// image here, as containerd resolves it in its local image store).
func (s *Service) Store() *Store { return s.store }

// Catalog returns the catalog PullImage resolves against.
func (s *Service) Catalog() *Catalog { return s.catalog }

// Pulls returns what each pull so far carried (credentials reduced to who and where).
func (s *Service) Pulls() []PullRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]PullRecord(nil), s.pulls...)
}

// toCRI renders a stored image the way containerd's toCRIImage does.
func toCRI(img Image) *runtimeapi.Image {
	out := &runtimeapi.Image{
		Id:          img.ID,
		RepoTags:    slices.Clone(img.RepoTags), // the caller may change its response
		RepoDigests: slices.Clone(img.RepoDigests),
		Size:        img.Config.Size,
		Spec:        &runtimeapi.ImageSpec{Image: img.ID},
		Pinned:      img.Pinned,
	}
	if uid, ok := img.Config.UID(); ok {
		out.Uid = &runtimeapi.Int64Value{Value: uid}
	} else {
		out.Username = img.Config.Username()
	}
	return out
}
