package images

import (
	"slices"
	"strings"
	"testing"

	"github.com/plugsim/plugsim/harness/fixtures"
)

const testDigest = "sha256:2222222222222222222222222222222222222222222222222222222222222222"

// busyboxDigest is the catalog's digest of docker.io/library/busybox:latest.
var busyboxDigest = func() string {
	r, _ := ParseReference("busybox")
	img, _ := DefaultCatalog().Lookup(r)
	return img.Digest
}()

// A preload stores what the same pulls would store, and an image the catalog lacks as defined.
func TestPreloadImages(t *testing.T) {
	s := newTestService(t, 0)
	pulled := newTestService(t, 0)
	for _, ref := range []string{"registry.k8s.io/pause:3.9", "k8s.gcr.io/pause:3.9", "busybox"} {
		pull(t, pulled, ref)
	}
	undo, err := s.Preload(&fixtures.CRI{Images: []fixtures.Image{
		{Image: "registry.k8s.io/pause:3.9", Pinned: true}, {Image: "k8s.gcr.io/pause:3.9"}, {Image: "busybox"},
		{RepoTags: []string{"app:1", "registry.example.com/app:1"}, RepoDigests: []string{"app@" + testDigest}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Store().List()); n != 3 {
		t.Fatalf("%d images, want three (pause under two names is one)", n)
	}
	for _, want := range pulled.Store().List() {
		got, ok := s.Store().Get(want.ID)
		if !ok || !slices.Equal(got.RepoTags, want.RepoTags) || !slices.Equal(got.RepoDigests, want.RepoDigests) {
			t.Errorf("preloaded %+v, pulled %+v", got, want)
		}
		if got.Pinned != strings.Contains(want.RepoTags[0], "pause") {
			t.Errorf("%s pinned=%v", want.ID, got.Pinned)
		}
	}
	app := status_(t, s, "docker.io/library/app:1")
	if app == nil || len(app.RepoTags) != 2 || app.RepoDigests[0] != "docker.io/library/app@"+testDigest || app.Size != 5<<20 || !IsID(app.Id) {
		t.Fatalf("defined image %v", app)
	}
	if status_(t, s, "registry.example.com/app:1").GetId() != app.Id {
		t.Error("the defined image is not found by its second tag")
	}

	// The derived ID is the same in every run.
	again := newTestService(t, 0)
	if _, err := again.Preload(&fixtures.CRI{Images: []fixtures.Image{{RepoTags: []string{"app:1", "registry.example.com/app:1"}, RepoDigests: []string{"app@" + testDigest}}}}); err != nil {
		t.Fatal(err)
	}
	if status_(t, again, "app:1").GetId() != app.Id {
		t.Error("derived ID differs between runs")
	}

	undo()
	if n := len(s.Store().List()); n != 0 {
		t.Fatalf("%d images left after the undo", n)
	}

	// An image pulled before gets the fixture's names; the undo takes only those away.
	id := pull(t, s, "busybox:1.37")
	undo, err = s.Preload(&fixtures.CRI{Images: []fixtures.Image{{Image: "busybox:latest", Pinned: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if img := status_(t, s, id); len(img.RepoTags) != 2 || !img.Pinned {
		t.Fatalf("pulled image after the preload: %v", img)
	}
	undo()
	if img := status_(t, s, id); len(img.RepoTags) != 1 || img.RepoTags[0] != "docker.io/library/busybox:1.37" || img.Pinned {
		t.Fatalf("pulled image after the undo: %v", img)
	}
	if status_(t, s, "busybox:latest") != nil {
		t.Fatal("the fixture's tag outlived the undo")
	}
}

func TestPreloadImagesRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		have   string // pulled before the preload
		images []fixtures.Image
		want   string
	}{
		{"not in the catalog", "", []fixtures.Image{{Image: "busybox@" + testDigest}},
			`fixtures: cri.images[0] "busybox@` + testDigest + `": docker.io/library/busybox@` + testDigest + ` is not in the image catalog`},
		{"the same digest twice", "", []fixtures.Image{{Image: "busybox@" + busyboxDigest}, {Image: "busybox:latest"}, {Image: "docker.io/library/busybox@" + busyboxDigest}},
			`fixtures: cri.images[2] "docker.io/library/busybox@` + busyboxDigest + `": docker.io/library/busybox@` + busyboxDigest + ` is also images[0]'s`},
		{"defined image takes a catalog image's digest", "", []fixtures.Image{{Image: "registry.k8s.io/pause:3.10"},
			{RepoDigests: []string{"registry.k8s.io/pause@" + DefaultCatalog().mustLookup(t, "registry.k8s.io/pause:3.10").Digest}}},
			`fixtures: cri.images[1] "registry.k8s.io/pause@sha256:`},
		{"defined image takes a pulled tag", "busybox", []fixtures.Image{{RepoTags: []string{"busybox"}}},
			`fixtures: cri.images[0] "busybox": docker.io/library/busybox:latest names image sha256:`},
		{"defined image reuses a pulled ID", "busybox", []fixtures.Image{{RepoTags: []string{"x:1"}, ID: "@busybox"}},
			`fixtures: cri.images[0] "x:1": id sha256:`},
		{"two defined images with one ID", "", []fixtures.Image{{RepoTags: []string{"x:1"}, ID: testDigest}, {RepoTags: []string{"y:1"}, ID: testDigest}},
			`fixtures: cri.images[1] "y:1": id ` + testDigest + ` is also images[0]'s`},
		{"neither kind", "", []fixtures.Image{{Pinned: true}},
			`fixtures: cri.images[0]: give image (a reference to a catalog image) or repoTags and repoDigests (an image the catalog does not have)`},
		{"digest with a tag", "", []fixtures.Image{{RepoDigests: []string{"x:1@" + testDigest}}},
			`fixtures: cri.images[0] "x:1@` + testDigest + `": repoDigests[0] "x:1@` + testDigest + `": want repo@sha256:<64 hex digits>, without a tag`},
		{"negative size", "", []fixtures.Image{{RepoTags: []string{"x:1"}, Size: -1}},
			`fixtures: cri.images[0] "x:1": size -1: must not be negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestService(t, 0)
			if tc.have != "" {
				id := pull(t, s, tc.have)
				for i := range tc.images {
					if tc.images[i].ID == "@"+tc.have {
						tc.images[i].ID = id
					}
				}
			}
			before := len(s.Store().List())
			_, err := s.Preload(&fixtures.CRI{Images: tc.images})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got  %v\nwant %s…", err, tc.want)
			}
			if n := len(s.Store().List()); n != before {
				t.Fatalf("a failed preload changed the store: %d images, had %d", n, before)
			}
		})
	}
}

func (c *Catalog) mustLookup(t testing.TB, ref string) *CatalogImage {
	r, err := ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, ok := c.Lookup(r)
	if !ok {
		t.Fatalf("%s is not in the catalog", ref)
	}
	return img
}
