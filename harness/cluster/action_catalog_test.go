package cluster

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/cri-fake/images"
)

func catalogContext(t *testing.T, user string) *actionContext {
	dir := t.TempDir()
	return &actionContext{o: Options{Dir: dir, Out: io.Discard, ImageCatalog: user}, st: &State{Dir: dir}, ctx: context.Background(), start: time.Now()}
}

// Without --image-catalog the nodes get a catalog cri-fake reads as its built-in images alone.
func TestImageCatalogStarter(t *testing.T) {
	c := catalogContext(t, "")
	if err := (imageCatalog{}).Execute(c); err != nil {
		t.Fatal(err)
	}
	got, err := images.LoadCatalog(c.path(imageCatalogFile))
	if err != nil {
		t.Fatalf("cri-fake would refuse the starter catalog: %v", err)
	}
	if n, want := len(got.Images()), len(images.DefaultCatalog().Images()); n != want {
		t.Errorf("the starter catalog holds %d images, want the %d built-in ones", n, want)
	}
}

// A user's catalog is copied as it is; one cri-fake would refuse fails `up` naming the file.
func TestImageCatalogFromUser(t *testing.T) {
	src := filepath.Join(t.TempDir(), "mine.yaml")
	mine := "images:\n  - repositories: [registry.example.com/mine]\n    tags: [\"1\"]\n    entrypoint: [/mine]\n"
	if err := os.WriteFile(src, []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	c := catalogContext(t, src)
	if err := (imageCatalog{}).Execute(c); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(c.path(imageCatalogFile)); string(b) != mine {
		t.Errorf("DIR/%s = %q, want the user's file", imageCatalogFile, b)
	}

	if err := os.WriteFile(src, []byte("images:\n  - repositorys: [x]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := (imageCatalog{}).Execute(catalogContext(t, src))
	if err == nil || !strings.Contains(err.Error(), src) {
		t.Errorf("a misspelt field: got %v, want an error naming %s", err, src)
	}
}
