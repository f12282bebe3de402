package images

import (
	"strings"
	"testing"
	"time"
)

func TestBuiltinCatalog(t *testing.T) {
	c := DefaultCatalog()
	ids := map[string]string{}
	for _, img := range c.Images() {
		if !IsID(img.ID) || !IsID(img.Digest) || img.Size == 0 {
			t.Errorf("%v: id %q digest %q size %d", img.Repositories, img.ID, img.Digest, img.Size)
		}
		if other, ok := ids[img.ID]; ok {
			t.Errorf("%v and %s share ID %s", img.Repositories, other, img.ID)
		}
		ids[img.ID] = strings.Join(img.Repositories, ",")
	}
	// Every image critest v1.37.0 pulls, with the users it checks.
	for _, tc := range []struct {
		ref      string
		uid      int64
		hasUID   bool
		username string
	}{
		{ref: "registry.k8s.io/e2e-test-images/busybox:1.29-2"},
		{ref: "registry.k8s.io/e2e-test-images/nginx:1.14-2"},
		{ref: "registry.k8s.io/e2e-test-images/httpd:2.4.39-4"},
		{ref: "gcr.io/k8s-staging-cri-tools/test-image-tag:test"},
		{ref: "gcr.io/k8s-staging-cri-tools/test-image-latest"},
		{ref: "gcr.io/k8s-staging-cri-tools/test-image-digest@sha256:9700f9a2f5bf2c45f2f605a0bd3bce7cf37420ec9d3ed50ac2758413308766bf"},
		{ref: "gcr.io/k8s-staging-cri-tools/test-image-tag:all"},
		{ref: "gcr.io/k8s-staging-cri-tools/test-image-1:latest"},
		{ref: "gcr.io/k8s-staging-cri-tools/test-image-tags:3"},
		{ref: "gcr.io/k8s-staging-cri-tools/test-image-user-uid", uid: 1002, hasUID: true},
		{ref: "gcr.io/k8s-staging-cri-tools/test-image-user-username", username: "www-data"},
		{ref: "gcr.io/k8s-staging-cri-tools/test-image-user-uid-group", uid: 1003, hasUID: true},
		{ref: "gcr.io/k8s-staging-cri-tools/test-image-user-username-group", username: "www-data"},
		{ref: "registry.k8s.io/pause:3.9", uid: 65535, hasUID: true},
		{ref: "k8s.gcr.io/pause:3.9", uid: 65535, hasUID: true},
		{ref: "busybox"},
		{ref: "nginx"},
	} {
		ref, err := ParseReference(tc.ref)
		if err != nil {
			t.Fatal(err)
		}
		img, ok := c.Lookup(ref)
		if !ok {
			t.Errorf("%s is not in the built-in catalog", tc.ref)
			continue
		}
		uid, hasUID := img.UID()
		if uid != tc.uid || hasUID != tc.hasUID || img.Username() != tc.username {
			t.Errorf("%s: uid %d (%v) username %q", tc.ref, uid, hasUID, img.Username())
		}
	}
	a, _ := c.Lookup(Reference{Repository: "registry.k8s.io/pause", Tag: "3.9"})
	b, _ := c.Lookup(Reference{Repository: "k8s.gcr.io/pause", Tag: "3.9"})
	if a != b {
		t.Error("pause:3.9 under two registries is not one image")
	}
	x, _ := c.Lookup(Reference{Repository: "gcr.io/k8s-staging-cri-tools/test-image-tags", Tag: "1"})
	y, _ := c.Lookup(Reference{Repository: "gcr.io/k8s-staging-cri-tools/test-image-tags", Tag: "2"})
	if x != y {
		t.Error("test-image-tags:1 and :2 are not one image")
	}
}

func TestParseCatalog(t *testing.T) {
	c, err := ParseCatalog([]byte(`
pullLatency: 5ms
images:
- repositories: [example.com/team/app, mirror.local/app]
  tags: ["1.0", latest]
  size: 12345
  user: "1000:1000"
  entrypoint: [/app]
  cmd: [--serve]
  env: [MODE=test]
  pullLatency: 2s
- repositories: [quick]
  tags: [v1]
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	app, ok := c.Lookup(Reference{Repository: "mirror.local/app", Tag: "1.0"})
	if !ok || app.Size != 12345 || app.PullDuration() != 2*time.Second || app.Entrypoint[0] != "/app" {
		t.Fatalf("app entry: %+v", app)
	}
	quick, ok := c.Lookup(Reference{Repository: "docker.io/library/quick", Tag: "v1"})
	if !ok || quick.PullDuration() != 5*time.Millisecond {
		t.Fatalf("quick entry: %+v", quick)
	}
	if _, ok := c.Lookup(Reference{Repository: "registry.k8s.io/pause", Tag: "3.9"}); !ok {
		t.Fatal("built-in images dropped without builtin: false")
	}
	c, err = ParseCatalog([]byte("builtin: false\nimages: [{repositories: [only]}]\n"), "x")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Images()) != 1 {
		t.Fatalf("builtin: false kept %d images", len(c.Images()))
	}
}

func TestParseCatalogErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", "images: [{repositories: [a], colour: red}]", "unknown field"},
		{"no repositories", "images: [{tags: [a]}]", "repositories"},
		{"tag in repository", "images: [{repositories: ['a:1']}]", "give the name only"},
		{"bad digest", "images: [{repositories: [a], digest: md5:1}]", "digest"},
		{"bad latency", "images: [{repositories: [a], pullLatency: soon}]", "pullLatency"},
		{"bad tag", "images: [{repositories: [a], tags: ['no spaces']}]", "tag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCatalog([]byte(tc.yaml), "bad.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestExampleCatalog(t *testing.T) {
	c, err := LoadCatalog("../../examples/cri/image-catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, ok1 := c.Lookup(Reference{Repository: "registry.example.com/shop/frontend", Tag: "2.4"})
	b, ok2 := c.Lookup(Reference{Repository: "mirror.example.org/shop/frontend", Tag: "latest"})
	if !ok1 || !ok2 || a != b || a.PullDuration() != 1500*time.Millisecond {
		t.Fatalf("frontend: %v %v", a, b)
	}
	if _, ok := c.Lookup(Reference{Repository: "registry.example.com/shop/cart", Digest: "sha256:4bd07fd2c1a5a4cbd0c7e9b2f1a9d3c6e8f7a1b2c3d4e5f60718293a4b5c6d7e"}); !ok {
		t.Fatal("cart by digest not found")
	}
	if m, ok := c.Lookup(Reference{Repository: "registry.example.com/tools/migrate", Tag: "v3"}); !ok || len(m.Behavior) == 0 {
		t.Fatal("migrate behavior lost")
	}
}
