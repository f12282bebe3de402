package images

import (
	"fmt"
	"slices"

	"github.com/plugsim/plugsim/harness/fixtures"
)

// Preload puts the fixtures' images in the store as if they had been pulled, without the pull
// latency: a catalog image under the reference given (its tag and repo@digest, as PullImage
// records them), an image the catalog does not have as the fixture defines it. Nothing is added
// unless every entry is good. The undo it returns puts the images back as they were, for a
// caller whose later steps fail.
func (s *Service) Preload(f *fixtures.CRI) (undo func(), _ error) {
	p := imagePlan{store: s.store, named: map[string]int{}, owner: map[string]string{}, byID: map[string]*plannedImage{}}
	for i := range f.Images {
		fx := &f.Images[i]
		bad := func(format string, args ...any) error { return f.Errorf("images", i, fx.Name(), format, args...) }
		var err error
		if fx.Image != "" {
			err = p.catalogImage(s.catalog, i, fx)
		} else {
			err = p.definedImage(i, fx)
		}
		if err != nil {
			return nil, bad("%v", err)
		}
	}
	var before []*Image // nil where the image is new
	for _, pi := range p.order {
		var prev *Image
		if have, ok := s.store.Get(pi.img.ID); ok && have.ID == pi.img.ID {
			prev = &have
		}
		before = append(before, prev)
		s.store.Restore(pi.img)
	}
	if len(p.order) > 0 {
		s.onChange()
	}
	return func() {
		for i, pi := range p.order {
			s.store.Remove(pi.img.ID)
			if before[i] != nil {
				s.store.Restore(*before[i])
			}
		}
		if len(p.order) > 0 {
			s.onChange()
		}
	}, nil
}

// imagePlan collects the images of a preload before any is stored.
type imagePlan struct {
	store *Store
	order []*plannedImage
	byID  map[string]*plannedImage
	// named maps each reference an entry names (a catalog entry's tag or digest, a defined
	// image's every repoTag and repoDigest) to the entry: naming one twice is a mistake.
	named map[string]int
	// owner maps every reference the planned images will carry to the image's ID.
	owner map[string]string
}

type plannedImage struct {
	img     Image
	entry   int  // the entry that named it first
	defined bool // defined by the fixture, not taken from the catalog
}

func (p *imagePlan) name(i int, ref string) error {
	if j, ok := p.named[ref]; ok {
		return fmt.Errorf("%s is also images[%d]'s", ref, j)
	}
	p.named[ref] = i
	return nil
}

// image returns the planned image with that config's ID, making it when new.
func (p *imagePlan) image(i int, cfg *CatalogImage, defined bool) (*plannedImage, error) {
	if pi, ok := p.byID[cfg.ID]; ok {
		if defined || pi.defined {
			return nil, fmt.Errorf("id %s is also images[%d]'s", cfg.ID, pi.entry)
		}
		return pi, nil
	}
	pi := &plannedImage{img: Image{ID: cfg.ID, Config: cfg}, entry: i, defined: defined}
	if have, ok := p.store.Get(cfg.ID); ok && have.ID == cfg.ID {
		if defined {
			return nil, fmt.Errorf("id %s is an image cri-fake already holds", cfg.ID)
		}
		pi.img = have // a pulled image gets more names, as a second pull gives it
	}
	p.byID[cfg.ID] = pi
	p.order = append(p.order, pi)
	return pi, nil
}

// addRef gives a planned image a reference, unless another image has it.
func (p *imagePlan) addRef(pi *plannedImage, ref string, digest bool) error {
	if id, ok := p.owner[ref]; ok && id != pi.img.ID {
		return fmt.Errorf("%s would name both image %s and image %s", ref, id, pi.img.ID)
	}
	if have, ok := p.store.Get(ref); ok && have.ID != pi.img.ID {
		return fmt.Errorf("%s names image %s, which cri-fake already holds", ref, have.ID)
	}
	p.owner[ref] = pi.img.ID
	if digest {
		pi.img.RepoDigests = insertSorted(pi.img.RepoDigests, ref)
	} else {
		pi.img.RepoTags = insertSorted(pi.img.RepoTags, ref)
	}
	return nil
}

// catalogImage plans an entry that names a catalog image.
func (p *imagePlan) catalogImage(c *Catalog, i int, fx *fixtures.Image) error {
	if fx.ID != "" || len(fx.RepoTags) > 0 || len(fx.RepoDigests) > 0 || fx.Size != 0 || fx.User != "" || len(fx.Entrypoint) > 0 ||
		len(fx.Cmd) > 0 || len(fx.Env) > 0 || fx.WorkingDir != "" || fx.StopSignal != "" || len(fx.Behavior) > 0 {
		return fmt.Errorf("image names a catalog image, while id, repoTags, repoDigests, size and the config keys define one the catalog does not have: give one or the other")
	}
	ref, err := ParseReference(fx.Image)
	if err != nil {
		return err
	}
	cfg, ok := c.Lookup(ref)
	if !ok {
		return fmt.Errorf("%s is not in the image catalog (add it with --image-catalog, or define the image here with repoTags)", ref)
	}
	if ref.Digest != "" && ref.Tag != "" {
		ref.Tag = "" // repo:tag@digest pulls by digest, and only the digest is recorded
	}
	named := ref.Tagged()
	if named == "" {
		named = ref.Digested(cfg.Digest)
	}
	if err := p.name(i, named); err != nil {
		return err
	}
	pi, err := p.image(i, cfg, false)
	if err != nil {
		return err
	}
	if t := ref.Tagged(); t != "" {
		if err := p.addRef(pi, t, false); err != nil {
			return err
		}
	}
	if err := p.addRef(pi, ref.Digested(cfg.Digest), true); err != nil {
		return err
	}
	pi.img.Pinned = pi.img.Pinned || fx.Pinned
	return nil
}

// definedImage plans an entry that defines an image the catalog does not have.
func (p *imagePlan) definedImage(i int, fx *fixtures.Image) error {
	if len(fx.RepoTags)+len(fx.RepoDigests) == 0 {
		return fmt.Errorf("give image (a reference to a catalog image) or repoTags and repoDigests (an image the catalog does not have)")
	}
	var tags, digests []Reference
	for k, t := range fx.RepoTags {
		ref, err := ParseReference(t)
		if err != nil {
			return fmt.Errorf("repoTags[%d]: %v", k, err)
		}
		if ref.Digest != "" {
			return fmt.Errorf("repoTags[%d] %q has a digest; repo@digest references go under repoDigests", k, t)
		}
		if err := p.name(i, ref.Tagged()); err != nil {
			return fmt.Errorf("repoTags[%d]: %v", k, err)
		}
		tags = append(tags, ref)
	}
	for k, d := range fx.RepoDigests {
		ref, err := ParseReference(d)
		if err != nil {
			return fmt.Errorf("repoDigests[%d]: %v", k, err)
		}
		if ref.Digest == "" || ref.Tag != "" {
			return fmt.Errorf("repoDigests[%d] %q: want repo@sha256:<64 hex digits>, without a tag", k, d)
		}
		if err := p.name(i, ref.String()); err != nil {
			return fmt.Errorf("repoDigests[%d]: %v", k, err)
		}
		digests = append(digests, ref)
	}
	if fx.Size < 0 {
		return fmt.Errorf("size %d: must not be negative", fx.Size)
	}
	all := append(slices.Clone(tags), digests...)
	cfg := &CatalogImage{
		ID: fx.ID, Size: uint64(fx.Size), User: fx.User, Entrypoint: fx.Entrypoint, Cmd: fx.Cmd, Env: fx.Env,
		WorkingDir: fx.WorkingDir, StopSignal: fx.StopSignal, Behavior: fx.Behavior,
		// Derived apart from the catalog's derivation, so a defined image never gets the ID of
		// the catalog image of the same name.
		Digest: derive("fixture/manifest", all[0].String()),
	}
	if cfg.Size == 0 {
		cfg.Size = 5 << 20 // the catalog's default
	}
	if len(digests) > 0 {
		cfg.Digest = digests[0].Digest
	}
	if cfg.ID == "" {
		cfg.ID = derive("fixture/config", cfg.Digest)
	} else if !IsID(cfg.ID) {
		return fmt.Errorf("id %q: want sha256:<64 hex digits>", cfg.ID)
	}
	for _, r := range all {
		if !slices.Contains(cfg.Repositories, r.Repository) {
			cfg.Repositories = append(cfg.Repositories, r.Repository)
		}
	}
	pi, err := p.image(i, cfg, true)
	if err != nil {
		return err
	}
	for _, t := range tags {
		if err := p.addRef(pi, t.Tagged(), false); err != nil {
			return err
		}
	}
	for _, d := range digests {
		if err := p.addRef(pi, d.String(), true); err != nil {
			return err
		}
	}
	pi.img.Pinned = fx.Pinned
	return nil
}
