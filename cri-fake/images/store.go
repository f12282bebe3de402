package images

import (
	"slices"
	"sort"
	"strings"
	"sync"
)

// Image is a pulled image: the catalog entry plus the names it was pulled under. RepoTags and
// RepoDigests accumulate over pulls, as containerd's image store does: pulling registry.k8s.io/pause:3.9
// and then k8s.gcr.io/pause:3.9 leaves one image with two tags.
type Image struct {
	ID          string
	RepoTags    []string
	RepoDigests []string
	Pinned      bool
	Config      *CatalogImage
}

// Store holds the pulled images, indexed by ID and by every tag and repo@digest reference.
type Store struct {
	mu    sync.RWMutex
	byID  map[string]*Image
	byRef map[string]string // "repo:tag" or "repo@digest" -> ID
}

// NewStore returns an empty image store.
func NewStore() *Store {
	return &Store{byID: map[string]*Image{}, byRef: map[string]string{}}
}

// Add records that img was pulled under ref: the tag (if any) and repo@digest become references
// to it. It returns a copy of the stored image.
func (s *Store) Add(cfg *CatalogImage, ref Reference) Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	img := s.byID[cfg.ID]
	if img == nil {
		img = &Image{ID: cfg.ID, Config: cfg}
		s.byID[cfg.ID] = img
	}
	if t := ref.Tagged(); t != "" {
		// A tag moves to the newly pulled image, as a registry tag does.
		if old, ok := s.byRef[t]; ok && old != cfg.ID {
			s.dropRef(old, t)
		}
		s.byRef[t] = cfg.ID
		img.RepoTags = insertSorted(img.RepoTags, t)
	}
	d := ref.Digested(cfg.Digest)
	s.byRef[d] = cfg.ID
	img.RepoDigests = insertSorted(img.RepoDigests, d)
	return img.copy()
}

// Restore puts back an image loaded from the state directory.
func (s *Store) Restore(img Image) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := img
	c.RepoTags, c.RepoDigests = slices.Clone(img.RepoTags), slices.Clone(img.RepoDigests)
	s.byID[img.ID] = &c
	for _, r := range img.RepoTags {
		s.byRef[r] = img.ID
	}
	for _, r := range img.RepoDigests {
		s.byRef[r] = img.ID
	}
}

func (s *Store) dropRef(id, ref string) {
	img := s.byID[id]
	if img == nil {
		return
	}
	img.RepoTags = slices.DeleteFunc(slices.Clone(img.RepoTags), func(t string) bool { return t == ref })
	if len(img.RepoTags) == 0 && len(img.RepoDigests) == 0 {
		delete(s.byID, id)
	}
}

// insertSorted returns list with v inserted in order, in a new array (see copy).
func insertSorted(list []string, v string) []string {
	i := sort.SearchStrings(list, v)
	if i < len(list) && list[i] == v {
		return list
	}
	return slices.Insert(slices.Clip(list), i, v)
}

// copy returns the image by value. Its RepoTags and RepoDigests are shared with the store, which
// never changes them in place (a pull or a removal puts new slices in), so what Get and List
// return stays as it was, and the kubelet's every CreateContainer, StartContainer and
// ImageStatus costs no copy of them.
func (img *Image) copy() Image { return *img }

// Get finds an image by ID ("sha256:..."), by a unique ID prefix of at least 12 hex digits, or
// by a tag or digest reference.
func (s *Store) Get(nameOrID string) (Image, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if img, ok := s.byID[nameOrID]; ok {
		return img.copy(), true
	}
	if img, ok := s.byID["sha256:"+nameOrID]; ok {
		return img.copy(), true
	}
	if id, ok := s.byRef[nameOrID]; ok {
		// Already a normalised reference (a key is what ParseReference makes of it, and
		// normalising is idempotent): the kubelet's and critest's usual form, found without
		// parsing.
		return s.byID[id].copy(), true
	}
	if ref, err := ParseReference(nameOrID); err == nil {
		key := ref.Tagged()
		if ref.Digest != "" {
			key = ref.Digested(ref.Digest)
		}
		if id, ok := s.byRef[key]; ok {
			return s.byID[id].copy(), true
		}
	}
	if p := strings.TrimPrefix(nameOrID, "sha256:"); len(p) >= 12 && isHex(p) {
		var found *Image
		for id, img := range s.byID {
			if strings.HasPrefix(id, "sha256:"+p) {
				if found != nil {
					return Image{}, false // ambiguous
				}
				found = img
			}
		}
		if found != nil {
			return found.copy(), true
		}
	}
	return Image{}, false
}

func isHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Remove deletes the image with that ID and every reference to it.
func (s *Store) Remove(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, ok := s.byID[id]
	if !ok {
		return false
	}
	for _, r := range img.RepoTags {
		delete(s.byRef, r)
	}
	for _, r := range img.RepoDigests {
		delete(s.byRef, r)
	}
	delete(s.byID, id)
	return true
}

// List returns copies of every image, ordered by ID.
func (s *Store) List() []Image {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Image, 0, len(s.byID))
	for _, img := range s.byID {
		out = append(out, img.copy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
