package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseReference: any string a client sends as an image (PullImage, CreateContainer,
// ImageStatus, RemoveImage) parses or is refused, never panics; an accepted one is normalised
// (a registry host, a tag or a digest) and parses to itself again.
func FuzzParseReference(f *testing.F) {
	for _, s := range []string{"busybox", "busybox:1.36", "docker.io/library/nginx:latest", "registry.k8s.io/pause:3.10",
		"localhost:5000/a/b@sha256:" + strings.Repeat("a", 64), "Foo/bar", "a//b", ":tag", "@", "a@sha256:x", "a:b:c",
		"[::1]:5000/x", "index.docker.io/x", "x:" + strings.Repeat("t", 200), "/abs", "../x", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseReference(s)
		if err != nil {
			return
		}
		if !strings.Contains(r.Repository, "/") || r.Tag == "" && r.Digest == "" || strings.ContainsAny(r.String(), "\x00\n ") {
			t.Fatalf("%q → %+v", s, r)
		}
		again, err := ParseReference(r.String())
		if err != nil || again.Repository != r.Repository || again.Tag != r.Tag || again.Digest != r.Digest {
			t.Fatalf("%q → %q → %+v, %v", s, r.String(), again, err)
		}
	})
}

// FuzzParseCatalog: an image catalog file (--image-catalog) loads or is refused with the file's
// name, never panics; every image of an accepted catalog is found again by its own name.
func FuzzParseCatalog(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "..", "examples", "cri", "image-catalog.yaml")); err == nil {
		f.Add(b)
	}
	f.Add([]byte("builtin: false\npullLatency: 1ms\nimages:\n- name: a/b:1\n  user: '1000:1000'\n  entrypoint: [sh]\n  size: 10\n"))
	f.Add([]byte("images:\n- name: ''\n"))
	f.Add([]byte("pullLatency: -1h\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCatalog(data, "catalog.yaml")
		if err != nil {
			if !strings.Contains(err.Error(), "catalog.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, img := range c.Images() {
			_, _ = img.UID()
			_ = img.Username()
			for _, r := range img.refs {
				r.Digest = img.Digest
				if _, ok := c.Lookup(r); !ok {
					t.Fatalf("image %s (%s) is in the catalog but %s finds nothing", img.ID, img.Repositories, r)
				}
			}
		}
	})
}
