package cluster

import (
	"fmt"
	"os"

	"github.com/plugsim/plugsim/cri-fake/images"
)

// imageCatalogFile is the catalog every node's cri-fake reads at start (--image-catalog), in DIR.
const imageCatalogFile = "image-catalog.yaml"

// starterCatalog is DIR/image-catalog.yaml when `up` was given none: no images of its own, so the nodes
// pull cri-fake's built-in ones (the conformance images among them).
const starterCatalog = `# The image catalog every node's cri-fake of this cluster read at start (cri-fake --image-catalog),
# merged over cri-fake's built-in images. Its format is cri-fake/README.md's "Image catalog"; an example
# is examples/cri/image-catalog.yaml. To run images of your own on a cluster, write a catalog and give
# it to ` + "`harness cluster up --image-catalog FILE`" + `: it is copied here.
images: []
`

// imageCatalog writes DIR/image-catalog.yaml, the user's catalog (checked as cri-fake will read it,
// so a mistake fails here and not in three cri-fake logs) or the starter one.
type imageCatalog struct{}

func (imageCatalog) Name() string { return "write the image catalog" }

func (imageCatalog) Execute(c *actionContext) error {
	data := []byte(starterCatalog)
	what := "no images beyond cri-fake's built-in ones"
	if c.o.ImageCatalog != "" {
		b, err := os.ReadFile(c.o.ImageCatalog)
		if err != nil {
			return err
		}
		cat, err := images.ParseCatalog(b, c.o.ImageCatalog)
		if err != nil {
			return err
		}
		data = b
		what = fmt.Sprintf("%s: %d images with the built-in ones", c.o.ImageCatalog, len(cat.Images()))
	}
	if err := os.WriteFile(c.path(imageCatalogFile), data, 0o644); err != nil {
		return err
	}
	c.step("image catalog %s (%s)", c.path(imageCatalogFile), what)
	return nil
}
