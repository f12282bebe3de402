package images

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

// conformanceImages are the images of test/utils/image/manifest.go that the [Conformance] specs
// of e2e.test pull (the ImageIDs they name through imageutils.GetE2EImage). APIServer
// (sample-apiserver) and Etcd are run as real programs, not simulated, and are left out here.
var conformanceImages = []string{"Agnhost", "AgnhostPrev", "BusyBox", "GlibcDnsTesting", "Kitten", "Nautilus", "Nginx", "Nonewprivs", "Pause"}

// TestCatalogMatchesE2EManifest fails when the built-in catalog and the e2e image manifest of the
// Kubernetes release plugsim's conformance run pins drift apart: every conformance image must be
// pullable at the exact registry, name and tag the manifest gives. The manifest is read from the
// k8s.io/kubernetes module harness/tools/conformance/go.mod requires, which `go mod download`
// fetches through the module proxy when the module cache lacks it (checked against that
// module's go.sum), so the test runs on a fresh machine as it does here.
func TestCatalogMatchesE2EManifest(t *testing.T) {
	manifest := manifestFile(t)
	registries, configs := parseManifest(t, manifest)
	c := DefaultCatalog()
	for _, id := range conformanceImages {
		cfg, ok := configs[id]
		if !ok {
			t.Errorf("manifest.go has no configs[%s]: the conformance image list here is out of date", id)
			continue
		}
		reg, ok := registries[cfg.registry]
		if !ok {
			t.Errorf("configs[%s]: registry field %s not in initRegistry", id, cfg.registry)
			continue
		}
		name := reg + "/" + cfg.name + ":" + cfg.version
		ref, err := ParseReference(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		img, ok := c.Lookup(ref)
		if !ok {
			t.Errorf("%s (manifest.go %s) is not in the built-in catalog", name, id)
			continue
		}
		// What the specs rely on, per image (test/images/*/Dockerfile).
		switch cfg.name {
		case "agnhost":
			if !slices.Equal(img.Entrypoint, []string{"/agnhost"}) || !slices.Equal(img.Cmd, []string{"pause"}) {
				t.Errorf("%s: entrypoint %q cmd %q, want [/agnhost] [pause]", name, img.Entrypoint, img.Cmd)
			}
		case "kitten", "nautilus":
			if !slices.Equal(img.Entrypoint, []string{"/agnhost"}) || !slices.Equal(img.Cmd, []string{"test-webserver"}) {
				t.Errorf("%s: entrypoint %q cmd %q, want [/agnhost] [test-webserver]", name, img.Entrypoint, img.Cmd)
			}
		case "pause":
			if !slices.Equal(img.Entrypoint, []string{"/pause"}) {
				t.Errorf("%s: entrypoint %q, want [/pause]", name, img.Entrypoint)
			}
		case "busybox":
			if !slices.Equal(img.Cmd, []string{"sh"}) {
				t.Errorf("%s: cmd %q, want [sh]", name, img.Cmd)
			}
		}
	}
}

// manifestFile is test/utils/image/manifest.go of the pinned k8s.io/kubernetes module.
func manifestFile(t *testing.T) string {
	t.Helper()
	mod := filepath.Join("..", "..", "harness", "tools", "conformance")
	gomod, err := os.ReadFile(filepath.Join(mod, "go.mod"))
	if err != nil {
		t.Fatalf("read the conformance tools' go.mod: %v", err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatalf("%s/go.mod requires no k8s.io/kubernetes", mod)
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(gobin, "mod", "download", "-json", "k8s.io/kubernetes@"+string(m[1]))
	cmd.Dir = mod
	out, err := cmd.Output()
	var dl struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &dl); err != nil || jerr != nil || dl.Dir == "" {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go mod download k8s.io/kubernetes@%s (the module proxy must be reachable): %v %s %s", m[1], err, dl.Error, msg)
	}
	return filepath.Join(dl.Dir, "test", "utils", "image", "manifest.go")
}

type manifestConfig struct{ registry, name, version string }

// parseManifest reads manifest.go's initRegistry (registry field → its default value) and the
// `configs[ID] = Config{list.Field, "name", "version"}` statements of initImageConfigs.
func parseManifest(t *testing.T, path string) (map[string]string, map[string]manifestConfig) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	registries := map[string]string{}
	configs := map[string]manifestConfig{}
	str := func(e ast.Expr) string {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			s, err := strconv.Unquote(lit.Value)
			if err == nil {
				return s
			}
		}
		return ""
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			for i, name := range n.Names {
				if name.Name != "initRegistry" || i >= len(n.Values) {
					continue
				}
				if lit, ok := n.Values[i].(*ast.CompositeLit); ok {
					for _, e := range lit.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok {
								registries[k.Name] = str(kv.Value)
							}
						}
					}
				}
			}
		case *ast.AssignStmt:
			if len(n.Lhs) != 1 || len(n.Rhs) != 1 {
				return true
			}
			idx, ok := n.Lhs[0].(*ast.IndexExpr)
			if !ok {
				return true
			}
			if x, ok := idx.X.(*ast.Ident); !ok || x.Name != "configs" {
				return true
			}
			id, ok := idx.Index.(*ast.Ident)
			lit, ok2 := n.Rhs[0].(*ast.CompositeLit)
			if !ok || !ok2 || len(lit.Elts) != 3 {
				return true
			}
			sel, ok := lit.Elts[0].(*ast.SelectorExpr)
			if !ok {
				return true
			}
			configs[id.Name] = manifestConfig{registry: sel.Sel.Name, name: str(lit.Elts[1]), version: str(lit.Elts[2])}
		}
		return true
	})
	if len(registries) == 0 || len(configs) == 0 {
		t.Fatalf("%s: found %d registries and %d image configs; has its layout changed?", path, len(registries), len(configs))
	}
	return registries, configs
}
