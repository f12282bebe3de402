package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"
)

// CatalogImage is one image the offline "registry" knows: the repositories it is published
// under, its tags, and the configuration a runtime reads from the image (user, entrypoint ...).
// The same image under two repositories (registry.k8s.io/pause and k8s.gcr.io/pause) is one
// entry, so pulling either yields the same image ID, as with a real registry.
type CatalogImage struct {
	// Repositories are fully qualified or short names; they are normalised on load.
	Repositories []string `json:"repositories"`
	// Tags the image is published under in every repository.
	Tags []string `json:"tags,omitempty"`
	// Digest is the manifest digest (sha256:...). Derived from the first repository and tag when empty.
	Digest string `json:"digest,omitempty"`
	// ID is the image (config) ID. Derived from the digest when empty.
	ID string `json:"id,omitempty"`
	// Size in bytes (the unpacked size a runtime reports). 0 means a default of 5 MiB.
	Size uint64 `json:"size,omitempty"`
	// User as in the image config: "1002", "www-data", "1003:1003", "www-data:www-data".
	User       string   `json:"user,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	// StopSignal as in the image config ("SIGTERM" when empty).
	StopSignal string `json:"stopSignal,omitempty"`
	// PullLatency is how long a pull takes ("150ms"); the catalog default applies when empty.
	PullLatency string `json:"pullLatency,omitempty"`
	// Behavior is read by the process simulation (what a container of this image does); the
	// image service keeps it opaque.
	Behavior json.RawMessage `json:"behavior,omitempty"`
	// Program, when set, makes containers of this image real processes: a binary of cri-fake's
	// program directory run by the real runc (cri-fake/oci), instead of the simulation.
	Program *Program `json:"program,omitempty"`

	refs        []Reference
	pullLatency time.Duration
}

// UID and Username as ImageStatus reports them: a numeric user gives a UID, a name a username
// (containerd's getUserFromImage; the group part is ignored).
func (c *CatalogImage) UID() (int64, bool) {
	u, _, _ := strings.Cut(c.User, ":")
	if u == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(u, 10, 64)
	return n, err == nil
}

// Username is the user name of the image config, when it is not numeric.
func (c *CatalogImage) Username() string {
	u, _, _ := strings.Cut(c.User, ":")
	if _, err := strconv.ParseInt(u, 10, 64); err == nil {
		return ""
	}
	return u
}

// PullDuration is how long pulling the image takes.
func (c *CatalogImage) PullDuration() time.Duration { return c.pullLatency }

// Catalog is the set of images PullImage can fetch.
type Catalog struct {
	images []*CatalogImage
	// byRepoTag maps "repo:tag" and byRepoDigest "repo@digest" to an image.
	byRepoTag    map[string]*CatalogImage
	byRepoDigest map[string]*CatalogImage
}

// CatalogFile is the YAML format of --image-catalog (see cri-fake/README.md).
type CatalogFile struct {
	// PullLatency is the default pull duration for images that give none ("20ms" when empty).
	PullLatency string `json:"pullLatency,omitempty"`
	// Builtin false drops the built-in images, leaving only this file's.
	Builtin *bool          `json:"builtin,omitempty"`
	Images  []CatalogImage `json:"images"`
}

// DefaultPullLatency is the pull duration when neither the image nor the catalog gives one. It
// is short, but long enough that a pull with an already expired 1 ms deadline fails with
// DeadlineExceeded as it does against a real registry (critest's "should timeout" spec).
const DefaultPullLatency = 20 * time.Millisecond

// NewCatalog builds a catalog from entries, normalising their references and deriving missing
// digests and IDs. Later entries override earlier ones for the same repo:tag.
func NewCatalog(defaultLatency time.Duration, entries ...CatalogImage) (*Catalog, error) {
	c := &Catalog{byRepoTag: map[string]*CatalogImage{}, byRepoDigest: map[string]*CatalogImage{}}
	for i := range entries {
		if err := c.add(entries[i], defaultLatency); err != nil {
			return nil, fmt.Errorf("image %d (%s): %w", i, strings.Join(entries[i].Repositories, ","), err)
		}
	}
	return c, nil
}

func (c *Catalog) add(e CatalogImage, defaultLatency time.Duration) error {
	if len(e.Repositories) == 0 {
		return fmt.Errorf("repositories: at least one is required")
	}
	img := e
	img.refs = nil
	for _, r := range e.Repositories {
		if strings.Contains(r, "@") || strings.Contains(r[strings.LastIndex(r, "/")+1:], ":") {
			return fmt.Errorf("repository %q: give the name only; tags go in tags, the digest in digest", r)
		}
		ref, err := ParseReference(r)
		if err != nil {
			return err
		}
		img.refs = append(img.refs, Reference{Repository: ref.Repository})
	}
	if img.Program != nil {
		if err := img.Program.validate(); err != nil {
			return fmt.Errorf("program: %w", err)
		}
	}
	for _, t := range img.Tags {
		if !tagRe.MatchString(t) {
			return fmt.Errorf("tag %q is not a valid tag", t)
		}
	}
	if img.Digest == "" {
		tag := "latest"
		if len(img.Tags) > 0 {
			tag = img.Tags[0]
		}
		img.Digest = derive("manifest", img.refs[0].Repository+":"+tag)
	} else if !digestRe.MatchString(img.Digest) {
		return fmt.Errorf("digest %q: want sha256:<64 hex digits>", img.Digest)
	}
	if img.ID == "" {
		img.ID = derive("config", img.Digest)
	} else if !digestRe.MatchString(img.ID) {
		return fmt.Errorf("id %q: want sha256:<64 hex digits>", img.ID)
	}
	if img.Size == 0 {
		img.Size = 5 << 20
	}
	img.pullLatency = defaultLatency
	if img.PullLatency != "" {
		d, err := time.ParseDuration(img.PullLatency)
		if err != nil {
			return fmt.Errorf("pullLatency: %w", err)
		}
		img.pullLatency = d
	}
	p := &img
	c.images = append(c.images, p)
	for _, r := range img.refs {
		for _, t := range img.Tags {
			c.byRepoTag[r.Repository+":"+t] = p
		}
		c.byRepoDigest[r.Repository+"@"+img.Digest] = p
	}
	return nil
}

// derive makes a stable sha256 digest from a purpose and a name, so a catalog entry without an
// explicit digest gets the same one in every run and on every machine.
func derive(purpose, name string) string {
	sum := sha256.Sum256([]byte("plugsim/" + purpose + "/" + name))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Lookup finds the image a normalised reference names. A reference with both tag and digest is
// resolved by digest, as registries do.
func (c *Catalog) Lookup(ref Reference) (*CatalogImage, bool) {
	if ref.Digest != "" {
		img, ok := c.byRepoDigest[ref.Repository+"@"+ref.Digest]
		return img, ok
	}
	img, ok := c.byRepoTag[ref.Repository+":"+ref.Tag]
	return img, ok
}

// Images returns the catalog entries.
func (c *Catalog) Images() []*CatalogImage { return slices.Clone(c.images) }

// LoadCatalog reads a YAML (or JSON) catalog file and merges it over the built-in images, unless
// the file says builtin: false.
func LoadCatalog(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read image catalog: %w", err)
	}
	return ParseCatalog(data, path)
}

// ParseCatalog parses catalog YAML; name is used in error messages.
func ParseCatalog(data []byte, name string) (*Catalog, error) {
	var f CatalogFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	latency := DefaultPullLatency
	if f.PullLatency != "" {
		d, err := time.ParseDuration(f.PullLatency)
		if err != nil {
			return nil, fmt.Errorf("%s: pullLatency: %w", name, err)
		}
		latency = d
	}
	var entries []CatalogImage
	if f.Builtin == nil || *f.Builtin {
		entries = append(entries, Builtin()...)
	}
	entries = append(entries, f.Images...)
	c, err := NewCatalog(latency, entries...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// DefaultCatalog is the built-in catalog. It is built once and shared (a Catalog does not change
// after NewCatalog; its images are not to be modified): deriving its digests took 2 ms, a third
// of a cri-fake server's start (BenchmarkStartUp in cri-fake/server).
func DefaultCatalog() *Catalog { return builtinCatalog() }

var builtinCatalog = sync.OnceValue(func() *Catalog {
	c, err := NewCatalog(DefaultPullLatency, Builtin()...)
	if err != nil {
		panic("built-in image catalog: " + err.Error()) // a defect in builtin.go, caught by its test
	}
	return c
})
